package runtime

import (
	"context"

	"github.com/agentd/agentd/internal/chat"
)

// Progress returns how far a chat of the tenant has got (status, last seq,
// whether an input answer waits), read without the rest of the chat: what
// long polls check on every wake-up.
func (r *Runtime) Progress(ctx context.Context, tenant, id string) (chat.Progress, error) {
	return r.store.GetProgress(ctx, tenant, id)
}
