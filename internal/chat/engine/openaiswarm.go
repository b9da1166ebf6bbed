package engine

import (
	"fmt"
	"strings"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/pytext"
	"github.com/agentd/agentd/internal/spec"
)

// This file is the swarm method under the openai_swarm protocol: what the
// models see is OpenAI Swarm's run loop (openai/swarm, core.py), not
// AgentChat's Swarm (docs/openai-swarm.md).
//
// In the log, each model call of the active agent is one turn: its reply,
// and when the reply asks for tools, one tool message with every result,
// which ends the turn. A hand-off among the results (the last one, as
// Swarm keeps the last agent a function returned) is recorded on that tool
// message, so the swarm selection (swarmTarget) makes its target the next
// speaker; without one the agent goes on. A reply without tool calls ends
// the run (swarmEnd), and the next run goes on with the agent that made it.

// swarmDefaultInstructions is the instructions of a Swarm Agent that sets
// none.
const swarmDefaultInstructions = "You are a helpful agent."

// swarmContext is the request messages of an agent's model call: its
// instructions as the system message, then the one history every agent is
// sent, as Swarm's run loop keeps it — user messages with their content
// only, each reply with the agent that made it as sender, each result as
// its own tool message naming the function it answers.
func (s *State) swarmContext(a *spec.Agent) []chat.ModelMessage {
	sys := swarmDefaultInstructions
	switch {
	case a.SystemMessageTemplate != nil:
		// Swarm's callable instructions, given the variables.
		sys = RenderTemplate(*a.SystemMessageTemplate, s.vars)
	case a.SystemMessage != nil:
		sys = *a.SystemMessage
	}
	out := make([]chat.ModelMessage, 0, len(s.Msgs)+1)
	out = append(out, chat.ModelMessage{Role: chat.RoleSystem, Content: sys})
	called := map[string]string{} // call id → function name
	for _, m := range s.Msgs {
		switch m.Role {
		case chat.RoleAssistant:
			for _, c := range m.ToolCalls {
				called[c.ID] = c.Function.Name
			}
			out = append(out, chat.ModelMessage{Role: chat.RoleAssistant, Content: m.Content, ToolCalls: m.ToolCalls, More: &chat.ModelMore{Sender: m.Name}})
		case chat.RoleTool:
			for _, r := range m.ToolResponses {
				out = append(out, chat.ModelMessage{Role: chat.RoleTool, ToolCallID: r.ToolCallID, More: &chat.ModelMore{ToolName: called[r.ToolCallID]}, Content: r.Content})
			}
		case chat.RoleSystem:
			out = append(out, chat.ModelMessage{Role: chat.RoleSystem, Content: m.Content})
		default:
			out = append(out, chat.ModelMessage{Role: chat.RoleUser, Content: m.Content, More: chat.MoreParts(modelParts(m.Parts))})
		}
	}
	return out
}

// SwarmHandoffDef is the function a Swarm program writes to hand off: no
// parameters, its docstring the description (function_to_json's schema,
// without strict). Its name is the hand-off's, else transfer_to_<target>
// lower-cased, with what a function name may not hold (a Swarm agent's
// name may be any text) made "_"; without a description it has none, as a
// function without a docstring.
func SwarmHandoffDef(h *spec.Handoff) chat.ToolDef {
	name := h.Name
	if name == "" {
		name = strings.Map(func(r rune) rune {
			if r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				return r
			}
			return '_'
		}, strings.ToLower(spec.HandoffPrefix+h.Target))
	}
	return chat.ToolDef{Name: name, Description: h.Description, Parameters: []byte(`{"type":"object","properties":{},"required":[]}`)}
}

// SwarmHandoffResult is the result of a function that returned an agent:
// json.dumps({"assistant": name}), as Swarm's handle_function_result
// writes it.
func SwarmHandoffResult(agent string) string {
	var b strings.Builder
	b.WriteString(`{"assistant": `)
	pytext.WriteJSONString(&b, agent, true)
	b.WriteByte('}')
	return b.String()
}

// SwarmToolEvents is the tool message that answers an agent's calls under
// the openai_swarm protocol, which ends its turn: a call of a function the
// agent does not have gets Swarm's "Error: Tool X not found.", a hand-off
// its {"assistant": name}; the last hand-off of the calls (a hand-off
// function's, or an agent a function returned, Handoffs[i]) is the next
// speaker.
//
// A function that returns an agent the chat does not have (by name) is
// answered with an error instead: there is no agent to hand off to.
func SwarmToolEvents(sp *spec.Spec, a *spec.Agent, turn int, open *chat.Message, results []chat.ToolResponse, handoffs []string, box *Toolbox) []chat.Event {
	var target string
	for i, c := range open.ToolCalls {
		o, ok := box.ByName[c.Function.Name]
		switch {
		case !ok:
			results[i] = chat.ToolResponse{ToolCallID: c.ID, Role: chat.RoleTool, Content: "Error: Tool " + c.Function.Name + " not found.", IsError: true}
		case o.Handoff != "":
			results[i] = chat.ToolResponse{ToolCallID: c.ID, Role: chat.RoleTool, Content: SwarmHandoffResult(o.Handoff)}
			target = o.Handoff
		case i < len(handoffs) && handoffs[i] != "" && sp.Agent(handoffs[i]) == nil:
			results[i] = ErrorResponse(c.ID, fmt.Sprintf("the function returned agent %q, and the chat has no agent of that name", handoffs[i]))
		case i < len(handoffs) && handoffs[i] != "":
			target = handoffs[i]
		}
	}
	ev := toolMessage(a.Name, turn, open.ToolCalls, results, true)
	if target != "" {
		var d chat.MessageData
		if err := chat.DecodeData(ev, &d); err == nil {
			d.Handoff = target
			ev = chat.WithData(ev, d)
		}
	}
	return []chat.Event{ev}
}

// swarmEnd is the end of a run under the openai_swarm protocol: the last
// message is an agent's reply without tool calls, where Swarm's run loop
// returns.
func (s *State) swarmEnd() (chat.Event, bool) {
	if !s.Spec.OpenAISwarm() || s.Pending != nil || len(s.Msgs) == 0 {
		return chat.Event{}, false
	}
	i := len(s.Msgs) - 1
	m, d := s.Msgs[i], s.Meta[i]
	if m.Role != chat.RoleAssistant || len(m.ToolCalls) > 0 || d.Kind != chat.KindModel || d.Turn <= s.RunTurns {
		return chat.Event{}, false
	}
	return terminalEvent(chat.StatusCompleted, chat.StopSwarmComplete, "'"+m.Name+"' replied without tool calls, which ends the run.", ""), true
}
