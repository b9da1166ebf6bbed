package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/chat/engine"

	"github.com/agentd/agentd/internal/spec"
)

// modelStep makes one model call of an assistant's turn and appends its
// reply: with the agent's tools, or without them to reflect on tool use.
//
// Most of a waiting chat's life is spent in this call, and its goroutine's
// stack is as large as the frames it waits under. So the frames on the way
// to the model are kept small: what is prepared before the call and done
// after it lives in frames of its own, gone while the call waits; that is
// what lets the garbage collector halve the stack of every waiting chat.
// That is also why it calls the model itself, not through askModel: one
// frame less under the wait.
func (w *worker) modelStep(ctx context.Context, s *engine.Step) error {
	box, err := w.modelTools(ctx, s.Agent, s.Reflect)
	if err != nil {
		return err
	}
	resp, err := w.callModel(ctx, w.st, s.Agent, box.Defs)
	if err != nil {
		return err
	}
	return w.commitReply(ctx, s.Agent, s.Turn, resp, box, s.Reflect)
}

// askModel offers an assistant its tools (none to reflect) and calls its
// model: a model step of a parallel branch.
func (w *worker) askModel(ctx context.Context, st *engine.State, a *spec.Agent, reflect bool) (*chat.ModelResponse, *engine.Toolbox, error) {
	box, err := w.modelTools(ctx, a, reflect)
	if err != nil {
		return nil, nil, err
	}
	resp, err := w.callModel(ctx, st, a, box.Defs)
	return resp, box, err
}

//go:noinline
func (w *worker) modelTools(ctx context.Context, a *spec.Agent, reflect bool) (*engine.Toolbox, error) {
	if reflect || a.Type == spec.AgentTeam {
		return &engine.Toolbox{}, nil // a team agent answers without tools
	}
	return w.toolboxFor(ctx, a)
}

//go:noinline
func (w *worker) commitReply(ctx context.Context, a *spec.Agent, turn int, resp *chat.ModelResponse, box *engine.Toolbox, reflect bool) error {
	ev, err := engine.ModelReply(a, turn, resp, box, reflect)
	if err != nil {
		w.rt.metrics.structuredInvalid.Inc()
		w.log().Warn("structured reply does not match its type", "agent", a.Name, "err", err)
		return err
	}
	return w.commit(ctx, ev)
}

// callModel makes one model call for an assistant with its system message,
// its view of the conversation as st has it and the functions it may call.
func (w *worker) callModel(ctx context.Context, st *engine.State, a *spec.Agent, tools []chat.ToolDef) (*chat.ModelResponse, error) {
	req, err := w.modelRequest(st, a, tools)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if w.cyc != nil {
		w.cyc.modelStart = start
	}
	resp, err := w.rt.models.Complete(ctx, req)
	if w.cyc != nil {
		w.cyc.modelEnd = time.Now()
	}
	return w.modelAnswered(ctx, req, resp, err, start)
}

// modelRequest is the request of an assistant's model call.
//
//go:noinline
func (w *worker) modelRequest(st *engine.State, a *spec.Agent, tools []chat.ToolDef) (*chat.ModelRequest, error) {
	msgs, err := st.ModelContext(a, w.rt.tokens)
	if err != nil {
		return nil, fmt.Errorf("model context of agent %s: %w", a.Name, err)
	}
	cfg := w.spec.ResolveModel(a.Model)
	if a.OutputSchema != nil {
		rf, err := engine.ResponseFormat(a.OutputSchema)
		if err != nil {
			return nil, fmt.Errorf("model context of agent %s: %w", a.Name, err)
		}
		cfg.ResponseFormat = rf
	}
	switch {
	case a.ParallelToolCalls != nil:
		cfg.ParallelToolCalls = a.ParallelToolCalls
	case w.spec.OpenAISwarm():
		parallel := true // a Swarm Agent's default
		cfg.ParallelToolCalls = &parallel
	}
	req := &chat.ModelRequest{ChatID: w.id, Caller: a.Name, Config: cfg, CallIndex: st.ModelCallsOf(a.Name),
		Messages: msgs, Tools: tools, OnDelta: w.deltaPublisher(a.Name, st.LastSeq)}
	if w.spec.OpenAISwarm() {
		req.Protocol = spec.ProtocolOpenAISwarm
	}
	after := st.LastSeq
	req.OnReset = func() {
		w.rt.broker.publishDelta(w.id, w.topic, w.epoch, chat.Delta{Name: a.Name, Reset: true, AfterSeq: after})
	}
	return req, nil
}

// modelAnswered counts an assistant's model call and names it in its error.
//
//go:noinline
func (w *worker) modelAnswered(ctx context.Context, req *chat.ModelRequest, resp *chat.ModelResponse, err error, start time.Time) (*chat.ModelResponse, error) {
	w.rt.metrics.modelCall(req.Config.Provider, resp, err, time.Since(start))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("model call of agent %s (%s): %w", req.Caller, req.Config.Provider, err)
	}
	return resp, nil
}

// deltaPublisher sends a streaming reply's fragments to the chat's streams,
// placed after the last event committed before the call.
func (w *worker) deltaPublisher(agent string, after int64) func(string) {
	return func(content string) {
		w.rt.broker.publishDelta(w.id, w.topic, w.epoch, chat.Delta{Name: agent, Content: content, AfterSeq: after})
	}
}

// selectAuto asks the selector model for the next speaker, AutoGen style:
// up to max_attempts calls, each failed one answered with corrective
// feedback; the state then picks the agent or the fallback
// (state.autoSelection).
func (w *worker) selectAuto(ctx context.Context, st *engine.State, sel chat.Selection) (chat.Selection, error) {
	sp := st.Spec
	ss := sp.SpeakerSelection
	cfg := sp.ResolveModel(ss.Model)
	prompt, err := engine.SelectorPrompt(sp, sel.Candidates, st.Msgs, w.rt.tokens)
	if err != nil {
		return chat.Selection{}, err
	}
	msgs := []chat.ModelMessage{{Role: chat.RoleSystem, Content: prompt}}
	var usage chat.Usage
	var replies []string
	names := engine.AgentNames(sp)
	for attempt := range engine.DerefOr(ss.MaxAttempts, 3) {
		req := &chat.ModelRequest{ChatID: w.id, Config: cfg, CallIndex: st.SelectorCalls + attempt, Messages: msgs}
		start := time.Now()
		resp, err := w.rt.models.Complete(ctx, req)
		w.rt.metrics.modelCall(cfg.Provider, resp, err, time.Since(start))
		if err != nil {
			if ctx.Err() != nil {
				return chat.Selection{}, ctx.Err()
			}
			return chat.Selection{}, fmt.Errorf("speaker selector model (%s): %w", cfg.Provider, err)
		}
		usage = usage.Add(resp.Usage)
		replies = append(replies, resp.Content)
		agent, feedback := engine.JudgeSelectorReply(names, sel.Candidates, resp.Content, st.LastSpeaker, sp.AllowRepeat())
		if agent != "" {
			break
		}
		// AgentChat sends the feedback as a user message from "user".
		msgs = append(msgs, chat.ModelMessage{Role: chat.RoleAssistant, Content: resp.Content}, chat.ModelMessage{Role: chat.RoleUser, Name: chat.UserName, Content: feedback})
	}
	sel = st.AutoSelection(sel, replies, usage)
	if sel.Fallback {
		w.log().Warn("speaker selector gave no valid answer; falling back to round robin", "attempts", sel.Attempts, "agent", sel.Agent)
	}
	return sel, nil
}
