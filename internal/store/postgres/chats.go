package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/store/internal/param"
)

// chatColumns is the column list every chat query selects, in scanChat's
// order, from chatFrom: what never changes after create is in chats (c),
// what appends change in the narrow chat_state (s; see migration 0003).
// Optional text columns hold NULL for "" (see the migrations). The spec is
// spec_text, or spec for a chat created before migration 0011.
const chatColumns = `c.id::text, c.tenant, coalesce(c.name, ''), coalesce(c.spec_text, c.spec::text), c.metadata, s.status,
	coalesce(s.stop_reason, ''), coalesce(s.stop_detail, ''), coalesce(s.error, ''),
	s.last_seq, s.turns, s.message_count, s.prompt_tokens, s.completion_tokens, s.pending_input,
	coalesce(c.idempotency_key, ''), coalesce(c.request_hash, ''), s.cancel_requested,
	coalesce(s.owner, ''), s.lease_expires_at, s.epoch, c.created_at, s.updated_at, s.completed_at,
	s.input_response, s.input_expires_at, s.run,
	CASE WHEN s.last_run > s.run THEN (SELECT count(*) FROM chat_runs r WHERE r.chat_id = s.id AND r.run > s.run) ELSE 0 END,
	s.stop_requested,
	c.forked_from::text, c.forked_at_seq, c.team_name, c.team_version`

// chatFrom joins a chat's two rows for chatColumns.
const chatFrom = `chats c JOIN chat_state s ON s.id = c.id`

func scanChat(row pgx.Row) (*chat.Chat, error) {
	var (
		c                   chat.Chat
		spec, meta, pending []byte
		inputResp           []byte
		status, stopReason  string
		forkedFrom          *string
		forkedAt            *int64
		teamName            *string
		teamVersion         *int32
	)
	err := row.Scan(&c.ID, &c.Tenant, &c.Name, &spec, &meta, &status,
		&stopReason, &c.StopDetail, &c.Error,
		&c.LastSeq, &c.Turns, &c.MessageCount, &c.PromptTokens, &c.CompletionTokens, &pending,
		&c.IdempotencyKey, &c.RequestHash, &c.CancelRequested,
		&c.Owner, &c.LeaseExpiresAt, &c.Epoch, &c.CreatedAt, &c.UpdatedAt, &c.CompletedAt,
		&inputResp, &c.InputExpiresAt, &c.Run, &c.QueuedRuns, &c.StopRequested,
		&forkedFrom, &forkedAt, &teamName, &teamVersion)
	if err != nil {
		return nil, err
	}
	if forkedFrom != nil && forkedAt != nil {
		c.ForkedFrom = &chat.ForkRef{ChatID: *forkedFrom, Seq: *forkedAt}
	}
	if teamName != nil && teamVersion != nil {
		c.Team = &chat.TeamRef{Name: *teamName, Version: int(*teamVersion)}
	}
	c.Spec, c.Metadata, c.PendingInput = spec, nullableJSON(meta), nullableJSON(pending)
	c.Status, c.StopReason = chat.Status(status), chat.StopReason(stopReason)
	// pgx returns timestamptz in the local zone; the store speaks UTC.
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	c.LeaseExpiresAt, c.CompletedAt = utcPtr(c.LeaseExpiresAt), utcPtr(c.CompletedAt)
	c.InputResponse, c.InputExpiresAt = nullableJSON(inputResp), utcPtr(c.InputExpiresAt)
	return &c, nil
}

func scanChats(rows pgx.Rows) ([]*chat.Chat, error) {
	defer rows.Close()
	var cs []*chat.Chat
	for rows.Next() {
		c, err := scanChat(rows)
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, rows.Err()
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// nullString stores "" as NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullJSON stores an absent JSON value as NULL. pgx sends a []byte bound to
// a jsonb parameter as the JSON text it is.
func nullJSON(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}

func nullableJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return b
}

// createSQL creates a chat as one statement: its chats row, its chat_state
// row and its first events. It runs in the group committer's batches like an
// append (see commitBatch), so a create costs no transaction of its own and
// shares a commit with whatever else is being written.
//
// Race-safe idempotency: of two concurrent inserts with one (tenant, key),
// the unique index makes the second wait for the first to commit, and ON
// CONFLICT DO NOTHING then makes it insert nothing at all (the later CTEs
// select from the empty RETURNING): zero rows affected, which CreateChat
// answers by reading the winner. DO NOTHING covers only that constraint: a
// taken id still fails with a unique violation.
//
// An id with a tombstone (an erased chat's) is not inserted either: the
// same zero rows, which CreateChat tells from a taken key.
var createSQL = createStatement(false)

// createOutboxSQL is createSQL that also writes the webhook deliveries of
// the chat's first events (arrays from $25 on), for the creates that have
// any: the others keep the statement without the outbox.
var createOutboxSQL = createStatement(true)

func createStatement(outbox bool) string {
	q := `WITH new_chat AS (
	INSERT INTO chats (id, tenant, name, spec_text, metadata, idempotency_key, request_hash, created_at, team_name, team_version)
	SELECT $1::uuid, $2::text, $3::text, $4::text, $5::jsonb, $6::text, $7::text, $8::timestamptz, $14::text, $15::int
	WHERE NOT EXISTS (SELECT 1 FROM chat_tombstones WHERE id = $1::uuid)
	ON CONFLICT (tenant, idempotency_key) DO NOTHING
	RETURNING id
), new_state AS (
	INSERT INTO chat_state (id, status, last_seq, message_count, owner, lease_expires_at, epoch, created_at, updated_at)
	SELECT id, 'queued', $9, $10, $11, $12, $13, $8, $8 FROM new_chat
	RETURNING id
)`
	if outbox {
		q += `, new_outbox AS (
	INSERT INTO webhook_deliveries (chat_id, seq, url, tenant, event, source, created_at, updated_at, next_attempt_at)
	SELECT n.id, o.seq, o.url, $2, o.event, o.source, $8, $8, $8
	FROM unnest($25::bigint[], $26::text[], $27::text[], $28::text[]) AS o(seq, url, event, source)
	CROSS JOIN new_state n
)`
	}
	return q + `
INSERT INTO events (` + eventInsertColumns + `)
SELECT n.id, ` + eventSelect(16, false) + ` CROSS JOIN new_state n`
}

// createOp is a create waiting in the group committer.
type createOp struct {
	id   string
	args []any
	// outbox: args include the deliveries (createOutboxSQL).
	outbox bool
}

// CreateChat implements chat.Store. The chat it returns is built from p, as
// the row was written, without reading it back.
func (s *Store) CreateChat(ctx context.Context, p *chat.CreateChatParams) (*chat.Chat, bool, error) {
	id, err := param.CheckCreate(p)
	if err != nil {
		return nil, false, fmt.Errorf("create chat: %w", err)
	}
	if p.State != nil {
		return s.createFork(ctx, id, p)
	}
	// Postgres keeps microseconds; pgx truncates, and so does the chat we return.
	created := param.Time(p.CreatedAt, s.now).Truncate(time.Microsecond)
	var evs eventColumns
	if err := evs.add(p.Events, created); err != nil {
		return nil, false, fmt.Errorf("create chat %s: %w", id, err)
	}
	c := &chat.Chat{ID: id, Tenant: p.Tenant, Name: param.Text(p.Name), Spec: p.Spec, Metadata: nullableJSON(p.Metadata),
		Status: chat.StatusQueued, LastSeq: int64(len(p.Events)), MessageCount: param.MessageCount(p.Events), Run: 1,
		IdempotencyKey: p.IdempotencyKey, RequestHash: p.RequestHash, CreatedAt: created, UpdatedAt: created, Team: p.Team}
	var lease any
	if p.Owner != "" {
		until := p.LeaseUntil.UTC().Truncate(time.Microsecond)
		c.Owner, c.Epoch, c.LeaseExpiresAt, lease = p.Owner, 1, &until, until
	}
	var teamName, teamVersion any
	if p.Team != nil {
		teamName, teamVersion = p.Team.Name, int32(p.Team.Version)
	}
	args := append([]any{
		id, p.Tenant, nullString(c.Name), []byte(p.Spec), nullJSON(p.Metadata),
		nullString(p.IdempotencyKey), nullString(p.RequestHash), created,
		c.LastSeq, c.MessageCount, nullString(c.Owner), lease, c.Epoch, teamName, teamVersion,
	}, evs.args()...)
	cop := &createOp{id: id, args: args}
	if len(p.Deliveries) > 0 {
		if err := param.CheckDeliveries(p.Deliveries, p.Events); err != nil {
			return nil, false, fmt.Errorf("create chat %s: %w", id, err)
		}
		var o outboxColumns
		o.add(p.Deliveries)
		cop.args, cop.outbox = append(cop.args, o.seqs, o.urls, o.events, o.sources), true
	}
	err = s.commit.Append(ctx, &op{Create: cop, CreateID: cop.id})
	switch {
	case errors.Is(err, chat.ErrFenced): // the idempotency key is taken, or the id was erased
		if p.IdempotencyKey == "" {
			return nil, false, fmt.Errorf("create chat %s: the id belongs to an erased chat: %w", id, chat.ErrConflict)
		}
		existing, err := scanChat(s.pool.QueryRow(ctx,
			`SELECT `+chatColumns+` FROM `+chatFrom+` WHERE c.tenant = $1 AND c.idempotency_key = $2`, p.Tenant, p.IdempotencyKey))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, false, fmt.Errorf("create chat %s: the id belongs to an erased chat: %w", id, chat.ErrConflict)
		}
		if err != nil {
			return nil, false, fmt.Errorf("create chat %s: find chat with idempotency key: %w", id, translate(err))
		}
		if existing.RequestHash != p.RequestHash {
			return nil, false, fmt.Errorf("create chat: idempotency key %q was used for another request: %w", p.IdempotencyKey, chat.ErrConflict)
		}
		return existing, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("create chat %s: %w", id, translate(err))
	}
	return c, true, nil
}

// GetChat implements chat.Store.
func (s *Store) GetChat(ctx context.Context, tenant, id string) (*chat.Chat, error) {
	cid, ok := param.ChatID(id)
	if !ok {
		return nil, fmt.Errorf("get chat %q: %w", id, chat.ErrNotFound)
	}
	c, err := scanChat(s.pool.QueryRow(ctx,
		`SELECT `+chatColumns+` FROM `+chatFrom+` WHERE c.id = $1 AND ($2 = '' OR c.tenant = $2)`, cid, tenant))
	if err != nil {
		return nil, fmt.Errorf("get chat %s: %w", cid, translate(err))
	}
	return c, nil
}

// GetProgress implements chat.Store from the narrow chat_state row; the
// chats row (spec and all) is read only to check the tenant, and even then
// its spec is not detoasted.
func (s *Store) GetProgress(ctx context.Context, tenant, id string) (chat.Progress, error) {
	var p chat.Progress
	cid, ok := param.ChatID(id)
	if !ok {
		return p, fmt.Errorf("get progress of chat %q: %w", id, chat.ErrNotFound)
	}
	var (
		status string
		err    error
	)
	if tenant == "" {
		err = s.pool.QueryRow(ctx, `SELECT status, last_seq, input_response IS NOT NULL FROM chat_state WHERE id = $1`, cid).
			Scan(&status, &p.LastSeq, &p.InputAnswered)
	} else {
		err = s.pool.QueryRow(ctx, `SELECT s.status, s.last_seq, s.input_response IS NOT NULL
			FROM chat_state s JOIN chats c ON c.id = s.id WHERE s.id = $1 AND c.tenant = $2`, cid, tenant).
			Scan(&status, &p.LastSeq, &p.InputAnswered)
	}
	if err != nil {
		return chat.Progress{}, fmt.Errorf("get progress of chat %s: %w", cid, translate(err))
	}
	p.Status = chat.Status(status)
	return p, nil
}

// ListChats implements chat.Store. Pages are ordered by (created_at, id)
// descending and continue strictly after the cursor's pair. The SQL is built
// per combination of filters, rather than with "$1 = ” OR tenant = $1", so
// that every variant gets a plan that uses its index.
func (s *Store) ListChats(ctx context.Context, p *chat.ListChatsParams) ([]*chat.Chat, string, error) {
	limit := param.Limit(p.Limit, param.DefaultListChats, param.MaxListChats)
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if p.Tenant != "" {
		where = append(where, "c.tenant = "+arg(p.Tenant))
	}
	if p.Status != "" {
		where = append(where, "s.status = "+arg(string(p.Status)))
	}
	if p.Name != "" {
		where = append(where, "c.name = "+arg(p.Name))
	}
	if p.Team != "" {
		where = append(where, "c.team_name = "+arg(p.Team))
	}
	if p.CreatedAfter != nil {
		where = append(where, "c.created_at > "+arg(p.CreatedAfter.UTC()))
	}
	if p.CreatedBefore != nil {
		where = append(where, "c.created_at < "+arg(p.CreatedBefore.UTC()))
	}
	// Each metadata filter is a containment (or two, for a value that is
	// also a JSON number or literal), which the GIN index on metadata
	// serves; see migration 0005.
	for _, m := range p.Metadata {
		var alts []string
		for _, v := range param.MetadataValues(m.Value) {
			obj, err := json.Marshal(map[string]json.RawMessage{m.Key: v})
			if err != nil {
				return nil, "", fmt.Errorf("list chats: metadata filter %q: %w", m.Key, err)
			}
			alts = append(alts, "c.metadata @> "+arg(string(obj))+"::jsonb")
		}
		where = append(where, "("+strings.Join(alts, " OR ")+")")
	}
	if p.Cursor != "" {
		cur, err := param.DecodeCursor(p.Cursor)
		if err != nil {
			return nil, "", fmt.Errorf("list chats: %w", err)
		}
		// A row comparison, which Postgres matches against the
		// (…, created_at DESC, id DESC) indexes as one range.
		where = append(where, fmt.Sprintf("(c.created_at, c.id) < (%s, %s::uuid)", arg(cur.CreatedAt), arg(cur.ID)))
	}
	q := `SELECT ` + chatColumns + ` FROM ` + chatFrom
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY c.created_at DESC, c.id DESC LIMIT ` + arg(limit+1) // one more: is there a next page?
	if len(p.Metadata) > 0 {
		// Planned for these values, every time: a plan cached for any
		// value of a containment (a generic plan) walks the tenant's chats
		// newest first and tests each, which is right for a value one chat
		// in ten has and reads the whole tenant for one no chat has; the
		// plan for the value knows which, from the GIN index's statistics.
		args = append([]any{pgx.QueryExecModeExec}, args...)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list chats: %w", translate(err))
	}
	cs, err := scanChats(rows)
	if err != nil {
		return nil, "", fmt.Errorf("list chats: %w", translate(err))
	}
	next := ""
	if len(cs) > limit {
		cs = cs[:limit]
		next = param.EncodeCursor(cs[limit-1])
	}
	return cs, next, nil
}

// RequestCancel implements chat.Store. The active run, if any, is asked to
// cancel, and the runs queued after it are dropped (their rows deleted, so
// that a worker about to start one is fenced: see appendsSQL).
func (s *Store) RequestCancel(ctx context.Context, tenant, id string) (*chat.Chat, error) {
	cid, ok := param.ChatID(id)
	if !ok {
		return nil, fmt.Errorf("request cancel of chat %q: %w", id, chat.ErrNotFound)
	}
	// updated_at is left alone: it tracks the worker's record of the log,
	// and the worker writes it when it acts on the request.
	c, err := scanChat(s.pool.QueryRow(ctx, `WITH s AS (
			UPDATE chat_state AS s SET cancel_requested = s.status NOT IN ('completed', 'failed', 'cancelled'),
				last_run = s.run
			FROM chats c
			WHERE s.id = $1 AND c.id = s.id AND ($2 = '' OR c.tenant = $2)
			  AND (s.status NOT IN ('completed', 'failed', 'cancelled') OR s.last_run > s.run)
			RETURNING s.*
		), dropped AS (
			DELETE FROM chat_runs r USING s WHERE r.chat_id = s.id AND r.run > s.run
		)
		SELECT `+chatColumns+` FROM chats c JOIN s ON s.id = c.id`, cid, tenant))
	if errors.Is(err, pgx.ErrNoRows) {
		// Terminal (returned unchanged) or not there (ErrNotFound).
		return s.GetChat(ctx, tenant, cid)
	}
	if err != nil {
		return nil, fmt.Errorf("request cancel of chat %s: %w", cid, translate(err))
	}
	if !c.Status.Terminal() {
		// The replica running the chat cuts its turn at once instead of at
		// its next lease renewal.
		s.notifyChat(ctx, channelCancel, cid)
	}
	return c, nil
}

// notifyChat sends a notification naming one chat; a failure only costs
// the wait for the next lease renewal or poll, so it is logged.
func (s *Store) notifyChat(ctx context.Context, channel, id string) {
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, id); err != nil {
		s.log.Warn("notify", "channel", channel, "chat_id", id, "err", err)
	}
}

// SubmitInput implements chat.Store. One conditional UPDATE both checks and
// stores, so of two concurrent submissions of one request_id exactly one
// wins (the second re-checks the committed row and finds the answer there);
// owner IS NULL keeps an answer from slipping in while a worker (claimed for
// a cancel or an expired request) is ending the chat. The same UPDATE makes
// the chat running and clears the answered request (see chat.Store), so
// that no read after it, on any replica, shows that request again.
func (s *Store) SubmitInput(ctx context.Context, p *chat.SubmitInputParams) (*chat.Chat, error) {
	cid, ok := param.ChatID(p.ChatID)
	if !ok {
		return nil, fmt.Errorf("submit input to chat %q: %w", p.ChatID, chat.ErrNotFound)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("submit input to chat %s: %w", cid, translate(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if p.Keyed != nil {
		// Held to the commit: two requests with one key are answered one
		// after the other.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM chat_state WHERE id = $1 FOR NO KEY UPDATE`, cid); err != nil {
			return nil, fmt.Errorf("submit input to chat %s: %w", cid, translate(err))
		}
		if err := checkKeyed(ctx, tx, p.Keyed); err != nil {
			return nil, fmt.Errorf("submit input to chat %s: %w", cid, err)
		}
	}
	c, err := scanChat(tx.QueryRow(ctx, `WITH s AS (
			UPDATE chat_state AS s SET input_response = $1, status = 'running', pending_input = NULL FROM chats c
			WHERE s.id = $2 AND c.id = s.id AND ($3 = '' OR c.tenant = $3) AND s.status = 'awaiting_input'
			  AND s.input_response IS NULL AND s.owner IS NULL AND s.pending_input->>'request_id' = $4
			RETURNING s.*)
		SELECT `+chatColumns+` FROM chats c JOIN s ON s.id = c.id`, []byte(p.Response), cid, p.Tenant, p.RequestID))
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := s.GetChat(ctx, p.Tenant, cid); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("submit input %q to chat %s: %w", p.RequestID, cid, chat.ErrNoPendingInput)
	}
	if err != nil {
		return nil, fmt.Errorf("submit input to chat %s: %w", cid, translate(err))
	}
	if err := storeAnswer(ctx, tx, p.Keyed, c, 0, param.Time(p.Now, s.now)); err != nil {
		return nil, fmt.Errorf("submit input to chat %s: %w", cid, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("submit input to chat %s: %w", cid, translate(err))
	}
	return c, nil
}

// CountByStatus implements chat.Store. Every status is in the map, zero or not.
func (s *Store) CountByStatus(ctx context.Context) (map[chat.Status]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT status, count(*) FROM chat_state GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count chats by status: %w", translate(err))
	}
	defer rows.Close()
	counts := make(map[chat.Status]int64, len(chat.AllStatuses))
	for _, st := range chat.AllStatuses {
		counts[st] = 0
	}
	for rows.Next() {
		var (
			st string
			n  int64
		)
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count chats by status: %w", err)
		}
		counts[chat.Status(st)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count chats by status: %w", translate(err))
	}
	return counts, nil
}
