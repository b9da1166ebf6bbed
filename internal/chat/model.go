package chat

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/agentd/agentd/internal/spec"
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
	Config spec.Model
	// CallIndex is the number of calls this caller made with this model
	// before this one, derived from the log. The replay provider answers
	// with Config.Responses[CallIndex], which makes its position survive
	// restarts.
	CallIndex int
	Messages  []ModelMessage
	Tools     []ToolDef
	// Protocol is spec.ProtocolOpenAISwarm when the request is to go out as
	// OpenAI Swarm's run loop sends it (messages with sender and
	// tool_name, tools as function_to_json writes them, no tool_choice);
	// "" for AgentChat's wire.
	Protocol string
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
// A request carries the chat's whole history on every call, so the fields
// few messages have are kept apart, in More: a message is 96 bytes, not
// 168.
type ModelMessage struct {
	Role       string
	Name       string
	Content    string
	ToolCalls  []ToolCall
	ToolCallID string
	// More holds the message's images, thinking blocks and Swarm fields;
	// nil when it has none. It may be shared between copies of the
	// message: it is never changed, only replaced.
	More *ModelMore
}

// ModelMore is what few model messages have.
type ModelMore struct {
	// Parts, on a user message, are its text and images in order (a
	// MultiModalMessage): sent as content parts instead of Content.
	Parts []ContentPart
	// Thinking, on an agent's own assistant message with tool calls, are
	// the signed thinking blocks of the reply it was made of (see
	// ModelResponse.Thinking): an anthropic endpoint sends them back in
	// the tool loop they belong to; no other wire sends them.
	Thinking []ThinkingBlock
	// Sender, on an assistant message, and ToolName, on a tool message,
	// are the fields OpenAI Swarm's run loop adds to its history: the
	// agent that made a reply, the function a result answers. Only
	// Protocol openai_swarm sends them.
	Sender, ToolName string
}

// MoreParts is the More of a message with parts p: nil when there are none.
func MoreParts(p []ContentPart) *ModelMore {
	if len(p) == 0 {
		return nil
	}
	return &ModelMore{Parts: p}
}

// MoreThinking is the More of a message with thinking blocks t: nil when
// there are none.
func MoreThinking(t []ThinkingBlock) *ModelMore {
	if len(t) == 0 {
		return nil
	}
	return &ModelMore{Thinking: t}
}

// Parts are the message's content parts (see ModelMore).
func (m *ModelMessage) Parts() []ContentPart {
	if m.More == nil {
		return nil
	}
	return m.More.Parts
}

// Thinking are the message's thinking blocks (see ModelMore).
func (m *ModelMessage) Thinking() []ThinkingBlock {
	if m.More == nil {
		return nil
	}
	return m.More.Thinking
}

// Sender is the Swarm agent that made the message (see ModelMore).
func (m *ModelMessage) Sender() string {
	if m.More == nil {
		return ""
	}
	return m.More.Sender
}

// ToolName is the Swarm function a tool message answers (see ModelMore).
func (m *ModelMessage) ToolName() string {
	if m.More == nil {
		return ""
	}
	return m.More.ToolName
}

// DropParts makes the message its text: its parts go, the rest of More
// stays (in a copy, since More may be shared).
func (m *ModelMessage) DropParts() {
	if m.More == nil || m.More.Parts == nil {
		return
	}
	more := *m.More
	more.Parts = nil
	if more.Thinking == nil && more.Sender == "" && more.ToolName == "" {
		m.More = nil
		return
	}
	m.More = &more
}

// ThinkingBlock is a thinking or redacted_thinking block of an Anthropic
// reply, exactly as received: the Messages API wants the blocks of the
// assistant message of a tool loop sent back unmodified, signature and
// all, while thinking is enabled.
type ThinkingBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	// Data is a redacted_thinking block's encrypted thinking.
	Data string `json:"data,omitempty"`
}

// ContentPart is one part of a multimodal message: text, or an image.
type ContentPart struct {
	Text  string
	Image *Image
}

// Image is an image of a message: its bytes, their media type, and its
// size in pixels (what its tokens are counted by).
type Image struct {
	Data      []byte
	MediaType string
	Width     int
	Height    int
}

// TokenCounter counts the tokens of a model request's messages as the
// model's AgentChat client counts them (count_tokens), for token-limited
// model contexts. The count must be a constant plus a sum over messages
// (as every AgentChat client's is): the context counts each message once.
// internal/llm implements it; a ModelClient that does is the runtime's
// counter.
type TokenCounter interface {
	CountTokens(m spec.Model, msgs []ModelMessage) (int, error)
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
	// Thought is the reply's reasoning (reasoning_content, thinking blocks,
	// a leading <think>…</think>), never part of Content: AgentChat's
	// CreateResult.thought. It is kept on the message, and models are not
	// shown it again.
	Thought string
	// Thinking are the reply's signed thinking blocks (Anthropic's
	// extended thinking), in order: kept with its message when it asks for
	// tools, to be sent back in the same tool loop, and never shown to
	// clients (Thought is what they see of them).
	Thinking []ThinkingBlock
}

// ErrReplayExhausted is returned by the replay provider when a caller asks for
// more responses than its script holds; the chat fails with it.
var ErrReplayExhausted = errors.New("replay model has no response left")
