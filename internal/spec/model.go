package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Model is a model as a spec names it: a provider and its options. A
// provider other than "replay" is the kind of endpoint that serves it
// ("openai", "azure", "anthropic"); Endpoint names one of the server's
// configured endpoints of that kind, and without it the server picks one by
// the model's name. URLs and keys are never part of it: they are server
// configuration.
type Model struct {
	Provider          string          `json:"provider"`
	Endpoint          string          `json:"endpoint,omitempty"`
	Model             string          `json:"model,omitempty"`
	Temperature       *float64        `json:"temperature,omitempty"`
	TopP              *float64        `json:"top_p,omitempty"`
	MaxTokens         *int            `json:"max_tokens,omitempty"`
	Seed              *int            `json:"seed,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	ResponseFormat    json.RawMessage `json:"response_format,omitempty"`
	// Stop is where the model stops: OpenAI's stop, the Messages API's
	// stop_sequences.
	Stop []string `json:"stop,omitempty"`
	// FrequencyPenalty, PresencePenalty and ReasoningEffort are OpenAI's
	// (openai and azure endpoints); the Messages API has none of them.
	FrequencyPenalty *float64         `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64         `json:"presence_penalty,omitempty"`
	ReasoningEffort  string           `json:"reasoning_effort,omitempty"`
	Responses        []ReplayResponse `json:"responses,omitempty"`
	// Vision is whether the model takes images (AgentChat's model_info
	// "vision"); unset, it does. A model that does not is sent each
	// MultiModalMessage as its text, "<image>" for each image and one part
	// per line, as AgentChat's agents do for such a client
	// (remove_images).
	Vision *bool `json:"vision,omitempty"`
	// Thinking is Anthropic's extended thinking, as the Messages API and
	// AgentChat's AnthropicChatCompletionClient take it:
	// {"type": "enabled", "budget_tokens": N} or {"type": "disabled"}.
	// Only a model of provider anthropic takes it.
	Thinking *Thinking `json:"thinking,omitempty"`
}

// Thinking is a model's extended thinking setting.
type Thinking struct {
	Type         string `json:"type"`
	BudgetTokens *int   `json:"budget_tokens,omitempty"`
}

// The thinking types, and the least budget the Messages API takes.
const (
	ThinkingEnabled   = "enabled"
	ThinkingDisabled  = "disabled"
	MinThinkingBudget = 1024
)

// DefaultAnthropicMaxTokens is an anthropic model's max_tokens when the
// spec sets none: the Messages API requires one, and AgentChat's Anthropic
// client sends 4096.
const DefaultAnthropicMaxTokens = 4096

// ThinkingEnabled is whether the model is asked to think.
func (m Model) ThinkingEnabled() bool {
	return m.Thinking != nil && m.Thinking.Type == ThinkingEnabled
}

// SeesImages is whether the model is sent images as images.
func (m Model) SeesImages() bool { return m.Vision == nil || *m.Vision }

// ReplayResponse is one scripted reply of the replay provider. In a spec it is
// either a string (the content) or an object.
type ReplayResponse struct {
	Content   string           `json:"content,omitempty"`
	ToolCalls []ReplayToolCall `json:"tool_calls,omitempty"`
	Usage     *Usage           `json:"usage,omitempty"`
	DelayMS   int              `json:"delay_ms,omitempty"`
	// Thought is the reply's reasoning, kept apart from its content
	// (AgentChat's CreateResult.thought).
	Thought string `json:"thought,omitempty"`
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
