package chat

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
)

// RuntimeConfig configures a Runtime.
type RuntimeConfig struct {
	Store  Store
	Models ModelClient
	// Providers are the model providers a spec may name besides "replay".
	Providers []string
	// Tools runs the spec's tools; nil rejects specs that define tools.
	Tools Tools
	// Sandboxes runs code; nil rejects specs that need code execution.
	Sandboxes  Sandboxes
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Now        func() time.Time
	// Owner identifies this replica in leases; default hostname plus a
	// random suffix, new for every process.
	Owner string
	// MaxActiveChats caps the chats this replica runs at once (default 1000).
	MaxActiveChats int
	// LeaseDuration is how long a claim lasts unless renewed (default 15s);
	// after a crash, another replica (or the restarted one) continues the
	// chat once it expires.
	LeaseDuration time.Duration
	// PollInterval is how often runnable chats are looked for besides the
	// immediate wake-up on create (default 1s).
	PollInterval time.Duration
	Limits       Limits
}

// Runtime runs chats: it validates and creates them, claims runnable chats
// from the store and runs one worker goroutine per claimed chat.
type Runtime struct {
	store     Store
	models    ModelClient
	providers []string
	tools     Tools
	sandboxes Sandboxes
	log       *slog.Logger
	now       func() time.Time
	owner     string
	maxActive int
	leaseDur  time.Duration
	poll      time.Duration
	limits    Limits
	metrics   *metrics
	broker    broker

	mu       sync.Mutex
	workers  map[string]*runningWorker
	wake     chan struct{}
	stopping atomic.Bool
	base     context.Context
	stopBase context.CancelCauseFunc
	loops    sync.WaitGroup
	wg       sync.WaitGroup
	started  bool
	stopped  bool
}

type runningWorker struct {
	cancel context.CancelCauseFunc
	lease  Lease
}

// NewRuntime returns a Runtime; call Start to begin running chats.
func NewRuntime(cfg RuntimeConfig) (*Runtime, error) {
	if cfg.Store == nil || cfg.Models == nil {
		return nil, errors.New("chat runtime needs a store and a model client")
	}
	owner := cfg.Owner
	if owner == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		owner = cmp.Or(host, "agentd") + "-" + hex.EncodeToString(b[:])
	}
	reg := cfg.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m, err := newMetrics(reg, cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("register chat metrics: %w", err)
	}
	r := &Runtime{
		store: cfg.Store, models: cfg.Models, providers: cfg.Providers, tools: cfg.Tools, sandboxes: cfg.Sandboxes,
		log:       cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		now:       cfg.Now,
		owner:     owner,
		maxActive: cmp.Or(cfg.MaxActiveChats, 1000),
		leaseDur:  cmp.Or(cfg.LeaseDuration, 15*time.Second),
		poll:      cmp.Or(cfg.PollInterval, time.Second),
		limits:    cfg.Limits.withDefaults(),
		metrics:   m,
		workers:   map[string]*runningWorker{},
		wake:      make(chan struct{}, 1),
	}
	if r.now == nil {
		r.now = func() time.Time { return time.Now().UTC() }
	}
	r.broker.subs = map[string]map[chan struct{}]struct{}{}
	return r, nil
}

// env is what this server offers specs.
func (r *Runtime) env() Env {
	e := Env{Providers: r.providers, Tools: r.tools}
	if r.sandboxes != nil {
		e.Sandbox = r.sandboxes.Backend()
	}
	return e
}

// Owner is the name this replica holds leases under.
func (r *Runtime) Owner() string { return r.owner }

// Start begins claiming and running chats. The context only bounds the start
// itself; Stop ends the runtime.
func (r *Runtime) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return errors.New("chat runtime already started")
	}
	r.started = true
	r.base, r.stopBase = context.WithCancelCause(context.WithoutCancel(ctx))
	r.loops.Add(2)
	go r.claimLoop()
	go r.renewLoop()
	if n, ok := r.store.(Notifier); ok {
		r.loops.Add(1)
		go func() {
			defer r.loops.Done()
			_ = n.Listen(r.base, NotifyHandler{
				Appended:        r.broker.publish,
				CancelRequested: func(id string) { r.cancelLocal(id) },
				Reconnected:     r.broker.publishAll,
			})
		}()
	}
	r.kick()
	return nil
}

// Stop stops claiming, cuts every running turn and hands the chats back
// (leases released) so another replica — or this one after a restart —
// continues them from the log. It waits for the workers until ctx ends. Safe
// to call twice or before Start.
func (r *Runtime) Stop(ctx context.Context) error {
	r.stopping.Store(true)
	r.mu.Lock()
	if !r.started || r.stopped {
		r.mu.Unlock()
		return nil
	}
	r.stopped = true
	r.stopBase(errShutdown)
	for _, w := range r.workers {
		w.cancel(errShutdown)
	}
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		r.loops.Wait()
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop chat runtime: %w", ctx.Err())
	}
}

// Ready reports whether the runtime accepts work (false once stopping).
func (r *Runtime) Ready() bool { return !r.stopping.Load() }

// kick wakes the claim loop without blocking.
func (r *Runtime) kick() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Runtime) claimLoop() {
	defer r.loops.Done()
	t := time.NewTicker(r.poll)
	defer t.Stop()
	for {
		select {
		case <-r.base.Done():
			return
		case <-r.wake:
		case <-t.C:
		}
		r.claim()
	}
}

// claim takes as many runnable chats as this replica has room for.
func (r *Runtime) claim() {
	for !r.stopping.Load() {
		r.mu.Lock()
		free := r.maxActive - len(r.workers)
		r.mu.Unlock()
		if free <= 0 {
			return
		}
		now := r.now()
		chats, err := r.store.Claim(r.base, &ClaimParams{Owner: r.owner, Now: now, LeaseUntil: now.Add(r.leaseDur), Limit: min(free, 100)})
		if err != nil {
			if r.base.Err() == nil {
				r.metrics.claimErrors.Inc()
				r.log.Error("claim runnable chats", "err", err)
			}
			return
		}
		for _, c := range chats {
			r.startWorker(c)
		}
		if len(chats) < min(free, 100) {
			return
		}
	}
}

func (r *Runtime) startWorker(c *Chat) {
	ctx, cancel := context.WithCancelCause(r.base)
	lease := Lease{ChatID: c.ID, Epoch: c.Epoch}
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		cancel(errShutdown)
		_ = r.store.ReleaseLease(context.Background(), lease, r.owner)
		return
	}
	if old, ok := r.workers[c.ID]; ok {
		// Our own lease ran out (renewals failed) and we claimed the chat
		// again: the old worker is fenced by the new epoch anyway; stop it.
		old.cancel(errLeaseLost)
	}
	rw := &runningWorker{cancel: cancel, lease: lease}
	r.workers[c.ID] = rw
	r.wg.Add(1)
	r.mu.Unlock()
	r.metrics.workers.Inc()
	go func() {
		defer r.wg.Done()
		defer func() {
			r.mu.Lock()
			if r.workers[c.ID] == rw {
				delete(r.workers, c.ID)
			}
			r.mu.Unlock()
			r.metrics.workers.Dec()
			cancel(nil)
			r.kick() // room for another chat
		}()
		r.runWorker(ctx, c, lease)
	}()
}

func (r *Runtime) runWorker(ctx context.Context, c *Chat, lease Lease) {
	w := newWorker(r, c)
	defer func() {
		// A bug in one chat must not take the server and every other chat
		// down: the chat fails with an internal error, which stops it from
		// being claimed (and crashing a worker) again.
		if p := recover(); p != nil {
			r.log.Error("worker panicked", "chat_id", c.ID, "panic", p, "stack", string(debug.Stack()))
			r.metrics.panics.Inc()
			if !w.status.Terminal() {
				w.stop(context.WithoutCancel(ctx), fmt.Errorf("internal error: %v", p))
			}
		}
	}()
	if err := w.rebuild(ctx); err != nil {
		r.log.Error("start worker", "chat_id", c.ID, "err", err)
		_ = r.store.ReleaseLease(context.WithoutCancel(ctx), lease, r.owner)
		return
	}
	w.run(ctx)
	if w.status.Terminal() && r.tools != nil && len(w.spec.Tools) > 0 {
		r.tools.ReleaseChat(c.ID)
	}
	if w.status.Terminal() && r.sandboxes != nil && w.spec.needsSandbox() {
		// The chat's sandbox goes with the chat; the reaper catches what a
		// crash leaves behind.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := r.sandboxes.Release(rctx, c.ID); err != nil {
			r.log.Warn("release sandbox", "chat_id", c.ID, "err", err)
		}
	}
	if !w.status.Terminal() {
		// Hand the chat back at once (shutdown, or an error we could not
		// record) rather than letting its lease run out; a no-op when the
		// lease went to someone else.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := r.store.ReleaseLease(rctx, lease, r.owner); err != nil {
			r.log.Warn("release lease", "chat_id", c.ID, "err", err)
		}
	}
}

func (r *Runtime) renewLoop() {
	defer r.loops.Done()
	t := time.NewTicker(r.leaseDur / 3)
	defer t.Stop()
	for {
		select {
		case <-r.base.Done():
			return
		case <-t.C:
		}
		r.renew()
	}
}

// renew extends this replica's leases and relays what the store says about
// them: a lease lost (fenced elsewhere) or a cancel requested through
// another replica.
func (r *Runtime) renew() {
	r.mu.Lock()
	leases := make([]Lease, 0, len(r.workers))
	for _, w := range r.workers {
		leases = append(leases, w.lease)
	}
	r.mu.Unlock()
	if len(leases) == 0 {
		return
	}
	states, err := r.store.RenewLeases(r.base, &RenewLeasesParams{Owner: r.owner, Leases: leases, LeaseUntil: r.now().Add(r.leaseDur)})
	if err != nil {
		if r.base.Err() == nil {
			r.metrics.claimErrors.Inc()
			r.log.Error("renew leases", "err", err)
		}
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range states {
		w, ok := r.workers[s.ChatID]
		if !ok {
			continue
		}
		switch {
		case !s.Held:
			w.cancel(errLeaseLost)
		case s.CancelRequested:
			w.cancel(errCancelRequested)
		}
	}
}

// appended is called after a worker's events are durable: it wakes the
// chat's subscribers and counts what was written.
func (r *Runtime) appended(chatID string, evs []Event) {
	for _, e := range evs {
		r.metrics.events.WithLabelValues(string(e.Type)).Inc()
		switch {
		case e.Type == EventMessage:
			r.metrics.messages.Inc()
			var d messageData
			if json.Unmarshal(e.Data, &d) == nil && d.End {
				r.metrics.turns.Inc()
			}
		case e.Type.Terminal():
			var d terminalData
			_ = json.Unmarshal(e.Data, &d)
			r.metrics.finished.WithLabelValues(string(d.Status), string(d.StopReason)).Inc()
		}
	}
	r.broker.publish(chatID)
}

// Create validates a spec and creates a chat, or returns the chat an
// Idempotency-Key already names with created=false. The chat's first events
// (chat.created, resumed messages, the task) are written with it.
func (r *Runtime) Create(ctx context.Context, p *CreateParams) (*Chat, bool, error) {
	spec, probs := DecodeSpec(p.Body)
	if len(probs) == 0 {
		probs = Validate(spec, r.limits, r.env())
	}
	if len(probs) > 0 {
		return nil, false, &ValidationError{Problems: probs}
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, p.Body); err != nil {
		return nil, false, &ValidationError{Problems: []Problem{{Message: err.Error()}}}
	}
	sum := sha256.Sum256(compact.Bytes())
	id, err := uuid.NewV7()
	if err != nil {
		return nil, false, fmt.Errorf("new chat id: %w", err)
	}
	now := r.now()
	evs := []Event{{Seq: 1, Type: EventChatCreated, Data: mustJSON(map[string]any{"status": StatusQueued, "name": spec.Name}), CreatedAt: now}}
	for _, m := range spec.Messages {
		// Tool calls and responses are kept: the agent that made them sees
		// them in its model context as AgentChat keeps them.
		evs = append(evs, Event{Type: EventMessage, Role: m.Role, Name: cmp.Or(m.Name, UserName), Content: m.Content,
			ToolCalls: m.ToolCalls, ToolResponses: m.ToolResponses, Data: mustJSON(messageData{Kind: kindHistory, Type: m.Type}), CreatedAt: now})
	}
	evs = append(evs, Event{Type: EventMessage, Role: RoleUser, Name: UserName, Content: spec.Task,
		Data: mustJSON(messageData{Kind: kindTask}), CreatedAt: now})
	for i := range evs {
		evs[i].Seq = int64(i + 1)
	}
	c, created, err := r.store.CreateChat(ctx, &CreateChatParams{
		ID: id.String(), Tenant: p.Tenant, Name: spec.Name, Spec: compact.Bytes(), Metadata: spec.Metadata,
		IdempotencyKey: p.IdempotencyKey, RequestHash: hex.EncodeToString(sum[:]), CreatedAt: now, Events: evs,
	})
	if err != nil {
		return nil, false, err
	}
	if created {
		r.metrics.created.Inc()
		r.log.Info("chat created", "chat_id", c.ID, "tenant", c.Tenant, "name", c.Name)
		r.kick()
	}
	return c, created, nil
}

// Get returns a chat of the tenant.
func (r *Runtime) Get(ctx context.Context, tenant, id string) (*Chat, error) {
	return r.store.GetChat(ctx, tenant, id)
}

// List returns a page of chats, newest first.
func (r *Runtime) List(ctx context.Context, p *ListChatsParams) ([]*Chat, string, error) {
	return r.store.ListChats(ctx, p)
}

// Events returns up to limit events of a tenant's chat after seq.
func (r *Runtime) Events(ctx context.Context, tenant, id string, after int64, limit int) ([]Event, error) {
	if _, err := r.store.GetChat(ctx, tenant, id); err != nil {
		return nil, err
	}
	return r.store.ListEvents(ctx, &ListEventsParams{ChatID: id, After: after, Limit: limit})
}

// Subscribe returns a channel that receives a value (coalesced) whenever new
// events of the chat are committed by this replica, and a function that ends
// the subscription. Subscribe before reading the log, then read after every
// signal: no commit can slip between the two.
func (r *Runtime) Subscribe(chatID string) (<-chan struct{}, func()) {
	return r.broker.subscribe(chatID)
}

// SubscribeDeltas returns the fragments of replies being streamed for the
// chat on this replica, and a function that ends the subscription. A slow
// reader loses fragments rather than slowing the model call down.
func (r *Runtime) SubscribeDeltas(chatID string) (<-chan Delta, func()) {
	return r.broker.subscribeDeltas(chatID)
}

// Cancel asks a chat to stop; the chat's worker appends chat.cancelled. The
// request is recorded in the store first, so it reaches the worker wherever
// it runs (through lease renewal) and survives restarts. changed is false
// when the chat had already ended.
func (r *Runtime) Cancel(ctx context.Context, tenant, id string) (*Chat, bool, error) {
	c, err := r.store.RequestCancel(ctx, tenant, id)
	if err != nil {
		return nil, false, err
	}
	if c.Status.Terminal() {
		return c, false, nil
	}
	if !r.cancelLocal(id) {
		r.kick() // unclaimed: claim it so that a worker records the cancel
	}
	return c, true, nil
}

// cancelLocal cuts the chat's worker if it runs on this replica.
func (r *Runtime) cancelLocal(id string) bool {
	r.mu.Lock()
	w, local := r.workers[id]
	r.mu.Unlock()
	if local {
		w.cancel(errCancelRequested)
	}
	return local
}

// broker fans "new events" signals, and streamed deltas, out to a chat's
// local subscribers.
type broker struct {
	mu     sync.Mutex
	subs   map[string]map[chan struct{}]struct{}
	deltas map[string]map[chan Delta]struct{}
}

func (b *broker) subscribeDeltas(id string) (<-chan Delta, func()) {
	ch := make(chan Delta, 64)
	b.mu.Lock()
	if b.deltas == nil {
		b.deltas = map[string]map[chan Delta]struct{}{}
	}
	if b.deltas[id] == nil {
		b.deltas[id] = map[chan Delta]struct{}{}
	}
	b.deltas[id][ch] = struct{}{}
	b.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			b.mu.Lock()
			delete(b.deltas[id], ch)
			if len(b.deltas[id]) == 0 {
				delete(b.deltas, id)
			}
			b.mu.Unlock()
		})
	}
}

func (b *broker) publishDelta(id string, d Delta) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.deltas[id] {
		select {
		case ch <- d:
		default: // ephemeral: a reader that cannot keep up misses fragments
		}
	}
}

func (b *broker) subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	b.mu.Lock()
	if b.subs[id] == nil {
		b.subs[id] = map[chan struct{}]struct{}{}
	}
	b.subs[id][ch] = struct{}{}
	b.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			b.mu.Lock()
			delete(b.subs[id], ch)
			if len(b.subs[id]) == 0 {
				delete(b.subs, id)
			}
			b.mu.Unlock()
		})
	}
}

// publishAll wakes every subscriber, which re-reads its chat's log.
func (b *broker) publishAll() {
	b.mu.Lock()
	ids := make([]string, 0, len(b.subs))
	for id := range b.subs {
		ids = append(ids, id)
	}
	b.mu.Unlock()
	for _, id := range ids {
		b.publish(id)
	}
}

func (b *broker) publish(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs[id] {
		select {
		case ch <- struct{}{}:
		default: // a signal is already pending; the reader will catch up
		}
	}
}
