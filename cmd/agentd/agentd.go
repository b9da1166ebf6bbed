package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/llm"
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
	m.tools, err = tool.New(tool.Config{HTTPAllowHosts: splitList(cfg.ToolAllowHosts), AllowPrivate: cfg.ToolAllowPrivate,
		Logger: m.Logger, Registerer: reg})
	if err != nil {
		return err
	}
	m.runtime, err = chat.NewRuntime(chat.RuntimeConfig{
		Store: db, Models: m.models, Providers: providers, Tools: m.tools, Logger: m.Logger, Registerer: reg,
		MaxActiveChats: cfg.MaxActiveChats, LeaseDuration: cfg.LeaseTTL,
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
		"providers", m.models.Providers(), "sandbox", "none", "owner", m.runtime.Owner())
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
		if m.models != nil {
			_ = m.models.Close()
		}
		if m.tools != nil {
			_ = m.tools.Close()
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
