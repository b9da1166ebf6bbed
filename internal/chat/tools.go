package chat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// More message kinds of the tool loop.
const (
	kindTool    = "tool"    // a tool message with tool_responses
	kindHandoff = "handoff" // an assistant's handoff to another agent
	kindSummary = "summary" // the tool-call summary that ends a turn without reflection
)

// handoffPrefix names the generated handoff tools: transfer_to_<agent>.
const handoffPrefix = "transfer_to_"

// offered is one function a model may call in a turn, and who runs it.
type offered struct {
	def     ToolDef
	tool    *ToolSpec // nil for handoffs and routed functions
	handoff string    // the target agent of a handoff tool
	// executor is the user_proxy that runs a function the caller does not
	// own (AutoGen's function_map routing); "" when the caller runs it.
	executor string
}

// toolbox is what an assistant may call: its own tools, the functions the
// chat's user_proxies execute for others, and a handoff tool per target.
type toolbox struct {
	byName map[string]offered
	defs   []ToolDef
}

func (b *toolbox) add(o offered) {
	if _, dup := b.byName[o.def.Name]; dup {
		return // first definition wins; validation keeps names unique
	}
	b.byName[o.def.Name] = o
	b.defs = append(b.defs, o.def)
}

// toolboxFor describes the functions offered to an assistant in this turn.
func (w *worker) toolboxFor(ctx context.Context, a *AgentSpec) (*toolbox, error) {
	b := &toolbox{byName: map[string]offered{}}
	for _, name := range a.Tools {
		t := w.spec.tool(name)
		defs, err := w.rt.tools.Describe(ctx, w.id, t)
		if err != nil {
			return nil, fmt.Errorf("describe tool %s: %w", name, err)
		}
		for _, d := range defs {
			b.add(offered{def: d, tool: t})
		}
	}
	for i := range w.spec.Agents {
		p := &w.spec.Agents[i]
		if p.Type != AgentUserProxy {
			continue
		}
		for _, fn := range p.Functions {
			t := w.spec.tool(fn)
			defs, err := w.rt.tools.Describe(ctx, w.id, t)
			if err != nil {
				return nil, fmt.Errorf("describe function %s: %w", fn, err)
			}
			for _, d := range defs {
				b.add(offered{def: d, executor: p.Name})
			}
		}
	}
	for _, target := range a.Handoffs {
		b.add(offered{def: handoffDef(target), handoff: target})
	}
	return b, nil
}

// tool returns the spec's tool of that name (validated to exist).
func (s *Spec) tool(name string) *ToolSpec {
	for i := range s.Tools {
		if s.Tools[i].Name == name {
			return &s.Tools[i]
		}
	}
	return nil
}

// handoffContent is AgentChat's content of a handoff's tool result and message.
func handoffContent(target string) string {
	return fmt.Sprintf("Transferred to %s, adopting the role of %s immediately.", target, target)
}

// assistantTurn is AgentChat's AssistantAgent turn: a model call with the
// agent's tools; while the model asks for tools it owns, run them all
// concurrently and call the model again, up to max_tool_iterations; then
// reflect (one more call, no tools) or append a summary of the last calls.
// A handoff ends the turn at once (first handoff wins). Calls of functions a
// user_proxy executes end the turn: that proxy speaks next. A turn cut by a
// crash is continued from its messages: calls without responses are run
// (again, with the same ids) before the model is asked anything.
func (w *worker) assistantTurn(ctx context.Context, a *AgentSpec, turn int) error {
	box, err := w.toolboxFor(ctx, a)
	if err != nil {
		return err
	}
	maxIter := derefOr(a.MaxToolIterations, 1)
	for {
		iter, open := w.turnProgress(turn)
		if open == nil {
			if iter >= maxIter {
				return w.endToolTurn(ctx, a, box, turn)
			}
			resp, err := w.callModel(ctx, a, box.defs)
			if err != nil {
				return err
			}
			usage := resp.Usage
			d := messageData{Usage: &usage, Kind: kindModel, Turn: turn}
			routed := len(resp.ToolCalls) > 0 && slices.ContainsFunc(resp.ToolCalls, func(c ToolCall) bool { return box.byName[c.Function.Name].executor != "" })
			// A text reply ends the turn; so do calls for a user_proxy to run.
			d.End = len(resp.ToolCalls) == 0 || routed
			if err := w.commit(ctx, Event{Type: EventMessage, Role: RoleAssistant, Name: a.Name, Content: resp.Content,
				ToolCalls: resp.ToolCalls, Data: mustJSON(d)}); err != nil {
				return err
			}
			if d.End || w.status != StatusRunning {
				return nil
			}
			continue
		}
		// Run the open calls: the caller's own tools, handoffs, and errors
		// for names nobody offers.
		results := w.runCalls(ctx, open.ToolCalls, func(c ToolCall) (offered, bool) {
			o, ok := box.byName[c.Function.Name]
			return o, ok && o.executor == ""
		})
		// Every handoff call is answered with its transfer text, as AgentChat
		// runs every handoff tool of a reply; the first one is taken.
		var target string
		for i, c := range open.ToolCalls {
			if o := box.byName[c.Function.Name]; o.handoff != "" {
				results[i] = ToolResponse{ToolCallID: c.ID, Role: RoleTool, Content: handoffContent(o.handoff)}
				if target == "" {
					target = o.handoff
				}
			}
		}
		if ctx.Err() != nil {
			return ctx.Err() // cut mid-call: redo the calls, do not record half of them
		}
		evs := []Event{toolMessage(a.Name, turn, open.ToolCalls, results, false)}
		if target != "" {
			evs = append(evs, Event{Type: EventMessage, Role: RoleAssistant, Name: a.Name, Content: handoffContent(target),
				Data: mustJSON(messageData{Kind: kindHandoff, Handoff: target, Turn: turn, End: true})})
		}
		if err := w.commit(ctx, evs...); err != nil || target != "" || w.status != StatusRunning {
			return err
		}
	}
}

// endToolTurn ends a turn whose iterations are used up: reflection (a
// model call without tools, whose text ends the turn) or the summary of the
// last iteration's calls in tool_call_summary_format.
func (w *worker) endToolTurn(ctx context.Context, a *AgentSpec, box *toolbox, turn int) error {
	if derefOr(a.ReflectOnToolUse, false) {
		resp, err := w.callModel(ctx, a, nil)
		if err != nil {
			return err
		}
		usage := resp.Usage
		return w.commit(ctx, Event{Type: EventMessage, Role: RoleAssistant, Name: a.Name, Content: resp.Content,
			Data: mustJSON(messageData{Usage: &usage, Kind: kindModel, Turn: turn, End: true})})
	}
	calls, responses := w.lastIteration(turn)
	format := derefOr(a.ToolCallSummaryFormat, "{result}")
	lines := make([]string, 0, len(calls))
	for _, c := range calls {
		r := responses[c.ID]
		lines = append(lines, strings.NewReplacer("{tool_name}", c.Function.Name, "{arguments}", c.Function.Arguments,
			"{result}", r.Content, "{is_error}", pyBool(r.IsError)).Replace(format))
	}
	return w.commit(ctx, Event{Type: EventMessage, Role: RoleAssistant, Name: a.Name, Content: strings.Join(lines, "\n"),
		Data: mustJSON(messageData{Kind: kindSummary, Turn: turn, End: true})})
}

// pyBool is a bool as Python's str.format writes it, which AgentChat uses
// for tool_call_summary_format.
func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// turnProgress reads the current turn from the log: how many model calls
// asked for tools, and the tool_calls message whose calls have no responses
// yet (nil when the model is to be asked next).
func (w *worker) turnProgress(turn int) (iterations int, open *Message) {
	answered := map[string]bool{}
	for i := range w.msgs {
		if w.meta[i].Turn != turn {
			continue
		}
		m := &w.msgs[i]
		for _, r := range m.ToolResponses {
			answered[r.ToolCallID] = true
		}
		if len(m.ToolCalls) > 0 && m.Role == RoleAssistant {
			iterations++
			open = m
		}
	}
	if open != nil && slices.ContainsFunc(open.ToolCalls, func(c ToolCall) bool { return !answered[c.ID] }) {
		return iterations, open
	}
	return iterations, nil
}

// lastIteration returns the calls of the turn's last tool_calls message and
// the responses to them.
func (w *worker) lastIteration(turn int) ([]ToolCall, map[string]ToolResponse) {
	var calls []ToolCall
	responses := map[string]ToolResponse{}
	for i := range w.msgs {
		if w.meta[i].Turn != turn {
			continue
		}
		if m := &w.msgs[i]; len(m.ToolCalls) > 0 {
			calls = m.ToolCalls
		}
		for _, r := range w.msgs[i].ToolResponses {
			responses[r.ToolCallID] = r
		}
	}
	return calls, responses
}

// runCalls runs the calls that mine accepts concurrently — a model's
// parallel calls are independent by contract — and returns responses in the
// calls' order. A name mine rejects gets an error response.
func (w *worker) runCalls(ctx context.Context, calls []ToolCall, mine func(ToolCall) (offered, bool)) []ToolResponse {
	out := make([]ToolResponse, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		o, ok := mine(c)
		switch {
		case o.handoff != "":
			continue // answered by the caller
		case !ok:
			out[i] = errorResponse(c.ID, fmt.Sprintf("unknown function %q", c.Function.Name))
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := w.rt.tools.Call(ctx, &ToolRequest{ChatID: w.id, Tool: o.tool, Function: o.def, CallID: c.ID,
				Arguments: c.Function.Arguments, Limits: w.spec.sandboxLimits()})
			out[i] = ToolResponse{ToolCallID: c.ID, Role: RoleTool, Content: res.Content, IsError: res.IsError}
		}()
	}
	wg.Wait()
	return out
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
	return Event{Type: EventMessage, Role: RoleTool, Name: executor, ToolResponses: responses,
		Data: mustJSON(messageData{Kind: kindTool, Turn: turn, End: end, Functions: names})}
}

// routedCalls returns the last message's tool calls when they wait for a
// user_proxy to execute them (AutoGen's func_call_filter), and that proxy.
func (w *worker) routedCalls() (*Message, string) {
	if len(w.msgs) == 0 {
		return nil, ""
	}
	m := &w.msgs[len(w.msgs)-1]
	if m.Role != RoleAssistant || len(m.ToolCalls) == 0 {
		return nil, ""
	}
	for _, c := range m.ToolCalls {
		for i := range w.spec.Agents {
			p := &w.spec.Agents[i]
			if p.Type == AgentUserProxy && w.spec.executes(p, c.Function.Name) {
				return m, p.Name
			}
		}
	}
	return nil, ""
}

// executes reports whether a user_proxy runs the function: one of its
// functions is that tool, or an mcp tool that may offer it.
func (s *Spec) executes(p *AgentSpec, fn string) bool {
	for _, name := range p.Functions {
		if name == fn {
			return true
		}
		if t := s.tool(name); t != nil && t.implementationType() == "mcp" {
			return true
		}
	}
	return false
}

// executeRouted is a user_proxy's turn after calls routed to it: run the
// calls it has functions for, answer the others with an error.
func (w *worker) executeRouted(ctx context.Context, p *AgentSpec, m *Message, turn int) error {
	owned := map[string]offered{}
	for _, fn := range p.Functions {
		t := w.spec.tool(fn)
		defs, err := w.rt.tools.Describe(ctx, w.id, t)
		if err != nil {
			return fmt.Errorf("describe function %s: %w", fn, err)
		}
		for _, d := range defs {
			owned[d.Name] = offered{def: d, tool: t}
		}
	}
	results := w.runCalls(ctx, m.ToolCalls, func(c ToolCall) (offered, bool) {
		o, ok := owned[c.Function.Name]
		return o, ok
	})
	for i, c := range m.ToolCalls {
		if _, ok := owned[c.Function.Name]; !ok {
			results[i] = errorResponse(c.ID, fmt.Sprintf("function %q is not executed by %s", c.Function.Name, p.Name))
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return w.commit(ctx, toolMessage(p.Name, turn, m.ToolCalls, results, true))
}

// sandboxLimits are the spec's sandbox settings for tools and code.
func (s *Spec) sandboxLimits() SandboxLimits {
	if s.Sandbox == nil {
		return SandboxLimits{}
	}
	return SandboxLimits{MemoryMB: derefOr(s.Sandbox.MemoryMB, 0), CPUs: derefOr(s.Sandbox.CPUs, 0)}
}

// needsSandbox reports whether the chat runs code: a code-executing
// user_proxy or a sandbox tool.
func (s *Spec) needsSandbox() bool {
	for i := range s.Agents {
		if s.Agents[i].CodeExecution != nil {
			return true
		}
	}
	for i := range s.Tools {
		if s.Tools[i].implementationType() == "sandbox" {
			return true
		}
	}
	return false
}

// SandboxNeeded reports whether a chat may still use its sandbox: it exists
// and has not ended. The sandbox reaper keeps exactly those.
func (r *Runtime) SandboxNeeded(ctx context.Context, chatID string) bool {
	c, err := r.store.GetChat(ctx, "", chatID)
	if err != nil {
		return !errors.Is(err, ErrNotFound) // keep on doubt: a store error is no proof the chat ended
	}
	return !c.Status.Terminal()
}
