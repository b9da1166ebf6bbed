package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/store/internal/param"
)

// chat.AppStore on Postgres (docs/backend.md): metadata changes, erasure and
// retention, saved teams, the webhook outbox. None of it is on the append
// path: the outbox rows are written by the append statements themselves
// (appendsOutboxSQL, createOutboxSQL).

// PatchMetadata implements chat.AppStore. The row lock serialises
// concurrent patches of one chat, so none is lost; the merge is done here,
// where the size of the result can be checked before it is written.
func (s *Store) PatchMetadata(ctx context.Context, p *chat.PatchMetadataParams) (*chat.Chat, error) {
	cid, ok := param.ChatID(p.ChatID)
	if !ok {
		return nil, fmt.Errorf("patch metadata of chat %q: %w", p.ChatID, chat.ErrNotFound)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var cur []byte
		if err := tx.QueryRow(ctx, `SELECT metadata FROM chats WHERE id = $1 AND ($2 = '' OR tenant = $2) FOR UPDATE`,
			cid, p.Tenant).Scan(&cur); err != nil {
			return err
		}
		merged, err := param.MergeMetadata(cur, p.Patch, p.MaxBytes)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE chats SET metadata = $2 WHERE id = $1`, cid, nullJSON(merged))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("patch metadata of chat %s: %w", cid, translate(err))
	}
	return s.GetChat(ctx, p.Tenant, cid)
}

// EraseChat implements chat.AppStore through agentd_erase_chat (migration
// 0004), the one way the database lets a chat's rows be deleted. Every
// replica's streams of the chat are woken (the appends channel), so that
// they find it gone and end.
func (s *Store) EraseChat(ctx context.Context, p *chat.EraseChatParams) error {
	cid, ok := param.ChatID(p.ChatID)
	if !ok {
		return fmt.Errorf("erase chat %q: %w", p.ChatID, chat.ErrNotFound)
	}
	var res string
	if err := s.pool.QueryRow(ctx, `SELECT agentd_erase_chat($1, $2, $3)`, cid, p.Tenant, param.Time(p.Now, s.now)).Scan(&res); err != nil {
		return fmt.Errorf("erase chat %s: %w", cid, translate(err))
	}
	switch res {
	case "missing":
		return fmt.Errorf("erase chat %s: %w", cid, chat.ErrNotFound)
	case "active":
		return fmt.Errorf("erase chat %s: %w", cid, chat.ErrChatActive)
	}
	s.notify.add([]string{cid})
	return nil
}

// retentionLockKey is the advisory lock that lets one replica at a time
// erase expired chats ("agentd-r" in ASCII).
const retentionLockKey int64 = 0x61676e74642d72

// EraseEnded implements chat.AppStore. The transaction first tries the
// retention lock: a replica that does not get it erases nothing and
// returns at once (another one is at work). The chats of one call are
// erased in one statement, oldest first, by the same function as EraseChat.
func (s *Store) EraseEnded(ctx context.Context, p *chat.EraseEndedParams) ([]string, error) {
	limit := param.Limit(p.Limit, 100, 10000)
	var ids []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var got bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, retentionLockKey).Scan(&got); err != nil {
			return err
		}
		if !got {
			return nil
		}
		rows, err := tx.Query(ctx, `SELECT x.id::text FROM (
				SELECT id FROM chat_state
				WHERE status IN ('completed', 'failed', 'cancelled') AND completed_at < $1
				  AND owner IS NULL AND last_run = run
				ORDER BY completed_at LIMIT $2) x
			WHERE agentd_erase_chat(x.id, '', $3) = 'erased'`, p.EndedBefore.UTC(), limit, param.Time(p.Now, s.now))
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("erase ended chats: %w", translate(err))
	}
	if len(ids) > 0 {
		s.notify.add(ids)
	}
	return ids, nil
}

// PutTeam implements chat.AppStore. Concurrent puts of one team are
// serialized by a transaction-scoped advisory lock on the team's tenant and
// name, taken before the latest version is read: a row lock on the latest
// version cannot order the puts of a team that has none yet, and a put that
// waited on it would still number its version from what it read before
// the wait (two puts that both read version n both write n+1, and the
// loser could lose again at every retry). The two-key form of the lock
// does not share keys with the one-key locks of migrations and retention.
func (s *Store) PutTeam(ctx context.Context, p *chat.PutTeamParams) (*chat.Team, bool, error) {
	now := param.Time(p.Now, s.now).Truncate(time.Microsecond)
	var (
		t       *chat.Team
		created bool
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))`, p.Tenant, p.Name); err != nil {
			return err
		}
		var (
			version int32
			same    bool
		)
		err := tx.QueryRow(ctx, `SELECT version, spec = $3::jsonb FROM teams WHERE tenant = $1 AND name = $2
			ORDER BY version DESC LIMIT 1`, p.Tenant, p.Name, []byte(p.Spec)).Scan(&version, &same)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if same {
			t, err = scanTeam(tx.QueryRow(ctx, `SELECT `+teamColumns+` FROM teams WHERE tenant = $1 AND name = $2 AND version = $3`,
				p.Tenant, p.Name, version))
			return err
		}
		t, err = scanTeam(tx.QueryRow(ctx, `INSERT INTO teams (tenant, name, version, spec, created_at)
			VALUES ($1, $2, $3, $4, $5) RETURNING `+teamColumns, p.Tenant, p.Name, version+1, []byte(p.Spec), now))
		if err != nil {
			return err
		}
		created = true
		// Sent with the commit, to every replica (see channelTeams).
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, channelTeams, p.Tenant)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("put team %q: %w", p.Name, translate(err))
	}
	return t, created, nil
}

const teamColumns = `tenant, name, version, spec, created_at`

func scanTeam(row pgx.Row) (*chat.Team, error) {
	var (
		t       chat.Team
		version int32
		spec    []byte
	)
	if err := row.Scan(&t.Tenant, &t.Name, &version, &spec, &t.CreatedAt); err != nil {
		return nil, err
	}
	t.Version, t.Spec, t.CreatedAt = int(version), spec, t.CreatedAt.UTC()
	return &t, nil
}

// GetTeam implements chat.AppStore.
func (s *Store) GetTeam(ctx context.Context, tenant, name string, version int) (*chat.Team, error) {
	t, err := scanTeam(s.pool.QueryRow(ctx, `SELECT `+teamColumns+` FROM teams
		WHERE tenant = $1 AND name = $2 AND ($3 = 0 OR version = $3) ORDER BY version DESC LIMIT 1`, tenant, name, int32(version)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get team %q version %d: %w", name, version, chat.ErrTeamNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get team %q: %w", name, translate(err))
	}
	return t, nil
}

// ListTeams implements chat.AppStore: the latest version of each name, by
// name, from the primary key's order.
func (s *Store) ListTeams(ctx context.Context, p *chat.ListTeamsParams) ([]*chat.Team, string, error) {
	limit := param.Limit(p.Limit, param.DefaultListTeams, param.MaxListTeams)
	after := ""
	if p.Cursor != "" {
		var err error
		if after, err = param.DecodeNameCursor(p.Cursor); err != nil {
			return nil, "", fmt.Errorf("list teams: %w", err)
		}
	}
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT ON (name) `+teamColumns+` FROM teams
		WHERE tenant = $1 AND name > $2 ORDER BY name, version DESC LIMIT $3`, p.Tenant, after, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list teams: %w", translate(err))
	}
	ts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*chat.Team, error) { return scanTeam(r) })
	if err != nil {
		return nil, "", fmt.Errorf("list teams: %w", translate(err))
	}
	next := ""
	if len(ts) > limit {
		ts = ts[:limit]
		next = param.EncodeNameCursor(ts[limit-1].Name)
	}
	return ts, next, nil
}

// deliveryColumns is what scanDelivery reads, from a webhook_deliveries
// row named d.
const deliveryColumns = `d.chat_id::text, d.seq, d.url, d.tenant, d.event, d.source, d.status, d.attempts,
	d.sent_attempts, coalesce(d.last_sent_by, ''),
	coalesce(d.last_status_code, 0), coalesce(d.last_error, ''), d.created_at, d.updated_at, d.next_attempt_at, d.delivered_at`

// deliveryCounts are the int columns of a delivery, which pgx scans as
// int32.
type deliveryCounts struct{ attempts, sent, code int32 }

func deliveryDest(d *chat.DeliveryRecord, event, status *string, n *deliveryCounts) []any {
	return []any{&d.ChatID, &d.Seq, &d.URL, &d.Tenant, event, &d.Source, status, &n.attempts, &n.sent, &d.SentBy,
		&n.code, &d.LastError, &d.CreatedAt, &d.UpdatedAt, &d.NextAttemptAt, &d.DeliveredAt}
}

func finishDelivery(d *chat.DeliveryRecord, event, status string, n deliveryCounts) {
	d.Event, d.Status, d.Attempts, d.LastStatusCode = chat.EventType(event), chat.DeliveryStatus(status), int(n.attempts), int(n.code)
	d.Sent = int(n.sent)
	d.CreatedAt, d.UpdatedAt, d.NextAttemptAt = d.CreatedAt.UTC(), d.UpdatedAt.UTC(), d.NextAttemptAt.UTC()
	d.DeliveredAt = utcPtr(d.DeliveredAt)
}

// ListDeliveries implements chat.AppStore.
func (s *Store) ListDeliveries(ctx context.Context, p *chat.ListDeliveriesParams) ([]chat.DeliveryRecord, error) {
	cid, ok := param.ChatID(p.ChatID)
	if !ok {
		return nil, nil
	}
	limit := param.Limit(p.Limit, param.DefaultListDeliveries, param.MaxListDeliveries)
	rows, err := s.pool.Query(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries d
		WHERE d.chat_id = $1 AND d.seq > $2 ORDER BY d.seq, d.url LIMIT $3`, cid, p.After, limit)
	if err != nil {
		return nil, fmt.Errorf("list deliveries of chat %s: %w", cid, translate(err))
	}
	defer rows.Close()
	var out []chat.DeliveryRecord
	for rows.Next() {
		var (
			d             chat.DeliveryRecord
			event, status string
			n             deliveryCounts
		)
		if err := rows.Scan(deliveryDest(&d, &event, &status, &n)...); err != nil {
			return nil, fmt.Errorf("list deliveries of chat %s: %w", cid, err)
		}
		finishDelivery(&d, event, status, n)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list deliveries of chat %s: %w", cid, translate(err))
	}
	return out, nil
}

// claimDeliveriesSQL takes due deliveries with FOR UPDATE SKIP LOCKED, so
// that dispatchers of several replicas claim disjoint sets without waiting
// for each other, counts the attempt and pushes the delivery's due time to
// the lease's end (where a dispatcher that dies during the attempt leaves
// it for another), and returns each with its event. The outbox is a table
// of its own: none of this touches a chat's rows, so delivery never waits
// for an append or makes one wait.
const claimDeliveriesSQL = `WITH due AS (
	SELECT chat_id, seq, url FROM webhook_deliveries
	WHERE status = 'pending' AND next_attempt_at <= $1
	ORDER BY next_attempt_at LIMIT $3
	FOR UPDATE SKIP LOCKED
), claimed AS (
	UPDATE webhook_deliveries d SET attempts = d.attempts + 1, next_attempt_at = $2, updated_at = $1
	FROM due WHERE d.chat_id = due.chat_id AND d.seq = due.seq AND d.url = due.url
	RETURNING d.*
)
SELECT ` + deliveryColumns + `,
	EXISTS (SELECT 1 FROM webhook_deliveries x WHERE x.chat_id = d.chat_id AND x.url = d.url AND x.last_status_code = 410),
	e.seq IS NOT NULL, coalesce(e.type, ''), coalesce(e.role, ''), coalesce(e.name, ''), coalesce(e.content, ''),
	e.tool_calls, e.tool_responses, coalesce(e.data_json::text, e.data::text), coalesce(e.created_at, d.created_at)
FROM claimed d LEFT JOIN events e ON e.chat_id = d.chat_id AND e.seq = d.seq`

// ClaimDeliveries implements chat.AppStore.
func (s *Store) ClaimDeliveries(ctx context.Context, p *chat.ClaimDeliveriesParams) ([]chat.ClaimedDelivery, error) {
	limit := param.Limit(p.Limit, 10, 1000)
	now := param.Time(p.Now, s.now)
	rows, err := s.pool.Query(ctx, claimDeliveriesSQL, now, p.LeaseUntil.UTC(), limit)
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", translate(err))
	}
	defer rows.Close()
	var out []chat.ClaimedDelivery
	for rows.Next() {
		var (
			c                 chat.ClaimedDelivery
			event, status     string
			n                 deliveryCounts
			found             bool
			typ               string
			calls, resps, dat []byte
		)
		dest := append(deliveryDest(&c.DeliveryRecord, &event, &status, &n), &c.Disabled,
			&found, &typ, &c.Event.Role, &c.Event.Name, &c.Event.Content, &calls, &resps, &dat, &c.Event.CreatedAt)
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("claim deliveries: %w", err)
		}
		finishDelivery(&c.DeliveryRecord, event, status, n)
		if found {
			c.Event.ChatID, c.Event.Seq, c.Event.Type = c.ChatID, c.Seq, chat.EventType(typ)
			c.Event.Data, c.Event.CreatedAt = nullableJSON(dat), c.Event.CreatedAt.UTC()
			if err := unmarshalToolColumns(calls, resps, &c.Event); err != nil {
				return nil, fmt.Errorf("claim deliveries: chat %s seq %d: %w", c.ChatID, c.Seq, err)
			}
		} else {
			c.Event = chat.Event{}
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", translate(err))
	}
	return out, nil
}

func unmarshalToolColumns(calls, resps []byte, e *chat.Event) error {
	if len(calls) > 0 {
		if err := json.Unmarshal(calls, &e.ToolCalls); err != nil {
			return fmt.Errorf("tool_calls: %w", err)
		}
	}
	if len(resps) > 0 {
		if err := json.Unmarshal(resps, &e.ToolResponses); err != nil {
			return fmt.Errorf("tool_responses: %w", err)
		}
	}
	return nil
}

// MarkDeliverySent implements chat.AppStore. The attempt count fences it
// as it fences FinishDelivery.
func (s *Store) MarkDeliverySent(ctx context.Context, p *chat.MarkDeliverySentParams) error {
	cid, ok := param.ChatID(p.ChatID)
	if !ok {
		return fmt.Errorf("mark delivery of chat %q sent: %w", p.ChatID, chat.ErrNotFound)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE webhook_deliveries SET sent_attempts = sent_attempts + 1, last_sent_by = $5, updated_at = $6
		WHERE chat_id = $1 AND seq = $2 AND url = $3 AND attempts = $4 AND status = 'pending'`,
		cid, p.Seq, p.URL, int32(p.Attempts), param.Text(p.Owner), param.Time(p.Now, s.now))
	if err != nil {
		return fmt.Errorf("mark delivery of chat %s seq %d sent: %w", cid, p.Seq, translate(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("mark delivery of chat %s seq %d sent: its claim was taken over: %w", cid, p.Seq, chat.ErrFenced)
	}
	return nil
}

// FinishDelivery implements chat.AppStore. The attempt count fences the
// record: an attempt that outlived its lease, and was taken over by
// another dispatcher, writes nothing.
func (s *Store) FinishDelivery(ctx context.Context, p *chat.FinishDeliveryParams) error {
	cid, ok := param.ChatID(p.ChatID)
	if !ok {
		return fmt.Errorf("finish delivery of chat %q: %w", p.ChatID, chat.ErrNotFound)
	}
	now := param.Time(p.Now, s.now)
	var code any
	if p.LastStatusCode != 0 {
		code = int32(p.LastStatusCode)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET status = $5, last_status_code = $6, last_error = $7,
				next_attempt_at = $8, updated_at = $9::timestamptz, delivered_at = CASE WHEN $5 = 'delivered' THEN $9::timestamptz END
			WHERE chat_id = $1 AND seq = $2 AND url = $3 AND attempts = $4 AND status = 'pending'`,
			cid, p.Seq, p.URL, int32(p.Attempts), string(p.Status), code, nullString(param.Text(p.LastError)),
			p.NextAttemptAt.UTC(), now)
		if err != nil || tag.RowsAffected() == 0 || !p.DisableURL {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE webhook_deliveries SET status = 'failed', updated_at = $3,
				last_error = 'the endpoint answered 410 Gone to an earlier delivery of this chat: disabled'
			WHERE chat_id = $1 AND url = $2 AND status = 'pending'`, cid, p.URL, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("finish delivery of chat %s seq %d: %w", cid, p.Seq, translate(err))
	}
	return nil
}
