// Package server is agentd's HTTP layer: the chi router, the handlers of the
// /v1 API, server-sent event streams, bearer-key authentication, the mapping
// of errors to RFC 9457 problem+json, and HTTP metrics.
//
// It depends on the chat domain only through the Chats interface declared
// here, and it is the only package that imports chi and promhttp.
package server

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/spec"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/a2a"
	"github.com/agentd/agentd/internal/agui"
	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/component"
	"github.com/agentd/agentd/internal/console"
	"github.com/agentd/agentd/internal/frontend"
	"github.com/agentd/agentd/internal/mcpserver"
	"github.com/agentd/agentd/internal/openaiapi"
)

// Chats is what the HTTP layer needs from the chat runtime. It is declared by
// its consumer so that handlers can be tested against a fake and so that the
// server never depends on how chats are stored or run; *runtime.Runtime
// satisfies it.
type Chats interface {
	// Create validates a raw spec and creates a chat; created is false when
	// the Idempotency-Key named an existing chat with the same body.
	Create(ctx context.Context, p *chat.CreateParams) (c *chat.Chat, created bool, err error)
	// Get returns a chat of the tenant, or chat.ErrNotFound.
	Get(ctx context.Context, tenant, id string) (*chat.Chat, error)
	// Progress returns how far a chat of the tenant has got, without the
	// rest of it: what a waiter checks after every wake-up.
	Progress(ctx context.Context, tenant, id string) (chat.Progress, error)
	// List returns a page of the tenant's chats, newest first, and the next cursor.
	List(ctx context.Context, p *chat.ListChatsParams) ([]*chat.Chat, string, error)
	// Events returns up to limit events of a chat with seq > after, in seq order.
	Events(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Event, error)
	// Subscribe returns a channel that receives a (coalesced) value whenever
	// new events of the chat are committed, and a function ending the subscription.
	Subscribe(chatID string) (<-chan runtime.Wake, func())
	// Follow subscribes as Subscribe does and also returns where the chat
	// stands if this replica runs it (Wake.Known), so that a waiter needs
	// no read of the store to start from.
	Follow(chatID string) (runtime.Wake, <-chan runtime.Wake, func())
	// Stream subscribes an event stream: wake-ups as Subscribe gives them,
	// and the fragments of replies a model is streaming for the chat
	// (ephemeral message.delta events) on any replica, queued; and a
	// function ending the subscription.
	Stream(chatID string) (<-chan runtime.Wake, *runtime.DeltaQueue, func())
	// Cancel asks a chat to stop; changed is false when it was already terminal.
	Cancel(ctx context.Context, tenant, id string) (c *chat.Chat, changed bool, err error)
	// The four requests below take the request's Idempotency-Key ("" if
	// none): a repeat of a key gets the first answer (the chat as that
	// request left it), a key used for another request is chat.ErrConflict.

	// Input answers a chat's pending input request and returns the chat as
	// the answer left it, or returns chat.ErrNoPendingInput.
	Input(ctx context.Context, tenant, id, key string, in *chat.Input) (*chat.Chat, error)
	// SubmitRun posts the next run of a chat (its body decoded by
	// spec.DecodeRunRequest) and returns the chat and the run's number; a
	// busy chat whose request says reject is a *chat.BusyError.
	SubmitRun(ctx context.Context, tenant, id, key string, req *spec.RunRequest) (*chat.Chat, int, error)
	// RunOfKey returns the run a keyed SubmitRun posted, whatever its
	// request (the AG-UI front-end's runs are named by their id alone).
	RunOfKey(ctx context.Context, tenant, id, key string) (*chat.Chat, int, error)
	// StopRun asks the active run to end after its current turn; changed
	// is false when no run was active.
	StopRun(ctx context.Context, tenant, id, key string) (c *chat.Chat, changed bool, err error)
	// Fork creates a chat from a copy of another's log (its body decoded
	// by spec.DecodeForkRequest).
	Fork(ctx context.Context, tenant, id, key string, req *spec.ForkRequest) (*chat.Chat, error)
	// CheckCreate validates a create request as Create does and returns
	// the spec the chat would be created from, creating nothing.
	CheckCreate(ctx context.Context, tenant string, body []byte) ([]byte, error)
	// Ready reports whether the runtime accepts work.
	Ready() bool
	// Backend serves metadata changes, erasure, deliveries and saved teams.
	Backend
}

// Defaults of Config.
const (
	DefaultMaxBodyBytes int64 = 1 << 20
	DefaultHeartbeat          = 15 * time.Second
	DefaultMaxWait            = 60 * time.Second
)

// DefaultTenant is the tenant of every request when no API keys are configured.
const DefaultTenant = "default"

// Config configures a Server. The zero value is usable: every field has a default.
type Config struct {
	// MaxBodyBytes caps request bodies; larger bodies are answered 413.
	// Default DefaultMaxBodyBytes (1 MiB).
	MaxBodyBytes int64
	// APIKeys maps a bearer key to the tenant it acts for. Empty means no
	// authentication: every request acts for DefaultTenant (the command only
	// allows that on loopback, see docs/configuration.md).
	APIKeys map[string]string
	// Heartbeat is the interval of the comment lines that keep idle SSE
	// streams alive through proxies. Default DefaultHeartbeat (15 s).
	Heartbeat time.Duration
	// MaxWait caps the wait_s parameter of create and long-poll requests;
	// larger values are clamped. Default DefaultMaxWait (60 s).
	MaxWait time.Duration
	// Ready, if set, is asked by /readyz besides Chats.Ready: it returns why
	// the replica cannot take work (the database is unreachable), or nil.
	Ready func() error
	// StreamRetry is the reconnection delay SSE streams advise clients
	// (the retry: field). Default DefaultStreamRetry.
	StreamRetry time.Duration
	// TracerProvider, when set, traces every request (continuing a
	// caller's W3C traceparent). Nil: no request spans.
	TracerProvider trace.TracerProvider
	// ModelEndpoints maps the model clients of AgentChat team files onto
	// the server's model endpoints, and describes them for exports; nil:
	// clients keep their kind and name no endpoint.
	ModelEndpoints component.Endpoints
	// Protection from browsers and from clients that take too much; see
	// guard.go and ratelimit.go.
	Guard
}

// DefaultStreamRetry is the reconnection delay SSE streams advise.
const DefaultStreamRetry = 2 * time.Second

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.Heartbeat = cmp.Or(c.Heartbeat, DefaultHeartbeat)
	c.MaxWait = cmp.Or(c.MaxWait, DefaultMaxWait)
	c.StreamRetry = cmp.Or(c.StreamRetry, DefaultStreamRetry)
	c.Guard = c.Guard.withDefaults()
	return c
}

// Validate reports every problem of the configuration at once.
func (c Config) Validate() error {
	var errs []error
	if c.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("max body bytes must not be negative, got %d", c.MaxBodyBytes))
	}
	if c.Heartbeat < 0 {
		errs = append(errs, fmt.Errorf("heartbeat must not be negative, got %s", c.Heartbeat))
	}
	if c.MaxWait < 0 {
		errs = append(errs, fmt.Errorf("max wait must not be negative, got %s", c.MaxWait))
	}
	errs = append(errs, c.Guard.validate()...)
	for key, tenant := range c.APIKeys {
		// The key itself is a secret: never put it in an error message.
		switch {
		case key == "":
			errs = append(errs, errors.New("an API key is empty"))
		case strings.TrimSpace(key) != key:
			// Presented keys are trimmed, so such a key could never match.
			errs = append(errs, errors.New("an API key has leading or trailing white space"))
		}
		if tenant == "" {
			errs = append(errs, errors.New("an API key maps to an empty tenant"))
		}
	}
	return errors.Join(errs...)
}

// Server is agentd's HTTP handler. Create it with New and serve Handler().
type Server struct {
	responder
	cfg      Config
	chats    Chats
	metrics  *httpMetrics
	gatherer prometheus.Gatherer
	// keys maps the SHA-256 of each API key to its tenant, see authenticate.
	keys map[[sha256.Size]byte]string
	// notReady is set by SetReady(false); the zero value means ready, so a
	// new Server serves /readyz 200 as soon as its Chats is ready.
	notReady atomic.Bool
	// readinessPolled is set by the first /readyz request: something (a
	// load balancer, Kubernetes) routes by it, and shutdown must give it
	// time to see the 503.
	readinessPolled atomic.Bool
	router          chi.Router
	allow           allowTable
	limits          *limits
	console         *console.Console
	a2a             *a2a.Handler
	mcp             *mcpserver.Handler
	reg             prometheus.Registerer
	openai          *openaiapi.Handler
	agui            *agui.Handler
}

// New returns a Server that serves chats. Its HTTP metrics are registered on
// reg, and GET /metrics exposes what gatherer gathers (usually the same
// registry, which also holds the runtime's and the Go collector's metrics).
func New(cfg Config, chats Chats, logger *slog.Logger, reg prometheus.Registerer, gatherer prometheus.Gatherer) (*Server, error) {
	cfg = cfg.withDefaults()
	errs := []error{cfg.Validate()}
	if chats == nil {
		errs = append(errs, errors.New("chats is required"))
	}
	if reg == nil {
		errs = append(errs, errors.New("prometheus registerer is required"))
	}
	if gatherer == nil {
		errs = append(errs, errors.New("prometheus gatherer is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("server config: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	metrics, err := newHTTPMetrics(reg)
	if err != nil {
		return nil, err
	}
	s := &Server{responder: responder{logger}, cfg: cfg, chats: chats, metrics: metrics, gatherer: gatherer, limits: newLimits(cfg), reg: reg}
	if s.a2a, err = newA2A(cfg, chats, s); err != nil {
		return nil, err
	}
	if s.mcp, err = mcpserver.New(mcpserver.Config{MaxBodyBytes: cfg.MaxBodyBytes}, chats, logger, reg); err != nil {
		return nil, err
	}
	// A team saved on another replica changes the MCP tools here too.
	if n, ok := chats.(interface{ OnTeamsChanged(func(tenant string)) }); ok {
		n.OnTeamsChanged(s.mcp.TeamSaved)
	}
	if len(cfg.APIKeys) > 0 {
		s.keys = make(map[[sha256.Size]byte]string, len(cfg.APIKeys))
		for key, tenant := range cfg.APIKeys {
			s.keys[sha256.Sum256([]byte(key))] = tenant
		}
	}
	if s.console, err = newConsole(); err != nil {
		return nil, err
	}
	// RunWait is left zero: each front-end has its own default.
	fe := frontend.Settings{MaxBodyBytes: cfg.MaxBodyBytes, Heartbeat: cfg.Heartbeat, Fail: s.writeError}
	if s.openai, err = openaiapi.New(fe, chats, logger, reg); err != nil {
		return nil, err
	}
	if s.agui, err = agui.New(fe, chats, logger, reg); err != nil {
		return nil, err
	}
	s.router = s.routes()
	if s.allow, err = newAllowTable(s.router); err != nil {
		return nil, err
	}
	return s, nil
}

// Handler returns the HTTP handler serving every route of api/openapi.yaml.
func (s *Server) Handler() http.Handler { return s.router }

// SetReady sets whether /readyz reports ready. The command sets it to false
// first thing on SIGTERM, so the load balancer stops sending new requests
// while running requests and streams finish (docs/operations.md).
func (s *Server) SetReady(ready bool) { s.notReady.Store(!ready) }

// ReadinessPolled reports whether /readyz has been asked since the server
// started. When it has not, no load balancer routes by it and the drain
// delay of a shutdown would only keep a local run (Ctrl-C) waiting.
func (s *Server) ReadinessPolled() bool { return s.readinessPolled.Load() }

// routes builds the router. Middleware order matters: the request id comes
// first so every log line and problem can name it; observe wraps recoverer so
// that a panic is logged and counted as the 500 it is turned into.
func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(s.requestID, s.observe)
	if s.cfg.TracerProvider != nil {
		r.Use(s.traced)
	}
	r.Use(s.recoverer, s.guard, s.options)
	// HEAD is served wherever GET is (RFC 9110 §9.3.2), by the GET handler;
	// net/http drops the body.
	r.Use(middleware.GetHead)
	r.NotFound(s.notFound)
	r.MethodNotAllowed(s.methodNotAllowed)

	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Method(http.MethodGet, "/metrics", s.metricsAuth(promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{
		ErrorLog: promLogger{s.logger},
		// A collector that cannot reach the database (agentd_chats) must
		// not take every other series down with it: during an outage is
		// when the metrics matter most. Its series are left out and the
		// error is logged; agentd_store_up says why.
		ErrorHandling: promhttp.ContinueOnError,
	})))
	r.Get("/openapi.yaml", s.openAPI)
	s.consoleRoutes(r)

	r.Route("/v1", func(r chi.Router) {
		r.Use(s.limit, s.authenticate)
		r.Mount("/chats", (&chatsResource{responder: s.responder, cfg: s.cfg, chats: s.chats, metrics: s.metrics}).Routes())
		r.Mount("/teams", (&teamsResource{responder: s.responder, cfg: s.cfg, chats: s.chats, saved: s.mcp.TeamsChanged}).Routes())
	})
	s.agentRoutes(r)
	s.openAIRoutes(r)
	s.aguiRoutes(r)
	return r
}

// healthz is liveness: the process serves HTTP. It checks nothing else, so
// that a slow database never gets a healthy replica restarted.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, r, http.StatusOK, statusResponse{Status: "ok"})
}

// readyz is readiness: 503 while shutting down or while the runtime does not
// accept work, so the load balancer sends requests elsewhere.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	s.readinessPolled.Store(true)
	if s.notReady.Load() || !s.chats.Ready() {
		s.writeError(w, r, errNotReady)
		return
	}
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	s.writeJSON(w, r, http.StatusOK, statusResponse{Status: "ready"})
}

// openAPI serves the contract the server was built with: as
// application/yaml, the media type RFC 9512 registers for YAML, to tools;
// as text/plain to a browser's navigation (its Accept names text/html),
// because browsers save application/yaml (and Firefox text/yaml) as a
// download where a person opening the link wants to read it. nosniff keeps
// the text from being taken for anything else.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", openAPIType(r.Header.Values("Accept")))
	h.Set("Content-Disposition", `inline; filename="openapi.yaml"`)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Add("Vary", "Accept")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(api.OpenAPI)
}

// openAPIType is the Content-Type of /openapi.yaml for a request's Accept
// headers: text/plain for a browser page load, which asks for text/html
// first, application/yaml for everything else.
func openAPIType(accept []string) string {
	for _, a := range accept {
		for part := range strings.SplitSeq(a, ",") {
			mt, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(mt), "text/html") {
				return "text/plain; charset=utf-8"
			}
		}
	}
	return "application/yaml"
}

// notFound answers requests for which no route exists.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	markUnmatched(r.Context())
	s.writeError(w, r, &requestError{status: http.StatusNotFound, kind: kindNotFound,
		detail: fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)})
}

// methodNotAllowed answers requests whose path exists but not for their
// method, with the Allow header RFC 9110 requires for a 405.
func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	markUnmatched(r.Context())
	if allowed := s.allow.methods(r.URL.Path); len(allowed) > 0 {
		w.Header().Set("Allow", allowed)
	}
	s.writeError(w, r, &requestError{status: http.StatusMethodNotAllowed, kind: kindMethodNotAllowed,
		detail: fmt.Sprintf("method %s is not allowed for %s", r.Method, r.URL.Path)})
}

// statusResponse is the body of /healthz and /readyz.
type statusResponse struct {
	Status string `json:"status"`
}

// promLogger routes promhttp's error log into slog.
type promLogger struct{ logger *slog.Logger }

// Println logs an error promhttp met while gathering or writing metrics.
func (l promLogger) Println(v ...any) {
	l.logger.Error("serve metrics", "error", fmt.Sprint(v...))
}
