package chat

import (
	"fmt"
	"strings"
)

// defaultSystemMessage is AgentChat's AssistantAgent default.
const defaultSystemMessage = "You are a helpful AI assistant. Solve tasks using your tools. Reply with TERMINATE when the task has been completed."

// modelContext is an assistant's view of the conversation, built so that
// the request is valid for the OpenAI chat API whatever the log holds:
//   - its own replies are assistant messages; each of its tool_calls
//     messages is followed at once by one tool message per call id (a call
//     without a recorded response — cut by a crash, say — gets an error
//     result), wherever the responses stand in the log;
//   - everyone else's messages are user messages with their name, and their
//     tool calls and results are shown as text (AgentChat keeps another
//     agent's tool traffic out of the context; a group chat still needs to
//     know what happened, e.g. a move on a shared board);
//   - context.buffer_size keeps the last N, never starting at a tool message.
func (s *state) modelContext(a *AgentSpec) []ModelMessage {
	responses := map[string]ToolResponse{}
	for _, m := range s.msgs {
		for _, r := range m.ToolResponses {
			responses[r.ToolCallID] = r
		}
	}
	placed := map[string]bool{}
	conv := make([]ModelMessage, 0, len(s.msgs))
	for _, m := range s.msgs {
		own := m.Name == a.Name && m.Role == RoleAssistant
		switch {
		case own && len(m.ToolCalls) > 0:
			conv = append(conv, ModelMessage{Role: RoleAssistant, Content: m.Content, ToolCalls: m.ToolCalls})
			for _, c := range m.ToolCalls {
				content := "Error: no result was recorded for this call"
				if r, ok := responses[c.ID]; ok {
					content = r.Content
				}
				conv = append(conv, ModelMessage{Role: RoleTool, ToolCallID: c.ID, Content: content})
				placed[c.ID] = true
			}
		case own:
			conv = append(conv, ModelMessage{Role: RoleAssistant, Content: m.Content})
		case len(m.ToolResponses) > 0:
			var parts []string
			for _, r := range m.ToolResponses {
				if !placed[r.ToolCallID] {
					parts = append(parts, r.Content)
				}
			}
			if len(parts) > 0 {
				conv = append(conv, ModelMessage{Role: RoleUser, Name: m.Name, Content: strings.Join(parts, "\n")})
			}
		case len(m.ToolCalls) > 0:
			conv = append(conv, ModelMessage{Role: RoleUser, Name: m.Name, Content: describeCalls(m)})
		default:
			conv = append(conv, ModelMessage{Role: RoleUser, Name: m.Name, Content: m.Content})
		}
	}
	if a.Context != nil && a.Context.BufferSize != nil && len(conv) > *a.Context.BufferSize {
		conv = conv[len(conv)-*a.Context.BufferSize:]
		for len(conv) > 0 && conv[0].Role == RoleTool {
			conv = conv[1:]
		}
	}
	sys := defaultSystemMessage
	if a.SystemMessage != nil {
		sys = *a.SystemMessage
	}
	if sys == "" {
		return conv
	}
	return append([]ModelMessage{{Role: RoleSystem, Content: sys}}, conv...)
}

// describeCalls renders another agent's tool calls as text.
func describeCalls(m Message) string {
	lines := []string{}
	if m.Content != "" {
		lines = append(lines, m.Content)
	}
	for _, c := range m.ToolCalls {
		lines = append(lines, fmt.Sprintf("[%s calls %s(%s)]", m.Name, c.Function.Name, c.Function.Arguments))
	}
	return strings.Join(lines, "\n")
}
