package agui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/frontend"
	"github.com/agentd/agentd/internal/spec"
)

// RunAgentInput is the body of a run, as @ag-ui/core defines it. The
// schema is open (unknown fields are allowed), so only what a run uses
// is read: tools and context are the client's and accepted without
// effect; state is merged into the chat's context variables
// (docs/ag-ui.md).
type runAgentInput struct {
	ThreadID string          `json:"threadId"`
	RunID    string          `json:"runId"`
	Messages []inputMessage  `json:"messages"`
	Resume   []resumeEntry   `json:"resume"`
	State    json.RawMessage `json:"state"`

	// state is State read as context variables (nil for none or {}).
	state map[string]json.RawMessage
}

// inputMessage is a message of the thread as the client holds it; only
// the role and the text of its content are read.
type inputMessage struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// ToolCalls are an assistant's: only their ids are read, to know
	// where the client puts their results.
	ToolCalls []struct {
		ID string `json:"id"`
	} `json:"toolCalls"`
}

// resumeEntry answers one interrupt of the run before.
type resumeEntry struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload"`
}

// Limits on what a client sends beyond the body's size.
const (
	maxIDBytes    = 200
	maxMessages   = 10_000
	maxResume     = 16
	resumeCancel  = "cancelled"
	resumeResolve = "resolved"
)

// readInput reads a size-limited body and checks it, listing every
// problem at once (a 422, as /v1 answers an invalid body).
func (h *Handler) readInput(w http.ResponseWriter, r *http.Request) (*runAgentInput, error) {
	body, err := frontend.ReadBody(w, r, h.cfg.MaxBodyBytes)
	if err != nil {
		if frontend.TooLarge(err) {
			return nil, err
		}
		return nil, invalid(spec.Problem{Path: "", Message: "the request body could not be read"})
	}
	var in runAgentInput
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&in); err != nil {
		return nil, invalid(spec.Problem{Path: "", Message: "is not a RunAgentInput: " + strings.TrimPrefix(err.Error(), "json: ")})
	}
	var probs []spec.Problem
	add := func(path, format string, args ...any) {
		probs = append(probs, spec.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	checkID := func(path, v string) {
		switch {
		case v == "":
			add(path, "is required")
		case len(v) > maxIDBytes:
			add(path, "must be at most %d bytes", maxIDBytes)
		}
	}
	checkID("/threadId", in.ThreadID)
	checkID("/runId", in.RunID)
	if len(in.Messages) > maxMessages {
		add("/messages", "must hold at most %d messages", maxMessages)
	}
	if len(in.Resume) > maxResume {
		add("/resume", "must hold at most %d entries", maxResume)
	}
	for i, e := range in.Resume {
		if e.InterruptID == "" {
			add(fmt.Sprintf("/resume/%d/interruptId", i), "is required")
		}
		if e.Status != resumeResolve && e.Status != resumeCancel {
			add(fmt.Sprintf("/resume/%d/status", i), "must be resolved or cancelled")
		}
	}
	if st := bytes.TrimSpace(in.State); len(st) > 0 && string(st) != "null" {
		// The client's state is the thread's context variables, with
		// their limits (an object of at most 64 KiB).
		if vars, ok := spec.CheckContext("/state", st, add); ok && len(vars) > 0 {
			in.state = vars
		}
	}
	if len(probs) > 0 {
		return nil, invalid(probs...)
	}
	return &in, nil
}

func invalid(probs ...spec.Problem) error { return &spec.ValidationError{Problems: probs} }

// lastUserText is the text of the thread's last message when it is the
// user's ("" when it is not, or has no text).
func (in *runAgentInput) lastUserText() string {
	if len(in.Messages) == 0 {
		return ""
	}
	m := in.Messages[len(in.Messages)-1]
	if m.Role != "user" {
		return ""
	}
	return contentText(m.Content)
}

// contentText is the text of a message's content: a string, or the text
// parts of a list of parts.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// answer is the answer to a chat's pending input p that a run carries:
// its resume entry for p's interrupt, else the thread's last user
// message. A resume payload is text (the human's message, the speaker's
// name, or "approve" / a reason to reject for approvals) or an object
// {"content"?, "speaker"?, "approvals"?} as POST /v1/chats/{id}/input
// takes it; a cancelled entry rejects what an approval holds.
func (in *runAgentInput) answer(p *chat.PendingInput) (*chat.Input, error) {
	a := &chat.Input{RequestID: p.RequestID}
	var entry *resumeEntry
	for i := range in.Resume {
		if in.Resume[i].InterruptID == p.RequestID {
			entry = &in.Resume[i]
		}
	}
	text := in.lastUserText()
	switch {
	case entry == nil && text == "":
		return nil, invalid(spec.Problem{Path: "/resume", Message: fmt.Sprintf("the thread waits for input (interrupt %s): answer it with a resume entry or a user message", p.RequestID)})
	case entry != nil && entry.Status == resumeCancel:
		if p.Kind != chat.InputApproval {
			return nil, invalid(spec.Problem{Path: "/resume", Message: "only an approval can be cancelled: answer the interrupt instead"})
		}
		return withText(a, p, "cancelled"), nil
	case entry != nil && len(entry.Payload) > 0:
		var s string
		if json.Unmarshal(entry.Payload, &s) == nil {
			return withText(a, p, s), nil
		}
		var o struct {
			Content   *string         `json:"content"`
			Speaker   *string         `json:"speaker"`
			Approvals []chat.Approval `json:"approvals"`
		}
		dec := json.NewDecoder(bytes.NewReader(entry.Payload))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			return nil, invalid(spec.Problem{Path: "/resume/payload", Message: "must be text or {\"content\"?, \"speaker\"?, \"approvals\"?}: " + strings.TrimPrefix(err.Error(), "json: ")})
		}
		a.Content, a.Speaker, a.Approvals = o.Content, o.Speaker, o.Approvals
		return a, nil
	default:
		return withText(a, p, text), nil
	}
}

// withText answers p with a text, as its kind reads one.
func withText(a *chat.Input, p *chat.PendingInput, text string) *chat.Input {
	t := strings.TrimSpace(text)
	switch p.Kind {
	case chat.InputSpeaker:
		a.Speaker = &t
	case chat.InputApproval:
		a.Approvals = p.ApprovalsFromText(t)
	default:
		a.Content = &text
	}
	return a
}
