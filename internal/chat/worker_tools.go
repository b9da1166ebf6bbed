package chat

import (
	"context"
	"fmt"
	"sync"

	"github.com/agentd/agentd/internal/spec"
)

// toolsStep runs an assistant's open calls — its own tools, handoffs, and
// errors for names nobody offers — and appends the results.
func (w *worker) toolsStep(ctx context.Context, s step) error {
	evs, err := w.toolEvents(ctx, w.st, s)
	if err != nil {
		return err
	}
	return w.commit(ctx, evs...)
}

// toolEvents runs the calls of a toolsStep planned on st and returns the
// events that record them.
func (w *worker) toolEvents(ctx context.Context, st *state, s step) ([]Event, error) {
	box, err := w.toolboxFor(ctx, s.agent)
	if err != nil {
		return nil, err
	}
	calls, decided := st.approvedCalls(s.open.ToolCalls)
	results := w.runCalls(ctx, calls, decided, func(c ToolCall) (offered, bool) {
		o, ok := box.byName[c.Function.Name]
		return o, ok && o.executor == ""
	})
	if ctx.Err() != nil {
		return nil, ctx.Err() // cut mid-call: redo the calls, do not record half of them
	}
	return toolTurnEvents(s.agent, s.turn, s.open, results, box), nil
}

// routedStep is a user_proxy's turn after calls routed to it: run the
// calls it has functions for, answer the others with an error.
func (w *worker) routedStep(ctx context.Context, s step) error {
	ev, err := w.routedEvent(ctx, s)
	if err != nil {
		return err
	}
	return w.commit(ctx, ev)
}

// routedEvent runs the calls of a stepRouted and returns the proxy's reply.
func (w *worker) routedEvent(ctx context.Context, s step) (Event, error) {
	owned := map[string]offered{}
	for _, fn := range s.agent.Functions {
		t := w.spec.Tool(fn)
		defs, err := w.rt.tools.Describe(ctx, w.id, t)
		if err != nil {
			return Event{}, fmt.Errorf("describe function %s: %w", fn, err)
		}
		for _, d := range defs {
			owned[d.Name] = offered{def: d, tool: t}
		}
	}
	results := w.runCalls(ctx, s.open.ToolCalls, nil, func(c ToolCall) (offered, bool) {
		o, ok := owned[c.Function.Name]
		return o, ok
	})
	if ctx.Err() != nil {
		return Event{}, ctx.Err()
	}
	return routedReply(s.agent, s.turn, s.open, results, owned), nil
}

// toolboxFor describes the functions offered to an assistant in this turn.
func (w *worker) toolboxFor(ctx context.Context, a *spec.Agent) (*toolbox, error) {
	b := &toolbox{}
	for _, name := range a.Tools {
		t := w.spec.Tool(name)
		defs, err := w.rt.tools.Describe(ctx, w.id, t)
		if err != nil {
			return nil, fmt.Errorf("describe tool %s: %w", name, err)
		}
		for _, d := range defs {
			b.add(offered{def: d, tool: t})
		}
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
				b.add(offered{def: d, executor: p.Name})
			}
		}
	}
	for _, target := range a.Handoffs {
		b.add(offered{def: handoffDef(target), handoff: target})
	}
	return b, nil
}

// runCalls runs the calls that mine accepts concurrently — a model's
// parallel calls are independent by contract — and returns responses in the
// calls' order. A name mine rejects gets an error response; a call that
// answered answers already (answered[i] set) does not run.
func (w *worker) runCalls(ctx context.Context, calls []ToolCall, answered []*ToolResponse, mine func(ToolCall) (offered, bool)) []ToolResponse {
	out := make([]ToolResponse, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		if i < len(answered) && answered[i] != nil {
			out[i] = *answered[i]
			continue
		}
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
				Arguments: c.Function.Arguments, Limits: sandboxLimits(w.spec)})
			out[i] = ToolResponse{ToolCallID: c.ID, Role: RoleTool, Content: res.Content, IsError: res.IsError}
		}()
	}
	wg.Wait()
	return out
}
