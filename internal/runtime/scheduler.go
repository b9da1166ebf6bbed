package runtime

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/tick"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// scheduler is the claim and lease loop of a Runtime: it claims runnable
// chats from the store as far as this replica has room, runs one worker
// goroutine per claimed chat, renews the leases of its workers and cuts a
// worker whose lease was lost or whose chat was cancelled elsewhere.
type scheduler struct {
	rt        *Runtime
	maxActive int
	leaseDur  time.Duration
	poll      time.Duration

	mu      sync.Mutex
	workers map[string]*runningWorker
	// reserved counts the slots Create took for chats it leases to this
	// replica and whose workers have not started yet.
	reserved int
	// base is the context workers run under, set by start; until then
	// Create leaves every chat to be claimed.
	base    context.Context
	stopped bool
	wake    chan struct{}
	wg      sync.WaitGroup
	// backlog says a chat may be waiting to be claimed that no claim with
	// room has looked for since: one created without room, handed back,
	// answered or cancelled while unclaimed, or one of more than a claim
	// took. Room that frees up is claimed into only then; other
	// replicas' chats (left without room there, or whose owner died) are
	// found by the poll.
	backlog atomic.Bool
}

type runningWorker struct {
	cancel context.CancelCauseFunc
	lease  chat.Lease
	flags  *workerFlags
}

func newScheduler(rt *Runtime, maxActive int, leaseDur, poll time.Duration) *scheduler {
	return &scheduler{rt: rt, maxActive: maxActive, leaseDur: leaseDur, poll: poll,
		workers: map[string]*runningWorker{}, wake: make(chan struct{}, 1)}
}

// kick wakes the claim loop without blocking, for a chat that may be
// claimable now.
func (s *scheduler) kick() {
	s.backlog.Store(true)
	s.wakeUp()
}

// roomFreed wakes the claim loop when a slot freed up and a chat may be
// waiting for one. Without a backlog it does not: a claim then would find
// nothing (about one query per chat otherwise).
func (s *scheduler) roomFreed() {
	if s.backlog.Load() {
		s.wakeUp()
	}
}

func (s *scheduler) wakeUp() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// stopAll cuts every worker for shutdown; no worker starts after it.
func (s *scheduler) stopAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	for _, w := range s.workers {
		w.cancel(errShutdown)
	}
}

// wait waits for every worker to end.
func (s *scheduler) wait() { s.wg.Wait() }

// flag sets a flag of the chat's worker if it runs on this replica, and
// reports whether it does.
func (s *scheduler) flag(id string, f func(*workerFlags)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, local := s.workers[id]
	if local {
		f(w.flags)
	}
	return local
}

// stopRequested tells the chat's worker, if it runs here, that its run is
// to end after the current turn; a chat without a worker (waiting for
// input) is claimed to end it.
func (s *scheduler) stopRequested(id string) {
	if !s.flag(id, func(f *workerFlags) { f.stop.Store(true) }) {
		s.kick()
	}
}

// runQueued tells the chat's worker, if it runs here, that a run waits
// after the current one (its end then looks for it at once); a chat
// without a worker is claimed to start it.
func (s *scheduler) runQueued(id string) {
	if !s.flag(id, func(f *workerFlags) { f.queued.Store(true) }) {
		s.kick()
	}
}

// cancel cuts the chat's worker with cause if it runs on this replica.
func (s *scheduler) cancel(id string, cause error) bool {
	s.mu.Lock()
	w, local := s.workers[id]
	s.mu.Unlock()
	if local {
		w.cancel(cause)
	}
	return local
}

// reserve takes a worker slot for a chat that Create is about to lease to
// this replica; false when there is no room, or the scheduler is not
// running (not started yet, or stopped).
func (s *scheduler) reserve() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.base == nil || len(s.workers)+s.reserved >= s.maxActive {
		return false
	}
	s.reserved++
	return true
}

// unreserve gives back a slot that reserve took and no worker used.
func (s *scheduler) unreserve() {
	s.mu.Lock()
	s.reserved--
	s.mu.Unlock()
	s.roomFreed()
}

// startCreated runs a worker for a chat that Create leased to this replica,
// in the slot reserve took: the chat runs at once, without a claim query
// finding it again, from the spec Create decoded and the events it wrote
// (no second decode, no read of the log).
func (s *scheduler) startCreated(c *chat.Chat, seed *workerSeed) {
	s.mu.Lock()
	s.reserved--
	base := s.base
	s.mu.Unlock()
	s.startWorker(base, c, seed)
}

// workerSeed is what a worker starts from instead of the stored chat: the
// decoded spec and the whole log so far.
type workerSeed struct {
	spec *spec.Spec
	log  []chat.Event
}

// start sets the context workers run under; from then on Create may lease
// chats to this replica.
func (s *scheduler) start(base context.Context) {
	s.mu.Lock()
	s.base = base
	s.mu.Unlock()
}

func (s *scheduler) claimLoop(ctx context.Context) {
	t := time.NewTicker(s.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-t.C:
		}
		s.claim(ctx)
	}
}

// claim takes as many runnable chats as this replica has room for.
func (s *scheduler) claim(ctx context.Context) {
	r := s.rt
	for !r.stopping.Load() {
		s.mu.Lock()
		free := s.maxActive - len(s.workers) - s.reserved
		s.mu.Unlock()
		if free <= 0 {
			return // the backlog, if any, waits for room
		}
		// What becomes claimable from here on, this claim finds or the
		// backlog says.
		s.backlog.Store(false)
		now := r.now()
		chats, err := r.store.Claim(ctx, &chat.ClaimParams{Owner: r.owner, Now: now, LeaseUntil: now.Add(s.leaseDur), Limit: min(free, 100)})
		if err != nil {
			s.backlog.Store(true)
			if ctx.Err() == nil {
				r.metrics.claimErrors.Inc()
				r.log.Error("claim runnable chats", "err", err)
			}
			return
		}
		for _, c := range chats {
			s.startWorker(ctx, c, nil)
		}
		if len(chats) < min(free, 100) {
			return
		}
		s.backlog.Store(true) // a full page: more may wait
	}
}

func (s *scheduler) startWorker(base context.Context, c *chat.Chat, seed *workerSeed) {
	r := s.rt
	ctx, cancel := context.WithCancelCause(base)
	lease := chat.Lease{ChatID: c.ID, Epoch: c.Epoch}
	// The worker is made here, not in its goroutine: decoding the spec
	// takes a deep stack, which the goroutine would keep (or grow into)
	// for the rest of its life, most of it spent waiting on a model. The
	// goroutine keeps the worker and not c, whose stored spec it does not
	// need once decoded.
	w := newWorker(r, c, seed)
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		cancel(errShutdown)
		_ = r.store.ReleaseLease(context.Background(), lease, r.owner)
		return
	}
	if old, ok := s.workers[c.ID]; ok {
		// Our own lease ran out (renewals failed) and we claimed the chat
		// again: the old worker is fenced by the new epoch anyway; stop it.
		old.cancel(errLeaseLost)
	}
	rw := &runningWorker{cancel: cancel, lease: lease, flags: w.flags}
	s.workers[c.ID] = rw
	s.wg.Add(1)
	s.mu.Unlock()
	r.metrics.workers.Inc()
	w.topic = r.broker.workerStarted(c.ID, chat.Progress{Status: c.Status, LastSeq: c.LastSeq, InputAnswered: len(c.InputResponse) > 0})
	go s.runWorker(ctx, w, rw)
}

// runWorker runs one chat's worker, then does what the chat's confirmed
// state calls for: a chat that ended in the store gives up its tools'
// sessions and its sandbox; any other chat is handed back (lease released),
// so that it is continued from its log.
//
// It is the bottom frame of a goroutine that spends most of its life
// waiting on a model, so it keeps its own frame small: the work before and
// after the run is done in functions of its own, and one deferred call
// (endRun) does all that is left when the run ends or panics.
func (s *scheduler) runWorker(ctx context.Context, w *worker, rw *runningWorker) {
	ctx, span := s.startRun(ctx, w)
	defer s.endRun(ctx, w, rw, span)
	if s.beginRun(ctx, w) {
		w.run(ctx)
		s.afterWorker(ctx, w, rw.lease)
	}
}

// endRun, deferred by runWorker, keeps a bug in one chat from taking the
// server and every other chat down (see workerPanicked), then ends the
// run's span and frees the worker's slot.
func (s *scheduler) endRun(ctx context.Context, w *worker, rw *runningWorker, span trace.Span) {
	defer s.workerEnded(w, rw)
	defer endRunSpan(span, w)
	if p := recover(); p != nil {
		s.workerPanicked(ctx, w, p)
	}
}

// startRun starts the span of a worker's run, joined to the trace of the
// request that made the chat runnable, if known. Without tracing, ctx is
// left as it is: a span that records nothing would only cost the chat
// memory for as long as it runs.
//
//go:noinline
func (s *scheduler) startRun(ctx context.Context, w *worker) (context.Context, trace.Span) {
	if !s.rt.parents.on {
		return ctx, noop.Span{}
	}
	return s.rt.tracer.Start(s.rt.parents.take(ctx, w.id), "chat.run", trace.WithAttributes(chatAttr(w.id)))
}

func endRunSpan(span trace.Span, w *worker) {
	span.SetAttributes(attribute.String("agentd.chat.status", string(w.st.Status)))
	span.End()
}

// beginRun rebuilds the worker's state from the log; false (the lease
// released) if the log could not be read.
//
//go:noinline
func (s *scheduler) beginRun(ctx context.Context, w *worker) bool {
	r := s.rt
	lease := chat.Lease{ChatID: w.id, Epoch: w.epoch}
	if err := w.rebuild(ctx); err != nil {
		r.log.Error("start worker", "chat_id", w.id, "err", err)
		if rerr := r.store.ReleaseLease(context.WithoutCancel(ctx), lease, r.owner); rerr != nil {
			r.log.Warn("release lease", "chat_id", w.id, "err", rerr)
		}
		return false
	}
	if w.st.Status == chat.StatusQueued {
		w.log().Info("chat claimed", "owner", r.owner, "epoch", lease.Epoch)
	} else {
		// Continued from its log: after a human answered or an input timed
		// out, or after another worker stopped (shutdown, crash, lost lease).
		w.log().Info("chat resumed", "owner", r.owner, "epoch", lease.Epoch, "status", w.st.Status, "turns", w.st.Turns, "last_seq", w.st.LastSeq)
	}
	return true
}

// workerPanicked handles a worker's panic, p: the chat fails with an
// internal error, which stops it from being claimed (and crashing a
// worker) again.
func (s *scheduler) workerPanicked(ctx context.Context, w *worker, p any) {
	r := s.rt
	r.log.Error("worker panicked", "chat_id", w.id, "panic", p, "stack", string(debug.Stack()))
	r.metrics.panics.Inc()
	if !w.st.Status.Terminal() {
		w.stop(context.WithoutCancel(ctx), fmt.Errorf("internal error: %v", p))
	}
	s.afterWorker(ctx, w, chat.Lease{ChatID: w.id, Epoch: w.epoch})
}

// workerEnded frees the worker's slot once its goroutine ends.
func (s *scheduler) workerEnded(w *worker, rw *runningWorker) {
	r, id := s.rt, w.id
	// After an end the worker saw confirmed, nobody appends to the chat.
	r.broker.workerEnded(id, w.st.Status.Terminal())
	s.mu.Lock()
	if s.workers[id] == rw {
		delete(s.workers, id)
	}
	s.mu.Unlock()
	r.metrics.workers.Dec()
	rw.cancel(nil)
	switch {
	case w.st.Status.Terminal() && w.flags.queued.Load():
		s.kick() // a run waits to start: claimable, here or elsewhere
	case w.st.Status.Terminal():
		s.roomFreed()
	default:
		s.kick() // the chat was handed back (or its lease lost): claimable, here or elsewhere
	}
	s.wg.Done()
}

// afterWorker releases what a worker leaves behind, decided from what the
// store confirmed: only a chat whose terminal event is durable loses its
// sandbox; every other chat keeps it, for the worker that continues it.
func (s *scheduler) afterWorker(ctx context.Context, w *worker, lease chat.Lease) {
	r := s.rt
	ended := w.st.Status.Terminal()
	if !ended {
		// An append whose outcome the worker did not hear (a timeout) may
		// have ended the chat; the store says.
		c, err := r.store.GetChat(context.WithoutCancel(ctx), "", w.id)
		ended = err == nil && c.Status.Terminal()
	}
	if ended && r.tools != nil && len(w.st.Spec.Tools) > 0 {
		r.tools.ReleaseChat(w.id)
	}
	if ended && r.sandboxes != nil && w.st.Spec.NeedsSandbox() {
		// The chat's sandbox goes with the chat; the reaper catches what a
		// crash leaves behind.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := r.sandboxes.Release(rctx, w.id); err != nil {
			r.log.Warn("release sandbox", "chat_id", w.id, "err", err)
		}
	}
	if !ended || w.claimedIdle {
		// Hand the chat back at once (shutdown, or an error we could not
		// record; or the worker of a next run that found none queued any
		// more) rather than letting its lease run out; a no-op when the
		// lease went to someone else, or an append released it.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := r.store.ReleaseLease(rctx, lease, r.owner); err != nil {
			r.log.Warn("release lease", "chat_id", w.id, "err", err)
		}
	}
}

// renewLoop renews this replica's leases three times per lease duration,
// so that a lease survives a renewal that fails or is slow.
func (s *scheduler) renewLoop(ctx context.Context) {
	tick.Every(ctx, s.leaseDur/3, s.renew)
}

// renew extends this replica's leases and relays what the store says about
// them: a lease lost (fenced elsewhere) or a cancel requested through
// another replica.
func (s *scheduler) renew(ctx context.Context) {
	r := s.rt
	s.mu.Lock()
	leases := make([]chat.Lease, 0, len(s.workers))
	for _, w := range s.workers {
		leases = append(leases, w.lease)
	}
	s.mu.Unlock()
	if len(leases) == 0 {
		return
	}
	states, err := r.store.RenewLeases(ctx, &chat.RenewLeasesParams{Owner: r.owner, Leases: leases, LeaseUntil: r.now().Add(s.leaseDur)})
	if err != nil {
		if ctx.Err() == nil {
			r.metrics.claimErrors.Inc()
			r.log.Error("renew leases", "err", err)
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range states {
		// The chat's worker may have ended, and another started for it
		// under a newer lease, while the store answered: the answer is
		// only about the worker whose lease it names.
		w, ok := s.workers[st.ChatID]
		if !ok || w.lease.Epoch != st.Epoch {
			continue
		}
		switch {
		case !st.Held:
			w.cancel(errLeaseLost)
		case st.CancelRequested:
			w.cancel(errCancelRequested)
		case st.StopRequested:
			w.flags.stop.Store(true)
		}
	}
}
