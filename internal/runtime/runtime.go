package runtime

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/chat/engine"

	"github.com/agentd/agentd/internal/spec"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// Config configures a Runtime.
type Config struct {
	Store chat.Store
	// Models makes the model calls. When it is also a TokenCounter (as
	// internal/llm's client is), it counts the tokens of token-limited
	// model contexts.
	Models chat.ModelClient
	// Providers are the model providers a spec may name besides "replay".
	Providers []string
	// Tools runs the spec's tools; nil rejects specs that define tools.
	Tools chat.Tools
	// Sandboxes runs code; nil rejects specs that need code execution.
	Sandboxes chat.Sandboxes
	// SandboxHosts checks sandbox.network.allow at create time (the
	// operator's AGENTD_SANDBOX_ALLOW_HOSTS); nil: sandboxes get no
	// network and specs asking for one are rejected.
	SandboxHosts spec.SandboxHostChecker
	Logger       *slog.Logger
	Registerer   prometheus.Registerer
	Now          func() time.Time
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
	// AppendTimeout bounds one durable append of a worker (default 30s). An
	// append that times out has an unknown outcome: the worker stops and
	// the chat is continued from its log.
	AppendTimeout time.Duration
	// HoldSelection is how long a turn's speaker.selected may wait to be
	// appended with the turn's first output (default 20ms; negative: it is
	// appended at once). See heldAppend.
	HoldSelection time.Duration
	Limits        spec.Limits
	// TracerProvider traces chat runs, turns and appends; nil: no spans.
	TracerProvider trace.TracerProvider
	// StatusCountsTTL is how long the counts of agentd_chats are reused
	// between scrapes (default DefaultStatusCountsTTL).
	StatusCountsTTL time.Duration
	// Webhooks routes events to webhook endpoints; nil: none, and specs
	// with a webhook are refused.
	Webhooks chat.Webhooks
	// Retention erases chats that ended longer ago than this (0: never);
	// see RetentionConfig.
	Retention RetentionConfig
}

// Runtime runs chats. It is made of three parts, each in a file of its
// own: the service API that the HTTP layer calls (service.go), the
// scheduler that claims runnable chats, renews their leases and runs one
// worker per claimed chat (scheduler.go), and the broker that hands
// committed events and streamed deltas to local subscribers (broker.go).
type Runtime struct {
	store         chat.Store
	models        chat.ModelClient
	tokens        chat.TokenCounter // nil: token-limited contexts fail the turn
	providers     []string
	tools         chat.Tools
	sandboxes     chat.Sandboxes
	sandboxHosts  spec.SandboxHostChecker
	log           *slog.Logger
	now           func() time.Time
	owner         string
	limits        spec.Limits
	appendTimeout time.Duration
	holdSelection time.Duration
	metrics       *metrics
	broker        *broker
	sched         *scheduler
	specs         *specShare
	tracer        trace.Tracer
	parents       *traceParents
	webhooks      chat.Webhooks
	retention     RetentionConfig
	appMetrics    *appMetrics
	// cycles, if set (by the turn-cycle benchmark, before any worker
	// starts), records every worker's turn cycle; nil in production.
	cycles *cycleRecorder

	// teamsChanged are told that a tenant's saved teams changed on some
	// replica (see OnTeamsChanged); set before Start.
	teamsChanged []func(tenant string)

	mu       sync.Mutex
	stopping atomic.Bool
	base     context.Context
	stopBase context.CancelCauseFunc
	loops    sync.WaitGroup
	started  bool
	stopped  bool
}

// New returns a Runtime; call Start to begin running chats.
func New(cfg Config) (*Runtime, error) {
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
	clock := cfg.Now
	if clock == nil {
		clock = func() time.Time { return time.Now().UTC() }
	}
	// Times are kept to the microsecond, which is what Postgres stores: so
	// what a worker wrote is what a read of the store gives back (see
	// Wake.Ended), on either store.
	now := func() time.Time { return clock().Truncate(time.Microsecond) }
	m, err := newMetrics(reg, cfg.Store, cmp.Or(cfg.StatusCountsTTL, DefaultStatusCountsTTL), now)
	if err != nil {
		return nil, fmt.Errorf("register chat metrics: %w", err)
	}
	tokens, _ := cfg.Models.(chat.TokenCounter)
	r := &Runtime{
		tokens: tokens,
		store:  cfg.Store, models: cfg.Models, providers: cfg.Providers, tools: cfg.Tools, sandboxes: cfg.Sandboxes, sandboxHosts: cfg.SandboxHosts,
		log:           cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		now:           now,
		owner:         owner,
		limits:        cfg.Limits.WithDefaults(),
		appendTimeout: cmp.Or(cfg.AppendTimeout, defaultAppendTimeout),
		holdSelection: cmp.Or(cfg.HoldSelection, defaultHoldSelection),
		metrics:       m,
		specs:         newSpecShare(),
		webhooks:      cfg.Webhooks,
		retention:     cfg.Retention.withDefaults(),
	}
	if r.appMetrics, err = newAppMetrics(reg); err != nil {
		return nil, fmt.Errorf("register chat metrics: %w", err)
	}
	r.tracer, r.parents = newTraceParents(cfg.TracerProvider)
	r.broker = newBroker(cfg.Store)
	if out, ok := cfg.Store.(chat.DeltaRelay); ok {
		r.broker.relay = newRelay(out, owner, r.broker, now, r.log, m)
	}
	r.sched = newScheduler(r, cmp.Or(cfg.MaxActiveChats, 1000), cmp.Or(cfg.LeaseDuration, 15*time.Second), cmp.Or(cfg.PollInterval, time.Second))
	return r, nil
}

// env is what this server offers specs.
func (r *Runtime) env() spec.Env {
	e := spec.Env{Providers: r.providers, Tools: r.tools}
	if r.webhooks != nil {
		e.Webhooks = r.webhooks
	}
	// A model client that knows its endpoints (internal/llm's) also says
	// at create time whether one serves each model.
	if mc, ok := r.models.(spec.ModelChecker); ok {
		e.Models = mc
	}
	if r.sandboxes != nil {
		e.Sandbox = r.sandboxes.Backend()
	}
	if r.sandboxHosts != nil {
		e.SandboxHosts = r.sandboxHosts
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
	r.sched.start(r.base)
	r.loops.Add(2)
	go func() {
		defer r.loops.Done()
		r.sched.claimLoop(r.base)
	}()
	go func() {
		defer r.loops.Done()
		r.sched.renewLoop(r.base)
	}()
	if r.retention.After > 0 {
		r.loops.Add(1)
		go func() {
			defer r.loops.Done()
			r.retentionLoop(r.base)
		}()
	}
	if n, ok := r.store.(chat.Notifier); ok {
		h := chat.NotifyHandler{
			Appended:        r.broker.notified,
			CancelRequested: func(id string) { r.sched.cancel(id, errCancelRequested) },
			StopRequested:   r.sched.stopRequested,
			RunQueued:       r.sched.runQueued,
			TeamSaved:       r.teamSaved,
			Reconnected: func() {
				r.broker.notifiedAll()
				r.teamSaved("") // a save made meanwhile was not heard
			},
			// What was appended or relayed before the listener listened
			// (it connects after the server serves, and after an outage)
			// was not heard: the subscribers catch up from the store, and
			// the relay asks again.
			Listening: func() {
				r.broker.notifiedAll()
				r.broker.relay.listening()
			},
		}
		if rl := r.broker.relay; rl.on() {
			h.Self, h.Deltas, h.Follows, h.RelayFailed = r.owner, rl.received, rl.heard, rl.failed
			r.loops.Add(1)
			go func() {
				defer r.loops.Done()
				rl.loop(r.base)
			}()
		}
		r.loops.Add(1)
		go func() {
			defer r.loops.Done()
			_ = n.Listen(r.base, h)
		}()
	}
	r.sched.kick()
	return nil
}

// OnTeamsChanged has f told when a tenant has a new version of a saved
// team, put on any replica that shares the store (a tenant of "": any
// tenant's teams may have changed, as after the store's notifications were
// lost for a while). f runs on the store's listener and must not block.
// An embedded store (SQLite) serves one process and tells nothing: the
// HTTP layer knows its own saves. Call it before Start.
func (r *Runtime) OnTeamsChanged(f func(tenant string)) {
	r.teamsChanged = append(r.teamsChanged, f)
}

func (r *Runtime) teamSaved(tenant string) {
	for _, f := range r.teamsChanged {
		f(tenant)
	}
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
	r.sched.stopAll()
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		r.loops.Wait()
		r.sched.wait()
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

// appended is called after a worker's events are durable: it hands them to
// the chat's local subscribers and counts what was written. t is the
// chat's topic if the caller holds it (see worker.topic).
func (r *Runtime) appended(chatID string, t *topic, evs []chat.Event, after *engine.State, upd *chat.ChatUpdate) {
	chat.Untyped(evs)
	// The messages of evs are the last of after's, already decoded there.
	msgs := 0
	for _, e := range evs {
		if e.Type == chat.EventMessage {
			msgs++
		}
	}
	meta := after.Meta[max(len(after.Meta)-msgs, 0):]
	if after.Broken != nil {
		meta = nil // a broken state folds no messages
	}
	for _, e := range evs {
		r.metrics.events.WithLabelValues(string(e.Type)).Inc()
		switch {
		case e.Type == chat.EventMessage:
			r.metrics.messages.Inc()
			if len(meta) > 0 {
				if meta[0].End {
					r.metrics.turns.Inc()
				}
				meta = meta[1:]
			}
		case e.Type.Terminal():
			var d chat.TerminalData
			_ = json.Unmarshal(e.Data, &d)
			r.metrics.finished.WithLabelValues(string(d.Status), string(d.StopReason)).Inc()
			level := slog.LevelInfo
			if d.Status == chat.StatusFailed {
				level = slog.LevelError
			}
			attrs := []any{"chat_id", chatID, "stop_reason", d.StopReason, "stop_detail", d.StopDetail}
			if d.Error != "" {
				attrs = append(attrs, "error", d.Error)
			}
			r.log.Log(context.Background(), level, "chat "+string(d.Status), attrs...)
		}
	}
	wk := Wake{Progress: chat.Progress{Status: after.Status, LastSeq: after.LastSeq}, Known: true}
	if after.Status.Terminal() {
		wk.ended = upd
	}
	r.broker.committed(chatID, t, evs, wk)
}
