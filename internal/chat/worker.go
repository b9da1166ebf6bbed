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

// defaultSystemMessage is AgentChat's AssistantAgent default.
const defaultSystemMessage = "You are a helpful AI assistant. Solve tasks using your tools. Reply with TERMINATE when the task has been completed."

// Message kinds recorded in a message event's data.
const (
	kindTask    = "task"
	kindHistory = "history"
	kindModel   = "model"
	kindAuto    = "auto"
)

// appendTimeout bounds one durable append. Appends do not use the turn's
// context: a cancel arriving mid-append must not leave the worker unsure
// whether its events were written.
const appendTimeout = 30 * time.Second

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

	// Derived from the log.
	lastSeq     int64
	status      Status
	stopReason  StopReason
	stopDetail  string
	errText     string
	completedAt *time.Time
	msgs        []Message
	msgCount    int
	runMsgs     int // task and later messages: what max_messages counts
	turns       int
	usage       Usage
	started     time.Time
	lastSpeaker string
	pending     *selection // a selected speaker whose turn has not ended
	modelCalls  map[string]int
	term        *terminator
	termFired   bool
}

func newWorker(rt *Runtime, c *Chat) *worker {
	var spec Spec
	// Specs are validated before they are stored, so this cannot fail unless
	// the database was edited by hand; the chat then fails in run.
	specErr := json.Unmarshal(c.Spec, &spec)
	if specErr != nil {
		specErr = fmt.Errorf("decode stored spec: %w", specErr)
	}
	w := &worker{
		specErr: specErr,
		rt:      rt, id: c.ID, spec: &spec, epoch: c.Epoch, cancelRequested: c.CancelRequested,
		log:        rt.log.With("chat_id", c.ID),
		maxRound:   min(derefOr(spec.MaxRound, DefaultMaxRound), rt.limits.MaxRound),
		status:     StatusQueued,
		modelCalls: map[string]int{},
		term:       newTerminator(spec.Termination),
	}
	return w
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
		w.status = StatusRunning
		if w.started.IsZero() {
			w.started = e.CreatedAt
		}
	case EventSpeakerSelected:
		var s selection
		_ = json.Unmarshal(e.Data, &s)
		w.lastSpeaker, w.pending = s.Agent, &s
	case EventMessage:
		m, _ := MessageFromEvent(e)
		var d messageData
		_ = json.Unmarshal(e.Data, &d)
		w.msgs = append(w.msgs, m)
		w.msgCount++
		if m.Usage != nil {
			w.usage = w.usage.Add(*m.Usage)
		}
		if d.Kind == kindModel {
			w.modelCalls[m.Name]++
		}
		if d.Kind == kindHistory {
			if w.agent(m.Name) != nil {
				w.lastSpeaker = m.Name
			}
			return
		}
		w.runMsgs++
		if d.End && d.Turn > 0 {
			w.turns, w.pending = d.Turn, nil
		}
		st := termState{messages: w.runMsgs, usage: w.usage, start: w.started, now: e.CreatedAt}
		if d.Kind == kindTask {
			w.termFired = w.term.observe(nil, st)
		} else {
			w.termFired = w.term.observe(&m, st)
		}
	case EventChatCompleted, EventChatFailed, EventChatCancelled:
		var d terminalData
		_ = json.Unmarshal(e.Data, &d)
		w.status, w.stopReason, w.stopDetail, w.errText = d.Status, d.StopReason, d.StopDetail, d.Error
		t := e.CreatedAt
		w.completedAt = &t
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
// one store append. When a message makes the termination tree fire, or ends
// the last allowed turn, the terminal event joins the same append, so a chat
// never stays running after its stop condition was recorded.
func (w *worker) commit(ctx context.Context, evs ...Event) error {
	now := w.rt.now()
	for i := range evs {
		evs[i].ChatID, evs[i].Seq, evs[i].CreatedAt = w.id, w.lastSeq+1, now
		w.apply(evs[i])
	}
	if !w.status.Terminal() && w.status != StatusQueued {
		if fin, ok := w.finishEvent(); ok {
			fin.ChatID, fin.Seq, fin.CreatedAt = w.id, w.lastSeq+1, now
			w.apply(fin)
			evs = append(evs, fin)
		}
	}
	upd := ChatUpdate{
		Status: w.status, StopReason: w.stopReason, StopDetail: w.stopDetail, Error: w.errText,
		Turns: w.turns, MessageCount: w.msgCount, PromptTokens: w.usage.PromptTokens, CompletionTokens: w.usage.CompletionTokens,
		CompletedAt: w.completedAt, UpdatedAt: now, ReleaseLease: w.status.Terminal(),
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), appendTimeout)
	defer cancel()
	if err := w.rt.store.Append(actx, &AppendParams{ChatID: w.id, Epoch: w.epoch, Events: evs, Update: upd}); err != nil {
		return fmt.Errorf("append to chat %s: %w", w.id, err)
	}
	w.rt.appended(w.id, evs)
	return nil
}

// finishEvent is the terminal event the current state calls for, if any:
// a fired termination condition first (AgentChat checks it on every
// message), then max_round once the last allowed turn has ended.
func (w *worker) finishEvent() (Event, bool) {
	if w.termFired {
		reason, detail := w.term.result()
		return terminalEvent(StatusCompleted, reason, detail, ""), true
	}
	if w.turns >= w.maxRound && w.pending == nil {
		return terminalEvent(StatusCompleted, StopMaxRound, fmt.Sprintf("Maximum number of turns %d reached.", w.maxRound), ""), true
	}
	return Event{}, false
}

// run drives the chat until it ends or the worker's context is cut.
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
	if w.status != StatusRunning {
		if err := w.commit(ctx, Event{Type: EventChatRunning, Data: mustJSON(map[string]Status{"status": StatusRunning})}); err != nil {
			w.stop(ctx, err)
			return
		}
	}
	for !w.status.Terminal() {
		if fin, ok := w.finishEvent(); ok {
			// The log ends right after a stop condition (a crash between the
			// two appends cannot happen, but a spec can stop at the task).
			if err := w.commit(ctx, fin); err != nil {
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

// step selects the next speaker (unless a selected turn is being redone) and
// runs its turn, bounded by the earliest timeout condition.
func (w *worker) step(ctx context.Context) error {
	tctx := ctx
	if d, ok := w.term.deadline(w.started); ok {
		var cancel context.CancelFunc
		tctx, cancel = context.WithDeadlineCause(ctx, d, errTermDeadline)
		defer cancel()
	}
	sel := w.pending
	if sel == nil {
		s := selectSpeaker(w.spec, w.lastSpeaker, w.turns+1)
		if err := w.commit(tctx, Event{Type: EventSpeakerSelected, Data: mustJSON(s)}); err != nil {
			return err
		}
		sel = &s
	}
	err := w.runTurn(tctx, *sel)
	if err != nil && context.Cause(tctx) == errTermDeadline && ctx.Err() == nil {
		return errTermDeadline
	}
	return err
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
		w.termFired = w.term.observe(nil, termState{messages: w.runMsgs, usage: w.usage, start: w.started, now: w.rt.now()})
		if w.termFired {
			if cerr := w.commit(ctx); cerr != nil {
				w.log.Error("append timeout completion", "err", cerr)
				return false
			}
		}
		return true // a timeout inside `all` does not end the chat; the turn is redone
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

// runTurn runs the selected agent's turn and appends its messages.
func (w *worker) runTurn(ctx context.Context, sel selection) error {
	a := w.agent(sel.Agent)
	if a == nil {
		return fmt.Errorf("selected speaker %q is not an agent of the chat", sel.Agent)
	}
	switch a.Type {
	case AgentAssistant:
		resp, err := w.callModel(ctx, a)
		if err != nil {
			return err
		}
		usage := resp.Usage
		return w.commit(ctx, Event{Type: EventMessage, Role: RoleAssistant, Name: a.Name, Content: resp.Content,
			ToolCalls: resp.ToolCalls, Data: mustJSON(messageData{Usage: &usage, Kind: kindModel, Turn: sel.Turn, End: true})})
	default:
		// A user_proxy with human_input_mode NEVER and nothing to execute
		// answers with its default auto-reply (AutoGen's default is "").
		return w.commit(ctx, Event{Type: EventMessage, Role: RoleUser, Name: a.Name, Content: derefOr(a.DefaultAutoReply, ""),
			Data: mustJSON(messageData{Kind: kindAuto, Turn: sel.Turn, End: true})})
	}
}

// callModel makes one model call for an assistant with its system message
// and its view of the conversation.
func (w *worker) callModel(ctx context.Context, a *AgentSpec) (*ModelResponse, error) {
	cfg := w.spec.resolveModel(a.Model)
	req := &ModelRequest{ChatID: w.id, Caller: a.Name, Config: cfg, CallIndex: w.modelCalls[a.Name], Messages: w.modelContext(a)}
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

// modelContext is AgentChat's view of the conversation for one assistant:
// its own replies as assistant messages, everyone else's as user messages
// with a name, after its system message; context.buffer_size keeps the last
// N messages.
func (w *worker) modelContext(a *AgentSpec) []ModelMessage {
	conv := make([]ModelMessage, 0, len(w.msgs))
	for _, m := range w.msgs {
		if m.Name == a.Name && m.Role == RoleAssistant {
			conv = append(conv, ModelMessage{Role: RoleAssistant, Content: m.Content})
			continue
		}
		conv = append(conv, ModelMessage{Role: RoleUser, Name: m.Name, Content: m.Content})
	}
	if a.Context != nil && a.Context.BufferSize != nil && len(conv) > *a.Context.BufferSize {
		conv = conv[len(conv)-*a.Context.BufferSize:]
	}
	sys := defaultSystemMessage
	if a.SystemMessage != nil {
		sys = *a.SystemMessage
	}
	if sys == "" {
		return conv
	}
	return append([]ModelMessage{{Role: RoleSystem, Content: sys}}, conv...)
}

func (w *worker) agent(name string) *AgentSpec {
	i := slices.IndexFunc(w.spec.Agents, func(a AgentSpec) bool { return a.Name == name })
	if i < 0 {
		return nil
	}
	return &w.spec.Agents[i]
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
