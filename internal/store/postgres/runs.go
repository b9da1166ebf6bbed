package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/store/internal/param"
)

// SubmitRun implements chat.Store in one transaction that holds the chat's
// state row: whether the chat is busy, and what its queue holds, cannot
// change under it. A worker appending to the chat meanwhile waits for the
// row, and the other way round; either order is consistent, since an append
// only ends runs and starts queued ones, and the start of a run the
// interrupt dropped is fenced (appendsSQL).
func (s *Store) SubmitRun(ctx context.Context, p *chat.SubmitRunParams) (*chat.Chat, int, error) {
	cid, ok := param.ChatID(p.ChatID)
	if !ok {
		return nil, 0, fmt.Errorf("submit run to chat %q: %w", p.ChatID, chat.ErrNotFound)
	}
	key, ok := param.UUID(p.Key)
	if !ok {
		return nil, 0, fmt.Errorf("submit run to chat %s: %w: run key %q", cid, param.ErrInvalid, p.Key)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("submit run to chat %s: %w", cid, translate(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var (
		status       string
		run, lastRun int
	)
	err = tx.QueryRow(ctx, `SELECT s.status, s.run, s.last_run FROM chat_state s JOIN chats c ON c.id = s.id
		WHERE s.id = $1 AND ($2 = '' OR c.tenant = $2) FOR NO KEY UPDATE OF s`, cid, p.Tenant).Scan(&status, &run, &lastRun)
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
		if _, err := tx.Exec(ctx, `DELETE FROM chat_runs WHERE chat_id = $1 AND run > $2`, cid, run); err != nil {
			return nil, 0, fmt.Errorf("submit run to chat %s: drop queued runs: %w", cid, translate(err))
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO chat_runs (chat_id, run, key, request, created_at) VALUES ($1, $2, $3, $4, $5)`,
		cid, n, key, []byte(p.Request), param.Time(p.Now, s.now)); err != nil {
		return nil, 0, fmt.Errorf("submit run to chat %s: %w", cid, translate(err))
	}
	c, err := scanChat(tx.QueryRow(ctx, `WITH s AS (
			UPDATE chat_state SET last_run = $2, cancel_requested = cancel_requested OR $3 WHERE id = $1 RETURNING *)
		SELECT `+chatColumns+` FROM chats c JOIN s ON s.id = c.id`, cid, n, cancel))
	if err != nil {
		return nil, 0, fmt.Errorf("submit run to chat %s: %w", cid, translate(err))
	}
	if err := storeAnswer(ctx, tx, p.Keyed, c, n, param.Time(p.Now, s.now)); err != nil {
		return nil, 0, fmt.Errorf("submit run to chat %s: %w", cid, err)
	}
	// Notifications go out at commit: every replica looks for the chat to
	// claim it, and the one running it cuts the interrupted turn.
	notify := []string{channelRun}
	if cancel {
		notify = append(notify, channelCancel)
	}
	for _, ch := range notify {
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, ch, cid); err != nil {
			return nil, 0, fmt.Errorf("submit run to chat %s: notify: %w", cid, translate(err))
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, 0, fmt.Errorf("submit run to chat %s: %w", cid, translate(err))
	}
	return c, n, nil
}

// QueuedRun implements chat.Store.
func (s *Store) QueuedRun(ctx context.Context, chatID string, after int) (*chat.QueuedRun, error) {
	cid, ok := param.ChatID(chatID)
	if !ok {
		return nil, fmt.Errorf("queued run of chat %q: %w", chatID, chat.ErrNotFound)
	}
	var q chat.QueuedRun
	err := s.pool.QueryRow(ctx, `SELECT run, key::text, request, created_at FROM chat_runs
		WHERE chat_id = $1 AND run > $2 ORDER BY run LIMIT 1`, cid, after).Scan(&q.Run, &q.Key, &q.Request, &q.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("queued run of chat %s after run %d: %w", cid, after, translate(err))
	}
	q.CreatedAt = q.CreatedAt.UTC()
	return &q, nil
}

// RequestStop implements chat.Store. A keyed request holds the chat's
// state row from its check to its commit, so two requests with one key
// are answered one after the other.
func (s *Store) RequestStop(ctx context.Context, tenant, id string, keyed *chat.KeyedRequest) (*chat.Chat, error) {
	cid, ok := param.ChatID(id)
	if !ok {
		return nil, fmt.Errorf("request stop of chat %q: %w", id, chat.ErrNotFound)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("request stop of chat %s: %w", cid, translate(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if keyed != nil {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM chat_state WHERE id = $1 FOR NO KEY UPDATE`, cid); err != nil {
			return nil, fmt.Errorf("request stop of chat %s: %w", cid, translate(err))
		}
		if err := checkKeyed(ctx, tx, keyed); err != nil {
			return nil, fmt.Errorf("request stop of chat %s: %w", cid, err)
		}
	}
	stopped := true
	c, err := scanChat(tx.QueryRow(ctx, `WITH s AS (
			UPDATE chat_state AS s SET stop_requested = true FROM chats c
			WHERE s.id = $1 AND c.id = s.id AND ($2 = '' OR c.tenant = $2) AND s.status NOT IN ('completed', 'failed', 'cancelled')
			RETURNING s.*)
		SELECT `+chatColumns+` FROM chats c JOIN s ON s.id = c.id`, cid, tenant))
	if errors.Is(err, pgx.ErrNoRows) {
		stopped = false
		c, err = scanChat(tx.QueryRow(ctx, `SELECT `+chatColumns+` FROM `+chatFrom+` WHERE c.id = $1 AND ($2 = '' OR c.tenant = $2)`, cid, tenant))
	}
	if err != nil {
		return nil, fmt.Errorf("request stop of chat %s: %w", cid, translate(err))
	}
	if err := storeAnswer(ctx, tx, keyed, c, 0, s.now()); err != nil {
		return nil, fmt.Errorf("request stop of chat %s: %w", cid, err)
	}
	if stopped {
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, channelStop, cid); err != nil {
			return nil, fmt.Errorf("request stop of chat %s: notify: %w", cid, translate(err))
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("request stop of chat %s: %w", cid, translate(err))
	}
	return c, nil
}

// createFork creates a chat whose first events are a copy of another's log
// (POST /fork), in a transaction of its own: unlike a new chat, a fork
// starts in whatever state its copied log leaves it, and may be long.
func (s *Store) createFork(ctx context.Context, id string, p *chat.CreateChatParams) (*chat.Chat, bool, error) {
	created := param.Time(p.CreatedAt, s.now).Truncate(time.Microsecond)
	var evs eventColumns
	if err := evs.add(p.Events, created); err != nil {
		return nil, false, fmt.Errorf("create chat %s: %w", id, err)
	}
	u := p.State
	var forkedFrom, forkedAt any
	if p.ForkedFrom != nil {
		from, ok := param.ChatID(p.ForkedFrom.ChatID)
		if !ok {
			return nil, false, fmt.Errorf("create chat %s: %w: forked from %q", id, param.ErrInvalid, p.ForkedFrom.ChatID)
		}
		forkedFrom, forkedAt = from, p.ForkedFrom.Seq
	}
	var lease any
	epoch := int64(0)
	if p.Owner != "" {
		lease, epoch = p.LeaseUntil.UTC().Truncate(time.Microsecond), 1
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("create chat %s: %w", id, translate(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := checkKeyed(ctx, tx, p.Keyed); err != nil {
		return nil, false, fmt.Errorf("create chat %s: %w", id, err)
	}
	var teamName, teamVersion any
	if p.Team != nil {
		teamName, teamVersion = p.Team.Name, int32(p.Team.Version)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO chats (id, tenant, name, spec_text, metadata, idempotency_key, request_hash, created_at,
			forked_from, forked_at_seq, team_name, team_version)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		id, p.Tenant, nullString(param.Text(p.Name)), []byte(p.Spec), nullJSON(p.Metadata), nullString(p.IdempotencyKey),
		nullString(p.RequestHash), created, forkedFrom, forkedAt, teamName, teamVersion); err != nil {
		return nil, false, fmt.Errorf("create chat %s: %w", id, translate(err))
	}
	if _, err := tx.Exec(ctx, `INSERT INTO chat_state (id, status, stop_reason, stop_detail, error, last_seq, turns, message_count,
			prompt_tokens, completion_tokens, pending_input, input_expires_at, owner, lease_expires_at, epoch,
			created_at, updated_at, completed_at, run, last_run)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $16, $17, $18, $18)`,
		id, string(u.Status), nullString(string(u.StopReason)), nullString(param.Text(u.StopDetail)), nullString(param.Text(u.Error)),
		int64(len(p.Events)), u.Turns, u.MessageCount, u.PromptTokens, u.CompletionTokens, nullJSON(u.PendingInput), u.InputExpiresAt,
		nullString(p.Owner), lease, epoch, created, u.CompletedAt, max(u.Run, 1)); err != nil {
		return nil, false, fmt.Errorf("create chat %s: %w", id, translate(err))
	}
	if _, err := tx.Exec(ctx, `INSERT INTO events (`+eventInsertColumns+`)
		SELECT $1::uuid, `+eventSelect(2, false), append([]any{id}, evs.args()...)...); err != nil {
		return nil, false, fmt.Errorf("create chat %s: %w", id, translate(err))
	}
	c, err := scanChat(tx.QueryRow(ctx, `SELECT `+chatColumns+` FROM `+chatFrom+` WHERE c.id = $1`, id))
	if err != nil {
		return nil, false, fmt.Errorf("create chat %s: %w", id, translate(err))
	}
	if err := storeAnswer(ctx, tx, p.Keyed, c, 0, created); err != nil {
		return nil, false, fmt.Errorf("create chat %s: %w", id, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, false, fmt.Errorf("create chat %s: %w", id, translate(err))
	}
	return c, true, nil
}
