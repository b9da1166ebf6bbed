package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

func newRequestID() string { return uuid.NewString() }

// resume continues a chat that waited for input and was claimed again: with
// the client's answer (stored by SubmitInput), because the request expired,
// or for nothing at all (then it leaves the chat waiting). A cancel request
// is handled before this.
func (w *worker) resume(ctx context.Context) error {
	p := w.pendingInput
	if p == nil {
		return w.commit(ctx, runningEvent())
	}
	var in Input
	if len(w.inputResponse) > 0 {
		if err := json.Unmarshal(w.inputResponse, &in); err != nil {
			return fmt.Errorf("decode stored input response: %w", err)
		}
	}
	if in.RequestID != p.RequestID {
		if p.ExpiresAt != nil && !w.rt.now().Before(*p.ExpiresAt) {
			detail := fmt.Sprintf("No input received within %d seconds.", derefOr(w.spec.InputTimeoutS, 0))
			return w.commit(ctx, terminalEvent(StatusCompleted, StopInputTimeout, detail, ""))
		}
		return nil // nothing to do yet; the lease is handed back
	}
	if p.Kind == "speaker" {
		sel := selection{Agent: derefOr(in.Speaker, ""), Method: SelectManual, Candidates: p.Candidates, Turn: w.turns + 1, RequestID: p.RequestID}
		return w.commit(ctx, runningEvent(), Event{Type: EventSpeakerSelected, Data: mustJSON(sel)})
	}
	a := w.agent(p.Agent)
	content := derefOr(in.Content, "")
	switch {
	case strings.TrimSpace(content) == "exit", content == "" && a.humanInputMode() != HumanInputAlways:
		return w.commit(ctx, terminalEvent(StatusCompleted, StopHumanExit, fmt.Sprintf("The human of '%s' ended the chat.", a.Name), ""))
	case content == "" && w.pending != nil:
		// ALWAYS with nothing said: AutoGen goes on with the auto-reply.
		if err := w.commit(ctx, runningEvent()); err != nil {
			return err
		}
		return w.autoReply(ctx, a, w.pending.Turn)
	case content == "":
		return w.commit(ctx, runningEvent())
	}
	d := messageData{Kind: kindHuman, RequestID: p.RequestID}
	if w.termFired || w.pending == nil {
		// Asked because the chat was about to end: the human goes on, and
		// the termination conditions start counting afresh (AgentChat resets
		// them when a run ends).
		d.ResetTermination = true
	} else {
		d.Turn, d.End = w.pending.Turn, true
	}
	return w.commit(ctx, runningEvent(), Event{Type: EventMessage, Role: RoleUser, Name: a.Name, Content: content, Data: mustJSON(d)})
}

// Input answers a chat's pending input request: a human message for a
// user_proxy, or the speaker of a manual selection. The answer is stored
// (once per request_id) and the chat becomes claimable; its worker appends
// the answer to the log, since only a worker writes the log.
func (r *Runtime) Input(ctx context.Context, tenant, id string, in *Input) error {
	c, err := r.store.GetChat(ctx, tenant, id)
	if err != nil {
		return err
	}
	if c.Status != StatusAwaitingInput || len(c.PendingInput) == 0 || len(c.InputResponse) > 0 {
		return ErrNoPendingInput
	}
	var p PendingInput
	if err := json.Unmarshal(c.PendingInput, &p); err != nil {
		return fmt.Errorf("decode pending input of chat %s: %w", id, err)
	}
	if in.RequestID != p.RequestID {
		return ErrNoPendingInput
	}
	var probs []Problem
	switch p.Kind {
	case "speaker":
		switch {
		case in.Speaker == nil:
			probs = append(probs, Problem{Path: "/speaker", Message: "this request asks for a speaker: one of " + pyList(p.Candidates)})
		case !containsName(p.Candidates, *in.Speaker):
			probs = append(probs, Problem{Path: "/speaker", Message: strconv.Quote(*in.Speaker) + " is not a candidate: pick one of " + pyList(p.Candidates)})
		}
		if in.Content != nil {
			probs = append(probs, Problem{Path: "/content", Message: "this request asks for a speaker, not a message"})
		}
	default:
		if in.Content == nil {
			probs = append(probs, Problem{Path: "/content", Message: "this request asks for a message (empty content skips or ends, see reason)"})
		} else if len(*in.Content) > r.limits.MaxTaskBytes {
			probs = append(probs, Problem{Path: "/content", Message: fmt.Sprintf("must be at most %d bytes", r.limits.MaxTaskBytes)})
		}
		if in.Speaker != nil {
			probs = append(probs, Problem{Path: "/speaker", Message: "this request asks for a message, not a speaker"})
		}
	}
	if len(probs) > 0 {
		return &ValidationError{Problems: probs}
	}
	if _, err := r.store.SubmitInput(ctx, &SubmitInputParams{Tenant: tenant, ChatID: id, RequestID: in.RequestID, Response: mustJSON(in), Now: r.now()}); err != nil {
		return err
	}
	r.parents.remember(ctx, id, r.now())
	r.log.Info("input received", "chat_id", id, "input_request_id", in.RequestID, "kind", p.Kind)
	r.kick()
	return nil
}
