package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/store/internal/param"
)

// chatColumns is the column list every chat query selects, in scanChat's
// order. Optional text columns hold NULL for "" (see the migration). A
// chat created since migration 0013 has its spec in chat_specs and the
// text null in chats.spec; createChatSQL's RETURNING, which runs before
// chat_specs has the row, gives NULL for it (withSpec).
const chatColumns = `id, tenant, coalesce(name, ''),
	CASE spec WHEN 'null' THEN (SELECT s.spec FROM chat_specs s WHERE s.id = chats.id) ELSE spec END, metadata, status,
	coalesce(stop_reason, ''), coalesce(stop_detail, ''), coalesce(error, ''),
	last_seq, turns, message_count, prompt_tokens, completion_tokens, pending_input,
	coalesce(idempotency_key, ''), coalesce(request_hash, ''), cancel_requested,
	coalesce(owner, ''), lease_expires_at, epoch, created_at, updated_at, completed_at,
	input_response, input_expires_at, run,
	CASE WHEN last_run > run THEN (SELECT count(*) FROM chat_runs r WHERE r.chat_id = chats.id AND r.run > chats.run) ELSE 0 END,
	stop_requested, forked_from, forked_at_seq, team_name, team_version`

type scanner interface{ Scan(dest ...any) error }

func scanChat(row scanner) (*chat.Chat, error) {
	var (
		c                    chat.Chat
		spec, meta, pending  []byte
		inputResp            []byte
		inputExpires         sql.NullInt64
		status, stopReason   string
		cancel, stop         int64
		lease, completed     sql.NullInt64
		forkedFrom           sql.NullString
		forkedAt             sql.NullInt64
		createdAt, updatedAt int64
		teamName             sql.NullString
		teamVersion          sql.NullInt64
	)
	err := row.Scan(&c.ID, &c.Tenant, &c.Name, &spec, &meta, &status,
		&stopReason, &c.StopDetail, &c.Error,
		&c.LastSeq, &c.Turns, &c.MessageCount, &c.PromptTokens, &c.CompletionTokens, &pending,
		&c.IdempotencyKey, &c.RequestHash, &cancel,
		&c.Owner, &lease, &c.Epoch, &createdAt, &updatedAt, &completed,
		&inputResp, &inputExpires, &c.Run, &c.QueuedRuns, &stop, &forkedFrom, &forkedAt, &teamName, &teamVersion)
	if err != nil {
		return nil, err
	}
	c.StopRequested = stop != 0
	if forkedFrom.Valid && forkedAt.Valid {
		c.ForkedFrom = &chat.ForkRef{ChatID: forkedFrom.String, Seq: forkedAt.Int64}
	}
	if teamName.Valid && teamVersion.Valid {
		c.Team = &chat.TeamRef{Name: teamName.String, Version: int(teamVersion.Int64)}
	}
	c.Spec, c.Metadata, c.PendingInput = spec, nullableJSON(meta), nullableJSON(pending)
	c.Status, c.StopReason = chat.Status(status), chat.StopReason(stopReason)
	c.CancelRequested = cancel != 0
	c.LeaseExpiresAt, c.CompletedAt = fromNullNanos(lease), fromNullNanos(completed)
	c.InputResponse, c.InputExpiresAt = nullableJSON(inputResp), fromNullNanos(inputExpires)
	c.CreatedAt, c.UpdatedAt = fromNanos(createdAt), fromNanos(updatedAt)
	return &c, nil
}

func scanChats(rows *sql.Rows) ([]*chat.Chat, error) {
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

// Times are stored as unix nanoseconds; see the migration for why.
func nanos(t time.Time) int64 { return t.UnixNano() }

func nullNanos(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

func fromNullNanos(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromNanos(n.Int64)
	return &t
}

// nullString stores "" as NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullJSON stores an absent JSON value as NULL, and JSON as text.
func nullJSON(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func nullableJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return b
}

// createChatSQL inserts a chat and returns it, unless its id belongs to an
// erased chat (an erased chat's id is never given to another chat) or its
// tenant's idempotency key is taken: then it returns no row. The single
// writer connection serializes creates, and the UNIQUE (tenant,
// idempotency_key) constraint backs that up across processes: of two
// creates with one key, the second finds the first's row. DO NOTHING covers
// only that constraint; a taken id still fails. (The WHERE is also what
// SQLite's grammar asks of an INSERT ... SELECT followed by ON CONFLICT.)
const createChatSQL = `INSERT INTO chats (id, tenant, name, spec, metadata, status, last_seq,
		message_count, idempotency_key, request_hash, created_at, updated_at, owner, lease_expires_at, epoch,
		stop_reason, stop_detail, error, turns, prompt_tokens, completion_tokens, pending_input, input_expires_at,
		completed_at, run, last_run, forked_from, forked_at_seq, team_name, team_version)
	SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
	WHERE NOT EXISTS (SELECT 1 FROM chat_tombstones WHERE id = ?)
	ON CONFLICT (tenant, idempotency_key) DO NOTHING
	RETURNING ` + chatColumns

// createChatArgs are createChatSQL's parameters for p.
func createChatArgs(id string, p *chat.CreateChatParams, created time.Time) []any {
	// A chat created for its creator (p.Owner) starts claimed: epoch 1.
	var lease, epoch any = nil, 0
	if p.Owner != "" {
		lease, epoch = nanos(p.LeaseUntil.UTC()), 1
	}
	var teamName, teamVersion any
	if p.Team != nil {
		teamName, teamVersion = p.Team.Name, p.Team.Version
	}
	// A fork starts as its copied log leaves it; a new chat queued at run 1.
	u := p.State
	if u == nil {
		u = &chat.ChatUpdate{Status: chat.StatusQueued, MessageCount: param.MessageCount(p.Events), Run: 1}
	}
	var forkedFrom, forkedAt any
	if p.ForkedFrom != nil {
		forkedFrom, forkedAt = p.ForkedFrom.ChatID, p.ForkedFrom.Seq
	}
	return []any{id, p.Tenant, nullString(param.Text(p.Name)), specElsewhere, nullJSON(p.Metadata), string(u.Status), len(p.Events),
		u.MessageCount, nullString(p.IdempotencyKey), nullString(p.RequestHash),
		nanos(created), nanos(created), nullString(p.Owner), lease, epoch,
		nullString(string(u.StopReason)), nullString(param.Text(u.StopDetail)), nullString(param.Text(u.Error)),
		u.Turns, u.PromptTokens, u.CompletionTokens, nullJSON(u.PendingInput), nullNanos(utcPtr(u.InputExpiresAt)),
		nullNanos(utcPtr(u.CompletedAt)), max(u.Run, 1), max(u.Run, 1), forkedFrom, forkedAt, teamName, teamVersion,
		id}
}

// specElsewhere is what a chats row created since migration 0013 holds
// in spec: its spec is in chat_specs (insertSpecSQL). A spec is a JSON
// object, never null.
const specElsewhere = "null"

// insertSpecSQL stores a new chat's spec, after createChatSQL wrote its
// row.
const insertSpecSQL = `INSERT INTO chat_specs (id, spec) VALUES (?, ?)`

// withSpec stores p's spec for the chat c that createChatSQL has just
// returned, and sets it on c as the chat's reads will return it.
func withSpec(ctx context.Context, ins *sql.Stmt, c *chat.Chat, p *chat.CreateChatParams) error {
	if _, err := ins.ExecContext(ctx, c.ID, string(p.Spec)); err != nil {
		return err
	}
	c.Spec = p.Spec
	return nil
}

// createOp is a chat's creation as a member of a group commit (see
// commitBatch); chat is the row written, once committed.
type createOp struct {
	id      string
	p       *chat.CreateChatParams
	args    []any // createChatSQL's
	created time.Time
	chat    *chat.Chat
}

// errTaken is createInTx's answer when createChatSQL wrote no row.
var errTaken = errors.New("id erased or idempotency key taken")

// CreateChat implements chat.Store. A new chat (not a fork, no keyed
// request to answer) joins the group committer's next batch, as appends do:
// it shares the batch's transaction and fsync instead of paying for its own
// while holding the single writer connection, which at 32 chats of 20
// messages had creates take as much of the writer's time as all the
// appends. Forks and keyed creates, which read and write more around the
// chat, keep a transaction of their own.
func (s *Store) CreateChat(ctx context.Context, p *chat.CreateChatParams) (*chat.Chat, bool, error) {
	id, err := param.CheckCreate(p)
	if err != nil {
		return nil, false, fmt.Errorf("create chat: %w", err)
	}
	if len(p.Deliveries) > 0 {
		if err := param.CheckDeliveries(p.Deliveries, p.Events); err != nil {
			return nil, false, fmt.Errorf("create chat %s: %w", id, err)
		}
	}
	created := param.Time(p.CreatedAt, s.now)
	args := createChatArgs(id, p, created)
	var c *chat.Chat
	if p.Keyed == nil && p.State == nil {
		cop := &createOp{id: id, p: p, args: args, created: created}
		err = s.commit.Append(ctx, &op{Create: cop, CreateID: cop.id})
		if errors.Is(err, chat.ErrFenced) {
			err = errTaken
		}
		c = cop.chat
	} else {
		c, err = s.createInTx(ctx, id, p, args, created)
	}
	switch {
	case errors.Is(err, errTaken):
		if p.IdempotencyKey == "" {
			return nil, false, fmt.Errorf("create chat %s: the id belongs to an erased chat: %w", id, chat.ErrConflict)
		}
		// The key is taken: answer with that chat, or a conflict.
		existing, err := scanChat(s.reader.QueryRowContext(ctx,
			`SELECT `+chatColumns+` FROM chats WHERE tenant = ? AND idempotency_key = ?`, p.Tenant, p.IdempotencyKey))
		if errors.Is(err, sql.ErrNoRows) {
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

// createInTx creates a fork or a chat with a keyed request in a
// transaction of its own; errTaken as createChatSQL says.
func (s *Store) createInTx(ctx context.Context, id string, p *chat.CreateChatParams, args []any, created time.Time) (*chat.Chat, error) {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() // a no-op after Commit
	if err := checkKeyed(ctx, tx, p.Keyed); err != nil {
		return nil, err
	}
	c, err := scanChat(tx.QueryRowContext(ctx, createChatSQL, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errTaken
	}
	if err != nil {
		return nil, err
	}
	insSpec, err := tx.PrepareContext(ctx, insertSpecSQL)
	if err != nil {
		return nil, err
	}
	defer insSpec.Close()
	if err := withSpec(ctx, insSpec, c, p); err != nil {
		return nil, err
	}
	ins, err := tx.PrepareContext(ctx, insertEventSQL)
	if err != nil {
		return nil, err
	}
	defer ins.Close()
	if err := insertEvents(ctx, ins, id, p.Events, created); err != nil {
		return nil, err
	}
	if len(p.Deliveries) > 0 {
		del, err := tx.PrepareContext(ctx, insertDeliverySQL)
		if err != nil {
			return nil, err
		}
		defer del.Close()
		if err := insertDeliveries(ctx, del, id, p.Deliveries, created); err != nil {
			return nil, err
		}
	}
	if err := storeAnswer(ctx, tx, p.Keyed, c, 0, created); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return c, nil
}

// GetChat implements chat.Store.
func (s *Store) GetChat(ctx context.Context, tenant, id string) (*chat.Chat, error) {
	cid, ok := param.ChatID(id)
	if !ok {
		return nil, fmt.Errorf("get chat %q: %w", id, chat.ErrNotFound)
	}
	c, err := scanChat(s.reader.QueryRowContext(ctx,
		`SELECT `+chatColumns+` FROM chats WHERE id = ? AND (? = '' OR tenant = ?)`, cid, tenant, tenant))
	if err != nil {
		return nil, fmt.Errorf("get chat %s: %w", cid, translate(err))
	}
	return c, nil
}

// GetProgress implements chat.Store.
func (s *Store) GetProgress(ctx context.Context, tenant, id string) (chat.Progress, error) {
	var p chat.Progress
	cid, ok := param.ChatID(id)
	if !ok {
		return p, fmt.Errorf("get progress of chat %q: %w", id, chat.ErrNotFound)
	}
	var status string
	err := s.reader.QueryRowContext(ctx, `SELECT status, last_seq, input_response IS NOT NULL
		FROM chats WHERE id = ? AND (? = '' OR tenant = ?)`, cid, tenant, tenant).
		Scan(&status, &p.LastSeq, &p.InputAnswered)
	if err != nil {
		return chat.Progress{}, fmt.Errorf("get progress of chat %s: %w", cid, translate(err))
	}
	p.Status = chat.Status(status)
	return p, nil
}

// ListChats implements chat.Store. Pages are ordered by (created_at, id)
// descending and continue strictly after the cursor's pair, which the
// indexes on (tenant[, status], created_at DESC, id DESC) serve directly.
func (s *Store) ListChats(ctx context.Context, p *chat.ListChatsParams) ([]*chat.Chat, string, error) {
	limit := param.Limit(p.Limit, param.DefaultListChats, param.MaxListChats)
	var (
		where []string
		args  []any
	)
	if p.Tenant != "" {
		where, args = append(where, "tenant = ?"), append(args, p.Tenant)
	}
	if p.Status != "" {
		where, args = append(where, "status = ?"), append(args, string(p.Status))
	}
	if p.Name != "" {
		where, args = append(where, "name = ?"), append(args, p.Name)
	}
	if p.Team != "" {
		where, args = append(where, "team_name = ?"), append(args, p.Team)
	}
	if p.CreatedAfter != nil {
		where, args = append(where, "created_at > ?"), append(args, nanos(*p.CreatedAfter))
	}
	if p.CreatedBefore != nil {
		where, args = append(where, "created_at < ?"), append(args, nanos(*p.CreatedBefore))
	}
	for _, m := range p.Metadata {
		w, a := metadataMatch(m)
		where, args = append(where, w), append(args, a...)
	}
	if p.Cursor != "" {
		cur, err := param.DecodeCursor(p.Cursor)
		if err != nil {
			return nil, "", fmt.Errorf("list chats: %w", err)
		}
		where = append(where, "(created_at < ? OR (created_at = ? AND id < ?))")
		args = append(args, nanos(cur.CreatedAt), nanos(cur.CreatedAt), cur.ID)
	}
	q := `SELECT ` + chatColumns + ` FROM chats`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, limit+1) // one more tells whether there is a next page
	rows, err := s.reader.QueryContext(ctx, q, args...)
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

// RequestCancel implements chat.Store: the active run, if any, is asked to
// cancel, and the runs queued after it are dropped.
func (s *Store) RequestCancel(ctx context.Context, tenant, id string) (*chat.Chat, error) {
	cid, ok := param.ChatID(id)
	if !ok {
		return nil, fmt.Errorf("request cancel of chat %q: %w", id, chat.ErrNotFound)
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("request cancel of chat %s: %w", cid, err)
	}
	defer tx.Rollback() // a no-op after Commit
	// updated_at is left alone: it tracks the worker's record of the log,
	// and the worker writes it when it acts on the request.
	c, err := scanChat(tx.QueryRowContext(ctx, `UPDATE chats
		SET cancel_requested = status NOT IN ('completed', 'failed', 'cancelled'), last_run = run
		WHERE id = ? AND (? = '' OR tenant = ?) AND (status NOT IN ('completed', 'failed', 'cancelled') OR last_run > run)
		RETURNING `+chatColumns, cid, tenant, tenant))
	if errors.Is(err, sql.ErrNoRows) {
		// Terminal (returned unchanged) or not there (ErrNotFound).
		return s.GetChat(ctx, tenant, cid)
	}
	if err != nil {
		return nil, fmt.Errorf("request cancel of chat %s: %w", cid, translate(err))
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM chat_runs WHERE chat_id = ? AND run > ?`, cid, c.Run); err != nil {
		return nil, fmt.Errorf("request cancel of chat %s: drop queued runs: %w", cid, translate(err))
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("request cancel of chat %s: commit: %w", cid, translate(err))
	}
	return c, nil
}

// SubmitInput implements chat.Store. One conditional UPDATE both checks and
// stores, so of two concurrent submissions of one request_id exactly one
// wins; owner IS NULL keeps an answer from slipping in while a worker
// (claimed for a cancel or an expired request) is ending the chat. The same
// UPDATE makes the chat running and clears the answered request (see
// chat.Store).
func (s *Store) SubmitInput(ctx context.Context, p *chat.SubmitInputParams) (*chat.Chat, error) {
	cid, ok := param.ChatID(p.ChatID)
	if !ok {
		return nil, fmt.Errorf("submit input to chat %q: %w", p.ChatID, chat.ErrNotFound)
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("submit input to chat %s: %w", cid, err)
	}
	defer tx.Rollback() // a no-op after Commit
	if err := checkKeyed(ctx, tx, p.Keyed); err != nil {
		return nil, fmt.Errorf("submit input to chat %s: %w", cid, err)
	}
	c, err := scanChat(tx.QueryRowContext(ctx, `UPDATE chats SET input_response = ?, status = 'running', pending_input = NULL
		WHERE id = ? AND (? = '' OR tenant = ?) AND status = 'awaiting_input' AND input_response IS NULL
		  AND owner IS NULL AND json_extract(pending_input, '$.request_id') = ?
		RETURNING `+chatColumns, string(p.Response), cid, p.Tenant, p.Tenant, p.RequestID))
	if errors.Is(err, sql.ErrNoRows) {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM chats WHERE id = ? AND (? = '' OR tenant = ?)`, cid, p.Tenant, p.Tenant).Scan(&n); err != nil {
			return nil, fmt.Errorf("submit input to chat %s: %w", cid, translate(err))
		}
		if n == 0 {
			return nil, fmt.Errorf("submit input to chat %s: %w", cid, chat.ErrNotFound)
		}
		return nil, fmt.Errorf("submit input %q to chat %s: %w", p.RequestID, cid, chat.ErrNoPendingInput)
	}
	if err != nil {
		return nil, fmt.Errorf("submit input to chat %s: %w", cid, translate(err))
	}
	if err := storeAnswer(ctx, tx, p.Keyed, c, 0, param.Time(p.Now, s.now)); err != nil {
		return nil, fmt.Errorf("submit input to chat %s: %w", cid, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("submit input to chat %s: commit: %w", cid, translate(err))
	}
	return c, nil
}

// CountByStatus implements chat.Store. Every status is in the map, zero or not.
func (s *Store) CountByStatus(ctx context.Context) (map[chat.Status]int64, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT status, count(*) FROM chats GROUP BY status`)
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
