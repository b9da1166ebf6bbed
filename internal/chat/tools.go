package chat

import (
	"fmt"
	"slices"

	"github.com/agentd/agentd/internal/spec"
)

// offered is one function a model may call in a turn, and who runs it.
type offered struct {
	def     ToolDef
	tool    *spec.Tool // nil for handoffs and routed functions
	handoff string     // the target agent of a handoff tool
	// executor is the user_proxy that runs a function the caller does not
	// own (AutoGen's function_map routing); "" when the caller runs it.
	executor string
}

// toolbox is what an assistant may call: its own tools, the functions the
// chat's user_proxies execute for others, and a handoff tool per target.
// The zero toolbox offers nothing; byName is made by the first add (an
// assistant without tools holds no map while it waits on its model).
type toolbox struct {
	byName map[string]offered
	defs   []ToolDef
}

func (b *toolbox) add(o offered) {
	if _, dup := b.byName[o.def.Name]; dup {
		return // first definition wins; validation keeps names unique
	}
	if b.byName == nil {
		b.byName = map[string]offered{}
	}
	b.byName[o.def.Name] = o
	b.defs = append(b.defs, o.def)
}

// handoffContent is AgentChat's content of a handoff's tool result and message.
func handoffContent(target string) string {
	return fmt.Sprintf("Transferred to %s, adopting the role of %s immediately.", target, target)
}

func errorResponse(callID, msg string) ToolResponse {
	return ToolResponse{ToolCallID: callID, Role: RoleTool, Content: "Error: " + msg, IsError: true}
}

// toolMessage is the tool message that answers calls (seed protocol: role
// tool, one response per call, in the calls' order).
func toolMessage(executor string, turn int, calls []ToolCall, responses []ToolResponse, end bool) Event {
	names := make([]string, len(calls))
	for i, c := range calls {
		names[i] = c.Function.Name
	}
	return withData(Event{Type: EventMessage, Role: RoleTool, Name: executor, ToolResponses: responses}, messageData{Kind: kindTool, Turn: turn, End: end, Functions: names})
}

// sandboxLimits are the spec's sandbox settings for tools and code.
func sandboxLimits(s *spec.Spec) SandboxLimits {
	if s.Sandbox == nil {
		return SandboxLimits{}
	}
	l := SandboxLimits{MemoryMB: derefOr(s.Sandbox.MemoryMB, 0), CPUs: derefOr(s.Sandbox.CPUs, 0),
		DiskMB: derefOr(s.Sandbox.DiskMB, 0)}
	if s.Sandbox.Network != nil {
		l.AllowHosts = s.Sandbox.Network.Allow
	}
	return l
}

// toolTurnEvents are the events that answer an assistant's open calls:
// the tool message with results, and, when the model handed off, the
// handoff message that ends the turn. Every handoff call is answered with
// its transfer text, as AgentChat runs every handoff tool of a reply; the
// first one is taken.
func toolTurnEvents(a *spec.Agent, turn int, open *Message, results []ToolResponse, box *toolbox) []Event {
	var target string
	for i, c := range open.ToolCalls {
		if o := box.byName[c.Function.Name]; o.handoff != "" {
			results[i] = ToolResponse{ToolCallID: c.ID, Role: RoleTool, Content: handoffContent(o.handoff)}
			if target == "" {
				target = o.handoff
			}
		}
	}
	evs := []Event{toolMessage(a.Name, turn, open.ToolCalls, results, false)}
	if target != "" {
		evs = append(evs, withData(Event{Type: EventMessage, Role: RoleAssistant, Name: a.Name, Content: handoffContent(target)}, messageData{Kind: kindHandoff, Handoff: target, Turn: turn, End: true}))
	}
	return evs
}

// routedReply is a user_proxy's answer to the calls routed to it: the
// results of the calls it has functions for (owned), an error for the others.
func routedReply(p *spec.Agent, turn int, open *Message, results []ToolResponse, owned map[string]offered) Event {
	for i, c := range open.ToolCalls {
		if _, ok := owned[c.Function.Name]; !ok {
			results[i] = errorResponse(c.ID, fmt.Sprintf("function %q is not executed by %s", c.Function.Name, p.Name))
		}
	}
	return toolMessage(p.Name, turn, open.ToolCalls, results, true)
}

// approvedCalls applies the approvals of the open turn to its calls: an
// approved call with edited arguments runs with them; a rejected one does
// not run, and is answered with an error naming the reason (decided[i]).
func (s *state) approvedCalls(open []ToolCall) (calls []ToolCall, decided []*ToolResponse) {
	calls, decided = slices.Clone(open), make([]*ToolResponse, len(open))
	for i, c := range open {
		d, ok := s.approvals[c.ID]
		switch {
		case !ok:
		case !d.Approve:
			r := errorResponse(c.ID, "Tool call was not approved. Reason: "+d.Reason)
			decided[i] = &r
		case len(d.Arguments) > 0:
			calls[i].Function.Arguments = string(d.Arguments)
		}
	}
	return calls, decided
}
