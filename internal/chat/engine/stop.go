package engine

import (
	"fmt"
	"time"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/spec"
)

// This file is where a chat stops: every terminal event is made here (the
// conditions themselves are in termination.go). The worker appends them;
// worker.stop maps an error that interrupted a step to one of them.

// WithRun is a terminal event that names the run it ends.
func WithRun(e chat.Event, run int) chat.Event {
	var d chat.TerminalData
	if err := chat.DecodeData(e, &d); err != nil {
		return e // not ours to mend: the fold reports it
	}
	d.Run = run
	return chat.WithData(e, d)
}

func terminalEvent(status chat.Status, reason chat.StopReason, detail, errText string) chat.Event {
	typ := map[chat.Status]chat.EventType{chat.StatusCompleted: chat.EventChatCompleted, chat.StatusFailed: chat.EventChatFailed, chat.StatusCancelled: chat.EventChatCancelled}[status]
	return chat.WithData(chat.Event{Type: typ}, chat.TerminalData{Status: status, StopReason: reason, StopDetail: detail, Error: errText})
}

// FailedEvent ends a chat that cannot go on: the error is its error and
// its stop detail.
func FailedEvent(err error) chat.Event {
	return terminalEvent(chat.StatusFailed, chat.StopError, err.Error(), err.Error())
}

// CancelledEvent ends a chat a client cancelled (ExternalTermination).
func CancelledEvent() chat.Event {
	return terminalEvent(chat.StatusCancelled, chat.StopCancelled, "External termination requested", "")
}

// ForkCutDetail is the stop detail of a run a fork cut: the fork's log
// ends the run it copied where it was forked, so that its own run starts
// there. The stop reason stays cancelled (a run ended from outside, not
// by a condition of its own), and the detail tells it from a client's
// cancel.
const ForkCutDetail = "Cut where the chat was forked, to start the fork's own run"

// ForkCutEvent ends, in a fork's log, the run it copied unfinished (see
// ForkCutDetail).
func ForkCutEvent(run int) chat.Event {
	return WithRun(terminalEvent(chat.StatusCancelled, chat.StopCancelled, ForkCutDetail, ""), run)
}

// AfterMessage is the event the current state calls for, if any: a fired
// termination condition completes the chat — or, when a user_proxy asks a
// human on termination (TERMINATE), pauses it for that human — and
// max_round ends it once the last allowed turn is over.
func (s *State) AfterMessage(env StepEnv) (chat.Event, bool) {
	if s.graph != nil && s.Pending == nil && len(s.graph.readyNodes(s.holds)) == 0 {
		// GraphFlow checks this before its conditions: no node is ready.
		return terminalEvent(chat.StatusCompleted, chat.StopGraphComplete, graphStopDetail, ""), true
	}
	if s.termFired || s.extFired {
		reason, detail := s.termResult()
		if a := s.terminateAsker(); a != nil && reason != chat.StopExternal {
			return s.inputRequest(env, &chat.PendingInput{Kind: "message", Agent: a.Name,
				Reason: "termination condition fired: " + detail + ". Send content to go on, or empty content or \"exit\" to end the chat."}), true
		}
		return terminalEvent(chat.StatusCompleted, reason, detail, ""), true
	}
	if ev, ok := s.swarmEnd(); ok {
		return ev, true
	}
	if s.Turns-s.RunTurns >= s.MaxRound && s.Pending == nil && s.magentic == nil { // magentic_one counts rounds
		return terminalEvent(chat.StatusCompleted, chat.StopMaxRound, fmt.Sprintf("Maximum number of turns %d reached.", s.MaxRound), ""), true
	}
	return chat.Event{}, false
}

// termResult is the stop reason and text of the fired conditions: the
// tree's, and a stop request's as the tree or-ed with an external
// condition would give them (AgentChat's OrTerminationCondition joins the
// texts of the parts that fired on one check).
func (s *State) termResult() (chat.StopReason, string) {
	switch {
	case s.termFired && s.extFired:
		reason, detail := s.term.result()
		return reason, detail + ", " + externalDetail
	case s.termFired:
		return s.term.result()
	}
	return chat.StopExternal, externalDetail
}

// externalStop is the event that ends a run asked to stop while no turn
// is in progress: there is no turn to wait for. A tree with an external
// condition of its own waits for its next check instead, as AgentChat's
// does; so does a magentic_one chat, whose orchestrator checks its
// conditions on its agents' responses only.
func (s *State) externalStop(env StepEnv) (chat.Event, bool) {
	if !env.StopRequested || s.explicitExternal || s.Pending != nil || s.magentic != nil {
		return chat.Event{}, false
	}
	return terminalEvent(chat.StatusCompleted, chat.StopExternal, externalDetail, ""), true
}

// ObserveTime tells the termination conditions that time passed without a
// message (a timeout condition's deadline cut a step) and reports whether
// the tree fired. Only the clock is read: a timeout inside `all` stays
// fired, as it would after the next message.
func (s *State) ObserveTime(now time.Time) bool {
	s.termFired = s.term.observe(nil, s.termState(now))
	return s.termFired
}

// terminateAsker is the first user_proxy with human_input_mode TERMINATE:
// the human AutoGen asks before a chat ends.
func (s *State) terminateAsker() *spec.Agent {
	for i := range s.Spec.Agents {
		if a := &s.Spec.Agents[i]; a.Type == spec.AgentUserProxy && a.HumanInputMode == spec.HumanInputTerminate {
			return a
		}
	}
	return nil
}
