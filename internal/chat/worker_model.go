package chat

import (
	"context"
	"fmt"
	"time"
)

// modelStep makes one model call of an assistant's turn and appends its
// reply: with the agent's tools, or without them to reflect on tool use.
func (w *worker) modelStep(ctx context.Context, s step) error {
	box := &toolbox{byName: map[string]offered{}}
	if !s.reflect {
		var err error
		if box, err = w.toolboxFor(ctx, s.agent); err != nil {
			return err
		}
	}
	resp, err := w.callModel(ctx, s.agent, box.defs)
	if err != nil {
		return err
	}
	return w.commit(ctx, modelReply(s.agent, s.turn, resp, box, s.reflect))
}

// callModel makes one model call for an assistant with its system message,
// its view of the conversation and the functions it may call.
func (w *worker) callModel(ctx context.Context, a *AgentSpec, tools []ToolDef) (*ModelResponse, error) {
	cfg := w.st.spec.resolveModel(a.Model)
	req := &ModelRequest{ChatID: w.id, Caller: a.Name, Config: cfg, CallIndex: w.st.modelCalls[a.Name], Messages: w.st.modelContext(a), Tools: tools,
		OnDelta: w.deltaPublisher(a.Name)}
	after := w.st.lastSeq
	req.OnReset = func() {
		w.rt.broker.publishDelta(w.id, Delta{Name: a.Name, Reset: true, AfterSeq: after})
	}
	start := time.Now()
	resp, err := w.rt.models.Complete(ctx, req)
	w.rt.metrics.modelCall(cfg.Provider, resp, err, time.Since(start))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("model call of agent %s (%s): %w", a.Name, cfg.Provider, err)
	}
	return resp, nil
}

// deltaPublisher sends a streaming reply's fragments to the chat's streams,
// placed after the last event committed before the call.
func (w *worker) deltaPublisher(agent string) func(string) {
	after := w.st.lastSeq
	return func(content string) {
		w.rt.broker.publishDelta(w.id, Delta{Name: agent, Content: content, AfterSeq: after})
	}
}

// selectAuto asks the selector model for the next speaker, AutoGen style:
// up to max_attempts calls, each failed one answered with corrective
// feedback; the state then picks the agent or the fallback
// (state.autoSelection).
func (w *worker) selectAuto(ctx context.Context, sel selection) (selection, error) {
	spec := w.st.spec
	ss := spec.SpeakerSelection
	cfg := spec.resolveModel(ss.Model)
	msgs := []ModelMessage{{Role: RoleSystem, Content: selectorPrompt(spec, sel.Candidates, w.st.msgs)}}
	var usage Usage
	var replies []string
	names := agentNames(spec)
	for attempt := range derefOr(ss.MaxAttempts, 3) {
		req := &ModelRequest{ChatID: w.id, Config: cfg, CallIndex: w.st.selectorCalls + attempt, Messages: msgs}
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
		agent, feedback := judgeSelectorReply(names, sel.Candidates, resp.Content, w.st.lastSpeaker, spec.allowRepeat())
		if agent != "" {
			break
		}
		// AgentChat sends the feedback as a user message from "user".
		msgs = append(msgs, ModelMessage{Role: RoleAssistant, Content: resp.Content}, ModelMessage{Role: RoleUser, Name: UserName, Content: feedback})
	}
	sel = w.st.autoSelection(sel, replies, usage)
	if sel.Fallback {
		w.log.Warn("speaker selector gave no valid answer; falling back to round robin", "attempts", sel.Attempts, "agent", sel.Agent)
	}
	return sel, nil
}
