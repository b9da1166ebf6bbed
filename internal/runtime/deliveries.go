package runtime

import (
	"context"

	"github.com/agentd/agentd/internal/chat"
)

// The record of a chat's webhook deliveries (docs/backend.md).

// Deliveries returns the webhook deliveries of a tenant's chat.
func (r *Runtime) Deliveries(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.DeliveryRecord, error) {
	if _, err := r.store.GetProgress(ctx, tenant, id); err != nil {
		return nil, err
	}
	return r.store.ListDeliveries(ctx, &chat.ListDeliveriesParams{ChatID: id, After: after, Limit: limit})
}
