package runtime

import (
	"context"
	"fmt"
	"slices"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/chat/engine"
)

// A parallel step is several agents' turns at once: the nodes a graph made
// ready together, which GraphFlow runs concurrently. Each branch is one
// agent's turn, taken step by step as a lone turn is (model call, tools,
// reflection), but the branches' model calls, tools and code run at the
// same time. The worker stays the chat's only writer: a branch's work runs
// on a goroutine of its own against the state it was planned on, and its
// events come back to the worker's goroutine, which commits them in the
// order they arrive and plans the branch's next step on the state after
// them. So a branch's reply is appended when it is ready, as AgentChat
// appends each response when it arrives, and a crash loses nothing
// committed: the next worker reads from the log which branches ended and
// how far the others got.

// branchResult is what a branch's step produced.
type branchResult struct {
	agent string
	evs   []chat.Event
	err   error
}

// runBranches runs the open branches of the parallel step until at most
// one is open, or one waits to ask a human while another runs. The first
// error cuts the others (their work is redone by whoever goes on) and is
// returned; what was committed stays.
func (w *worker) runBranches(ctx context.Context) error {
	bctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	results := make(chan branchResult)
	running := map[string]bool{}
	var parked []engine.Step // branches that wait for the others before they ask a human
	launch := func(agent string) {
		st := w.st
		s := st.BranchStep(w.env(), agent)
		if asksHuman(s) {
			parked = append(parked, s)
			return
		}
		running[agent] = true
		w.rt.metrics.parallelBranches.Inc()
		go func() {
			evs, err := w.produce(bctx, st, s)
			results <- branchResult{agent: agent, evs: evs, err: err}
		}()
	}
	for _, a := range w.st.OpenBranches() {
		launch(a)
	}
	var first error
	for len(running) > 0 {
		r := <-results
		delete(running, r.agent)
		w.rt.metrics.parallelBranches.Dec()
		if first != nil {
			continue // cut: drop what it made
		}
		if r.err == nil {
			r.err = w.commit(ctx, r.evs...)
		}
		if r.err != nil {
			first = r.err
			cancel(r.err)
			continue
		}
		if w.st.Status != chat.StatusRunning || !w.st.Parallel() {
			continue
		}
		if slices.Contains(w.st.OpenBranches(), r.agent) {
			launch(r.agent)
		}
	}
	if first != nil {
		return first
	}
	if len(parked) > 0 && len(w.st.OpenBranches()) > 1 && w.st.Status == chat.StatusRunning {
		// Every open branch waits to ask a human: the first asks now; the
		// others ask in turn once the answer lets it go on.
		return w.commit(ctx, parked[0].Events...)
	}
	return nil
}

// asksHuman reports whether a step pauses the chat for a client: a
// branch does that only when it is the last one running, so that a
// human is asked about one thing at a time and no reply is held back.
func asksHuman(s engine.Step) bool {
	return s.Kind == engine.StepAppend && slices.ContainsFunc(s.Events, func(e chat.Event) bool { return e.Type == chat.EventInputRequested })
}

// produce does the work of one step, planned on st (or, for a step of a
// team agent's inner run, on the inner run's state), and returns the
// events that record it without appending them, marked as the team's for
// an inner step. It must not read w.st: the branches of a parallel step
// run it while the worker's goroutine replaces w.st as others commit.
func (w *worker) produce(ctx context.Context, st *engine.State, s engine.Step) ([]chat.Event, error) {
	if s.Inner != nil {
		st = s.Inner // a step of a team agent's inner run
	}
	evs, err := w.produceOn(ctx, st, s)
	if err != nil || s.Team == "" {
		return evs, err
	}
	return engine.TagTeam(evs, s.Team), nil
}

func (w *worker) produceOn(ctx context.Context, st *engine.State, s engine.Step) ([]chat.Event, error) {
	switch s.Kind {
	case engine.StepSelect:
		sel, err := w.selectAuto(ctx, st, s.Sel)
		if err != nil {
			return nil, err
		}
		return []chat.Event{engine.SelectedEvent(sel)}, nil
	case engine.StepAppend:
		return s.Events, nil
	case engine.StepModel:
		resp, box, err := w.askModel(ctx, st, s.Agent, s.Reflect)
		if err != nil {
			return nil, err
		}
		ev, err := engine.ModelReply(s.Agent, s.Turn, resp, box, s.Reflect)
		if err != nil {
			w.rt.metrics.structuredInvalid.Inc()
			return nil, err
		}
		return []chat.Event{ev}, nil
	case engine.StepTools:
		return w.toolEvents(ctx, st, s)
	case engine.StepRouted:
		ev, err := w.routedEvent(ctx, s)
		if err != nil {
			return nil, err
		}
		return []chat.Event{ev}, nil
	case engine.StepCode:
		res, err := w.executeBlocks(ctx, s.Agent, s.Blocks)
		if err != nil {
			return nil, err
		}
		return []chat.Event{engine.CodeReply(s.Agent, s.Turn, res)}, nil
	}
	return nil, fmt.Errorf("a branch of a parallel step cannot take a %v step", s.Kind)
}
