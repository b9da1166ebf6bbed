package server

import (
	"bytes"
	"encoding/json"
	"reflect"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
	specproblem "github.com/agentd/agentd/internal/spec/problem"
)

// The request and response bodies of the API. They are separate from the
// domain types so that a field added to chat.Chat for the worker's sake (an
// owner, an epoch, a request hash) can never leak into a response, and so
// that the wire shape is written down in one place next to the handlers.
//
// Messages are the exception: chat.Message is itself the wire shape of a
// message, shared by GET /messages and the SSE data of message events
// (chat.EventPayload). A copy here could only drift from the stream.

// chatResponse is the chat object of api/openapi.yaml.
type chatResponse struct {
	ID           string          `json:"id"`
	Name         *string         `json:"name"`
	Status       chat.Status     `json:"status"`
	StopReason   *string         `json:"stop_reason"`
	StopDetail   *string         `json:"stop_detail"`
	Error        *string         `json:"error"`
	Turns        int             `json:"turns"`
	MessageCount int             `json:"message_count"`
	LastSeq      int64           `json:"last_seq"`
	Usage        usageResponse   `json:"usage"`
	PendingInput json.RawMessage `json:"pending_input"`
	CreatedAt    time.Time       `json:"created_at"`
	UpdatedAt    time.Time       `json:"updated_at"`
	CompletedAt  *time.Time      `json:"completed_at"`
	Metadata     json.RawMessage `json:"metadata"`
	// Run is the number of the chat's latest run; QueuedRuns counts the
	// runs posted after it that have not started (docs/runs.md).
	Run        int           `json:"run"`
	QueuedRuns int           `json:"queued_runs"`
	ForkedFrom *chat.ForkRef `json:"forked_from"`
	// Team is the saved team (name and version) the chat was created
	// from, null for a chat from a spec.
	Team *chat.TeamRef `json:"team"`
	// ContextVariables are the chat's variables (docs/context-variables.md)
	// in the responses about one chat (GET, PATCH, fork); lists leave them
	// out, as reading them reads the chat's log.
	ContextVariables json.RawMessage `json:"context_variables,omitempty"`
	// Spec is the spec the chat was created from, only with ?include=spec:
	// it can be large, and most clients (lists, polls) never look at it.
	Spec json.RawMessage `json:"spec,omitempty"`
}

// usageResponse is a chat's token usage, summed over its model calls.
type usageResponse struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

// newChatResponse converts a chat record into the chat object. Optional
// fields are null, not "", so that clients can tell "not set" from a value.
// The spec is included only when withSpec is set (?include=spec).
func newChatResponse(c *chat.Chat, withSpec bool) chatResponse {
	resp := chatResponse{
		ID:           c.ID,
		Name:         nullable(c.Name),
		Status:       c.Status,
		StopReason:   nullable(string(c.StopReason)),
		StopDetail:   nullable(c.StopDetail),
		Error:        nullable(c.Error),
		Turns:        c.Turns,
		MessageCount: c.MessageCount,
		LastSeq:      c.LastSeq,
		Usage:        usageResponse{PromptTokens: c.PromptTokens, CompletionTokens: c.CompletionTokens},
		CreatedAt:    c.CreatedAt,
		UpdatedAt:    c.UpdatedAt,
		CompletedAt:  c.CompletedAt,
		Metadata:     rawOrNull(c.Metadata),
		Run:          max(c.Run, 1),
		QueuedRuns:   c.QueuedRuns,
		ForkedFrom:   c.ForkedFrom,
		Team:         c.Team,
		// The runtime sets them where it read them.
		ContextVariables: c.ContextVariables,
	}
	if withSpec {
		resp.Spec = rawOrNull(c.Spec)
	}
	// The contract says pending_input is null unless the chat is
	// awaiting_input; don't rely on the record being cleared on resume.
	if c.Status == chat.StatusAwaitingInput {
		resp.PendingInput = rawOrNull(c.PendingInput)
	} else {
		resp.PendingInput = rawOrNull(nil)
	}
	return resp
}

// chatListResponse is the body of GET /v1/chats.
type chatListResponse struct {
	Chats      []chatResponse `json:"chats"`
	NextCursor *string        `json:"next_cursor"`
}

// messageListResponse is the body of GET /v1/chats/{id}/messages.
type messageListResponse struct {
	Messages []chat.Message `json:"messages"`
	// LastSeq is the seq of the last event examined: pass it as after to
	// continue. It may be past the last message returned, since events that
	// are not messages are skipped.
	LastSeq int64       `json:"last_seq"`
	Status  chat.Status `json:"status"`
}

// runResponse is the body of POST /v1/chats/{id}/runs: the chat, and the
// number the posted run got (the run.started and terminal events of that
// run carry it).
type runResponse struct {
	chatResponse
	PostedRun int `json:"posted_run"`
}

// inputRequest is the body of POST /v1/chats/{id}/input.
type inputRequest struct {
	RequestID string `json:"request_id"`
	// Content is a string, or a list of texts and images (the human's
	// message is then a MultiModalMessage); validate reads it.
	Content   inputContent    `json:"content"`
	Speaker   *string         `json:"speaker"`
	Approvals []chat.Approval `json:"approvals"`

	text  *string
	parts []spec.Part
}

// inputContent is an input's content as given: a string or a list (of
// texts and images), anything else being a malformed request.
type inputContent struct{ raw json.RawMessage }

func (c *inputContent) UnmarshalJSON(b []byte) error {
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] != '"' && t[0] != '[' && string(t) != "null" {
		return &json.UnmarshalTypeError{Value: "non-string", Field: "content", Type: reflect.TypeFor[string]()}
	}
	c.raw = b
	return nil
}

// validate reports every problem of an input request at once.
func (in *inputRequest) validate() error {
	var problems specproblem.List
	if in.RequestID == "" {
		problems.Add("/request_id", "is required")
	}
	switch c := bytes.TrimSpace(in.Content.raw); {
	case len(c) == 0 || string(c) == "null":
	case c[0] == '"':
		in.text = new(string)
		_ = json.Unmarshal(c, in.text)
	case c[0] == '[':
		var items []json.RawMessage
		_ = json.Unmarshal(c, &items)
		in.parts = make([]spec.Part, len(items))
		for i, it := range items {
			if err := json.Unmarshal(it, &in.parts[i]); err != nil {
				problems.Add(specproblem.Index("/content", i), "%s", err.Error())
			}
		}
	}
	given := 0
	for _, set := range []bool{in.text != nil || in.parts != nil, in.Speaker != nil, in.Approvals != nil} {
		if set {
			given++
		}
	}
	switch {
	case given == 0:
		problems.Add("/content", "one of content, speaker or approvals is required")
	case given > 1:
		path := "/speaker"
		if in.Approvals != nil {
			path = "/approvals"
		}
		problems.Add(path, "content, speaker and approvals are mutually exclusive")
	}
	if problems.Len() > 0 {
		return &spec.ValidationError{Problems: problems.Items()}
	}
	return nil
}

// toInput converts the request into the domain's input.
func (in *inputRequest) toInput() *chat.Input {
	return &chat.Input{RequestID: in.RequestID, Content: in.text, Parts: in.parts, Speaker: in.Speaker, Approvals: in.Approvals}
}

// nullable returns nil for "", so the field is encoded as null.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// rawOrNull returns raw JSON, or the JSON null for none (a nil
// json.RawMessage would encode as null too, but an empty non-nil one would
// make encoding fail).
func rawOrNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}
