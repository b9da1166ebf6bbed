package chat

import "github.com/agentd/agentd/internal/spec"

// AgentChat's names for messages are the spec's (see spec.MessageTypes).
const (
	TypeTextMessage            = spec.TypeTextMessage
	TypeToolCallRequestEvent   = spec.TypeToolCallRequestEvent
	TypeToolCallExecutionEvent = spec.TypeToolCallExecutionEvent
	TypeToolCallSummaryMessage = spec.TypeToolCallSummaryMessage
	TypeHandoffMessage         = spec.TypeHandoffMessage
	TypeStructuredMessage      = spec.TypeStructuredMessage
	TypeMultiModalMessage      = spec.TypeMultiModalMessage
)

// MessageType is AgentChat's type for a message event. It is derived from the
// message's shape and kind, so logs written before types were shown get them
// too.
//   - an assistant message with tool_calls is AgentChat's
//     ToolCallRequestEvent (a text that came with the calls, AgentChat's
//     ThoughtEvent, stays in its content);
//   - a tool message with tool_responses is a ToolCallExecutionEvent;
//   - the summary that ends a tool turn without reflection is a
//     ToolCallSummaryMessage, a handoff a HandoffMessage;
//   - everything else (the task, model replies, human messages, a
//     user_proxy's code-execution and auto replies, which AgentChat's
//     CodeExecutorAgent and UserProxyAgent also send as text) is a
//     TextMessage.
func MessageType(e Event, d MessageData) string {
	kind := d.Kind
	switch {
	case d.Type != "":
		return d.Type
	case len(e.ToolCalls) > 0 || e.Role == RoleTool || len(e.ToolResponses) > 0:
		return spec.ShapeType(e.Role, e.ToolCalls, e.ToolResponses)
	case kind == KindSummary:
		return TypeToolCallSummaryMessage
	case kind == KindHandoff:
		return TypeHandoffMessage
	}
	return TypeTextMessage
}
