package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	goruntime "runtime"
	"strings"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/egress"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/sandbox"
	"github.com/agentd/agentd/internal/server"
	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/tick"
	"github.com/agentd/agentd/internal/tool"
	"github.com/agentd/agentd/internal/tracing"
	"github.com/agentd/agentd/internal/webhook"
)

// Main is the whole program: store, models, chat runtime and HTTP server.
// End-to-end tests run it on 127.0.0.1:0 in-process; the binary runs it
// until a signal.
type Main struct {
	Config Config
	Logger *slog.Logger

	db       store.DB
	probe    *store.Probe
	tracing  *tracing.Provider
	models   *llm.Client
	tools    *tool.Runner
	webhooks *webhook.Dispatcher
	sandbox  sandbox.Manager
	egress   *egress.Proxy
	reaper   *reaper
	runtime  *runtime.Runtime
	server   *server.Server
	http     *http.Server
	listener net.Listener
	admin    *adminServer
	// streams is the base context of every request; cancelling it ends
	// long-lived SSE streams and long polls, which http.Server.Shutdown
	// would otherwise wait for until the grace period ran out. Its cause,
	// runtime.ErrStopped, tells a protocol stream to say why it ends
	// (runtime.ServerEnded) before its connection closes.
	streams    context.Context
	endStreams context.CancelCauseFunc
	served     chan error
	closeOnce  sync.Once
	closeErr   error
}

// sandboxHosts is what checks sandbox.network.allow at create time: the
// egress proxy, when there is a sandbox and the operator permits hosts.
func (m *Main) sandboxHosts() spec.SandboxHostChecker {
	if m.egress == nil || m.sandbox == nil {
		return nil
	}
	return m.egress
}

// NewMain returns a Main for a validated configuration.
func NewMain(cfg Config, logger *slog.Logger) *Main {
	return &Main{Config: cfg, Logger: logger}
}

// Run opens the store (migrating it unless disabled), starts the runtime and
// begins serving. It returns once the server listens; Close stops it.
func (m *Main) Run(ctx context.Context) error {
	cfg := m.Config
	db, err := store.Open(ctx, store.Config{DatabaseURL: cfg.DatabaseURL, DataDir: cfg.DataDir, Logger: m.Logger, ConnectWait: cfg.DatabaseWait})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	m.db = db
	if cfg.Migrate {
		if err := db.Migrate(ctx); err != nil {
			return fmt.Errorf("migrate %s store: %w", db.Kind(), err)
		}
	}
	m.tracing, err = tracing.New(ctx, tracing.Config{Enabled: cfg.Traces, ServiceVersion: buildVersion()})
	if err != nil {
		return err
	}
	// Components take no provider at all when tracing is off, so they skip
	// even the propagation work.
	var tp trace.TracerProvider
	if m.tracing.Enabled() {
		tp = m.tracing.TracerProvider()
		m.Logger.Info("exporting OpenTelemetry traces over OTLP/HTTP")
	}
	reg := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo()} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register metrics: %w", err)
		}
	}
	modelsCfg, err := cfg.models()
	if err != nil {
		return err
	}
	modelsCfg.OpenAI.Timeout = cfg.ModelCallTimeout
	modelsCfg.Logger, modelsCfg.Registerer, modelsCfg.TracerProvider = m.Logger, reg, tp
	m.models, err = llm.New(*modelsCfg)
	if err != nil {
		return fmt.Errorf("models: %w", err)
	}
	providers := []string{}
	for _, p := range m.models.Providers() {
		if p != "replay" {
			providers = append(providers, p)
		}
	}
	var sandboxes chat.Sandboxes
	sbCfg := sandbox.Config{
		Backend: cfg.Sandbox, DockerHost: sandbox.ResolveDockerHost(cfg.DockerHost), Image: cfg.SandboxImage,
		WorkRoot: sandboxWorkRoot(cfg.Sandbox, cfg.SandboxWorkRoot, cfg.DataDir),
		Owner:    cfg.SandboxOwner, Logger: m.Logger, Registerer: reg, TracerProvider: tp,
		DefaultDiskMB: cfg.SandboxDiskMB,
	}
	if hosts := splitList(cfg.SandboxAllowHosts); len(hosts) > 0 {
		// Only when the operator permits hosts: otherwise there is no
		// proxy, and every sandbox has no network at all.
		m.egress, err = egress.New(egress.Config{AllowHosts: hosts, MaxBytesPerChat: cfg.SandboxEgressMaxBytes,
			Logger: m.Logger, Registerer: reg})
		if err != nil {
			return fmt.Errorf("sandbox egress: %w", err)
		}
		sbCfg.Egress = m.egress // its sockets go to .egress in the work root
	}
	m.sandbox, err = sandbox.Open(ctx, sbCfg)
	switch {
	case err == nil:
		sandboxes = m.sandbox
	case errors.Is(err, sandbox.ErrNoSandbox) && (cfg.Sandbox == "auto" || cfg.Sandbox == "none"):
		// Specs that need code execution are rejected at create time, with
		// the reason; code never runs on the host.
		m.Logger.Warn("no code sandbox: specs with code execution or sandbox tools will be rejected", "reason", err)
	default:
		return fmt.Errorf("sandbox: %w", err)
	}
	secrets, err := cfg.toolSecrets() // checked by Validate
	if err != nil {
		return err
	}
	m.tools, err = tool.New(tool.Config{HTTPAllowHosts: splitList(cfg.ToolAllowHosts), AllowPrivate: cfg.ToolAllowPrivate,
		Sandboxes: sandboxes, Secrets: secrets, Logger: m.Logger, Registerer: reg, TracerProvider: tp})
	if err != nil {
		return err
	}
	router, err := m.webhookRouter()
	if err != nil {
		return err
	}
	m.runtime, err = runtime.New(runtime.Config{
		Store: db, Models: m.models, Providers: providers, Tools: m.tools, Sandboxes: sandboxes, SandboxHosts: m.sandboxHosts(), Logger: m.Logger, Registerer: reg,
		MaxActiveChats: cfg.MaxActiveChats, LeaseDuration: cfg.LeaseTTL, AppendTimeout: cfg.AppendTimeout,
		Limits: spec.Limits{MaxRound: cfg.MaxRoundLimit, MaxSandboxDiskMB: cfg.SandboxMaxDiskMB, MaxImageBytes: cfg.MaxImageBytes}, TracerProvider: tp,
		Webhooks: router, Retention: runtime.RetentionConfig{After: cfg.Retention},
	})
	if err != nil {
		return err
	}
	if cfg.WebhookSecret != "" || cfg.WebhooksFile != "" {
		// Without a secret or endpoints no delivery can be queued, and no
		// replica polls the outbox for nothing.
		m.webhooks, err = webhook.NewDispatcher(webhook.DispatcherConfig{Store: db, Router: router, Transport: m.tools.Transport(), Owner: m.runtime.Owner(),
			RetryFor: cfg.WebhookRetryFor, Timeout: cfg.WebhookTimeout, Logger: m.Logger, Registerer: reg})
		if err != nil {
			return fmt.Errorf("webhooks: %w", err)
		}
	}
	keys, err := cfg.apiKeys()
	if err != nil {
		return err
	}
	m.probe, err = store.NewProbe(store.ProbeConfig{Ping: db.Ping, Registerer: reg, Logger: m.Logger})
	if err != nil {
		return err
	}
	if err := m.probe.Start(ctx); err != nil {
		return err
	}
	m.server, err = server.New(server.Config{MaxBodyBytes: cfg.MaxBodyBytes, APIKeys: keys, Ready: m.probe.Err, TracerProvider: tp,
		ModelEndpoints: teamEndpoints{c: m.models},
		Guard:          cfg.GuardConfig.serverGuard(len(keys) > 0)}, m.runtime, m.Logger, reg, reg)
	if err != nil {
		return fmt.Errorf("http server: %w", err)
	}
	m.listener, err = net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if err := m.runtime.Start(ctx); err != nil {
		return err
	}
	if m.webhooks != nil {
		if err := m.webhooks.Start(ctx); err != nil {
			return err
		}
	}
	if m.sandbox != nil {
		m.reaper = startReaper(m.sandbox, m.runtime.SandboxNeeded, cfg.SandboxReap, m.Logger)
	}
	if cfg.AdminAddr != "" {
		if m.admin, err = startAdmin(cfg.AdminAddr, server.AdminHandler(reg), m.Logger); err != nil {
			return err
		}
	}
	m.streams, m.endStreams = context.WithCancelCause(context.Background())
	m.http = &http.Server{
		Handler:           m.server.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		// Every request is read and answered within these, so a client
		// trickling its body or never reading the answer does not hold a
		// connection; event streams and long polls extend their own.
		ReadTimeout:  cfg.ReadTimeout,
		WriteTimeout: cfg.WriteTimeout,
		IdleTimeout:  2 * time.Minute,
		BaseContext:  func(net.Listener) context.Context { return m.streams },
		ErrorLog:     slog.NewLogLogger(m.Logger.Handler(), slog.LevelWarn),
	}
	m.served = make(chan error, 1)
	go func() { m.served <- m.http.Serve(m.listener) }()
	m.Logger.Info("agentd serving", "addr", m.listener.Addr().String(), "store", db.Kind(), "version", version,
		"providers", m.models.Providers(), "model_endpoints", m.models.Endpoints(), "sandbox", sandboxName(sandboxes), "owner", m.runtime.Owner())
	return nil
}

// Addr is the address the server listens on (useful with port 0).
func (m *Main) Addr() string {
	if m.listener == nil {
		return ""
	}
	return m.listener.Addr().String()
}

// AdminAddr is the address of the admin listener, "" without one.
func (m *Main) AdminAddr() string {
	if m.admin == nil {
		return ""
	}
	return m.admin.addr
}

// Close shuts down in the order that loses nothing: readiness turns 503 and
// for the drain delay requests are still served, so load balancers see the
// 503 and stop sending new work before anything is refused (no delay when
// nothing has asked /readyz: no load balancer routes by it, and a local run
// stopped with Ctrl-C ends at once); then the runtime
// stops claiming and hands its chats back (their logs are durable; another
// replica, or this one after a restart, continues them), SSE streams are
// aborted so clients reconnect elsewhere from their last event id (the
// protocol streams, which cannot resume, first send their error event),
// the HTTP
// server drains, and the store closes last. Safe to call twice, or after a
// failed Run.
func (m *Main) Close() error {
	m.closeOnce.Do(func() {
		var errs []error
		if m.server != nil {
			m.server.SetReady(false)
			switch {
			case m.Config.ShutdownDrain <= 0:
			case !m.server.ReadinessPolled():
				m.Logger.Info("no drain: nothing has asked /readyz since the start", "drain", m.Config.ShutdownDrain)
			default:
				m.Logger.Info("draining: /readyz answers 503, requests are still served", "drain", m.Config.ShutdownDrain)
				time.Sleep(m.Config.ShutdownDrain)
			}
		}
		// The grace period starts after the drain delay.
		ctx, cancel := context.WithTimeout(context.Background(), m.Config.ShutdownGrace)
		defer cancel()
		if m.runtime != nil {
			if err := m.runtime.Stop(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		if m.webhooks != nil {
			// Attempts under way are cut; they are claimed again (here
			// after a restart, or by another replica) once their lease runs
			// out, with the same webhook id.
			if err := m.webhooks.Stop(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		if m.endStreams != nil {
			m.endStreams(runtime.ErrStopped)
		}
		if m.http != nil {
			if err := m.http.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("http shutdown: %w", err))
			}
			if err := <-m.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs = append(errs, err)
			}
		} else if m.listener != nil {
			if err := m.listener.Close(); err != nil {
				m.Logger.Warn("close listener", "err", err)
			}
		}
		if m.admin != nil {
			m.admin.stop(ctx)
		}
		if m.reaper != nil {
			m.reaper.stop()
		}
		if m.probe != nil {
			_ = m.probe.Stop(ctx)
		}
		// Errors closing these lose nothing durable, but say what leaked.
		if m.models != nil {
			if err := m.models.Close(); err != nil {
				m.Logger.Warn("close model clients", "err", err)
			}
		}
		if m.tools != nil {
			if err := m.tools.Close(); err != nil {
				m.Logger.Warn("close tool runner", "err", err)
			}
		}
		if m.sandbox != nil {
			if err := m.sandbox.Close(); err != nil {
				m.Logger.Warn("close sandbox manager", "err", err)
			}
		}
		if m.egress != nil {
			_ = m.egress.Stop(context.Background())
		}
		if m.db != nil {
			if err := m.db.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close store: %w", err))
			}
		}
		// Last: everything that makes spans has stopped; this exports the
		// spans still buffered.
		if err := m.tracing.Shutdown(ctx); err != nil {
			m.Logger.Warn("export the last traces", "err", err)
		}
		m.closeErr = errors.Join(errs...)
	})
	return m.closeErr
}

// webhookRouter builds the router of webhook deliveries from the
// configuration (the server's secret and the tenant endpoints' file), with
// the tools' address rules.
func (m *Main) webhookRouter() (*webhook.Router, error) {
	var eps []webhook.Endpoint
	if m.Config.WebhooksFile != "" {
		var err error
		if eps, err = webhook.ReadFile(m.Config.WebhooksFile); err != nil {
			return nil, err
		}
	}
	r, err := webhook.NewRouter(webhook.RouterConfig{Secret: m.Config.WebhookSecret, Endpoints: eps, Check: m.tools})
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	if len(eps) > 0 {
		m.Logger.Info("webhook endpoints configured", "endpoints", len(eps))
	}
	return r, nil
}

// buildInfo is agentd_build_info, the usual constant 1 whose labels say
// which build runs, so dashboards can show versions and mark rollouts.
func buildInfo() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "agentd_build_info",
		Help:        "The agentd build that runs: always 1, labelled with its version and Go version.",
		ConstLabels: prometheus.Labels{"version": buildVersion(), "goversion": goruntime.Version()},
	})
	g.Set(1)
	return g
}

// migrate applies the migrations and exits (agentd migrate).
func migrate(ctx context.Context, cfg Config, logger *slog.Logger) error {
	db, err := store.Open(ctx, store.Config{DatabaseURL: cfg.DatabaseURL, DataDir: cfg.DataDir, Logger: logger})
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		return err
	}
	logger.Info("migrations applied", "store", db.Kind())
	return nil
}

// splitList splits a comma-separated setting, dropping empty entries.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

func sandboxName(s chat.Sandboxes) string {
	if s == nil {
		return "none"
	}
	return s.Backend()
}

// adminServer is the opt-in admin listener (AGENTD_ADMIN_ADDR): pprof and
// metrics, apart from the API so that neither is reachable by API clients.
type adminServer struct {
	addr   string
	srv    *http.Server
	served chan error
	log    *slog.Logger
}

func startAdmin(addr string, h http.Handler, log *slog.Logger) (*adminServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin listen: %w", err)
	}
	a := &adminServer{
		addr: ln.Addr().String(),
		// No WriteTimeout: a CPU profile or trace takes as long as asked.
		srv:    &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)},
		served: make(chan error, 1),
		log:    log,
	}
	go func() { a.served <- a.srv.Serve(ln) }()
	log.Info("admin listener serving pprof and metrics", "addr", ln.Addr().String())
	return a, nil
}

// stop shuts the admin listener down, cutting a profile still running when
// ctx ends.
func (a *adminServer) stop(ctx context.Context) {
	if err := a.srv.Shutdown(ctx); err != nil {
		a.log.Warn("admin listener shutdown", "err", err)
		_ = a.srv.Close()
	}
	if err := <-a.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		a.log.Warn("admin listener", "err", err)
	}
}

// reaper removes the sandboxes of chats that ended — those a crash left
// behind, since a chat that ends normally releases its own — at start and
// then periodically.
type reaper struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func startReaper(mgr sandbox.Manager, needed func(context.Context, string) bool, every time.Duration, log *slog.Logger) *reaper {
	ctx, cancel := context.WithCancel(context.Background())
	r := &reaper{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		reap := func(ctx context.Context) {
			n, err := mgr.Reap(ctx, func(id string) bool { return needed(ctx, id) })
			switch {
			case err != nil && ctx.Err() == nil:
				log.Error("reap sandboxes", "err", err)
			case n > 0:
				log.Info("reaped sandboxes of ended chats", "removed", n)
			}
		}
		reap(ctx)
		tick.Every(ctx, every, reap)
	}()
	return r
}

// stop ends the reaper and waits for it; safe to call twice.
func (r *reaper) stop() {
	r.cancel()
	<-r.done
}
