package chat

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RuntimeConfig configures a Runtime.
type RuntimeConfig struct {
	Store  Store
	Models ModelClient
	// Providers are the model providers a spec may name besides "replay".
	Providers  []string
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Now        func() time.Time
	// Owner identifies this replica in leases.
	Owner          string
	MaxActiveChats int
	MaxRoundLimit  int
	LeaseDuration  time.Duration
}

// Runtime runs chats: it validates and creates them, claims runnable chats
// from the store and runs one worker goroutine per claimed chat.
type Runtime struct {
	cfg RuntimeConfig
}

// NewRuntime returns a Runtime; call Start to begin running chats.
func NewRuntime(cfg RuntimeConfig) (*Runtime, error) { return &Runtime{cfg: cfg}, nil }

// Start begins claiming and running chats.
func (r *Runtime) Start(ctx context.Context) error { return errors.New("not implemented") }

// Stop stops claiming, cuts running turns and hands the chats back.
func (r *Runtime) Stop(ctx context.Context) error { return nil }

// Create validates a spec and creates a chat (or returns the chat an
// Idempotency-Key already names, with created=false).
func (r *Runtime) Create(ctx context.Context, p *CreateParams) (*Chat, bool, error) {
	return nil, false, errors.New("not implemented")
}

// Get returns a chat of the tenant.
func (r *Runtime) Get(ctx context.Context, tenant, id string) (*Chat, error) {
	return r.cfg.Store.GetChat(ctx, tenant, id)
}

// List returns a page of chats, newest first.
func (r *Runtime) List(ctx context.Context, p *ListChatsParams) ([]*Chat, string, error) {
	return r.cfg.Store.ListChats(ctx, p)
}

// Events returns up to limit events of a tenant's chat after seq.
func (r *Runtime) Events(ctx context.Context, tenant, id string, after int64, limit int) ([]Event, error) {
	return nil, errors.New("not implemented")
}

// Subscribe returns a channel that receives a value (coalesced) whenever new
// events of the chat are committed, and a function that ends the subscription.
func (r *Runtime) Subscribe(chatID string) (<-chan struct{}, func()) {
	return nil, func() {}
}

// Cancel asks a chat to stop. changed is false when the chat was already terminal.
func (r *Runtime) Cancel(ctx context.Context, tenant, id string) (*Chat, bool, error) {
	return nil, false, errors.New("not implemented")
}

// Input answers a chat's pending input request.
func (r *Runtime) Input(ctx context.Context, tenant, id string, in *Input) error {
	return ErrNoPendingInput
}

// Ready reports whether the runtime accepts work (false while stopping).
func (r *Runtime) Ready() bool { return true }
