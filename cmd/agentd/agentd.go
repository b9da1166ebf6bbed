package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/sandbox"
	"github.com/agentd/agentd/internal/server"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/tool"
)

// Main is the whole program: store, models, chat runtime and HTTP server.
// End-to-end tests run it on 127.0.0.1:0 in-process; the binary runs it
// until a signal.
type Main struct {
	Config Config
	Logger *slog.Logger

	db       store.DB
	models   *llm.Client
	tools    *tool.Runner
	sandbox  sandbox.Manager
	reaper   *reaper
	runtime  *chat.Runtime
	server   *server.Server
	http     *http.Server
	listener net.Listener
	// streams is the base context of every request; cancelling it ends
	// long-lived SSE streams and long polls, which http.Server.Shutdown
	// would otherwise wait for until the grace period ran out.
	streams    context.Context
	endStreams context.CancelFunc
	served     chan error
	closeOnce  sync.Once
	closeErr   error
}

// NewMain returns a Main for a validated configuration.
func NewMain(cfg Config, logger *slog.Logger) *Main {
	return &Main{Config: cfg, Logger: logger}
}

// Run opens the store (migrating it unless disabled), starts the runtime and
// begins serving. It returns once the server listens; Close stops it.
func (m *Main) Run(ctx context.Context) error {
	cfg := m.Config
	db, err := store.Open(ctx, store.Config{DatabaseURL: cfg.DatabaseURL, DataDir: cfg.DataDir, Logger: m.Logger})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	m.db = db
	if cfg.Migrate {
		if err := db.Migrate(ctx); err != nil {
			return fmt.Errorf("migrate %s store: %w", db.Kind(), err)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.models, err = llm.New(llm.Config{
		OpenAI:     llm.OpenAIConfig{APIKey: cfg.OpenAIAPIKey, BaseURL: cfg.OpenAIBaseURL, Timeout: cfg.ModelCallTimeout},
		Logger:     m.Logger,
		Registerer: reg,
	})
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
	m.sandbox, err = sandbox.Open(ctx, sandbox.Config{
		Backend: cfg.Sandbox, DockerHost: sandbox.ResolveDockerHost(cfg.DockerHost), Image: cfg.SandboxImage,
		WorkRoot: cmp.Or(cfg.SandboxWorkRoot, filepath.Join(os.TempDir(), "agentd-sandbox-"+cfg.SandboxOwner)),
		Owner:    cfg.SandboxOwner, Logger: m.Logger, Registerer: reg,
	})
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
	m.tools, err = tool.New(tool.Config{HTTPAllowHosts: splitList(cfg.ToolAllowHosts), AllowPrivate: cfg.ToolAllowPrivate,
		Sandboxes: sandboxes, Logger: m.Logger, Registerer: reg})
	if err != nil {
		return err
	}
	m.runtime, err = chat.NewRuntime(chat.RuntimeConfig{
		Store: db, Models: m.models, Providers: providers, Tools: m.tools, Sandboxes: sandboxes, Logger: m.Logger, Registerer: reg,
		MaxActiveChats: cfg.MaxActiveChats, LeaseDuration: cfg.LeaseTTL, AppendTimeout: cfg.AppendTimeout,
		Limits: chat.Limits{MaxRound: cfg.MaxRoundLimit},
	})
	if err != nil {
		return err
	}
	keys, err := cfg.apiKeys()
	if err != nil {
		return err
	}
	m.server, err = server.New(server.Config{MaxBodyBytes: cfg.MaxBodyBytes, APIKeys: keys}, m.runtime, m.Logger, reg, reg)
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
	if m.sandbox != nil {
		m.reaper = startReaper(m.sandbox, m.runtime.SandboxNeeded, cfg.SandboxReap, m.Logger)
	}
	m.streams, m.endStreams = context.WithCancel(context.Background())
	m.http = &http.Server{
		Handler:           m.server.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return m.streams },
		ErrorLog:          slog.NewLogLogger(m.Logger.Handler(), slog.LevelWarn),
	}
	m.served = make(chan error, 1)
	go func() { m.served <- m.http.Serve(m.listener) }()
	m.Logger.Info("agentd serving", "addr", m.listener.Addr().String(), "store", db.Kind(), "version", version,
		"providers", m.models.Providers(), "sandbox", sandboxName(sandboxes), "owner", m.runtime.Owner())
	return nil
}

// Addr is the address the server listens on (useful with port 0).
func (m *Main) Addr() string {
	if m.listener == nil {
		return ""
	}
	return m.listener.Addr().String()
}

// Close shuts down in the order that loses nothing: readiness turns 503 so
// load balancers stop sending new work, the runtime stops claiming and hands
// its chats back (their logs are durable; another replica, or this one after
// a restart, continues them), streams end, the HTTP server drains, and the
// store closes last. Safe to call twice, or after a failed Run.
func (m *Main) Close() error {
	m.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), m.Config.ShutdownGrace)
		defer cancel()
		var errs []error
		if m.server != nil {
			m.server.SetReady(false)
		}
		if m.runtime != nil {
			if err := m.runtime.Stop(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		if m.endStreams != nil {
			m.endStreams()
		}
		if m.http != nil {
			if err := m.http.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("http shutdown: %w", err))
			}
			if err := <-m.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs = append(errs, err)
			}
		} else if m.listener != nil {
			_ = m.listener.Close()
		}
		if m.reaper != nil {
			m.reaper.stop()
		}
		if m.models != nil {
			_ = m.models.Close()
		}
		if m.tools != nil {
			_ = m.tools.Close()
		}
		if m.sandbox != nil {
			_ = m.sandbox.Close()
		}
		if m.db != nil {
			if err := m.db.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close store: %w", err))
			}
		}
		m.closeErr = errors.Join(errs...)
	})
	return m.closeErr
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
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			n, err := mgr.Reap(ctx, func(id string) bool { return needed(ctx, id) })
			switch {
			case err != nil && ctx.Err() == nil:
				log.Error("reap sandboxes", "err", err)
			case n > 0:
				log.Info("reaped sandboxes of ended chats", "removed", n)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return r
}

// stop ends the reaper and waits for it; safe to call twice.
func (r *reaper) stop() {
	r.cancel()
	<-r.done
}
