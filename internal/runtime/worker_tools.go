package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/chat/engine"

	"github.com/agentd/agentd/internal/spec"
)

// toolsStep runs an assistant's open calls — its own tools, handoffs, and
// errors for names nobody offers — and appends the results.
func (w *worker) toolsStep(ctx context.Context, s engine.Step) error {
	evs, err := w.toolEvents(ctx, w.st, s)
	if err != nil {
		return err
	}
	return w.commit(ctx, evs...)
}

// toolEvents runs the calls of a toolsStep planned on st and returns the
// events that record them.
func (w *worker) toolEvents(ctx context.Context, st *engine.State, s engine.Step) ([]chat.Event, error) {
	box, err := w.toolboxFor(ctx, s.Agent)
	if err != nil {
		return nil, err
	}
	calls, decided := st.ApprovedCalls(s.Open.ToolCalls)
	results, outcomes := w.runCalls(ctx, st, calls, decided, func(c chat.ToolCall) (engine.Offered, bool) {
		o, ok := box.ByName[c.Function.Name]
		return o, ok && o.Executor == ""
	})
	if ctx.Err() != nil {
		return nil, ctx.Err() // cut mid-call: redo the calls, do not record half of them
	}
	ctxEvs, refused := st.ToolContextEvents(s.Agent.Name, calls, outcomes, results)
	if refused > 0 {
		w.rt.metrics.contextRefused.Add(float64(refused))
		w.log().Warn("a function's change of the context variables was refused", "agent", s.Agent.Name, "calls", refused)
	}
	if w.spec.OpenAISwarm() {
		handoffs := make([]string, len(outcomes))
		for i, o := range outcomes {
			handoffs[i] = o.Handoff
		}
		return append(ctxEvs, engine.SwarmToolEvents(w.spec, s.Agent, s.Turn, s.Open, results, handoffs, box)...), nil
	}
	return append(ctxEvs, engine.ToolTurnEvents(s.Agent, s.Turn, s.Open, results, box)...), nil
}

// routedStep is a user_proxy's turn after calls routed to it: run the
// calls it has functions for, answer the others with an error.
func (w *worker) routedStep(ctx context.Context, s engine.Step) error {
	ev, err := w.routedEvent(ctx, s)
	if err != nil {
		return err
	}
	return w.commit(ctx, ev)
}

// routedEvent runs the calls of a stepRouted and returns the proxy's reply.
func (w *worker) routedEvent(ctx context.Context, s engine.Step) (chat.Event, error) {
	owned := map[string]engine.Offered{}
	for _, fn := range s.Agent.Functions {
		t := w.spec.Tool(fn)
		defs, err := w.rt.tools.Describe(ctx, w.id, t)
		if err != nil {
			return chat.Event{}, fmt.Errorf("describe function %s: %w", fn, err)
		}
		for _, d := range defs {
			owned[d.Name] = engine.Offered{Def: d, Tool: t}
		}
	}
	results, _ := w.runCalls(ctx, w.st, s.Open.ToolCalls, nil, func(c chat.ToolCall) (engine.Offered, bool) {
		o, ok := owned[c.Function.Name]
		return o, ok
	})
	if ctx.Err() != nil {
		return chat.Event{}, ctx.Err()
	}
	return engine.RoutedReply(s.Agent, s.Turn, s.Open, results, owned), nil
}

// toolboxFor describes the functions offered to an assistant in this turn.
// Under the openai_swarm protocol they are a Swarm Agent's functions: its
// tools as function_to_json describes them, then its hand-offs as the
// functions a Swarm program writes for them; no user_proxy is there to
// run functions for others.
func (w *worker) toolboxFor(ctx context.Context, a *spec.Agent) (*engine.Toolbox, error) {
	swarm := w.spec.OpenAISwarm()
	b := &engine.Toolbox{}
	for _, name := range a.Tools {
		t := w.spec.Tool(name)
		// A runtime without tools has none to describe: the method is
		// taken only here, where a spec with tools has them checked.
		describe := w.rt.tools.Describe
		if swarm {
			describe = w.rt.tools.DescribeSwarm
		}
		defs, err := describe(ctx, w.id, t)
		if err != nil {
			return nil, fmt.Errorf("describe tool %s: %w", name, err)
		}
		for _, d := range defs {
			b.Add(engine.Offered{Def: d, Tool: t})
		}
	}
	if swarm {
		for i := range a.Handoffs {
			h := &a.Handoffs[i]
			b.Add(engine.Offered{Def: engine.SwarmHandoffDef(h), Handoff: h.Target})
		}
		return b, nil
	}
	for i := range w.spec.Agents {
		if w.spec.AgentIndex(a.Name) < 0 {
			break // an inner team's agent: no user_proxy of the chat runs its calls
		}
		p := &w.spec.Agents[i]
		if p.Type != spec.AgentUserProxy {
			continue
		}
		for _, fn := range p.Functions {
			t := w.spec.Tool(fn)
			defs, err := w.rt.tools.Describe(ctx, w.id, t)
			if err != nil {
				return nil, fmt.Errorf("describe function %s: %w", fn, err)
			}
			for _, d := range defs {
				b.Add(engine.Offered{Def: d, Executor: p.Name})
			}
		}
	}
	for _, h := range a.Handoffs {
		if !h.Conditional() { // a conditional hand-off is no tool (engine.State.handoffTaken)
			b.Add(engine.Offered{Def: engine.HandoffDef(h), Handoff: h.Target})
		}
	}
	return b, nil
}

// runCalls runs the calls that mine accepts concurrently — a model's
// parallel calls are independent by contract — and returns responses in the
// calls' order, with each call's full result (a python_function's hand-off
// and changes of the context variables). A name mine rejects gets an error
// response; a call that answered answers already (answered[i] set) does
// not run. Every call is given the context variables of st: Swarm passes a
// reply's calls the variables as they were before them.
func (w *worker) runCalls(ctx context.Context, st *engine.State, calls []chat.ToolCall, answered []*chat.ToolResponse, mine func(chat.ToolCall) (engine.Offered, bool)) ([]chat.ToolResponse, []chat.ToolResult) {
	out := make([]chat.ToolResponse, len(calls))
	results := make([]chat.ToolResult, len(calls))
	protocol := ""
	if w.spec.OpenAISwarm() {
		protocol = spec.ProtocolOpenAISwarm
	}
	vars := toolContext(st)
	var wg sync.WaitGroup
	for i, c := range calls {
		if i < len(answered) && answered[i] != nil {
			out[i] = *answered[i]
			continue
		}
		o, ok := mine(c)
		switch {
		case o.Handoff != "":
			continue // answered by the caller
		case !ok:
			out[i] = engine.ErrorResponse(c.ID, fmt.Sprintf("unknown function %q", c.Function.Name))
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := w.rt.tools.Call(ctx, &chat.ToolRequest{ChatID: w.id, Tool: o.Tool, Function: o.Def, CallID: c.ID,
				Arguments: c.Function.Arguments, Limits: engine.SandboxLimits(w.spec), Protocol: protocol, ContextVariables: vars})
			out[i], results[i] = chat.ToolResponse{ToolCallID: c.ID, Role: chat.RoleTool, Content: res.Content, IsError: res.IsError}, res
		}()
	}
	wg.Wait()
	return out, results
}

// toolContext is the context variables a tool call is given: those of st.
func toolContext(st *engine.State) json.RawMessage {
	return engine.EncodeContext(st.ContextVariables())
}
