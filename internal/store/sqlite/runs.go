package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/store/internal/param"
)

// SubmitRun implements chat.Store in one transaction on the single writer
// connection: nothing changes the chat between the check and the writes.
func (s *Store) SubmitRun(ctx context.Context, p *chat.SubmitRunParams) (*chat.Chat, int, error) {
	cid, ok := param.ChatID(p.ChatID)
	if !ok {
		return nil, 0, fmt.Errorf("submit run to chat %q: %w", p.ChatID, chat.ErrNotFound)
	}
	if _, ok := param.UUID(p.Key); !ok {
		return nil, 0, fmt.Errorf("submit run to chat %s: %w: run key %q", cid, param.ErrInvalid, p.Key)
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("submit run to chat %s: %w", cid, err)
	}
	defer tx.Rollback() // a no-op after Commit
	var (
		status       string
		run, lastRun int
	)
	err = tx.QueryRowContext(ctx, `SELECT status, run, last_run FROM chats WHERE id = ? AND (? = '' OR tenant = ?)`,
		cid, p.Tenant, p.Tenant).Scan(&status, &run, &lastRun)
	if err != nil {
		return nil, 0, fmt.Errorf("submit run to chat %s: %w", cid, translate(err))
	}
	if err := checkKeyed(ctx, tx, p.Keyed); err != nil {
		return nil, 0, fmt.Errorf("submit run to chat %s: %w", cid, err)
	}
	plan, err := param.PlanRun(chat.Status(status), run, lastRun, p.IfBusy)
	if err != nil {
		return nil, 0, fmt.Errorf("submit run to chat %s: %w", cid, err)
	}
	n, cancel := plan.Run, plan.Cancel
	if plan.DropQueued {
		if _, err := tx.ExecContext(ctx, `DELETE FROM chat_runs WHERE chat_id = ? AND run > ?`, cid, run); err != nil {
			return nil, 0, fmt.Errorf("submit run to chat %s: drop queued runs: %w", cid, translate(err))
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO chat_runs (chat_id, run, key, request, created_at) VALUES (?, ?, ?, ?, ?)`,
		cid, n, p.Key, string(p.Request), nanos(param.Time(p.Now, s.now))); err != nil {
		return nil, 0, fmt.Errorf("submit run to chat %s: %w", cid, translate(err))
	}
	c, err := scanChat(tx.QueryRowContext(ctx, `UPDATE chats SET last_run = ?, cancel_requested = cancel_requested OR ?
		WHERE id = ? RETURNING `+chatColumns, n, cancel, cid))
	if err != nil {
		return nil, 0, fmt.Errorf("submit run to chat %s: %w", cid, translate(err))
	}
	if err := storeAnswer(ctx, tx, p.Keyed, c, n, param.Time(p.Now, s.now)); err != nil {
		return nil, 0, fmt.Errorf("submit run to chat %s: %w", cid, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, 0, fmt.Errorf("submit run to chat %s: commit: %w", cid, translate(err))
	}
	return c, n, nil
}

// QueuedRun implements chat.Store.
func (s *Store) QueuedRun(ctx context.Context, chatID string, after int) (*chat.QueuedRun, error) {
	cid, ok := param.ChatID(chatID)
	if !ok {
		return nil, fmt.Errorf("queued run of chat %q: %w", chatID, chat.ErrNotFound)
	}
	var (
		q       chat.QueuedRun
		request string
		created int64
	)
	err := s.reader.QueryRowContext(ctx, `SELECT run, key, request, created_at FROM chat_runs
		WHERE chat_id = ? AND run > ? ORDER BY run LIMIT 1`, cid, after).Scan(&q.Run, &q.Key, &request, &created)
	if err != nil {
		return nil, fmt.Errorf("queued run of chat %s after run %d: %w", cid, after, translate(err))
	}
	q.Request, q.CreatedAt = []byte(request), fromNanos(created)
	return &q, nil
}

// RequestStop implements chat.Store.
func (s *Store) RequestStop(ctx context.Context, tenant, id string, keyed *chat.KeyedRequest) (*chat.Chat, error) {
	cid, ok := param.ChatID(id)
	if !ok {
		return nil, fmt.Errorf("request stop of chat %q: %w", id, chat.ErrNotFound)
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("request stop of chat %s: %w", cid, err)
	}
	defer tx.Rollback() // a no-op after Commit
	if err := checkKeyed(ctx, tx, keyed); err != nil {
		return nil, fmt.Errorf("request stop of chat %s: %w", cid, err)
	}
	c, err := scanChat(tx.QueryRowContext(ctx, `UPDATE chats SET stop_requested = 1
		WHERE id = ? AND (? = '' OR tenant = ?) AND status NOT IN ('completed', 'failed', 'cancelled')
		RETURNING `+chatColumns, cid, tenant, tenant))
	if errors.Is(err, sql.ErrNoRows) {
		c, err = scanChat(tx.QueryRowContext(ctx, `SELECT `+chatColumns+` FROM chats WHERE id = ? AND (? = '' OR tenant = ?)`, cid, tenant, tenant))
	}
	if err != nil {
		return nil, fmt.Errorf("request stop of chat %s: %w", cid, translate(err))
	}
	if err := storeAnswer(ctx, tx, keyed, c, 0, s.now()); err != nil {
		return nil, fmt.Errorf("request stop of chat %s: %w", cid, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("request stop of chat %s: commit: %w", cid, translate(err))
	}
	return c, nil
}
