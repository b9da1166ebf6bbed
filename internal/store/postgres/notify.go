package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/internal/chat"
)

// Notification channels. Their payload is a chat id.
const (
	channelAppended = "agentd_appended"
	channelCancel   = "agentd_cancel"
)

var _ chat.Notifier = (*Store)(nil)

// Listen implements chat.Notifier with LISTEN on a dedicated connection (a
// pooled one would be handed to others between waits). It reconnects with
// backoff when the connection drops and then calls h.Reconnected, since
// notifications sent meanwhile are lost. It returns when ctx ends.
func (s *Store) Listen(ctx context.Context, h chat.NotifyHandler) error {
	backoff := 100 * time.Millisecond
	for first := true; ; first = false {
		err := s.listenOnce(ctx, h, !first)
		if ctx.Err() != nil {
			return nil
		}
		s.log.Warn("notification listener lost its connection; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (s *Store) listenOnce(ctx context.Context, h chat.NotifyHandler, reconnected bool) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+channelAppended+"; LISTEN "+channelCancel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if reconnected && h.Reconnected != nil {
		h.Reconnected()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("wait for notification: %w", err)
		}
		switch n.Channel {
		case channelAppended:
			if h.Appended != nil {
				h.Appended(n.Payload)
			}
		case channelCancel:
			if h.CancelRequested != nil {
				h.CancelRequested(n.Payload)
			}
		}
	}
}
