// Package openaiapi serves saved teams through the OpenAI API's own shapes
// (docs/openai.md): the models list, chat completions and the Responses
// API under /openai/v1, so that any OpenAI SDK or tool pointed at agentd
// runs a team. It is a mapping onto chats, runs and events, never a second
// engine: a chat completion is a new chat from the saved team, a Responses
// conversation is one chat and each response one of its runs.
//
// It depends on the runtime only through the Runtime interface declared
// here; routing, keys, tenants and rate limits are internal/server's.
package openaiapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/frontend"
	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/spec"
)

// Runtime is what the OpenAI API needs of the chat runtime; *runtime.Runtime
// satisfies it.
type Runtime interface {
	// Create creates a chat from a request body (here always a team_ref);
	// created is false when the Idempotency-Key named an existing chat.
	Create(ctx context.Context, p *chat.CreateParams) (c *chat.Chat, created bool, err error)
	// Get returns a chat of the tenant, or chat.ErrNotFound.
	Get(ctx context.Context, tenant, id string) (*chat.Chat, error)
	// Events returns up to limit events of a chat with seq > after.
	Events(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Event, error)
	// Stream subscribes to a chat's commits and to the deltas of the
	// replies its models stream.
	Stream(chatID string) (<-chan runtime.Wake, *runtime.DeltaQueue, func())
	// SubmitRun posts the next run of a chat and returns its number.
	SubmitRun(ctx context.Context, tenant, id, key string, req *spec.RunRequest) (*chat.Chat, int, error)
	// GetTeam returns a version of a saved team (the latest for 0), or
	// chat.ErrTeamNotFound.
	GetTeam(ctx context.Context, tenant, name string, version int) (*chat.Team, error)
	// ListTeams returns a page of the latest version of each saved team.
	ListTeams(ctx context.Context, p *chat.ListTeamsParams) ([]*chat.Team, string, error)
}

// Defaults of Config.
const (
	DefaultRunWait   = 10 * time.Minute
	DefaultHeartbeat = 15 * time.Second
	// DefaultMaxBodyBytes caps request bodies, as on /v1.
	DefaultMaxBodyBytes int64 = 1 << 20
)

// Config configures a Handler: the settings of a front-end that follows
// runs, with this package's defaults. A request follows its run for
// RunWait, then answers that the run goes on without it; the default, ten
// minutes, is the OpenAI SDKs' own request timeout. Fail answers a request
// with an error that is not an *Error (a runtime error): the server maps
// it to a status and writes it in this API's error shape, logging what
// needs logging.
type Config = frontend.Settings

// Handler serves the OpenAI API's routes. Create it with New.
type Handler struct {
	cfg     Config
	rt      Runtime
	log     *slog.Logger
	outcome *prometheus.CounterVec
	now     func() time.Time
}

// New returns a Handler; its metrics are registered on reg.
func New(cfg Config, rt Runtime, logger *slog.Logger, reg prometheus.Registerer) (*Handler, error) {
	if rt == nil || reg == nil || cfg.Fail == nil {
		return nil, errors.New("openai api: runtime, registerer and Fail are required")
	}
	cfg = cfg.WithDefaults(Config{MaxBodyBytes: DefaultMaxBodyBytes, RunWait: DefaultRunWait, Heartbeat: DefaultHeartbeat})
	outcome := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentd_openai_runs_total",
		Help: "Runs answered through the OpenAI-compatible API, by endpoint and how the answer ended (completed, input_required, failed, cancelled, timeout, interrupted).",
	}, []string{"endpoint", "outcome"})
	if err := frontend.Register(reg, "openai api", outcome); err != nil {
		return nil, err
	}
	return &Handler{cfg: cfg, rt: rt, log: cmp.Or(logger, slog.New(slog.DiscardHandler)), outcome: outcome, now: time.Now}, nil
}

// Error is an error in the OpenAI API's shape:
// {"error": {"message", "type", "param", "code"}}.
type Error struct {
	Status  int
	Message string
	// Type is the API's error type: invalid_request_error, server_error…
	Type  string
	Param string
	Code  string
	// NoRetry asks the SDKs not to retry (x-should-retry: false): the
	// request did something (a chat was created, a run posted), and a
	// retry would do it again.
	NoRetry bool
}

// Error describes the error for logs.
func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// NewError returns an Error of the type the API uses for status.
func NewError(status int, code, param, message string) *Error {
	return &Error{Status: status, Type: typeFor(status), Code: code, Param: param, Message: message}
}

// typeFor is the API's error type of an HTTP status.
func typeFor(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

// errorBody is the wire shape of an Error; param and code are null when
// empty, as the API sends them.
type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *Error) body() errorBody {
	o := errorObject{Message: e.Message, Type: cmp.Or(e.Type, typeFor(e.Status))}
	if e.Param != "" {
		o.Param = &e.Param
	}
	if e.Code != "" {
		o.Code = &e.Code
	}
	return errorBody{Error: o}
}

// WriteError writes e as a JSON response.
func WriteError(w http.ResponseWriter, e *Error) {
	b, _ := json.Marshal(e.body()) // strings only: cannot fail
	w.Header().Set("Content-Type", "application/json")
	if e.NoRetry {
		w.Header().Set("X-Should-Retry", "false")
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(append(b, '\n'))
}

// fail answers a request with err: an *Error as it is, anything else
// through Config.Fail.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if errors.As(err, &e) {
		if e.Status >= 500 {
			h.log.Warn("openai api: request failed", "path", r.URL.Path, "error", err)
		}
		WriteError(w, e)
		return
	}
	h.cfg.Fail(w, r, err)
}

// writeJSON writes v as a 200 JSON response.
func (h *Handler) writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		h.fail(w, r, fmt.Errorf("encode %T: %w", v, err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(b, '\n'))
}
