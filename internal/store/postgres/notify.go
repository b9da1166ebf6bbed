package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/internal/chat"
)

// Notification channels. The payload of channelAppends is the ids of the
// chats whose logs grew, separated by commas: one notification per batch,
// not one per chat, for the notifier to send and every listener to take.
// channelAppended, one chat id per notification, is what replicas of
// earlier versions send; it is still listened to, so that replicas of both
// kinds wake each other during a rolling upgrade.
const (
	channelAppends  = "agentd_appends"
	channelAppended = "agentd_appended"
	channelCancel   = "agentd_cancel"
	// channelStop and channelRun name one chat each: a stop was requested
	// (POST /stop), a run was posted (POST /runs).
	channelStop = "agentd_stop"
	channelRun  = "agentd_run"
	// channelTeams names a tenant that has a new version of a saved team
	// (PutTeam), so that every replica's MCP sessions of that tenant are
	// told their tools changed, not only those of the replica that saved.
	channelTeams = "agentd_teams"
)

var _ chat.Notifier = (*Store)(nil)

// Listen implements chat.Notifier with LISTEN on a dedicated connection (a
// pooled one would be handed to others between waits). It reconnects with
// backoff when the connection drops and then calls h.Reconnected, since
// notifications sent meanwhile are lost. It returns when ctx ends. The
// backoff starts afresh after every connection that got to listen, so a
// connection lost once a day is retried at once, not after the longest wait
// an outage months ago reached.
func (s *Store) Listen(ctx context.Context, h chat.NotifyHandler) error {
	const firstBackoff = 100 * time.Millisecond
	backoff := firstBackoff
	for first := true; ; first = false {
		listened, err := s.listenOnce(ctx, h, !first)
		if ctx.Err() != nil {
			return nil
		}
		if listened {
			backoff = firstBackoff
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

// listenOnce listens on one connection until it fails; listened reports
// whether it got as far as listening.
func (s *Store) listenOnce(ctx context.Context, h chat.NotifyHandler, reconnected bool) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		if cerr := conn.Close(context.WithoutCancel(ctx)); cerr != nil && ctx.Err() == nil {
			s.log.Warn("close notification listener connection", "err", cerr)
		}
	}()
	s.notify.mu.Lock()
	s.notify.relayFailed = h.RelayFailed
	s.notify.mu.Unlock()
	if _, err := conn.Exec(ctx, "LISTEN "+channelAppends+"; LISTEN "+channelAppended+"; LISTEN "+channelCancel+
		"; LISTEN "+channelStop+"; LISTEN "+channelRun+"; LISTEN "+channelDeltas+"; LISTEN "+channelFollows+"; LISTEN "+channelTeams); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	if reconnected && h.Reconnected != nil {
		h.Reconnected()
	}
	if h.Listening != nil {
		h.Listening()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, fmt.Errorf("wait for notification: %w", err)
		}
		switch n.Channel {
		case channelAppends:
			if h.Appended != nil {
				for id := range strings.SplitSeq(n.Payload, ",") {
					h.Appended(id)
				}
			}
		case channelAppended:
			if h.Appended != nil {
				h.Appended(n.Payload)
			}
		case channelCancel:
			if h.CancelRequested != nil {
				h.CancelRequested(n.Payload)
			}
		case channelStop:
			if h.StopRequested != nil {
				h.StopRequested(n.Payload)
			}
		case channelRun:
			if h.RunQueued != nil {
				h.RunQueued(n.Payload)
			}
		case channelTeams:
			if h.TeamSaved != nil {
				h.TeamSaved(n.Payload)
			}
		case channelDeltas, channelFollows:
			s.relayed(h, n.Channel, n.Payload)
		}
	}
}

// relayed hands what another replica relayed to the handler; what this
// replica sent itself is skipped before it is decoded.
func (s *Store) relayed(h chat.NotifyHandler, channel, payload string) {
	from, body, ok := strings.Cut(payload, "\n")
	if !ok || from == h.Self {
		return
	}
	switch channel {
	case channelDeltas:
		if h.Deltas == nil {
			return
		}
		ds, err := decodeDeltas(body)
		if err != nil {
			s.log.Warn("relayed deltas could not be read", "from", from, "err", err)
			return
		}
		h.Deltas(from, ds)
	case channelFollows:
		if h.Follows == nil {
			return
		}
		ids, replay, ok := decodeFollows(body)
		if !ok {
			s.log.Warn("relayed follows could not be read", "from", from)
			return
		}
		h.Follows(from, ids, replay)
	}
}
