package chat

import "github.com/agentd/agentd/internal/spec"

// The log keeps tool calls, their responses and usage in the shapes a spec's
// history gives them (a resumed message is stored as it was given), so the
// chat's names for them are the spec's.
type (
	ToolCall     = spec.ToolCall
	FunctionCall = spec.FunctionCall
	ToolResponse = spec.ToolResponse
	Usage        = spec.Usage
)
