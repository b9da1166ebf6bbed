package chat

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentd/agentd/internal/spec"
)

// resume decides for a chat that waited for input and was claimed again:
// with the client's answer (stored by Input), because the request expired,
// or for nothing at all (then it leaves the chat waiting). A cancel request
// is handled before this.
func (s *state) resume(env stepEnv) step {
	p := s.pendingInput
	if p == nil {
		return appendStep(runningEvent())
	}
	var in Input
	if len(env.input) > 0 {
		if err := json.Unmarshal(env.input, &in); err != nil {
			return appendStep(failedEvent(fmt.Errorf("decode stored input response: %w", err)))
		}
	}
	if env.stopRequested {
		// Asked to stop while it waits: no turn is in progress to finish.
		return appendStep(terminalEvent(StatusCompleted, StopExternal, externalDetail, ""))
	}
	if in.RequestID != p.RequestID {
		if p.ExpiresAt != nil && !env.now.Before(*p.ExpiresAt) {
			detail := fmt.Sprintf("No input received within %d seconds.", derefOr(s.spec.InputTimeoutS, 0))
			return appendStep(terminalEvent(StatusCompleted, StopInputTimeout, detail, ""))
		}
		return step{} // nothing to do yet; the lease is handed back
	}
	if p.Kind == InputApproval {
		return appendStep(withData(Event{Type: EventChatRunning}, runningData{Status: StatusRunning, RequestID: p.RequestID, Approvals: in.Approvals}))
	}
	if p.Kind == "speaker" {
		sel := selection{Agent: derefOr(in.Speaker, ""), Method: spec.SelectManual, Candidates: p.Candidates, Turn: s.nextTurn(), RequestID: p.RequestID}
		return appendStep(runningEvent(), selectedEvent(sel))
	}
	a := s.agent(p.Agent)
	if a == nil {
		return appendStep(failedEvent(fmt.Errorf("input request %s names %q, which is not an agent of the chat", p.RequestID, p.Agent)))
	}
	content := derefOr(in.Content, "")
	if len(in.Parts) > 0 {
		content = spec.PartsText(in.Parts)
	}
	switch {
	case strings.TrimSpace(content) == "exit", content == "" && a.InputMode() != spec.HumanInputAlways:
		return appendStep(terminalEvent(StatusCompleted, StopHumanExit, fmt.Sprintf("The human of '%s' ended the chat.", a.Name), ""))
	case content == "" && s.pending != nil:
		// ALWAYS with nothing said: AutoGen goes on with the auto-reply.
		st := s.autoReplyStep(env, a, s.pending.Turn)
		st.before = []Event{runningEvent()}
		return st
	case content == "":
		return appendStep(runningEvent())
	}
	d := messageData{Kind: kindHuman, RequestID: p.RequestID}
	if len(in.Parts) > 0 {
		d.Type, d.Parts = TypeMultiModalMessage, in.Parts
	}
	if s.termFired || s.pending == nil {
		// Asked because the chat was about to end: the human goes on, and
		// the termination conditions start counting afresh (AgentChat resets
		// them when a run ends).
		d.ResetTermination = true
	} else {
		d.Turn, d.End = s.pending.Turn, true
	}
	return appendStep(runningEvent(), withData(Event{Type: EventMessage, Role: RoleUser, Name: a.Name, Content: content}, d))
}
