package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
)

// Causes with which the runtime cuts a worker's context.
var (
	errCancelRequested = errors.New("chat cancelled by request")
	errShutdown        = errors.New("runtime shutting down")
	errLeaseLost       = errors.New("lease lost")
	errTermDeadline    = errors.New("termination deadline")
)

// Message kinds recorded in a message event's data.
const (
	kindTask    = "task"
	kindHistory = "history"
	kindModel   = "model"
	kindAuto    = "auto"
	kindHuman   = "human"
)

// appendTimeout bounds one durable append. Appends do not use the turn's
// context: a cancel arriving mid-append must not leave the worker unsure
// whether its events were written.
const appendTimeout = 30 * time.Second

// defaultMaxConsecutiveAutoReply is AutoGen's MAX_CONSECUTIVE_AUTO_REPLY.
const defaultMaxConsecutiveAutoReply = 100

// worker drives one chat. All its state is derived from the chat's log
// (apply), so a worker rebuilt on any replica continues where the last one
// stopped. It is the only writer of its chat while it holds the lease; the
// store fences it (epoch and seq) if it is not.
type worker struct {
	rt              *Runtime
	id              string
	spec            *Spec
	epoch           int64
	log             *slog.Logger
	cancelRequested bool
	maxRound        int
	specErr         error
	// inputResponse is a client's answer to the pending input request,
	// stored by SubmitInput and consumed by this worker's first append.
	inputResponse  json.RawMessage
	inputExpiresAt *time.Time

	// Derived from the log.
	lastSeq       int64
	status        Status
	stopReason    StopReason
	stopDetail    string
	errText       string
	completedAt   *time.Time
	msgs          []Message
	meta          []messageData // msgs[i]'s bookkeeping
	msgCount      int
	runMsgs       int // chat messages of the task and later: what max_messages counts
	turns         int
	usage         Usage // every model call's, the selector's included: the chat's usage
	started       time.Time
	lastSpeaker   string
	pending       *selection // a selected speaker whose turn has not ended
	modelCalls    map[string]int
	selectorCalls int
	autoReplies   map[string]int // per user_proxy, since its last human reply
	pendingInput  *PendingInput  // the open input request, while awaiting input
	term          *terminator
	termFired     bool
	// termBase holds the counts at the last reset of the termination tree
	// (a human chose to go on after it fired), as AgentChat resets its
	// conditions: they count from there.
	termBase termState
	// agentUsage sums the agents' model calls only (usage also has the
	// selector's): what token_usage counts.
	agentUsage Usage
	// delta holds the messages of the turn in progress: termination is
	// evaluated on a whole agent response, as AgentChat does.
	delta []termMsg
}

func newWorker(rt *Runtime, c *Chat) *worker {
	var spec Spec
	// Specs are validated before they are stored, so this cannot fail unless
	// the database was edited by hand; the chat then fails in run.
	specErr := json.Unmarshal(c.Spec, &spec)
	if specErr != nil {
		specErr = fmt.Errorf("decode stored spec: %w", specErr)
	}
	return &worker{
		rt: rt, id: c.ID, spec: &spec, epoch: c.Epoch, cancelRequested: c.CancelRequested, specErr: specErr,
		inputResponse: c.InputResponse, inputExpiresAt: c.InputExpiresAt,
		log:         rt.log.With("chat_id", c.ID),
		maxRound:    min(derefOr(spec.MaxRound, DefaultMaxRound), rt.limits.MaxRound),
		status:      StatusQueued,
		modelCalls:  map[string]int{},
		autoReplies: map[string]int{},
		term:        newTerminator(spec.Termination),
	}
}

// rebuild reads the whole log and derives the worker's state from it.
func (w *worker) rebuild(ctx context.Context) error {
	const page = 1000
	for {
		evs, err := w.rt.store.ListEvents(ctx, &ListEventsParams{ChatID: w.id, After: w.lastSeq, Limit: page})
		if err != nil {
			return fmt.Errorf("read log of chat %s: %w", w.id, err)
		}
		for _, e := range evs {
			w.apply(e)
		}
		if len(evs) < page {
			return nil
		}
	}
}

// apply folds one event into the worker's state. It is the single place that
// interprets the log, used both when rebuilding and for live appends.
func (w *worker) apply(e Event) {
	w.lastSeq = e.Seq
	switch e.Type {
	case EventChatRunning:
		w.status, w.pendingInput = StatusRunning, nil
		if w.started.IsZero() {
			w.started = e.CreatedAt
			w.termBase.start = e.CreatedAt
		}
	case EventSpeakerSelected:
		var s selection
		_ = json.Unmarshal(e.Data, &s)
		w.lastSpeaker, w.pending = s.Agent, &s
		w.selectorCalls += s.Attempts
		if s.Usage != nil {
			w.usage = w.usage.Add(*s.Usage)
		}
	case EventInputRequested:
		var p PendingInput
		_ = json.Unmarshal(e.Data, &p)
		w.status, w.pendingInput = StatusAwaitingInput, &p
	case EventMessage:
		w.applyMessage(e)
	case EventChatCompleted, EventChatFailed, EventChatCancelled:
		var d terminalData
		_ = json.Unmarshal(e.Data, &d)
		w.status, w.stopReason, w.stopDetail, w.errText = d.Status, d.StopReason, d.StopDetail, d.Error
		w.pendingInput = nil
		t := e.CreatedAt
		w.completedAt = &t
	}
}

func (w *worker) applyMessage(e Event) {
	m, _ := MessageFromEvent(e)
	var d messageData
	_ = json.Unmarshal(e.Data, &d)
	w.msgs = append(w.msgs, m)
	w.meta = append(w.meta, d)
	w.msgCount++
	if m.Usage != nil {
		w.usage = w.usage.Add(*m.Usage)
		w.agentUsage = w.agentUsage.Add(*m.Usage)
	}
	switch d.Kind {
	case kindModel:
		w.modelCalls[m.Name]++
	case kindAuto:
		w.autoReplies[m.Name]++
	case kindHuman:
		w.autoReplies[m.Name] = 0
	case kindHistory:
		if w.agent(m.Name) != nil {
			w.lastSpeaker = m.Name
		}
		return
	}
	if isChatMessage(m) {
		w.runMsgs++
	}
	if d.Turn > 0 && d.End {
		w.turns, w.pending = d.Turn, nil
	}
	if d.ResetTermination {
		w.term = newTerminator(w.spec.Termination)
		w.termFired, w.delta = false, nil
		w.termBase = termState{messages: w.runMsgs, usage: w.agentUsage, start: e.CreatedAt}
		return
	}
	w.delta = append(w.delta, termMsg{Message: m, task: d.Kind == kindTask, functions: d.Functions})
	if d.Turn > 0 && !d.End {
		return // the turn goes on
	}
	w.termFired = w.term.observe(w.delta, w.termState(e.CreatedAt))
	w.delta = nil
}

// termState is what the termination conditions count, since their last reset.
func (w *worker) termState(now time.Time) termState {
	return termState{
		messages: w.runMsgs - w.termBase.messages,
		usage:    Usage{PromptTokens: w.agentUsage.PromptTokens - w.termBase.usage.PromptTokens, CompletionTokens: w.agentUsage.CompletionTokens - w.termBase.usage.CompletionTokens},
		start:    w.termBase.start,
		now:      now,
	}
}

// terminalData is the data of chat.completed, chat.failed and chat.cancelled.
type terminalData struct {
	Status     Status     `json:"status"`
	StopReason StopReason `json:"stop_reason"`
	StopDetail string     `json:"stop_detail"`
	Error      string     `json:"error,omitempty"`
}

func terminalEvent(status Status, reason StopReason, detail, errText string) Event {
	typ := map[Status]EventType{StatusCompleted: EventChatCompleted, StatusFailed: EventChatFailed, StatusCancelled: EventChatCancelled}[status]
	return Event{Type: typ, Data: mustJSON(terminalData{Status: status, StopReason: reason, StopDetail: detail, Error: errText})}
}

// commit applies events to the worker's state and appends them durably in
// one store append. When a message makes the chat stop or pause (a fired
// termination condition, the last allowed turn), that event joins the same
// append, so a chat never stays running after its stop condition was
// recorded.
func (w *worker) commit(ctx context.Context, evs ...Event) error {
	now := w.rt.now()
	for i := range evs {
		evs[i].ChatID, evs[i].Seq, evs[i].CreatedAt = w.id, w.lastSeq+1, now
		w.apply(evs[i])
	}
	if w.status == StatusRunning {
		if next, ok := w.afterMessage(); ok {
			next.ChatID, next.Seq, next.CreatedAt = w.id, w.lastSeq+1, now
			w.apply(next)
			evs = append(evs, next)
		}
	}
	upd := ChatUpdate{
		Status: w.status, StopReason: w.stopReason, StopDetail: w.stopDetail, Error: w.errText,
		Turns: w.turns, MessageCount: w.msgCount, PromptTokens: w.usage.PromptTokens, CompletionTokens: w.usage.CompletionTokens,
		CompletedAt: w.completedAt, UpdatedAt: now,
		// A chat that ended or waits for a human needs no worker.
		ReleaseLease: w.status.Terminal() || w.status == StatusAwaitingInput,
	}
	if w.status == StatusAwaitingInput && w.pendingInput != nil {
		upd.PendingInput = mustJSON(w.pendingInput)
		upd.InputExpiresAt = w.pendingInput.ExpiresAt
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), appendTimeout)
	defer cancel()
	start := time.Now()
	err := w.rt.store.Append(actx, &AppendParams{ChatID: w.id, Epoch: w.epoch, Events: evs, Update: upd})
	w.rt.metrics.appendSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		reason := "error"
		if errors.Is(err, ErrFenced) {
			reason = "fenced"
		}
		w.rt.metrics.appendErrors.WithLabelValues(reason).Inc()
		return fmt.Errorf("append to chat %s: %w", w.id, err)
	}
	w.inputResponse = nil // the store cleared it with this append
	w.rt.appended(w.id, evs)
	return nil
}

// afterMessage is the event the current state calls for, if any: a fired
// termination condition completes the chat — or, when a user_proxy asks a
// human on termination (TERMINATE), pauses it for that human — and
// max_round ends it once the last allowed turn is over.
func (w *worker) afterMessage() (Event, bool) {
	if w.termFired {
		reason, detail := w.term.result()
		if a := w.terminateAsker(); a != nil {
			return w.inputRequest(&PendingInput{Kind: "message", Agent: a.Name,
				Reason: "termination condition fired: " + detail + ". Send content to go on, or empty content or \"exit\" to end the chat."}), true
		}
		return terminalEvent(StatusCompleted, reason, detail, ""), true
	}
	if w.turns >= w.maxRound && w.pending == nil {
		return terminalEvent(StatusCompleted, StopMaxRound, fmt.Sprintf("Maximum number of turns %d reached.", w.maxRound), ""), true
	}
	return Event{}, false
}

// terminateAsker is the first user_proxy with human_input_mode TERMINATE:
// the human AutoGen asks before a chat ends.
func (w *worker) terminateAsker() *AgentSpec {
	for i := range w.spec.Agents {
		if a := &w.spec.Agents[i]; a.Type == AgentUserProxy && a.HumanInputMode == HumanInputTerminate {
			return a
		}
	}
	return nil
}

// inputRequest makes the input.requested event that pauses the chat.
func (w *worker) inputRequest(p *PendingInput) Event {
	p.RequestID = newRequestID()
	if t := w.spec.InputTimeoutS; t != nil {
		exp := w.rt.now().Add(time.Duration(*t) * time.Second)
		p.ExpiresAt = &exp
	}
	return Event{Type: EventInputRequested, Data: mustJSON(p)}
}

// run drives the chat until it ends, pauses for input, or the worker's
// context is cut.
func (w *worker) run(ctx context.Context) {
	if w.status.Terminal() {
		return
	}
	if w.cancelRequested {
		w.stop(ctx, errCancelRequested)
		return
	}
	if w.specErr != nil {
		w.stop(ctx, w.specErr)
		return
	}
	if w.status == StatusAwaitingInput {
		if err := w.resume(ctx); err != nil {
			w.stop(ctx, err)
			return
		}
	} else if w.status != StatusRunning {
		if err := w.commit(ctx, runningEvent()); err != nil {
			w.stop(ctx, err)
			return
		}
	}
	for w.status == StatusRunning {
		if next, ok := w.afterMessage(); ok {
			// The log can end right after a stop condition: a spec that stops
			// at the task, or a crash between a turn and the next selection.
			if err := w.commit(ctx, next); err != nil {
				w.stop(ctx, err)
			}
			return
		}
		if err := w.step(ctx); err != nil {
			if !w.stop(ctx, err) {
				return
			}
		}
	}
}

func runningEvent() Event {
	return Event{Type: EventChatRunning, Data: mustJSON(map[string]Status{"status": StatusRunning})}
}

// step selects the next speaker (unless a selected turn is being redone) and
// runs its turn, bounded by the earliest timeout condition.
func (w *worker) step(ctx context.Context) error {
	tctx := ctx
	if d, ok := w.term.deadline(w.termBase.start); ok {
		var cancel context.CancelFunc
		tctx, cancel = context.WithDeadlineCause(ctx, d, errTermDeadline)
		defer cancel()
	}
	err := w.stepWithin(tctx)
	if err != nil && context.Cause(tctx) == errTermDeadline && ctx.Err() == nil {
		return errTermDeadline
	}
	return err
}

func (w *worker) stepWithin(ctx context.Context) error {
	sel := w.pending
	if sel == nil {
		next, err := w.selectNext(ctx)
		if err != nil || next == nil {
			return err // paused or stopped, or failed
		}
		sel = next
	}
	return w.runTurn(ctx, *sel)
}

// stop handles an error that interrupted the loop and reports whether the
// loop should go on.
func (w *worker) stop(ctx context.Context, err error) bool {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(err, ErrFenced) || errors.Is(cause, errLeaseLost):
		w.log.Warn("worker lost its chat to another owner; stopping without writing", "err", err)
		return false
	case errors.Is(cause, errShutdown):
		w.log.Info("worker stopped for shutdown; the chat will be continued from its log")
		return false
	case errors.Is(err, errCancelRequested) || errors.Is(cause, errCancelRequested):
		if cerr := w.commit(ctx, terminalEvent(StatusCancelled, StopCancelled, "External termination requested", "")); cerr != nil {
			w.log.Error("append chat.cancelled", "err", cerr)
		}
		return false
	case errors.Is(err, errTermDeadline):
		w.termFired = w.term.observe(nil, w.termState(w.rt.now()))
		if w.termFired {
			next, _ := w.afterMessage()
			if cerr := w.commit(ctx, next); cerr != nil {
				w.log.Error("append timeout completion", "err", cerr)
				return false
			}
		}
		return w.status == StatusRunning // a timeout inside `all` does not end the chat; the turn is redone
	case ctx.Err() != nil:
		return false
	default:
		w.log.Error("chat failed", "err", err)
		if cerr := w.commit(ctx, terminalEvent(StatusFailed, StopError, err.Error(), err.Error())); cerr != nil {
			w.log.Error("append chat.failed", "err", cerr)
		}
		return false
	}
}

func (w *worker) agent(name string) *AgentSpec { return w.spec.agent(name) }

// agent is the spec's agent of that name, or nil.
func (s *Spec) agent(name string) *AgentSpec {
	i := slices.IndexFunc(s.Agents, func(a AgentSpec) bool { return a.Name == name })
	if i < 0 {
		return nil
	}
	return &s.Agents[i]
}

// resolveModel turns a validated model reference into its configuration.
func (s *Spec) resolveModel(ref *ModelRef) ModelConfig {
	if ref == nil {
		return ModelConfig{}
	}
	if ref.Inline != nil {
		return *ref.Inline
	}
	return s.Models[ref.Name]
}

func derefOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshal %T: %v", v, err)) // only our own plain structs are marshalled
	}
	return b
}
