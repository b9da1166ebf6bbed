// Package a2a serves saved teams as agents of the Agent2Agent protocol
// (A2A 1.0, JSON-RPC binding, as the official @a2a-js/sdk 1.3 client speaks
// it). It is a mapping, not an engine: a task is one run of a chat, its
// contextId the chat; sending a message creates the chat from the team,
// posts the chat's next run, or answers the input the chat waits for; the
// task's state, history and result are folded from the chat's log, and
// streams follow the log. Everything durable stays in the chat, so a task
// survives a replica's crash and is served by any replica.
//
// The package needs the chat service only through the Chats interface it
// declares, and knows nothing of routing or authentication: the HTTP
// layer resolves the tenant and calls Handler.ServeCard and ServeRPC.
package a2a

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/frontend"
	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/spec"
)

// Chats is what the A2A mapping needs of the chat service; *runtime.Runtime
// satisfies it.
type Chats interface {
	// Create creates a chat (here: from a saved team and a task).
	Create(ctx context.Context, p *chat.CreateParams) (*chat.Chat, bool, error)
	// Get returns a chat of the tenant, or chat.ErrNotFound.
	Get(ctx context.Context, tenant, id string) (*chat.Chat, error)
	// Events returns up to limit events of a chat with seq > after.
	Events(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Event, error)
	// Subscribe wakes the caller (coalesced) whenever the chat has new
	// events, on whichever replica they were written.
	Subscribe(chatID string) (<-chan runtime.Wake, func())
	// Cancel asks a chat's run to stop.
	Cancel(ctx context.Context, tenant, id string) (*chat.Chat, bool, error)
	// Input answers the chat's pending input request; key is an
	// Idempotency-Key ("" for none).
	Input(ctx context.Context, tenant, id, key string, in *chat.Input) (*chat.Chat, error)
	// SubmitRun posts the chat's next run (a /v1 runs request); key
	// is an Idempotency-Key ("" for none).
	SubmitRun(ctx context.Context, tenant, id, key string, req *spec.RunRequest) (*chat.Chat, int, error)
	// GetTeam returns a saved team (the latest version for 0).
	GetTeam(ctx context.Context, tenant, name string, version int) (*chat.Team, error)
}

// Defaults of Config.
const (
	DefaultMaxBodyBytes        int64 = 1 << 20
	DefaultMaxBlock                  = 10 * time.Minute
	DefaultHeartbeat                 = 15 * time.Second
	DefaultMaxHistory                = 1000
	maxMessageIDBytes                = 200
	maxParts                         = 100
	eventPage                        = 500
	protocolVersion                  = "1.0"
	protocolBindingJSONRPC           = "JSONRPC"
	bearerSchemeName                 = "bearer"
	defaultAgentDescription          = "An agentd team: a multi-agent group chat that takes a task and answers with the team's final message."
	contentTypeText                  = "text/plain"
	contentTypeJSON                  = "application/json"
	methodSendMessage                = "SendMessage"
	methodSendStreamingMessage       = "SendStreamingMessage"
	methodGetTask                    = "GetTask"
	methodCancelTask                 = "CancelTask"
	methodSubscribeToTask            = "SubscribeToTask"
)

// Config configures a Handler. The zero value is usable.
type Config struct {
	// MaxBodyBytes caps a request body (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// MaxBlock caps how long a blocking SendMessage waits for the run to
	// end or ask for input; then the task is answered as it stands
	// (default DefaultMaxBlock).
	MaxBlock time.Duration
	// Heartbeat is the interval of comment lines on idle streams (default
	// DefaultHeartbeat).
	Heartbeat time.Duration
	// MaxHistory caps the messages of a task's history in an answer
	// (default DefaultMaxHistory).
	MaxHistory int
	// AuthRequired puts the bearer scheme on the cards (API keys are on).
	AuthRequired bool
}

func (c Config) withDefaults() Config {
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.MaxBlock = cmp.Or(c.MaxBlock, DefaultMaxBlock)
	c.Heartbeat = cmp.Or(c.Heartbeat, DefaultHeartbeat)
	c.MaxHistory = cmp.Or(c.MaxHistory, DefaultMaxHistory)
	return c
}

// Validate reports every problem of the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("a2a: max body bytes must not be negative, got %d", c.MaxBodyBytes))
	}
	if c.MaxBlock < 0 {
		errs = append(errs, fmt.Errorf("a2a: max block must not be negative, got %s", c.MaxBlock))
	}
	if c.Heartbeat < 0 {
		errs = append(errs, fmt.Errorf("a2a: heartbeat must not be negative, got %s", c.Heartbeat))
	}
	if c.MaxHistory < 0 {
		errs = append(errs, fmt.Errorf("a2a: max history must not be negative, got %d", c.MaxHistory))
	}
	return errors.Join(errs...)
}

// Handler serves the A2A agents of saved teams.
type Handler struct {
	cfg     Config
	chats   Chats
	log     *slog.Logger
	metrics *metrics
}

// New returns a Handler; its metrics are registered on reg.
func New(cfg Config, chats Chats, logger *slog.Logger, reg prometheus.Registerer) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if chats == nil || reg == nil {
		return nil, errors.New("a2a: chats and a prometheus registerer are required")
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Handler{cfg: cfg.withDefaults(), chats: chats, log: cmp.Or(logger, slog.New(slog.DiscardHandler)), metrics: m}, nil
}

// metrics are the A2A mapping's own series; the HTTP layer counts the
// requests themselves.
type metrics struct {
	calls   *prometheus.CounterVec
	streams prometheus.Gauge
	cut     *prometheus.CounterVec
}

// Reasons of agentd_a2a_streams_cut_total.
const (
	cutShutdown = "shutdown"
	cutError    = "error"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentd_a2a_calls_total",
			Help: "A2A JSON-RPC calls, by method and outcome (ok, or the A2A error's name).",
		}, []string{"method", "outcome"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentd_a2a_streams_open",
			Help: "A2A task streams (SendStreamingMessage, SubscribeToTask) open now.",
		}),
		cut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentd_a2a_streams_cut_total",
			Help: "A2A task streams ended with an error before their task settled, by reason (shutdown: the replica stopped; error: the chat's log could not be read).",
		}, []string{"reason"}),
	}
	if err := frontend.Register(reg, "a2a", m.calls, m.streams, m.cut); err != nil {
		return nil, err
	}
	return m, nil
}
