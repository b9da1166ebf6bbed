package spec

// The shapes below are shared by a spec's history (HistoryMessage) and by
// the chat log: a resumed message is stored as it was given.

// ToolCall is one function call requested by a model (seed protocol shape).
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is the function part of a ToolCall; Arguments is a JSON string.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolResponse answers one ToolCall (seed protocol shape).
type ToolResponse struct {
	ToolCallID string `json:"tool_call_id"`
	Role       string `json:"role"`
	Content    string `json:"content"`
	IsError    bool   `json:"is_error,omitempty"`
}

// Usage counts the tokens of one model call (or a sum of them).
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{PromptTokens: u.PromptTokens + o.PromptTokens, CompletionTokens: u.CompletionTokens + o.CompletionTokens}
}

// Message roles, as in the OpenAI chat API.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
	RoleSystem    = "system"
)

// UserName is the name of the task and of human messages; no agent may use it.
const UserName = "user"
