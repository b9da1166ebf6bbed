package chat

import (
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/spec"
)

// This file holds what a client sends a chat and is shown of it: the
// create request, pending input and its answer, deltas of replies in
// progress, and the message view of an event.

// ErrNoPendingInput is returned by Runtime.Input when the chat is not waiting
// for input or the request_id is stale; the HTTP layer answers 409.
var ErrNoPendingInput = errors.New("no input is pending for this request_id")

// CreateParams are the arguments of Runtime.Create.
type CreateParams struct {
	Tenant string
	// Body is the request body: one JSON value (the HTTP layer has checked it
	// is well-formed JSON). It is decoded strictly here: unknown fields and
	// wrong types are validation problems.
	Body           []byte
	IdempotencyKey string
}

// PendingInput describes what a chat in status awaiting_input waits for (the
// data of its input.requested event).
type PendingInput struct {
	RequestID  string     `json:"request_id"`
	Kind       string     `json:"kind"`
	Agent      string     `json:"agent,omitempty"`
	Candidates []string   `json:"candidates,omitempty"`
	Reason     string     `json:"reason"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	// ToolCalls (an assistant's) or CodeBlocks (a user_proxy's) wait for
	// a client's approval (kind approval).
	ToolCalls  []ToolCall    `json:"tool_calls,omitempty"`
	CodeBlocks []PendingCode `json:"code_blocks,omitempty"`
}

// The kinds of PendingInput.
const (
	InputMessage  = "message"
	InputSpeaker  = "speaker"
	InputApproval = "approval"
)

// PendingCode is a code block that waits for approval.
type PendingCode struct {
	Language string `json:"language"`
	Code     string `json:"code"`
}

// Delta is a fragment of a reply being streamed by a model: the data of an
// ephemeral message.delta event. Deltas are not in the log and are not
// replayed; the message event that follows holds the whole reply.
type Delta struct {
	Name    string `json:"name"`
	Content string `json:"content"`
	// Reset voids the deltas of this reply sent so far: the model call
	// failed mid-reply and is retried, and the reply streams again from its
	// start. A reset delta has no content.
	Reset bool `json:"reset,omitempty"`
	// AfterSeq is the chat's last seq when the reply began: the reply's
	// message will be the next message after it. Streams use it to keep
	// deltas before their message and drop those that come too late.
	AfterSeq int64 `json:"-"`
}

// Input is a client's answer to a pending input request.
type Input struct {
	RequestID string     `json:"request_id"`
	Content   *string    `json:"content,omitempty"`
	Speaker   *string    `json:"speaker,omitempty"`
	Approvals []Approval `json:"approvals,omitempty"`
	// Parts, instead of Content, make the human's message a
	// MultiModalMessage of these texts and images.
	Parts []spec.Part `json:"parts,omitempty"`
}

// MessageFromEvent returns the message an event of type "message" holds.
func MessageFromEvent(e Event) (Message, bool) {
	if e.Type != EventMessage {
		return Message{}, false
	}
	m := Message{Seq: e.Seq, Role: e.Role, Name: e.Name, Content: e.Content,
		ToolCalls: e.ToolCalls, ToolResponses: e.ToolResponses, CreatedAt: e.CreatedAt}
	var d MessageData
	if len(e.Data) > 0 {
		if err := json.Unmarshal(e.Data, &d); err == nil {
			m.CodeResult, m.Handoff, m.Usage, m.Thought = d.CodeResult, d.Handoff, d.Usage, d.Thought
			if d.Structured != "" {
				m.Structured = json.RawMessage(d.Structured)
			}
			m.Parts, m.Team = d.Parts, d.Team
		}
	}
	m.Type = MessageType(e, d)
	return m, true
}

// ApprovalsFromText are the decisions a text makes on what p holds, for
// protocols whose answers are text: "approve" (or "approved", "yes") runs
// it all, any other text rejects it all with the text as the reason.
func (p *PendingInput) ApprovalsFromText(text string) []Approval {
	t := strings.TrimSpace(text)
	ok := strings.EqualFold(t, "approve") || strings.EqualFold(t, "approved") || strings.EqualFold(t, "yes")
	reason := ""
	if !ok {
		reason = t
	}
	if len(p.ToolCalls) == 0 {
		return []Approval{{Approve: ok, Reason: reason}}
	}
	out := make([]Approval, len(p.ToolCalls))
	for i, tc := range p.ToolCalls {
		out[i] = Approval{ToolCallID: tc.ID, Approve: ok, Reason: reason}
	}
	return out
}
