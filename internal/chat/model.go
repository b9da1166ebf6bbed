package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// ModelClient makes one chat-completion call. internal/llm implements it for
// the replay provider and for OpenAI-compatible endpoints; retries, backoff
// and per-call timeouts are the client's business, so an error returned here
// is final for the chat.
type ModelClient interface {
	Complete(ctx context.Context, req *ModelRequest) (*ModelResponse, error)
}

// ModelRequest is one call to a model.
type ModelRequest struct {
	ChatID string
	// Caller is the agent making the call ("" for the speaker selector).
	Caller string
	Config ModelConfig
	// CallIndex is the number of calls this caller made with this model
	// before this one, derived from the log. The replay provider answers
	// with Config.Responses[CallIndex], which makes its position survive
	// restarts.
	CallIndex int
	Messages  []ModelMessage
	Tools     []ToolDef
	// OnDelta, when set, receives fragments of the reply's content as the
	// model streams them (they become ephemeral message.delta events). A
	// client that does not stream never calls it; the response is complete
	// either way.
	OnDelta func(content string)
	// OnReset, when set, is called before a streamed call is retried after
	// some of its deltas went out: the deltas sent so far are void and the
	// reply streams again from its start.
	OnReset func()
}

// ModelMessage is one message of a model request, in OpenAI chat terms.
type ModelMessage struct {
	Role       string
	Name       string
	Content    string
	ToolCalls  []ToolCall
	ToolCallID string
}

// ToolDef describes a tool to the model.
type ToolDef struct {
	Name        string
	Description string
	Parameters  json.RawMessage
	// Strict asks the model to follow the schema exactly (AgentChat makes
	// handoff tools strict).
	Strict bool
}

// ModelResponse is a model's reply.
type ModelResponse struct {
	Content   string
	ToolCalls []ToolCall
	Usage     Usage
}

// ErrReplayExhausted is returned by the replay provider when a caller asks for
// more responses than its script holds; the chat fails with it.
var ErrReplayExhausted = errors.New("replay model has no response left")

// ModelConfig is a model as a spec names it: a provider and its options.
// Endpoints and keys are never part of it: they are server configuration.
type ModelConfig struct {
	Provider          string           `json:"provider"`
	Model             string           `json:"model,omitempty"`
	Temperature       *float64         `json:"temperature,omitempty"`
	TopP              *float64         `json:"top_p,omitempty"`
	MaxTokens         *int             `json:"max_tokens,omitempty"`
	Seed              *int             `json:"seed,omitempty"`
	ParallelToolCalls *bool            `json:"parallel_tool_calls,omitempty"`
	ResponseFormat    json.RawMessage  `json:"response_format,omitempty"`
	Responses         []ReplayResponse `json:"responses,omitempty"`
}

// ReplayResponse is one scripted reply of the replay provider. In a spec it is
// either a string (the content) or an object.
type ReplayResponse struct {
	Content   string           `json:"content,omitempty"`
	ToolCalls []ReplayToolCall `json:"tool_calls,omitempty"`
	Usage     *Usage           `json:"usage,omitempty"`
	DelayMS   int              `json:"delay_ms,omitempty"`
}

// ReplayToolCall is a scripted tool call; Arguments is any JSON value.
type ReplayToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// UnmarshalJSON accepts a string or an object with known fields only.
func (r *ReplayResponse) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*r = ReplayResponse{Content: s}
		return nil
	}
	// Unknown fields are refused by DecodeSpec's shape check, before any
	// spec is decoded into Go values; a stored spec passed it. So a plain
	// Unmarshal, without a Decoder (and its buffer) per response.
	type plain ReplayResponse
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("replay response: %w", err)
	}
	*r = ReplayResponse(p)
	return nil
}
