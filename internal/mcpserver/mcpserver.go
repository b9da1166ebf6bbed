// Package mcpserver serves saved teams as tools of a Model Context
// Protocol server (Streamable HTTP, with the MCP Go SDK): one tool per
// saved team (run_<team>: a task in, the team's final message out, the
// chat's id in the structured content, a progress notification per
// message while it runs, and cancelling the call cancels the chat's run),
// and the tenant's chats as readable resources (agentd://chats/{id}).
//
// It is a mapping onto chats, not an engine: a call creates a chat from
// the team and follows its log. It needs the chat service only through
// the Chats interface it declares; the HTTP layer authenticates and hands
// each request over with its tenant. Each tenant has its own MCP server
// and sessions, so a session never crosses tenants.
package mcpserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/frontend"
	"github.com/agentd/agentd/internal/runtime"
)

// Chats is what the MCP server needs of the chat service; *runtime.Runtime
// satisfies it.
type Chats interface {
	// Create creates a chat (here: from a saved team and a task).
	Create(ctx context.Context, p *chat.CreateParams) (*chat.Chat, bool, error)
	// Get returns a chat of the tenant, or chat.ErrNotFound.
	Get(ctx context.Context, tenant, id string) (*chat.Chat, error)
	// List returns a page of the tenant's chats, newest first.
	List(ctx context.Context, p *chat.ListChatsParams) ([]*chat.Chat, string, error)
	// Events returns up to limit events of a chat with seq > after.
	Events(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Event, error)
	// Subscribe wakes the caller whenever the chat has new events.
	Subscribe(chatID string) (<-chan runtime.Wake, func())
	// Cancel asks a chat's run to stop.
	Cancel(ctx context.Context, tenant, id string) (*chat.Chat, bool, error)
	// ListTeams returns the latest version of each of the tenant's teams.
	ListTeams(ctx context.Context, p *chat.ListTeamsParams) ([]*chat.Team, string, error)
}

// Defaults and limits.
const (
	DefaultSessionTimeout = 30 * time.Minute
	DefaultPoll           = 15 * time.Second
	DefaultMaxBodyBytes   = 1 << 20
	// maxTeams caps the tools of a tenant: a tools/list is one answer.
	maxTeams = 1000
	// resourcePage is how many chats one resources/list page holds.
	resourcePage = 100
	eventPage    = 500
	// cancelTimeout bounds the cancel of a run whose call was cancelled
	// (the call's own context is gone by then).
	cancelTimeout = 10 * time.Second
)

// Config configures a Handler. The zero value is usable.
type Config struct {
	// SessionTimeout closes sessions idle this long (default 30 min).
	SessionTimeout time.Duration
	// Poll is how often a running call reads the chat's log even without
	// a wake-up (default 15 s).
	Poll time.Duration
	// MaxBodyBytes caps a request body (default 1 MiB).
	MaxBodyBytes int64
	// Version is the server version announced to clients.
	Version string
}

// Validate reports every problem of the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.SessionTimeout < 0 {
		errs = append(errs, fmt.Errorf("mcp: session timeout must not be negative, got %s", c.SessionTimeout))
	}
	if c.Poll < 0 {
		errs = append(errs, fmt.Errorf("mcp: poll must not be negative, got %s", c.Poll))
	}
	if c.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("mcp: max body bytes must not be negative, got %d", c.MaxBodyBytes))
	}
	return errors.Join(errs...)
}

// Handler serves /mcp for every tenant.
type Handler struct {
	cfg     Config
	chats   Chats
	log     *slog.Logger
	metrics *metrics

	mu      sync.Mutex
	tenants map[string]*tenantServer

	// ended is closed when the server shuts down: the tool calls in
	// flight answer at once (endCalls).
	ended   chan struct{}
	endOnce sync.Once
}

// New returns a Handler; its metrics are registered on reg.
func New(cfg Config, chats Chats, logger *slog.Logger, reg prometheus.Registerer) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if chats == nil || reg == nil {
		return nil, errors.New("mcp: chats and a prometheus registerer are required")
	}
	cfg.SessionTimeout = cmp.Or(cfg.SessionTimeout, DefaultSessionTimeout)
	cfg.Poll = cmp.Or(cfg.Poll, DefaultPoll)
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, DefaultMaxBodyBytes)
	cfg.Version = cmp.Or(cfg.Version, "dev")
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Handler{cfg: cfg, chats: chats, log: cmp.Or(logger, slog.New(slog.DiscardHandler)), metrics: m, tenants: map[string]*tenantServer{}, ended: make(chan struct{})}, nil
}

// ServeHTTP serves an MCP request of a tenant (POST, GET or DELETE /mcp).
//
// The SDK runs a tool call on its session, not on the POST that carries
// it, and ends that POST's event stream when the request's context ends,
// without the call's answer: the client would wait for an answer that
// never comes. So when the server shuts down (the request's context ends
// with runtime.ErrStopped) the calls in flight are told to answer at once
// (an error result: the run goes on), and the POST is kept open up to
// shutdownGrace for that answer to reach the client. A client that goes
// away ends the request at once, as before.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, tenant string) {
	ctx := r.Context()
	kept, release := context.WithCancel(context.WithoutCancel(ctx))
	defer release()
	stop := context.AfterFunc(ctx, func() {
		if !runtime.ServerEnded(ctx) {
			release()
			return
		}
		h.endCalls()
		if r.Method != http.MethodPost {
			release() // no call answers on it
			return
		}
		time.AfterFunc(shutdownGrace, release)
	})
	defer stop()
	h.tenant(tenant).http.ServeHTTP(w, r.WithContext(kept))
}

// shutdownGrace bounds how long a POST outlives the server's shutdown for
// the answers of its calls, which come as soon as the calls see it.
const shutdownGrace = 3 * time.Second

// endCalls tells the tool calls in flight that the server shuts down.
func (h *Handler) endCalls() { h.endOnce.Do(func() { close(h.ended) }) }

// TeamsChanged brings the tenant's tools in line with its saved teams,
// which notifies its sessions (tools/list_changed) when they differ. The
// HTTP layer calls it after a team is saved here; the sessions on other
// replicas hear of it through TeamSaved.
func (h *Handler) TeamsChanged(ctx context.Context, tenant string) {
	h.mu.Lock()
	ts := h.tenants[tenant]
	h.mu.Unlock()
	if ts == nil {
		return // no session has asked yet: the first one lists the teams
	}
	if err := ts.sync(ctx); err != nil {
		h.log.Error("mcp: sync tools with saved teams", "tenant", tenant, "error", err)
	}
}

// TeamSaved is TeamsChanged for a save that the store's notifications
// tell of, made on this replica or another (runtime.OnTeamsChanged); a
// tenant of "" stands for every tenant. It does not wait: it runs on the
// store's listener.
func (h *Handler) TeamSaved(tenant string) {
	h.mu.Lock()
	var tss []*tenantServer
	if tenant == "" {
		for _, ts := range h.tenants {
			tss = append(tss, ts)
		}
	} else if ts := h.tenants[tenant]; ts != nil {
		tss = append(tss, ts)
	}
	h.mu.Unlock()
	for _, ts := range tss {
		ts.syncSoon()
	}
}

// tenant returns the tenant's MCP server, making it on first use.
func (h *Handler) tenant(tenant string) *tenantServer {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ts := h.tenants[tenant]; ts != nil {
		return ts
	}
	ts := newTenantServer(h, tenant)
	h.tenants[tenant] = ts
	return ts
}

// metrics are the MCP server's own series.
type metrics struct {
	calls    *prometheus.CounterVec
	sessions prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentd_mcp_tool_calls_total",
			Help: "MCP team tool calls, by outcome (completed, failed, cancelled, awaiting_input, invalid, error, client_cancelled, server_shutting_down).",
		}, []string{"outcome"}),
		sessions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentd_mcp_sessions_total",
			Help: "MCP sessions opened.",
		}),
	}
	if err := frontend.Register(reg, "mcp", m.calls, m.sessions); err != nil {
		return nil, err
	}
	return m, nil
}
