// Package agui serves saved teams over AG-UI, the agent-user interaction
// protocol web front-ends speak (docs/ag-ui.md): POST /ag-ui/{team} takes
// a RunAgentInput and answers with an SSE stream of AG-UI events. It is a
// mapping onto chats, runs and events, never a second engine: a thread
// is a chat made from the saved team, each POST one of its runs, and a
// run that waits for input ends with an AG-UI interrupt that the next
// run's resume answers.
//
// It depends on the runtime only through the Runtime interface declared
// here; routing, keys, tenants and rate limits are internal/server's.
package agui

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/frontend"
	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/spec"
)

// Runtime is what AG-UI needs of the chat runtime; *runtime.Runtime
// satisfies it.
type Runtime interface {
	// Create creates a chat from a request body (here always a team_ref);
	// created is false when the Idempotency-Key named an existing chat.
	Create(ctx context.Context, p *chat.CreateParams) (c *chat.Chat, created bool, err error)
	// Get returns a chat of the tenant, or chat.ErrNotFound.
	Get(ctx context.Context, tenant, id string) (*chat.Chat, error)
	// List returns a page of the tenant's chats (here: a thread's).
	List(ctx context.Context, p *chat.ListChatsParams) ([]*chat.Chat, string, error)
	// Events returns up to limit events of a chat with seq > after.
	Events(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Event, error)
	// Stream subscribes to a chat's commits and to the deltas of the
	// replies its models stream.
	Stream(chatID string) (<-chan runtime.Wake, *runtime.DeltaQueue, func())
	// SubmitRun posts the next run of a chat and returns its number.
	SubmitRun(ctx context.Context, tenant, id, key string, req *spec.RunRequest) (*chat.Chat, int, error)
	// RunOfKey returns the run a keyed SubmitRun posted, as that post
	// left the chat, whatever its request (nil for none).
	RunOfKey(ctx context.Context, tenant, id, key string) (*chat.Chat, int, error)
	// Input answers the chat's pending input request.
	Input(ctx context.Context, tenant, id, key string, in *chat.Input) (*chat.Chat, error)
	// GetTeam returns a version of a saved team (the latest for 0), or
	// chat.ErrTeamNotFound.
	GetTeam(ctx context.Context, tenant, name string, version int) (*chat.Team, error)
}

// Defaults of Config.
const (
	DefaultRunWait   = 30 * time.Minute
	DefaultHeartbeat = 15 * time.Second
	// DefaultMaxBodyBytes caps request bodies, as on /v1.
	DefaultMaxBodyBytes int64 = 1 << 20
)

// Config configures a Handler: the settings of a front-end that follows
// runs, with this package's defaults. A stream follows its run for RunWait,
// then ends with an error saying the run goes on without it. Fail answers
// a request that failed before its stream began (a bad body, an unknown
// team): the server writes it as a problem, as on /v1.
type Config = frontend.Settings

// Handler serves POST /ag-ui/{team}. Create it with New.
type Handler struct {
	cfg     Config
	rt      Runtime
	log     *slog.Logger
	outcome *prometheus.CounterVec
}

// New returns a Handler; its metrics are registered on reg.
func New(cfg Config, rt Runtime, logger *slog.Logger, reg prometheus.Registerer) (*Handler, error) {
	if rt == nil || reg == nil || cfg.Fail == nil {
		return nil, errors.New("ag-ui: runtime, registerer and Fail are required")
	}
	cfg = cfg.WithDefaults(Config{MaxBodyBytes: DefaultMaxBodyBytes, RunWait: DefaultRunWait, Heartbeat: DefaultHeartbeat})
	outcome := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentd_agui_runs_total",
		Help: "AG-UI runs by how their stream ended (success, interrupt, cancelled, error, timeout, interrupted).",
	}, []string{"outcome"})
	if err := frontend.Register(reg, "ag-ui", outcome); err != nil {
		return nil, err
	}
	return &Handler{cfg: cfg, rt: rt, log: cmp.Or(logger, slog.New(slog.DiscardHandler)), outcome: outcome}, nil
}
