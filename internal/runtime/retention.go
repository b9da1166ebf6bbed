package runtime

import (
	"context"
	"time"

	"github.com/agentd/agentd/internal/chat"
)

// Erasure of ended chats, by request and by retention (docs/backend.md).

// Erase removes a chat that has ended, with everything the store holds of
// it, and leaves a tombstone: from then on its id answers ErrNotFound. A
// chat that has not ended is ErrChatActive (cancel it first). Streams and
// long polls of it, on this replica and (through the store's
// notifications) on others, find it gone and end.
func (r *Runtime) Erase(ctx context.Context, tenant, id string) error {
	if err := r.store.EraseChat(ctx, &chat.EraseChatParams{Tenant: tenant, ChatID: id, Now: r.now()}); err != nil {
		return err
	}
	r.erased(id, "request")
	r.log.Info("chat erased", "chat_id", id, "tenant", tenant, "cause", "request")
	return nil
}

// erased tells the local subscribers of a chat that it is gone.
func (r *Runtime) erased(id, cause string) {
	r.appMetrics.erased.WithLabelValues(cause).Inc()
	r.broker.erased(id)
}

// RetentionConfig configures the erasure of chats that ended long ago.
type RetentionConfig struct {
	// After: chats that ended longer ago than this are erased; 0: never.
	After time.Duration
	// Interval is the time between passes (default 1m, or half the
	// retention when that is shorter, at least 1s).
	Interval time.Duration
	// Batch is how many chats one store call erases (default 50): small
	// transactions, each holding few row locks for little time.
	Batch int
	// Pause is the time between the batches of one pass (default 100ms),
	// so that a large backlog is worked off without crowding out live
	// traffic.
	Pause time.Duration
}

func (c RetentionConfig) withDefaults() RetentionConfig {
	if c.Interval <= 0 {
		// A short retention is looked after as often as it needs.
		c.Interval = min(time.Minute, max(c.After/2, time.Second))
	}
	if c.Batch <= 0 {
		c.Batch = 50
	}
	if c.Pause <= 0 {
		c.Pause = 100 * time.Millisecond
	}
	return c
}

// retentionLoop erases expired chats, one pass per interval, until ctx
// ends. Every replica runs it; the store lets one at a time erase.
func (r *Runtime) retentionLoop(ctx context.Context) {
	t := time.NewTicker(r.retention.Interval)
	defer t.Stop()
	for {
		r.retentionPass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// retentionPass erases, batch by batch, the chats that ended before now
// minus the retention.
func (r *Runtime) retentionPass(ctx context.Context) {
	before := r.now().Add(-r.retention.After)
	total := 0
	for ctx.Err() == nil {
		ids, err := r.store.EraseEnded(ctx, &chat.EraseEndedParams{EndedBefore: before, Limit: r.retention.Batch, Now: r.now()})
		if err != nil {
			if ctx.Err() == nil {
				r.appMetrics.errors.WithLabelValues("erase").Inc()
				r.log.Error("retention: erase ended chats", "err", err)
			}
			return
		}
		for _, id := range ids {
			r.erased(id, "retention")
			r.log.Debug("chat erased", "chat_id", id, "cause", "retention")
		}
		total += len(ids)
		if len(ids) < r.retention.Batch {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(r.retention.Pause):
		}
	}
	if total > 0 {
		r.log.Info("retention: erased chats that ended before the retention", "erased", total, "ended_before", before, "retention", r.retention.After)
	}
}
