package chat

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// defaultSystemMessage is AgentChat's AssistantAgent default.
const defaultSystemMessage = "You are a helpful AI assistant. Solve tasks using your tools. Reply with TERMINATE when the task has been completed."

// selectNext chooses the speaker of the next turn and appends the
// speaker.selected event. It returns nil (and no error) when the chat paused
// for a manual selection or stopped because no agent may speak.
func (w *worker) selectNext(ctx context.Context) (*selection, error) {
	turn := w.turns + 1
	method := w.spec.method()
	if _, proxy := w.routedCalls(); proxy != "" {
		// Tool calls wait for the user_proxy that executes them (AutoGen's
		// func_call_filter): it speaks next, whatever the method says.
		sel := selection{Agent: proxy, Method: method, Candidates: []string{proxy}, Turn: turn, Routed: true}
		if err := w.commit(ctx, Event{Type: EventSpeakerSelected, Data: mustJSON(sel)}); err != nil {
			return nil, err
		}
		return &sel, nil
	}
	cands := w.spec.candidates(w.lastSpeaker)
	if len(cands) == 0 {
		detail := fmt.Sprintf("No eligible speaker after '%s': the transitions allow none.", w.lastSpeaker)
		return nil, w.commit(ctx, terminalEvent(StatusCompleted, StopNoEligibleSpeaker, detail, ""))
	}
	sel := selection{Method: method, Candidates: cands, Turn: turn}
	switch method {
	case SelectRandom:
		sel.Agent = pickRandom(w.spec, cands, turn)
	case SelectManual:
		return nil, w.commit(ctx, w.inputRequest(&PendingInput{Kind: "speaker", Candidates: cands,
			Reason: fmt.Sprintf("Select the speaker of turn %d.", turn)}))
	case SelectSwarm:
		sel.Agent = swarmTarget(w.spec, w.msgs, w.lastSpeaker)
		if !containsName(cands, sel.Agent) {
			detail := fmt.Sprintf("No eligible speaker: the swarm hands over to '%s', which the transitions do not allow after '%s'.", sel.Agent, w.lastSpeaker)
			return nil, w.commit(ctx, terminalEvent(StatusCompleted, StopNoEligibleSpeaker, detail, ""))
		}
	case SelectAuto:
		if err := w.selectAuto(ctx, &sel); err != nil {
			return nil, err
		}
	default:
		sel.Agent = nextInOrder(w.spec, w.lastSpeaker, cands)
		sel.Candidates = []string{sel.Agent}
	}
	if err := w.commit(ctx, Event{Type: EventSpeakerSelected, Data: mustJSON(sel)}); err != nil {
		return nil, err
	}
	return &sel, nil
}

// selectAuto asks the selector model for the next speaker, AutoGen style:
// one eligible candidate needs no call; otherwise up to max_attempts calls,
// each failed one answered with corrective feedback; then the fallback is
// the next candidate in agents order after the last speaker — never an
// excluded agent.
func (w *worker) selectAuto(ctx context.Context, sel *selection) error {
	if len(sel.Candidates) == 1 {
		sel.Agent = sel.Candidates[0]
		return nil
	}
	ss := w.spec.SpeakerSelection
	cfg := w.spec.resolveModel(ss.Model)
	msgs := []ModelMessage{{Role: RoleSystem, Content: selectorPrompt(w.spec, sel.Candidates, w.msgs)}}
	var usage Usage
	names := agentNames(w.spec)
	for attempt := range derefOr(ss.MaxAttempts, 3) {
		req := &ModelRequest{ChatID: w.id, Config: cfg, CallIndex: w.selectorCalls + attempt, Messages: msgs}
		start := time.Now()
		resp, err := w.rt.models.Complete(ctx, req)
		w.rt.metrics.modelCall(cfg.Provider, err, time.Since(start))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("speaker selector model (%s): %w", cfg.Provider, err)
		}
		usage = usage.Add(resp.Usage)
		sel.Attempts, sel.Replies = attempt+1, append(sel.Replies, resp.Content)
		agent, feedback := judgeSelectorReply(names, sel.Candidates, resp.Content, w.lastSpeaker, w.spec.allowRepeat())
		if agent != "" {
			sel.Agent, sel.Usage = agent, &usage
			return nil
		}
		// AgentChat sends the feedback as a user message from "user".
		msgs = append(msgs, ModelMessage{Role: RoleAssistant, Content: resp.Content}, ModelMessage{Role: RoleUser, Name: UserName, Content: feedback})
	}
	sel.Agent, sel.Fallback, sel.Usage = nextInOrder(w.spec, w.lastSpeaker, sel.Candidates), true, &usage
	w.log.Warn("speaker selector gave no valid answer; falling back to round robin", "attempts", sel.Attempts, "agent", sel.Agent)
	return nil
}

func containsName(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}

// runTurn runs the selected agent's turn and appends its messages.
func (w *worker) runTurn(ctx context.Context, sel selection) error {
	a := w.agent(sel.Agent)
	if a == nil {
		return fmt.Errorf("selected speaker %q is not an agent of the chat", sel.Agent)
	}
	if a.Type == AgentAssistant {
		return w.assistantTurn(ctx, a, sel.Turn)
	}
	if m, proxy := w.routedCalls(); m != nil && proxy == a.Name {
		return w.executeRouted(ctx, a, m, sel.Turn)
	}
	return w.userProxyTurn(ctx, a, sel.Turn)
}

// userProxyTurn is AutoGen 0.2's check_termination_and_human_reply followed
// by the auto-reply: ALWAYS asks the human every time; TERMINATE asks only
// once max_consecutive_auto_reply auto-replies were given (a fired
// termination condition asks too, see afterMessage); NEVER never asks and
// ends the chat when the auto-replies run out.
func (w *worker) userProxyTurn(ctx context.Context, a *AgentSpec, turn int) error {
	limit := derefOr(a.MaxConsecutiveAutoReply, defaultMaxConsecutiveAutoReply)
	switch a.humanInputMode() {
	case HumanInputAlways:
		return w.commit(ctx, w.inputRequest(&PendingInput{Kind: "message", Agent: a.Name,
			Reason: "Provide feedback. Send empty content to skip and use the auto-reply, or \"exit\" to end the chat."}))
	case HumanInputTerminate:
		if w.autoReplies[a.Name] >= limit {
			return w.commit(ctx, w.inputRequest(&PendingInput{Kind: "message", Agent: a.Name,
				Reason: fmt.Sprintf("max_consecutive_auto_reply (%d) reached. Send content to go on, or empty content or \"exit\" to end the chat.", limit)}))
		}
	default:
		if w.autoReplies[a.Name] >= limit {
			detail := fmt.Sprintf("Agent '%s' reached max_consecutive_auto_reply (%d).", a.Name, limit)
			return w.commit(ctx, terminalEvent(StatusCompleted, StopMaxAutoReply, detail, ""))
		}
	}
	return w.autoReply(ctx, a, turn)
}

// autoReply is a user_proxy's reply without a human, which counts toward
// max_consecutive_auto_reply: the result of the code blocks addressed to it
// when it executes code and there are any, else its default auto-reply
// (AutoGen's default is "").
func (w *worker) autoReply(ctx context.Context, a *AgentSpec, turn int) error {
	if a.CodeExecution != nil {
		if blocks := runnableBlocks(w.msgs, a.Name, a.CodeExecution.Languages); len(blocks) > 0 {
			res, err := w.executeBlocks(ctx, a, blocks)
			if err != nil {
				return err
			}
			outcome := "execution succeeded"
			if res.ExitCode != 0 {
				outcome = "execution failed"
			}
			return w.commit(ctx, Event{Type: EventMessage, Role: RoleUser, Name: a.Name,
				Content: fmt.Sprintf("exitcode: %d (%s)\nCode output: %s", res.ExitCode, outcome, res.Output),
				Data:    mustJSON(messageData{Kind: kindAuto, Turn: turn, End: true, CodeResult: res})})
		}
	}
	return w.commit(ctx, Event{Type: EventMessage, Role: RoleUser, Name: a.Name, Content: derefOr(a.DefaultAutoReply, ""),
		Data: mustJSON(messageData{Kind: kindAuto, Turn: turn, End: true})})
}

// defaultCodeTimeout bounds one code block when neither code_execution nor
// sandbox sets timeout_s (AutoGen's default is 60 s).
const defaultCodeTimeout = 60

// executeBlocks runs blocks in order in the chat's sandbox and stops at the
// first that fails, as AutoGen's executors do; the outputs are joined.
func (w *worker) executeBlocks(ctx context.Context, a *AgentSpec, blocks []codeBlock) (*CodeResult, error) {
	if w.rt.sandboxes == nil {
		return nil, fmt.Errorf("agent %s executes code, but this server has no sandbox", a.Name)
	}
	timeout := derefOr(a.CodeExecution.TimeoutS, 0)
	if timeout == 0 && w.spec.Sandbox != nil {
		timeout = derefOr(w.spec.Sandbox.TimeoutS, 0)
	}
	if timeout == 0 {
		timeout = defaultCodeTimeout
	}
	var out strings.Builder
	res := &CodeResult{}
	for _, b := range blocks {
		r, err := w.rt.sandboxes.Exec(ctx, &ExecRequest{ChatID: w.id, Language: b.Language, Code: b.Code,
			Timeout: time.Duration(timeout) * time.Second, Limits: w.spec.sandboxLimits()})
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("run code of %s in the %s sandbox: %w", a.Name, w.rt.sandboxes.Backend(), err)
		}
		out.WriteString(r.Output)
		res.ExitCode = r.ExitCode
		if r.ExitCode != 0 {
			break
		}
	}
	res.Output = out.String()
	return res, nil
}

func (a *AgentSpec) humanInputMode() string {
	if a.HumanInputMode == "" {
		return HumanInputAlways // AutoGen's UserProxyAgent default
	}
	return a.HumanInputMode
}

// callModel makes one model call for an assistant with its system message,
// its view of the conversation and the functions it may call.
func (w *worker) callModel(ctx context.Context, a *AgentSpec, tools []ToolDef) (*ModelResponse, error) {
	cfg := w.spec.resolveModel(a.Model)
	req := &ModelRequest{ChatID: w.id, Caller: a.Name, Config: cfg, CallIndex: w.modelCalls[a.Name], Messages: w.modelContext(a), Tools: tools,
		OnDelta: w.deltaPublisher(a.Name)}
	start := time.Now()
	resp, err := w.rt.models.Complete(ctx, req)
	w.rt.metrics.modelCall(cfg.Provider, err, time.Since(start))
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
	after := w.lastSeq
	return func(content string) {
		w.rt.broker.publishDelta(w.id, Delta{Name: agent, Content: content, AfterSeq: after})
	}
}

// modelContext is an assistant's model request messages: its system
// message (AgentChat's default when unset; none when empty), then its view
// of the conversation (see agentContext).
func (w *worker) modelContext(a *AgentSpec) []ModelMessage {
	conv := agentContext(w.spec, a, w.msgs, w.meta)
	sys := defaultSystemMessage
	if a.SystemMessage != nil {
		sys = *a.SystemMessage
	}
	if sys == "" {
		return conv
	}
	return append([]ModelMessage{{Role: RoleSystem, Content: sys}}, conv...)
}
