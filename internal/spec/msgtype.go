package spec

import "strings"

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
	// TypeStructuredMessage is the family of an assistant's replies with an
	// output_schema. A reply's own type names its content's type, as
	// AgentChat's class does (StructuredMessageType); logs written before
	// that hold this name alone.
	TypeStructuredMessage = "StructuredMessage"
)

// StructuredMessageType is the type of a reply of an agent whose
// output_schema is named model: AgentChat's StructuredMessage[T] takes
// its type from the class name, which pydantic makes "StructuredMessage[T]"
// for the content model T.
func StructuredMessageType(model string) string {
	return TypeStructuredMessage + "[" + model + "]"
}

// IsStructuredMessage reports whether a message's type is a
// StructuredMessage's, of whatever content type.
func IsStructuredMessage(typ string) bool {
	rest, ok := strings.CutPrefix(typ, TypeStructuredMessage)
	return ok && (rest == "" || strings.HasPrefix(rest, "[") && strings.HasSuffix(rest, "]"))
}

// MessageTypes lists every message type agentd writes (a
// StructuredMessage's with its content type, see StructuredMessageType).
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
