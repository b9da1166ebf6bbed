package spec

// AgentChat's names for messages (autogen_agentchat.messages), the "type" a
// client sees on every message so that it can tell, for example, a tool-call
// summary from a model's reply. A history message may name its type where
// its shape does not tell it.
const (
	TypeTextMessage            = "TextMessage"
	TypeToolCallRequestEvent   = "ToolCallRequestEvent"
	TypeToolCallExecutionEvent = "ToolCallExecutionEvent"
	TypeToolCallSummaryMessage = "ToolCallSummaryMessage"
	TypeHandoffMessage         = "HandoffMessage"
	// TypeStructuredMessage is an assistant's reply with an output_schema.
	TypeStructuredMessage = "StructuredMessage"
)

// MessageTypes lists every message type agentd writes.
var MessageTypes = []string{TypeTextMessage, TypeToolCallRequestEvent, TypeToolCallExecutionEvent,
	TypeToolCallSummaryMessage, TypeHandoffMessage, TypeStructuredMessage, TypeMultiModalMessage}

// ShapeType is the type a message's shape gives it: an assistant message
// with tool_calls is a ToolCallRequestEvent, a tool message (or one with
// tool_responses) a ToolCallExecutionEvent, anything else a TextMessage.
func ShapeType(role string, calls []ToolCall, responses []ToolResponse) string {
	switch {
	case len(calls) > 0:
		return TypeToolCallRequestEvent
	case role == RoleTool || len(responses) > 0:
		return TypeToolCallExecutionEvent
	}
	return TypeTextMessage
}
