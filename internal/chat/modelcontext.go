package chat

import "github.com/agentd/agentd/internal/spec"

// defaultSystemMessage is AgentChat's AssistantAgent default.
const defaultSystemMessage = "You are a helpful AI assistant. Solve tasks using your tools. Reply with TERMINATE when the task has been completed."

// modelContext is an assistant's model request messages: its system
// message (AgentChat's default when unset; none when empty), then its view
// of the conversation (see agentContext).
func (s *state) modelContext(a *spec.Agent) []ModelMessage {
	sys := defaultSystemMessage
	if a.SystemMessage != nil {
		sys = *a.SystemMessage
	}
	// About one model message per message of the log, and the system's.
	out := make([]ModelMessage, 0, len(s.msgs)+1)
	if sys != "" {
		out = append(out, ModelMessage{Role: RoleSystem, Content: sys})
	}
	return appendAgentContext(out, s.spec, a, s.msgs, s.meta)
}
