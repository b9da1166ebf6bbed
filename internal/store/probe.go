package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/tick"
)

// ProbeConfig configures a Probe.
type ProbeConfig struct {
	// Ping checks the database (DB.Ping).
	Ping func(context.Context) error
	// Interval between pings; default 2s.
	Interval time.Duration
	// Timeout of one ping; default 2s. A database that hangs counts as down.
	Timeout    time.Duration
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// Probe pings the store in the background and remembers whether it
// answered, for readiness (/readyz answers 503 while it is down, so a load
// balancer sends no new work to a replica that cannot do it) and for the
// agentd_store_up gauge. The gauge is set by the probe, never by a scrape,
// so /metrics answers at once during an outage.
type Probe struct {
	ping     func(context.Context) error
	interval time.Duration
	timeout  time.Duration
	log      *slog.Logger
	up       prometheus.Gauge

	mu      sync.Mutex
	lastErr error
	cancel  context.CancelFunc
	done    chan struct{}
}

// NewProbe returns a Probe that reports the store down until its first ping
// succeeds; Start runs that ping before it returns.
func NewProbe(cfg ProbeConfig) (*Probe, error) {
	if cfg.Ping == nil || cfg.Registerer == nil {
		return nil, errors.New("store probe needs a ping function and a registerer")
	}
	p := &Probe{
		ping:     cfg.Ping,
		interval: cmp.Or(cfg.Interval, 2*time.Second),
		timeout:  cmp.Or(cfg.Timeout, 2*time.Second),
		log:      cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		up: prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentd_store_up",
			Help: "1 if this replica's last ping of the database succeeded, else 0."}),
		lastErr: errors.New("store not probed yet"),
	}
	if err := cfg.Registerer.Register(p.up); err != nil {
		return nil, fmt.Errorf("register store probe: %w", err)
	}
	return p, nil
}

// Start pings once, then keeps pinging until Stop.
func (p *Probe) Start(ctx context.Context) error {
	p.mu.Lock()
	if p.done != nil {
		p.mu.Unlock()
		return errors.New("store probe already started")
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel, p.done = cancel, make(chan struct{})
	done := p.done
	p.mu.Unlock()
	p.probe(ctx)
	go p.loop(bg, done)
	return nil
}

func (p *Probe) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	tick.Every(ctx, p.interval, p.probe)
}

// probe pings once and records the outcome; changes are logged.
func (p *Probe) probe(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, p.timeout)
	err := p.ping(pctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	p.mu.Lock()
	was := p.lastErr
	p.lastErr = err
	p.mu.Unlock()
	switch {
	case err == nil:
		p.up.Set(1)
		if was != nil {
			p.log.Info("store reachable")
		}
	default:
		p.up.Set(0)
		if was == nil {
			p.log.Error("store unreachable", "err", err)
		}
	}
}

// Err returns nil while the last ping succeeded, else its error (for
// /readyz: it wraps chat.ErrUnavailable when the database is unreachable).
func (p *Probe) Err() error {
	p.mu.Lock()
	err := p.lastErr
	p.mu.Unlock()
	if err == nil || errors.Is(err, chat.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %v", chat.ErrUnavailable, err)
}

// Stop ends the pings; safe to call twice or before Start.
func (p *Probe) Stop(ctx context.Context) error {
	p.mu.Lock()
	cancel, done := p.cancel, p.done
	p.cancel = nil
	p.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
