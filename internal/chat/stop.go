package chat

import (
	"fmt"
	"time"

	"github.com/agentd/agentd/internal/spec"
)

// This file is where a chat stops: every terminal event is made here (the
// conditions themselves are in termination.go). The worker appends them;
// worker.stop maps an error that interrupted a step to one of them.

// withRun is a terminal event that names the run it ends.
func withRun(e Event, run int) Event {
	var d terminalData
	if err := decodeData(e, &d); err != nil {
		return e // not ours to mend: the fold reports it
	}
	d.Run = run
	return withData(e, d)
}

func terminalEvent(status Status, reason StopReason, detail, errText string) Event {
	typ := map[Status]EventType{StatusCompleted: EventChatCompleted, StatusFailed: EventChatFailed, StatusCancelled: EventChatCancelled}[status]
	return withData(Event{Type: typ}, terminalData{Status: status, StopReason: reason, StopDetail: detail, Error: errText})
}

// failedEvent ends a chat that cannot go on: the error is its error and
// its stop detail.
func failedEvent(err error) Event {
	return terminalEvent(StatusFailed, StopError, err.Error(), err.Error())
}

// cancelledEvent ends a chat a client cancelled (ExternalTermination).
func cancelledEvent() Event {
	return terminalEvent(StatusCancelled, StopCancelled, "External termination requested", "")
}

// afterMessage is the event the current state calls for, if any: a fired
// termination condition completes the chat — or, when a user_proxy asks a
// human on termination (TERMINATE), pauses it for that human — and
// max_round ends it once the last allowed turn is over.
func (s *state) afterMessage(env stepEnv) (Event, bool) {
	if s.graph != nil && s.pending == nil && len(s.graph.readyNodes()) == 0 {
		// GraphFlow checks this before its conditions: no node is ready.
		return terminalEvent(StatusCompleted, StopGraphComplete, graphStopDetail, ""), true
	}
	if s.termFired || s.extFired {
		reason, detail := s.termResult()
		if a := s.terminateAsker(); a != nil && reason != StopExternal {
			return s.inputRequest(env, &PendingInput{Kind: "message", Agent: a.Name,
				Reason: "termination condition fired: " + detail + ". Send content to go on, or empty content or \"exit\" to end the chat."}), true
		}
		return terminalEvent(StatusCompleted, reason, detail, ""), true
	}
	if s.turns-s.runTurns >= s.maxRound && s.pending == nil && s.magentic == nil { // magentic_one counts rounds
		return terminalEvent(StatusCompleted, StopMaxRound, fmt.Sprintf("Maximum number of turns %d reached.", s.maxRound), ""), true
	}
	return Event{}, false
}

// termResult is the stop reason and text of the fired conditions: the
// tree's, and a stop request's as the tree or-ed with an external
// condition would give them (AgentChat's OrTerminationCondition joins the
// texts of the parts that fired on one check).
func (s *state) termResult() (StopReason, string) {
	switch {
	case s.termFired && s.extFired:
		reason, detail := s.term.result()
		return reason, detail + ", " + externalDetail
	case s.termFired:
		return s.term.result()
	}
	return StopExternal, externalDetail
}

// externalStop is the event that ends a run asked to stop while no turn
// is in progress: there is no turn to wait for. A tree with an external
// condition of its own waits for its next check instead, as AgentChat's
// does; so does a magentic_one chat, whose orchestrator checks its
// conditions on its agents' responses only.
func (s *state) externalStop(env stepEnv) (Event, bool) {
	if !env.stopRequested || s.explicitExternal || s.pending != nil || s.magentic != nil {
		return Event{}, false
	}
	return terminalEvent(StatusCompleted, StopExternal, externalDetail, ""), true
}

// observeTime tells the termination conditions that time passed without a
// message (a timeout condition's deadline cut a step) and reports whether
// the tree fired. Only the clock is read: a timeout inside `all` stays
// fired, as it would after the next message.
func (s *state) observeTime(now time.Time) bool {
	s.termFired = s.term.observe(nil, s.termState(now))
	return s.termFired
}

// terminateAsker is the first user_proxy with human_input_mode TERMINATE:
// the human AutoGen asks before a chat ends.
func (s *state) terminateAsker() *spec.Agent {
	for i := range s.spec.Agents {
		if a := &s.spec.Agents[i]; a.Type == spec.AgentUserProxy && a.HumanInputMode == spec.HumanInputTerminate {
			return a
		}
	}
	return nil
}
