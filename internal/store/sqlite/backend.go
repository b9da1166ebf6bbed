package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/store/internal/param"
)

// chat.AppStore on SQLite (docs/backend.md), mirroring the Postgres store. Every
// write goes through the one writer connection, so the transactions here
// are serialised with the group committer's and need no row locks.

// insertDeliverySQL writes one webhook delivery of a chat's event to the
// outbox; the tenant is the chat's.
const insertDeliverySQL = `INSERT INTO webhook_deliveries
		(chat_id, seq, url, tenant, event, source, created_at, updated_at, next_attempt_at)
	VALUES (?, ?, ?, (SELECT tenant FROM chats WHERE id = ?), ?, ?, ?, ?, ?)
	ON CONFLICT DO NOTHING`

// insertDeliveries writes webhook deliveries of a chat's events to the
// outbox with stmt, insertDeliverySQL prepared in the transaction that
// writes the events (the group commit's is prepared once: parsing it for
// every delivery was a fifth of a batch's time with one delivery per
// append, BenchmarkAppend's outbox case).
func insertDeliveries(ctx context.Context, stmt *sql.Stmt, chatID string, ds []chat.Delivery, at time.Time) error {
	for _, d := range ds {
		if _, err := stmt.ExecContext(ctx, chatID, d.Seq, param.Text(d.URL), chatID, string(d.Event), d.Source,
			at.UnixNano(), at.UnixNano(), at.UnixNano()); err != nil {
			return err
		}
	}
	return nil
}

// metadataMatch is the condition of one metadata filter, and its
// arguments: the chat's metadata has the key, with the string value, or a
// number equal to it, or the literal (true, false, null) it spells.
func metadataMatch(m chat.MetadataMatch) (string, []any) {
	var num, lit any
	for _, v := range param.MetadataValues(m.Value)[1:] {
		switch s := string(v); s {
		case "true", "false", "null":
			lit = s
		default:
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				num = n
			} else if f, err := strconv.ParseFloat(s, 64); err == nil {
				num = f
			}
		}
	}
	return `EXISTS (SELECT 1 FROM json_each(chats.metadata) j WHERE j.key = ? AND
		(j.type = 'text' AND j.atom = ? OR j.type IN ('integer', 'real') AND j.atom = ? OR j.type = ?))`,
		[]any{m.Key, m.Value, num, lit}
}

// PatchMetadata implements chat.AppStore.
func (s *Store) PatchMetadata(ctx context.Context, p *chat.PatchMetadataParams) (*chat.Chat, error) {
	cid, ok := param.ChatID(p.ChatID)
	if !ok {
		return nil, fmt.Errorf("patch metadata of chat %q: %w", p.ChatID, chat.ErrNotFound)
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var cur []byte
		if err := tx.QueryRowContext(ctx, `SELECT metadata FROM chats WHERE id = ? AND (? = '' OR tenant = ?)`,
			cid, p.Tenant, p.Tenant).Scan(&cur); err != nil {
			return err
		}
		merged, err := param.MergeMetadata(cur, p.Patch, p.MaxBytes)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE chats SET metadata = ? WHERE id = ?`, nullJSON(merged), cid)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("patch metadata of chat %s: %w", cid, translate(err))
	}
	return s.GetChat(ctx, p.Tenant, cid)
}

// inTx runs f in a write transaction, committing if it returns nil.
func (s *Store) inTx(ctx context.Context, f func(tx *sql.Tx) error) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if err := f(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.ckpt.committed()
	return nil
}

// EraseChat implements chat.AppStore. This transaction is SQLite's
// counterpart of Postgres's agentd_erase_chat: the triggers of migration
// 0004 let the chat's rows be deleted only while its id is in
// chat_erasures, which this transaction alone writes, and removes again
// before it commits.
func (s *Store) EraseChat(ctx context.Context, p *chat.EraseChatParams) error {
	cid, ok := param.ChatID(p.ChatID)
	if !ok {
		return fmt.Errorf("erase chat %q: %w", p.ChatID, chat.ErrNotFound)
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		return eraseChat(ctx, tx, cid, p.Tenant, nanos(param.Time(p.Now, s.now)))
	})
	if err != nil {
		return fmt.Errorf("erase chat %s: %w", cid, translate(err))
	}
	return nil
}

func eraseChat(ctx context.Context, tx *sql.Tx, id, tenant string, at int64) error {
	var (
		status, owner string
		busy          bool
	)
	err := tx.QueryRowContext(ctx, `SELECT status, tenant, owner IS NOT NULL OR last_run > run FROM chats
		WHERE id = ? AND (? = '' OR tenant = ?)`, id, tenant, tenant).Scan(&status, &owner, &busy)
	if err != nil {
		return err
	}
	// Ended means: its latest run ended, no run waits to start, and no
	// worker holds it (one that is starting the next run does).
	if !chat.Status(status).Terminal() || busy {
		return chat.ErrChatActive
	}
	for _, q := range []string{
		`INSERT INTO chat_erasures (chat_id) VALUES (?)`,
		`DELETE FROM events WHERE chat_id = ?`,
		`DELETE FROM webhook_deliveries WHERE chat_id = ?`,
		`DELETE FROM chat_runs WHERE chat_id = ?`,
		`DELETE FROM chat_requests WHERE chat_id = ?`,
		`DELETE FROM chat_specs WHERE id = ?`,
		`DELETE FROM chats WHERE id = ?`,
		`DELETE FROM chat_erasures WHERE chat_id = ?`,
	} {
		if _, err := tx.ExecContext(ctx, q, id); err != nil {
			return err
		}
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO chat_tombstones (id, tenant, deleted_at) VALUES (?, ?, ?)
		ON CONFLICT (id) DO NOTHING`, id, owner, at)
	return err
}

// EraseEnded implements chat.AppStore. One process has the file, so there
// is no other replica to keep out.
func (s *Store) EraseEnded(ctx context.Context, p *chat.EraseEndedParams) ([]string, error) {
	limit := param.Limit(p.Limit, 100, 10000)
	var ids []string
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id FROM chats
			WHERE status IN ('completed', 'failed', 'cancelled') AND completed_at < ?
			  AND owner IS NULL AND last_run = run
			ORDER BY completed_at LIMIT ?`, nanos(p.EndedBefore), limit)
		if err != nil {
			return err
		}
		var found []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			found = append(found, id)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		at := nanos(param.Time(p.Now, s.now))
		for _, id := range found {
			if err := eraseChat(ctx, tx, id, "", at); err != nil {
				return fmt.Errorf("chat %s: %w", id, err)
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("erase ended chats: %w", translate(err))
	}
	return ids, nil
}

const teamColumns = `tenant, name, version, spec, created_at`

func scanTeam(row scanner) (*chat.Team, error) {
	var (
		t       chat.Team
		spec    []byte
		created int64
	)
	if err := row.Scan(&t.Tenant, &t.Name, &t.Version, &spec, &created); err != nil {
		return nil, err
	}
	t.Spec, t.CreatedAt = spec, fromNanos(created)
	return &t, nil
}

// PutTeam implements chat.AppStore. The single writer serialises puts.
func (s *Store) PutTeam(ctx context.Context, p *chat.PutTeamParams) (*chat.Team, bool, error) {
	var (
		t       *chat.Team
		created bool
	)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var (
			version int
			same    bool
		)
		err := tx.QueryRowContext(ctx, `SELECT version, json(spec) = json(?) FROM teams WHERE tenant = ? AND name = ?
			ORDER BY version DESC LIMIT 1`, string(p.Spec), p.Tenant, p.Name).Scan(&version, &same)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if same {
			t, err = scanTeam(tx.QueryRowContext(ctx, `SELECT `+teamColumns+` FROM teams WHERE tenant = ? AND name = ? AND version = ?`,
				p.Tenant, p.Name, version))
			return err
		}
		t, err = scanTeam(tx.QueryRowContext(ctx, `INSERT INTO teams (tenant, name, version, spec, created_at)
			VALUES (?, ?, ?, ?, ?) RETURNING `+teamColumns, p.Tenant, p.Name, version+1, string(p.Spec), nanos(param.Time(p.Now, s.now))))
		created = err == nil
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("put team %q: %w", p.Name, translate(err))
	}
	return t, created, nil
}

// GetTeam implements chat.AppStore.
func (s *Store) GetTeam(ctx context.Context, tenant, name string, version int) (*chat.Team, error) {
	t, err := scanTeam(s.reader.QueryRowContext(ctx, `SELECT `+teamColumns+` FROM teams
		WHERE tenant = ? AND name = ? AND (? = 0 OR version = ?) ORDER BY version DESC LIMIT 1`, tenant, name, version, version))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get team %q version %d: %w", name, version, chat.ErrTeamNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get team %q: %w", name, translate(err))
	}
	return t, nil
}

// ListTeams implements chat.AppStore.
func (s *Store) ListTeams(ctx context.Context, p *chat.ListTeamsParams) ([]*chat.Team, string, error) {
	limit := param.Limit(p.Limit, param.DefaultListTeams, param.MaxListTeams)
	after := ""
	if p.Cursor != "" {
		var err error
		if after, err = param.DecodeNameCursor(p.Cursor); err != nil {
			return nil, "", fmt.Errorf("list teams: %w", err)
		}
	}
	// The latest version of each name: the row with no later version.
	rows, err := s.reader.QueryContext(ctx, `SELECT `+teamColumns+` FROM teams t
		WHERE tenant = ? AND name > ? AND version = (SELECT max(version) FROM teams x WHERE x.tenant = t.tenant AND x.name = t.name)
		ORDER BY name LIMIT ?`, p.Tenant, after, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list teams: %w", translate(err))
	}
	defer rows.Close()
	var ts []*chat.Team
	for rows.Next() {
		t, err := scanTeam(rows)
		if err != nil {
			return nil, "", fmt.Errorf("list teams: %w", err)
		}
		ts = append(ts, t)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("list teams: %w", translate(err))
	}
	next := ""
	if len(ts) > limit {
		ts = ts[:limit]
		next = param.EncodeNameCursor(ts[limit-1].Name)
	}
	return ts, next, nil
}

const deliveryColumns = `chat_id, seq, url, tenant, event, source, status, attempts,
	sent_attempts, coalesce(last_sent_by, ''), coalesce(last_status_code, 0), coalesce(last_error, ''), created_at, updated_at, next_attempt_at, delivered_at`

func scanDelivery(row scanner, extra ...any) (chat.DeliveryRecord, error) {
	var (
		d                        chat.DeliveryRecord
		event, status            string
		created, updated, nextAt int64
		delivered                sql.NullInt64
	)
	dest := append([]any{&d.ChatID, &d.Seq, &d.URL, &d.Tenant, &event, &d.Source, &status, &d.Attempts,
		&d.Sent, &d.SentBy, &d.LastStatusCode, &d.LastError, &created, &updated, &nextAt, &delivered}, extra...)
	if err := row.Scan(dest...); err != nil {
		return d, err
	}
	d.Event, d.Status = chat.EventType(event), chat.DeliveryStatus(status)
	d.CreatedAt, d.UpdatedAt, d.NextAttemptAt, d.DeliveredAt = fromNanos(created), fromNanos(updated), fromNanos(nextAt), fromNullNanos(delivered)
	return d, nil
}

// ListDeliveries implements chat.AppStore.
func (s *Store) ListDeliveries(ctx context.Context, p *chat.ListDeliveriesParams) ([]chat.DeliveryRecord, error) {
	cid, ok := param.ChatID(p.ChatID)
	if !ok {
		return nil, nil
	}
	limit := param.Limit(p.Limit, param.DefaultListDeliveries, param.MaxListDeliveries)
	rows, err := s.reader.QueryContext(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries
		WHERE chat_id = ? AND seq > ? ORDER BY seq, url LIMIT ?`, cid, p.After, limit)
	if err != nil {
		return nil, fmt.Errorf("list deliveries of chat %s: %w", cid, translate(err))
	}
	defer rows.Close()
	var out []chat.DeliveryRecord
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, fmt.Errorf("list deliveries of chat %s: %w", cid, err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list deliveries of chat %s: %w", cid, translate(err))
	}
	return out, nil
}

// ClaimDeliveries implements chat.AppStore.
func (s *Store) ClaimDeliveries(ctx context.Context, p *chat.ClaimDeliveriesParams) ([]chat.ClaimedDelivery, error) {
	limit := param.Limit(p.Limit, 10, 1000)
	now := nanos(param.Time(p.Now, s.now))
	var out []chat.ClaimedDelivery
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `UPDATE webhook_deliveries
			SET attempts = attempts + 1, next_attempt_at = ?, updated_at = ?
			WHERE rowid IN (SELECT rowid FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= ?
				ORDER BY next_attempt_at LIMIT ?)
			RETURNING `+deliveryColumns, nanos(p.LeaseUntil), now, now, limit)
		if err != nil {
			return err
		}
		for rows.Next() {
			d, err := scanDelivery(rows)
			if err != nil {
				rows.Close()
				return err
			}
			out = append(out, chat.ClaimedDelivery{DeliveryRecord: d})
		}
		if err := rows.Close(); err != nil {
			return err
		}
		for i := range out {
			c := &out[i]
			if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM webhook_deliveries
					WHERE chat_id = ? AND url = ? AND last_status_code = 410)`, c.ChatID, c.URL).Scan(&c.Disabled); err != nil {
				return err
			}
			var (
				typ               string
				calls, resps, dat []byte
				created           int64
			)
			err := tx.QueryRowContext(ctx, `SELECT type, coalesce(role, ''), coalesce(name, ''), coalesce(content, ''),
					tool_calls, tool_responses, data, created_at FROM events WHERE chat_id = ? AND seq = ?`, c.ChatID, c.Seq).
				Scan(&typ, &c.Event.Role, &c.Event.Name, &c.Event.Content, &calls, &resps, &dat, &created)
			if errors.Is(err, sql.ErrNoRows) {
				continue // the dispatcher fails a delivery whose event is gone
			}
			if err != nil {
				return err
			}
			c.Event.ChatID, c.Event.Seq, c.Event.Type = c.ChatID, c.Seq, chat.EventType(typ)
			c.Event.Data, c.Event.CreatedAt = nullableJSON(dat), fromNanos(created)
			if err := unmarshalCalls(calls, resps, &c.Event); err != nil {
				return fmt.Errorf("chat %s seq %d: %w", c.ChatID, c.Seq, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", translate(err))
	}
	return out, nil
}

// MarkDeliverySent implements chat.AppStore. The attempt count fences it
// as it fences FinishDelivery.
func (s *Store) MarkDeliverySent(ctx context.Context, p *chat.MarkDeliverySentParams) error {
	cid, ok := param.ChatID(p.ChatID)
	if !ok {
		return fmt.Errorf("mark delivery of chat %q sent: %w", p.ChatID, chat.ErrNotFound)
	}
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET sent_attempts = sent_attempts + 1, last_sent_by = ?, updated_at = ?
			WHERE chat_id = ? AND seq = ? AND url = ? AND attempts = ? AND status = 'pending'`,
			param.Text(p.Owner), nanos(param.Time(p.Now, s.now)), cid, p.Seq, p.URL, p.Attempts)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("mark delivery of chat %s seq %d sent: %w", cid, p.Seq, translate(err))
	}
	if n == 0 {
		return fmt.Errorf("mark delivery of chat %s seq %d sent: its claim was taken over: %w", cid, p.Seq, chat.ErrFenced)
	}
	return nil
}

// FinishDelivery implements chat.AppStore.
func (s *Store) FinishDelivery(ctx context.Context, p *chat.FinishDeliveryParams) error {
	cid, ok := param.ChatID(p.ChatID)
	if !ok {
		return fmt.Errorf("finish delivery of chat %q: %w", p.ChatID, chat.ErrNotFound)
	}
	now := nanos(param.Time(p.Now, s.now))
	var code any
	if p.LastStatusCode != 0 {
		code = p.LastStatusCode
	}
	var delivered any
	if p.Status == chat.DeliveryDelivered {
		delivered = now
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET status = ?, last_status_code = ?, last_error = ?,
				next_attempt_at = ?, updated_at = ?, delivered_at = ?
			WHERE chat_id = ? AND seq = ? AND url = ? AND attempts = ? AND status = 'pending'`,
			string(p.Status), code, nullString(param.Text(p.LastError)), nanos(p.NextAttemptAt), now, delivered,
			cid, p.Seq, p.URL, p.Attempts)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 || !p.DisableURL {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE webhook_deliveries SET status = 'failed', updated_at = ?,
				last_error = 'the endpoint answered 410 Gone to an earlier delivery of this chat: disabled'
			WHERE chat_id = ? AND url = ? AND status = 'pending'`, now, cid, p.URL)
		return err
	})
	if err != nil {
		return fmt.Errorf("finish delivery of chat %s seq %d: %w", cid, p.Seq, translate(err))
	}
	return nil
}
