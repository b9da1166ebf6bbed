package chat

// AgentChat's names for messages (autogen_agentchat.messages), the "type" a
// client sees on every message so that it can tell, for example, a tool-call
// summary from a model's reply.
const (
	TypeTextMessage            = "TextMessage"
	TypeToolCallRequestEvent   = "ToolCallRequestEvent"
	TypeToolCallExecutionEvent = "ToolCallExecutionEvent"
	TypeToolCallSummaryMessage = "ToolCallSummaryMessage"
	TypeHandoffMessage         = "HandoffMessage"
)

// MessageTypes lists every message type agentd writes.
var MessageTypes = []string{TypeTextMessage, TypeToolCallRequestEvent, TypeToolCallExecutionEvent,
	TypeToolCallSummaryMessage, TypeHandoffMessage}

// messageType is AgentChat's type for a message event. It is derived from the
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
func messageType(e Event, d messageData) string {
	kind := d.Kind
	switch {
	case d.Type != "":
		return d.Type
	case len(e.ToolCalls) > 0:
		return TypeToolCallRequestEvent
	case e.Role == RoleTool || len(e.ToolResponses) > 0:
		return TypeToolCallExecutionEvent
	case kind == kindSummary:
		return TypeToolCallSummaryMessage
	case kind == kindHandoff:
		return TypeHandoffMessage
	}
	return TypeTextMessage
}
