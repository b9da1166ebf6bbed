package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"

	"github.com/agentd/agentd/internal/api"
	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
	specproblem "github.com/agentd/agentd/internal/spec/problem"
)

// The server's side of the API's bodies: the chat object made from a chat
// record, and the input request the server reads with checks of its own.
// The wire types themselves are internal/api's, shared with the Go client;
// they are separate from the domain types so that a field added to
// chat.Chat for the worker's sake (an owner, an epoch, a request hash) can
// never leak into a response.

// newChatResponse converts a chat record into the chat object. Optional
// fields are null, not "", so that clients can tell "not set" from a value.
// The spec is included only when withSpec is set (?include=spec). It fails
// only for a stored pending input that cannot be read.
func newChatResponse(c *chat.Chat, withSpec bool) (api.Chat, error) {
	resp := api.Chat{
		ID:           c.ID,
		Name:         nullable(c.Name),
		Status:       c.Status,
		StopReason:   nullable(string(c.StopReason)),
		StopDetail:   nullable(c.StopDetail),
		Error:        nullable(c.Error),
		Turns:        c.Turns,
		MessageCount: c.MessageCount,
		LastSeq:      c.LastSeq,
		Usage:        api.Usage{PromptTokens: c.PromptTokens, CompletionTokens: c.CompletionTokens},
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
	if c.Status == chat.StatusAwaitingInput && len(c.PendingInput) > 0 && string(c.PendingInput) != "null" {
		if err := json.Unmarshal(c.PendingInput, &resp.PendingInput); err != nil {
			return api.Chat{}, fmt.Errorf("decode pending input of chat %s: %w", c.ID, err)
		}
	}
	return resp, nil
}

// writeChat answers with the chat object of a chat record.
func (rs responder) writeChat(w http.ResponseWriter, r *http.Request, status int, c *chat.Chat, withSpec bool) {
	resp, err := newChatResponse(c, withSpec)
	if err != nil {
		rs.writeError(w, r, err)
		return
	}
	rs.writeJSON(w, r, status, resp)
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
