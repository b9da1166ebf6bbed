package engine

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/spec"
)

// resume decides for a chat that waited for input and was claimed again:
// with the client's answer (stored by Input), because the request expired,
// or for nothing at all (then it leaves the chat waiting). A cancel request
// is handled before this.
func (s *State) resume(env StepEnv) Step {
	p := s.PendingInput
	if p == nil {
		return AppendStep(runningEvent())
	}
	var in chat.Input
	if len(env.Input) > 0 {
		if err := json.Unmarshal(env.Input, &in); err != nil {
			return AppendStep(FailedEvent(fmt.Errorf("decode stored input response: %w", err)))
		}
	}
	if env.StopRequested {
		// Asked to stop while it waits: no turn is in progress to finish.
		return AppendStep(terminalEvent(chat.StatusCompleted, chat.StopExternal, externalDetail, ""))
	}
	if in.RequestID != p.RequestID {
		if p.ExpiresAt != nil && !env.Now.Before(*p.ExpiresAt) {
			detail := fmt.Sprintf("No input received within %d seconds.", DerefOr(s.Spec.InputTimeoutS, 0))
			return AppendStep(terminalEvent(chat.StatusCompleted, chat.StopInputTimeout, detail, ""))
		}
		return Step{} // nothing to do yet; the lease is handed back
	}
	if p.Kind == chat.InputApproval {
		return AppendStep(chat.WithData(chat.Event{Type: chat.EventChatRunning}, chat.RunningData{Status: chat.StatusRunning, RequestID: p.RequestID, Approvals: in.Approvals}))
	}
	if p.Kind == "speaker" {
		sel := chat.Selection{Agent: DerefOr(in.Speaker, ""), Method: spec.SelectManual, Candidates: p.Candidates, Turn: s.nextTurn(), RequestID: p.RequestID}
		return AppendStep(runningEvent(), SelectedEvent(sel))
	}
	a := s.agent(p.Agent)
	if a == nil {
		return AppendStep(FailedEvent(fmt.Errorf("input request %s names %q, which is not an agent of the chat", p.RequestID, p.Agent)))
	}
	content := DerefOr(in.Content, "")
	if len(in.Parts) > 0 {
		content = spec.PartsText(in.Parts)
	}
	switch {
	case strings.TrimSpace(content) == "exit", content == "" && a.InputMode() != spec.HumanInputAlways:
		return AppendStep(terminalEvent(chat.StatusCompleted, chat.StopHumanExit, fmt.Sprintf("The human of '%s' ended the chat.", a.Name), ""))
	case content == "" && s.Pending != nil:
		// ALWAYS with nothing said: AutoGen goes on with the auto-reply.
		st := s.autoReplyStep(env, a, s.Pending.Turn)
		st.Before = []chat.Event{runningEvent()}
		return st
	case content == "":
		return AppendStep(runningEvent())
	}
	d := chat.MessageData{Kind: chat.KindHuman, RequestID: p.RequestID}
	if len(in.Parts) > 0 {
		d.Type, d.Parts = chat.TypeMultiModalMessage, in.Parts
	}
	if s.termFired || s.Pending == nil {
		// Asked because the chat was about to end: the human goes on, and
		// the termination conditions start counting afresh (AgentChat resets
		// them when a run ends).
		d.ResetTermination = true
	} else {
		d.Turn, d.End = s.Pending.Turn, true
	}
	return AppendStep(runningEvent(), chat.WithData(chat.Event{Type: chat.EventMessage, Role: chat.RoleUser, Name: a.Name, Content: content}, d))
}
