package chat

import (
	"context"
	"fmt"
	"time"

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
func (w *worker) modelStep(ctx context.Context, s step) error {
	resp, box, err := w.askModel(ctx, w.st, s.agent, s.reflect)
	if err != nil {
		return err
	}
	return w.commitReply(ctx, s.agent, s.turn, resp, box, s.reflect)
}

// askModel offers an assistant its tools (none to reflect) and calls its
// model.
func (w *worker) askModel(ctx context.Context, st *state, a *spec.Agent, reflect bool) (*ModelResponse, *toolbox, error) {
	box, err := w.modelTools(ctx, a, reflect)
	if err != nil {
		return nil, nil, err
	}
	resp, err := w.callModel(ctx, st, a, box.defs)
	return resp, box, err
}

//go:noinline
func (w *worker) modelTools(ctx context.Context, a *spec.Agent, reflect bool) (*toolbox, error) {
	if reflect || a.Type == spec.AgentTeam {
		return &toolbox{}, nil // a team agent answers without tools
	}
	return w.toolboxFor(ctx, a)
}

//go:noinline
func (w *worker) commitReply(ctx context.Context, a *spec.Agent, turn int, resp *ModelResponse, box *toolbox, reflect bool) error {
	ev, err := modelReply(a, turn, resp, box, reflect)
	if err != nil {
		w.rt.metrics.structuredInvalid.Inc()
		w.log.Warn("structured reply does not match its type", "agent", a.Name, "err", err)
		return err
	}
	return w.commit(ctx, ev)
}

// callModel makes one model call for an assistant with its system message,
// its view of the conversation as st has it and the functions it may call.
func (w *worker) callModel(ctx context.Context, st *state, a *spec.Agent, tools []ToolDef) (*ModelResponse, error) {
	req, err := w.modelRequest(st, a, tools)
	if err != nil {
		return nil, fmt.Errorf("model context of agent %s: %w", a.Name, err)
	}
	start := time.Now()
	resp, err := w.rt.models.Complete(ctx, req)
	return w.modelAnswered(ctx, req, resp, err, start)
}

// modelRequest is the request of an assistant's model call.
//
//go:noinline
func (w *worker) modelRequest(st *state, a *spec.Agent, tools []ToolDef) (*ModelRequest, error) {
	msgs, err := st.modelContext(a, w.rt.tokens)
	if err != nil {
		return nil, err
	}
	cfg := w.spec.ResolveModel(a.Model)
	if a.OutputSchema != nil {
		rf, err := responseFormat(a.OutputSchema)
		if err != nil {
			return nil, err
		}
		cfg.ResponseFormat = rf
	}
	req := &ModelRequest{ChatID: w.id, Caller: a.Name, Config: cfg, CallIndex: st.modelCallsOf(a.Name),
		Messages: msgs, Tools: tools, OnDelta: w.deltaPublisher(a.Name, st.lastSeq)}
	after := st.lastSeq
	req.OnReset = func() {
		w.rt.broker.publishDelta(w.id, w.epoch, Delta{Name: a.Name, Reset: true, AfterSeq: after})
	}
	return req, nil
}

// modelAnswered counts an assistant's model call and names it in its error.
//
//go:noinline
func (w *worker) modelAnswered(ctx context.Context, req *ModelRequest, resp *ModelResponse, err error, start time.Time) (*ModelResponse, error) {
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
		w.rt.broker.publishDelta(w.id, w.epoch, Delta{Name: agent, Content: content, AfterSeq: after})
	}
}

// selectAuto asks the selector model for the next speaker, AutoGen style:
// up to max_attempts calls, each failed one answered with corrective
// feedback; the state then picks the agent or the fallback
// (state.autoSelection).
func (w *worker) selectAuto(ctx context.Context, st *state, sel selection) (selection, error) {
	sp := st.spec
	ss := sp.SpeakerSelection
	cfg := sp.ResolveModel(ss.Model)
	prompt, err := selectorPrompt(sp, sel.Candidates, st.msgs, w.rt.tokens)
	if err != nil {
		return selection{}, err
	}
	msgs := []ModelMessage{{Role: RoleSystem, Content: prompt}}
	var usage Usage
	var replies []string
	names := agentNames(sp)
	for attempt := range derefOr(ss.MaxAttempts, 3) {
		req := &ModelRequest{ChatID: w.id, Config: cfg, CallIndex: st.selectorCalls + attempt, Messages: msgs}
		start := time.Now()
		resp, err := w.rt.models.Complete(ctx, req)
		w.rt.metrics.modelCall(cfg.Provider, resp, err, time.Since(start))
		if err != nil {
			if ctx.Err() != nil {
				return selection{}, ctx.Err()
			}
			return selection{}, fmt.Errorf("speaker selector model (%s): %w", cfg.Provider, err)
		}
		usage = usage.Add(resp.Usage)
		replies = append(replies, resp.Content)
		agent, feedback := judgeSelectorReply(names, sel.Candidates, resp.Content, st.lastSpeaker, sp.AllowRepeat())
		if agent != "" {
			break
		}
		// AgentChat sends the feedback as a user message from "user".
		msgs = append(msgs, ModelMessage{Role: RoleAssistant, Content: resp.Content}, ModelMessage{Role: RoleUser, Name: UserName, Content: feedback})
	}
	sel = st.autoSelection(sel, replies, usage)
	if sel.Fallback {
		w.log.Warn("speaker selector gave no valid answer; falling back to round robin", "attempts", sel.Attempts, "agent", sel.Agent)
	}
	return sel, nil
}
