package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/chat/engine"

	"github.com/agentd/agentd/internal/spec"
	"github.com/google/uuid"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Causes with which the runtime cuts a worker's context.
var (
	errCancelRequested = errors.New("chat cancelled by request")
	errShutdown        = errors.New("runtime shutting down")
	errLeaseLost       = errors.New("lease lost")
	errTermDeadline    = errors.New("termination deadline")
)

// defaultAppendTimeout bounds one durable append. Appends do not use the
// turn's context: a cancel arriving mid-append must not leave the worker
// unsure whether its events were written.
const defaultAppendTimeout = 30 * time.Second

// worker is the effects runner of one chat: it asks the chat's state what
// to do next (state.next), does it (model calls, tools, code, appends), and
// adopts the state after an append only once the store confirmed it. All
// it knows is derived from the log, so a worker rebuilt on any replica
// continues where the last one stopped. It is the only writer of its chat
// while it holds the lease; the store fences it (epoch and seq) if it is not.
type worker struct {
	rt     *Runtime
	id     string
	tenant string
	epoch  int64
	// spec is the chat's spec, as every state of the worker holds it: what
	// the branches of a parallel step read, which must not read w.st.
	spec *spec.Spec
	// hook is the spec's webhook (nil: none), for the deliveries of the
	// chat's events (see append).
	hook *spec.Webhook
	// topic is the chat's topic in the broker, which stays while the
	// worker runs (see broker.workerStarted): each token of a streamed
	// reply goes to it without a lookup. Nil for a worker that was not
	// started by the scheduler.
	topic           *topic
	cancelRequested bool
	// seeded: the worker was given the whole log when its chat was created.
	seeded bool
	// inputResponse is a client's answer to the pending input request,
	// stored by Input and consumed by this worker's first append.
	inputResponse json.RawMessage
	// st is the chat as the store confirmed it, plus the held selection,
	// if any (see heldAppend).
	st *engine.State
	// held is a selection acted on but not yet durable; holdMu serialises
	// it with its flush, which runs on a timer's goroutine.
	holdMu sync.Mutex
	held   *heldAppend
	// runCtx is the context of the worker's run, which a held selection's
	// flush appends under: the step that held it may have ended by then.
	runCtx context.Context
	// turnSpan traces the turn in progress, which takes several steps
	// (model call, tools, reflection); turnCtx carries it to them.
	turnSpan trace.Span
	turnCtx  context.Context
	turnNo   int
	// flags are what the scheduler tells the worker while it runs: a stop
	// request, runs queued after this one.
	flags *workerFlags
	// claimedIdle: the worker was started for an ended chat's next run;
	// it holds a lease that no append of its own may release.
	claimedIdle bool
	// cur is the step in progress (see plan).
	cur engine.Step
	// timed bounds the steps of a run by the chat's earliest timeout
	// condition (see bounded): one context for as long as the deadline
	// and the step's parent context stay the same, so that no step waits
	// under a frame that holds one of its own.
	timed timedContext
	// cyc are the times of the turn in progress when the runtime records
	// turn cycles (Runtime.cycles); nil otherwise.
	cyc *turnStamps
}

// workerFlags are set by the scheduler (lease renewals, notifications,
// requests made on this replica) and read by the worker's decisions.
type workerFlags struct {
	stop   atomic.Bool
	queued atomic.Bool
}

// newWorker returns the worker of c: from seed when its creator gives the
// decoded spec and the log, else from the stored spec (the log is then
// read by rebuild).
func newWorker(rt *Runtime, c *chat.Chat, seed *workerSeed) *worker {
	var (
		sp      *spec.Spec
		specErr error
	)
	if seed != nil {
		sp = seed.spec
	} else {
		// Specs are validated before they are stored, so this cannot fail
		// unless the database was edited by hand; the chat then fails.
		sp, specErr = rt.specs.decode(c.Spec)
	}
	st := engine.NewState(sp, min(engine.DerefOr(sp.MaxRound, sp.DefaultMaxRound()), rt.limits.MaxRound))
	if specErr != nil {
		st.Broken = fmt.Errorf("decode stored spec: %w", specErr)
	}
	w := &worker{
		rt: rt, id: c.ID, tenant: c.Tenant, epoch: c.Epoch, cancelRequested: c.CancelRequested, spec: sp, hook: sp.Webhook,
		inputResponse: c.InputResponse,
		st:            st,
		flags:         &workerFlags{},
		claimedIdle:   c.Status.Terminal(),
	}
	if rt.cycles != nil {
		w.cyc = &turnStamps{}
	}
	w.flags.stop.Store(c.StopRequested)
	w.flags.queued.Store(c.QueuedRuns > 0)
	if seed != nil {
		w.follow(seed.log)
		w.seeded = true
	}
	return w
}

// log is the runtime's logger with the chat's id. It is made for each
// line rather than kept: a worker logs a few lines in its chat's life, and
// a kept logger (its handler's copy and the id written out) was about 250
// bytes of every waiting chat's memory.
func (w *worker) log() *slog.Logger {
	return w.rt.log.With("chat_id", w.id)
}

// rebuild reads the log after what the worker has folded and folds it
// into the worker's state. An event that does not fold marks the state
// broken (the chat then fails); the rest of the log is still read, to its
// last seq. A worker seeded with the whole log by Create reads nothing.
func (w *worker) rebuild(ctx context.Context) error {
	if w.seeded {
		return nil
	}
	const page = 1000
	for {
		evs, err := w.rt.store.ListEvents(ctx, &chat.ListEventsParams{ChatID: w.id, After: w.st.LastSeq, Limit: page})
		if err != nil {
			return fmt.Errorf("read log of chat %s: %w", w.id, err)
		}
		w.follow(evs)
		if len(evs) < page {
			return nil
		}
	}
}

// follow folds events of the log into the worker's state.
func (w *worker) follow(evs []chat.Event) {
	for _, e := range evs {
		if err := w.st.Apply(e); err != nil {
			w.log().Error("chat log does not fold", "seq", e.Seq, "err", err)
		}
	}
}

// env is what the state's decisions may read besides the log.
func (w *worker) env() engine.StepEnv {
	return engine.StepEnv{Now: w.rt.now(), Input: w.inputResponse, NewID: newRequestID,
		StopRequested: w.flags.stop.Load(), Queued: w.flags.queued.Load()}
}

// run drives the chat until it ends, pauses for input, or the worker's
// context is cut.
func (w *worker) run(ctx context.Context) {
	if w.st.Status.Terminal() && !w.flags.queued.Load() {
		return
	}
	w.runCtx = ctx
	defer w.leave()
	if w.cancelRequested {
		w.stop(ctx, errCancelRequested)
		return
	}
	// The first step starts or resumes the chat (or starts its next run);
	// then it runs while running.
	for first := true; first || w.st.Status == chat.StatusRunning; first = false {
		if !w.step(ctx) {
			return
		}
	}
}

// leave, deferred by run, makes what the worker leaves behind what is
// durable (a held selection is appended or dropped), then ends the span
// of the turn in progress. One deferred call, not two: run's frame is
// under every wait.
func (w *worker) leave() {
	_ = w.settleHeld()
	w.endTurnSpan(nil)
	w.timed.release()
}

// step plans the chat's next step and does it; false when the worker is
// to end. It is a frame of its own, and not run's loop body, because a
// waiting chat's goroutine stack is as large as the frames it waits
// under (see modelStep): the step's locals live here, and run's frame,
// below every wait, stays small.
//
//go:noinline
func (w *worker) step(ctx context.Context) bool {
	s := w.plan()
	if s.Kind == engine.StepWait {
		return false
	}
	if w.holdable(s) {
		if err := w.hold(ctx, s.Events...); err != nil && !w.stop(ctx, err) {
			return false
		}
		return true
	}
	sctx := w.turnContext(ctx, s)
	err := w.perform(sctx, s)
	if err != nil || w.st.Pending == nil || w.st.Pending.Turn != w.turnNo {
		w.endTurnSpan(err)
	}
	return err == nil || w.stop(ctx, err)
}

// plan asks the chat's state for the next step, kept in the worker (cur)
// rather than in step's frame, which a waiting chat's stack holds.
//
//go:noinline
func (w *worker) plan() *engine.Step {
	w.cur = w.st.Next(w.env())
	return &w.cur
}

// turnContext returns the context a step runs in: for a step of an agent's
// turn, one that carries the turn's span, started by the turn's first step.
func (w *worker) turnContext(ctx context.Context, s *engine.Step) context.Context {
	if s.Agent == nil || s.Turn == 0 {
		return ctx
	}
	if w.turnSpan == nil || w.turnNo != s.Turn {
		w.endTurnSpan(nil)
		w.turnNo = s.Turn
		if !w.rt.parents.on {
			// Tracing is off: no span, and no attributes made for none.
			w.turnCtx, w.turnSpan = ctx, noop.Span{}
			return ctx
		}
		w.turnCtx, w.turnSpan = w.rt.tracer.Start(ctx, "chat.turn", trace.WithAttributes(chatAttr(w.id),
			attribute.String("agentd.agent", s.Agent.Name), attribute.Int("agentd.turn", s.Turn)))
	}
	return w.turnCtx
}

// endTurnSpan ends the span of the turn in progress, if any.
func (w *worker) endTurnSpan(err error) {
	if w.turnSpan != nil {
		endSpan(w.turnSpan, err)
		w.turnSpan, w.turnCtx, w.turnNo = nil, nil, 0
	}
}

// perform does one step, bounded by the earliest timeout condition while
// the chat runs. A model call, where a chat spends most of its life, goes
// straight to modelStep: the other steps are done in a frame of their own
// (performOther), whose locals (a couple of KB for every kind of step)
// would otherwise sit on the stack of every chat waiting on its model and
// keep the garbage collector from shrinking it. For the same reason the
// deadline's context is made in a frame of its own (bounded) and kept on
// the worker, not held here with its cancel.
func (w *worker) perform(ctx context.Context, s *engine.Step) error {
	ctx = w.bounded(ctx)
	var err error
	if onlyModel(s) {
		err = w.modelStep(ctx, s)
	} else {
		err = w.performOther(ctx, s)
	}
	if err != nil && w.timed.cut() {
		return errTermDeadline
	}
	return err
}

// timedContext is a context cut at a chat's timeout deadline, derived from
// the context of the steps it bounds.
type timedContext struct {
	ctx, parent context.Context
	deadline    time.Time
	cancel      context.CancelFunc
	// inUse: the step in progress runs under ctx.
	inUse bool
}

// bounded returns the context a step runs in: ctx, or while the chat runs
// and has a timeout condition, a context under ctx that is cut at the
// condition's deadline with errTermDeadline as its cause. That one is used
// again while the deadline and ctx are the ones it was made for and it has
// not been cut, as a run's steps mostly are; leave releases it when the
// run ends.
//
//go:noinline
func (w *worker) bounded(ctx context.Context) context.Context {
	t := &w.timed
	d, ok := w.st.Deadline()
	if !ok || w.st.Status != chat.StatusRunning {
		t.inUse = false
		return ctx
	}
	if t.ctx == nil || t.parent != ctx || !t.deadline.Equal(d) || t.ctx.Err() != nil {
		t.release()
		t.ctx, t.cancel = context.WithDeadlineCause(ctx, d, errTermDeadline)
		t.parent, t.deadline = ctx, d
	}
	t.inUse = true
	return t.ctx
}

// cut reports whether the step in progress, which failed, ran under this
// context and it was cut because the deadline passed, not because the
// step's own context was.
//
//go:noinline
func (t *timedContext) cut() bool {
	return t.inUse && context.Cause(t.ctx) == errTermDeadline && t.parent.Err() == nil
}

// release cancels the context, if any, and forgets it.
func (t *timedContext) release() {
	if t.cancel != nil {
		t.cancel()
	}
	*t = timedContext{}
}

// onlyModel reports whether a step is a model call and nothing else: no
// events to append first, not a step of an inner team's run.
func onlyModel(s *engine.Step) bool {
	return s.Kind == engine.StepModel && len(s.Before) == 0 && s.Inner == nil
}

//go:noinline
func (w *worker) performOther(ctx context.Context, s *engine.Step) error {
	if len(s.Before) > 0 {
		if err := w.commit(ctx, s.Before...); err != nil {
			return err
		}
	}
	if s.Inner != nil {
		// A step of a team agent's inner run, planned on its state.
		evs, err := w.produce(ctx, s.Inner, *s)
		if err != nil {
			return err
		}
		return w.commit(ctx, evs...)
	}
	switch s.Kind {
	case engine.StepAppend:
		return w.commit(ctx, s.Events...)
	case engine.StepSelect:
		sel, err := w.selectAuto(ctx, w.st, s.Sel)
		if err != nil {
			return err
		}
		if as := engine.AppendStep(engine.SelectedEvent(sel)); w.holdable(&as) {
			return w.hold(ctx, engine.SelectedEvent(sel))
		}
		return w.commit(ctx, engine.SelectedEvent(sel))
	case engine.StepModel:
		return w.modelStep(ctx, s)
	case engine.StepTools:
		return w.toolsStep(ctx, *s)
	case engine.StepRouted:
		return w.routedStep(ctx, *s)
	case engine.StepCode:
		res, err := w.executeBlocks(ctx, s.Agent, s.Blocks)
		if err != nil {
			return err
		}
		return w.commit(ctx, engine.CodeReply(s.Agent, s.Turn, res))
	case engine.StepStartRun:
		return w.startQueuedRun(ctx)
	case engine.StepBranches:
		return w.runBranches(ctx)
	case engine.StepMagentic:
		return w.magenticStep(ctx, *s)
	}
	return fmt.Errorf("unknown step %v", s.Kind)
}

// appendError is an append the store did not confirm.
type appendError struct {
	err error
}

func (e *appendError) Error() string { return e.err.Error() }
func (e *appendError) Unwrap() error { return e.err }

// commit is where a chat's events are appended: the state plans the
// events (adding the stop the resulting state calls for, see state.plan),
// the store appends them, after the held selection if it is still held,
// with the chat record in one transaction, and only then does the worker
// adopt the new state and publish the events. An append that fails leaves
// the worker's state as the store has it.
func (w *worker) commit(ctx context.Context, evs ...chat.Event) error {
	return w.commitKeyed(ctx, "", evs...)
}

// commitKeyed is commit with the key of the queued run the append starts
// (startKey, see AppendParams.StartKey), or "" for any other append.
func (w *worker) commitKeyed(ctx context.Context, startKey string, evs ...chat.Event) error {
	held, base, err := w.takeUnwritten()
	if err != nil {
		return err
	}
	for i := range evs {
		evs[i] = chat.Storable(evs[i])
	}
	if w.flags.stop.Load() {
		markStop(evs)
	}
	env := w.env()
	next, evs, err := w.st.Plan(evs, env, w.id)
	if base != nil {
		w.st = base // until the append below confirms the held events
	}
	if err != nil {
		return fmt.Errorf("fold events of chat %s: %w", w.id, err)
	}
	evs = append(held, evs...)
	upd := next.Update(env.Now)
	p := &chat.AppendParams{ChatID: w.id, Epoch: w.epoch, Events: evs, Update: upd, StartKey: startKey}
	if w.cyc != nil {
		p.Trace, w.cyc.appendStart = &w.cyc.trace, time.Now()
	}
	if err := w.append(ctx, p); err != nil {
		return &appendError{err: fmt.Errorf("append seq %d..%d to chat %s: %w", evs[0].Seq, evs[len(evs)-1].Seq, w.id, err)}
	}
	if w.cyc != nil {
		w.cyc.appendEnd = time.Now()
	}
	w.st = next
	w.inputResponse = nil // the store cleared it with this append
	w.rt.appended(w.id, w.topic, evs, next, &upd)
	if w.cyc != nil {
		w.rt.cycles.committed(w.cyc)
	}
	return nil
}

// stop handles an error that interrupted a step and reports whether the
// worker should go on. What it appends (a cancel, a timeout's stop, a
// failure) it appends from the confirmed state; an append whose outcome the
// worker does not know (a timeout, a lost connection) or that another owner
// fenced ends the worker without writing anything: the chat is continued
// from its log by the next worker.
func (w *worker) stop(ctx context.Context, err error) bool {
	if herr := w.settleHeld(); herr != nil {
		w.log().Warn("held selection not confirmed; handing the chat back to be continued from its log", "err", herr)
		return false
	}
	cause := context.Cause(ctx)
	var aerr *appendError
	switch {
	case errors.Is(err, chat.ErrFenced) || errors.Is(cause, errLeaseLost):
		w.log().Warn("worker lost its chat to another owner; stopping without writing", "err", err)
		return false
	case errors.Is(cause, errShutdown):
		w.log().Info("worker stopped for shutdown; the chat will be continued from its log")
		return false
	case errors.As(err, &aerr) && errors.Is(err, chat.ErrDataRejected):
		// The events cannot be stored as they are; retrying would fail
		// again. The failure is recorded without them.
		w.log().Error("store refused the chat's events; failing the chat", "err", err)
		w.finish(ctx, engine.FailedEvent(fmt.Errorf("the store refused to record the chat's next events: %w", errors.Unwrap(aerr.err))))
		return false
	case errors.As(err, &aerr):
		w.log().Warn("append not confirmed; handing the chat back to be continued from its log", "err", err)
		return false
	case errors.Is(err, errCancelRequested) || errors.Is(cause, errCancelRequested):
		if !w.cancelStillRequested(ctx) {
			// A late word about a run that ended already (a notification
			// that took its time): this run was not asked to cancel. Its
			// turn, cut, is redone by the next worker.
			w.log().Info("cancel signal for an earlier run; the chat is continued from its log")
			return false
		}
		w.finish(ctx, engine.CancelledEvent())
		return false
	case errors.Is(err, errTermDeadline):
		if w.st.ObserveTime(w.rt.now()) {
			if ev, ok := w.st.AfterMessage(w.env()); ok {
				if cerr := w.commit(ctx, ev); cerr != nil {
					w.log().Error("append timeout completion", "err", cerr)
					return false
				}
			}
		}
		return w.st.Status == chat.StatusRunning // a timeout inside `all` does not end the chat; the turn is redone
	case ctx.Err() != nil:
		return false
	default:
		w.log().Error("turn failed; the chat fails", "err", err)
		w.finish(ctx, engine.FailedEvent(err))
		return false
	}
}

// finish appends a terminal event; failing that, the chat is left to the
// next worker, which decides again from the log.
func (w *worker) finish(ctx context.Context, ev chat.Event) {
	if err := w.commit(ctx, ev); err != nil {
		w.log().Error("append "+string(ev.Type), "err", err)
	}
}

// append writes one append durably. While the store is unreachable it
// waits and tries again (0.25 s doubling up to 5 s) until the worker's
// context ends: a database outage pauses running chats, it does not fail
// them. Retrying is safe because the append is fenced by epoch and seq: if
// an attempt did commit before the connection broke, the retry is fenced,
// the worker stops, and the chat is continued from its log. Nothing of the
// append is adopted by the worker until this returns nil.
func (w *worker) append(ctx context.Context, p *chat.AppendParams) error {
	if w.rt.webhooks != nil {
		p.Deliveries = w.rt.webhooks.Route(w.tenant, w.hook, p.Events)
	}
	backoff := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.rt.appendTimeout)
		var span trace.Span = noop.Span{}
		if w.rt.parents.on {
			actx, span = w.rt.tracer.Start(actx, "chat.append", trace.WithAttributes(chatAttr(w.id),
				attribute.Int("agentd.events", len(p.Events)), attribute.Int64("agentd.first_seq", p.Events[0].Seq)))
		}
		start := time.Now()
		err := w.rt.store.Append(actx, p)
		w.rt.metrics.appendSeconds.Observe(time.Since(start).Seconds())
		endSpan(span, err)
		cancel()
		if err == nil {
			if attempt > 1 {
				w.log().Info("store reachable again; append done", "attempts", attempt)
			}
			if len(p.Deliveries) > 0 {
				w.rt.webhooks.Queued()
			}
			return nil
		}
		reason := "error"
		switch {
		case errors.Is(err, chat.ErrFenced):
			reason = "fenced"
		case errors.Is(err, chat.ErrDataRejected):
			reason = "data"
		case errors.Is(err, chat.ErrUnavailable):
			reason = "unavailable"
		}
		w.rt.metrics.appendErrors.WithLabelValues(reason).Inc()
		if reason != "unavailable" {
			return err
		}
		if attempt == 1 {
			w.log().Warn("store unavailable; the chat waits for it", "err", err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// markStop marks the message that ends a turn (or is a response of its
// own: a task, a human's message) among evs: POST /stop asked the run to
// end, and termination is checked on that message (see termMsg.stop).
func markStop(evs []chat.Event) {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type != chat.EventMessage {
			continue
		}
		var d chat.MessageData
		if err := chat.DecodeData(evs[i], &d); err != nil {
			return
		}
		if d.Turn > 0 && !d.End || d.Team != "" {
			// A turn goes on, or a team agent's inner run does: the stop
			// waits for the team agent's own answer.
			return
		}
		d.Stop = true
		evs[i] = chat.WithData(evs[i], d)
		return
	}
}

// cancelStillRequested asks the store whether the chat's run is still
// asked to cancel: a cancel signal may reach a worker late, after the run
// it was for ended and the next began. A store that cannot say is taken
// at its word: the signal stands.
func (w *worker) cancelStillRequested(ctx context.Context) bool {
	if w.cancelRequested {
		return true // from the claim: this run's
	}
	c, err := w.rt.store.GetChat(context.WithoutCancel(ctx), "", w.id)
	if err != nil {
		return true
	}
	return c.CancelRequested && c.Run == w.st.Run
}

// startQueuedRun starts the run queued after the chat's latest: its
// run.started, its task and chat.running, appended only while the run is
// still queued (see AppendParams.StartKey). A run dropped meanwhile (a
// cancel, an interrupt that replaced it) is looked for again; with none
// queued the worker ends.
func (w *worker) startQueuedRun(ctx context.Context) error {
	for {
		q, err := w.rt.store.QueuedRun(ctx, w.id, w.st.Run)
		if errors.Is(err, chat.ErrNotFound) {
			w.flags.queued.Store(false)
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the queued run of chat %s: %w", w.id, err)
		}
		var req engine.QueuedRequest
		var evs []chat.Event
		if err := json.Unmarshal(q.Request, &req); err != nil {
			evs = []chat.Event{chat.WithData(chat.Event{Type: chat.EventRunStarted}, chat.RunData{Run: q.Run}),
				engine.FailedEvent(fmt.Errorf("the request of run %d cannot be read: %w", q.Run, err))}
		} else {
			evs = w.st.RunStartEvents(q.Run, req)
		}
		err = w.commitKeyed(ctx, q.Key, evs...)
		if err == nil {
			w.rt.metrics.runs.Inc()
			w.log().Info("run started", "run", q.Run, "task_messages", len(req.Task))
			return nil
		}
		if !errors.Is(err, chat.ErrFenced) {
			return err
		}
		// Fenced: the run was dropped, or another owner has the chat.
		c, gerr := w.rt.store.GetChat(context.WithoutCancel(ctx), "", w.id)
		if gerr != nil || c.Epoch != w.epoch || c.LastSeq != w.st.LastSeq {
			return err
		}
		w.log().Info("queued run was dropped before it started", "run", q.Run)
	}
}

func newRequestID() string { return uuid.NewString() }
