package engine

import (
	"fmt"
	"slices"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/spec"
)

// Offered is one function a model may call in a turn, and who runs it.
type Offered struct {
	Def     chat.ToolDef
	Tool    *spec.Tool // nil for handoffs and routed functions
	Handoff string     // the target agent of a handoff tool
	// Executor is the user_proxy that runs a function the caller does not
	// own (AutoGen's function_map routing); "" when the caller runs it.
	Executor string
}

// Toolbox is what an assistant may call: its own tools, the functions the
// chat's user_proxies execute for others, and a handoff tool per target.
// The zero toolbox offers nothing; byName is made by the first add (an
// assistant without tools holds no map while it waits on its model).
type Toolbox struct {
	ByName map[string]Offered
	Defs   []chat.ToolDef
}

func (b *Toolbox) Add(o Offered) {
	if _, dup := b.ByName[o.Def.Name]; dup {
		return // first definition wins; validation keeps names unique
	}
	if b.ByName == nil {
		b.ByName = map[string]Offered{}
	}
	b.ByName[o.Def.Name] = o
	b.Defs = append(b.Defs, o.Def)
}

// handoffContent is AgentChat's content of a handoff's tool result and message.
func handoffContent(target string) string {
	return fmt.Sprintf("Transferred to %s, adopting the role of %s immediately.", target, target)
}

func ErrorResponse(callID, msg string) chat.ToolResponse {
	return chat.ToolResponse{ToolCallID: callID, Role: chat.RoleTool, Content: "Error: " + msg, IsError: true}
}

// toolMessage is the tool message that answers calls (seed protocol: role
// tool, one response per call, in the calls' order).
func toolMessage(executor string, turn int, calls []chat.ToolCall, responses []chat.ToolResponse, end bool) chat.Event {
	names := make([]string, len(calls))
	for i, c := range calls {
		names[i] = c.Function.Name
	}
	return chat.WithData(chat.Event{Type: chat.EventMessage, Role: chat.RoleTool, Name: executor, ToolResponses: responses}, chat.MessageData{Kind: chat.KindTool, Turn: turn, End: end, Functions: names})
}

// SandboxLimits are the spec's sandbox settings for tools and code.
func SandboxLimits(s *spec.Spec) chat.SandboxLimits {
	if s.Sandbox == nil {
		return chat.SandboxLimits{}
	}
	l := chat.SandboxLimits{MemoryMB: DerefOr(s.Sandbox.MemoryMB, 0), CPUs: DerefOr(s.Sandbox.CPUs, 0),
		DiskMB: DerefOr(s.Sandbox.DiskMB, 0)}
	if s.Sandbox.Network != nil {
		l.AllowHosts = s.Sandbox.Network.Allow
	}
	return l
}

// ToolTurnEvents are the events that answer an assistant's open calls:
// the tool message with results, and, when the model handed off, the
// handoff message that ends the turn. Every handoff call is answered with
// its transfer text, as AgentChat runs every handoff tool of a reply; the
// first one is taken.
func ToolTurnEvents(a *spec.Agent, turn int, open *chat.Message, results []chat.ToolResponse, box *Toolbox) []chat.Event {
	var target string
	for i, c := range open.ToolCalls {
		if o := box.ByName[c.Function.Name]; o.Handoff != "" {
			results[i] = chat.ToolResponse{ToolCallID: c.ID, Role: chat.RoleTool, Content: handoffContent(o.Handoff)}
			if target == "" {
				target = o.Handoff
			}
		}
	}
	evs := []chat.Event{toolMessage(a.Name, turn, open.ToolCalls, results, false)}
	if target != "" {
		evs = append(evs, chat.WithData(chat.Event{Type: chat.EventMessage, Role: chat.RoleAssistant, Name: a.Name, Content: handoffContent(target)}, chat.MessageData{Kind: chat.KindHandoff, Handoff: target, Turn: turn, End: true}))
	}
	return evs
}

// RoutedReply is a user_proxy's answer to the calls routed to it: the
// results of the calls it has functions for (owned), an error for the others.
func RoutedReply(p *spec.Agent, turn int, open *chat.Message, results []chat.ToolResponse, owned map[string]Offered) chat.Event {
	for i, c := range open.ToolCalls {
		if _, ok := owned[c.Function.Name]; !ok {
			results[i] = ErrorResponse(c.ID, fmt.Sprintf("function %q is not executed by %s", c.Function.Name, p.Name))
		}
	}
	return toolMessage(p.Name, turn, open.ToolCalls, results, true)
}

// ApprovedCalls applies the approvals of the open turn to its calls: an
// approved call with edited arguments runs with them; a rejected one does
// not run, and is answered with an error naming the reason (decided[i]).
func (s *State) ApprovedCalls(open []chat.ToolCall) (calls []chat.ToolCall, decided []*chat.ToolResponse) {
	calls, decided = slices.Clone(open), make([]*chat.ToolResponse, len(open))
	for i, c := range open {
		d, ok := s.approvals[c.ID]
		switch {
		case !ok:
		case !d.Approve:
			r := ErrorResponse(c.ID, "Tool call was not approved. Reason: "+d.Reason)
			decided[i] = &r
		case len(d.Arguments) > 0:
			calls[i].Function.Arguments = string(d.Arguments)
		}
	}
	return calls, decided
}
