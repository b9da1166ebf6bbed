package chat

import (
	"fmt"
	"time"

	"github.com/agentd/agentd/internal/spec"
)

// This file is where a chat stops: every terminal event is made here (the
// conditions themselves are in termination.go). The worker appends them;
// worker.stop maps an error that interrupted a step to one of them.

// terminalData is the data of chat.completed, chat.failed and chat.cancelled.
type terminalData struct {
	Status     Status     `json:"status"`
	StopReason StopReason `json:"stop_reason"`
	StopDetail string     `json:"stop_detail"`
	Error      string     `json:"error,omitempty"`
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
	if s.termFired {
		reason, detail := s.term.result()
		if a := s.terminateAsker(); a != nil {
			return s.inputRequest(env, &PendingInput{Kind: "message", Agent: a.Name,
				Reason: "termination condition fired: " + detail + ". Send content to go on, or empty content or \"exit\" to end the chat."}), true
		}
		return terminalEvent(StatusCompleted, reason, detail, ""), true
	}
	if s.turns >= s.maxRound && s.pending == nil {
		return terminalEvent(StatusCompleted, StopMaxRound, fmt.Sprintf("Maximum number of turns %d reached.", s.maxRound), ""), true
	}
	return Event{}, false
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
