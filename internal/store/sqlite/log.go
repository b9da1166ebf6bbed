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

const eventColumns = `chat_id, seq, type, coalesce(role, ''), coalesce(name, ''), coalesce(content, ''),
	tool_calls, tool_responses, data, created_at`

// ListEvents implements chat.Store. An unknown chat has no events.
func (s *Store) ListEvents(ctx context.Context, p *chat.ListEventsParams) ([]chat.Event, error) {
	id, ok := param.ChatID(p.ChatID)
	if !ok {
		return nil, nil
	}
	limit := param.Limit(p.Limit, param.DefaultListEvents, param.MaxListEvents)
	typeFilter, err := param.EventTypeFilter(p.Type)
	if err != nil {
		return nil, err
	}
	rows, err := s.reader.QueryContext(ctx, `SELECT `+eventColumns+` FROM events
		WHERE chat_id = ? AND seq > ?`+typeFilter+` ORDER BY seq LIMIT ?`, id, p.After, limit)
	if err != nil {
		return nil, fmt.Errorf("list events of chat %s: %w", id, translate(err))
	}
	defer rows.Close()
	var es []chat.Event
	for rows.Next() {
		var (
			e                 chat.Event
			typ               string
			calls, resps, dat []byte
			created           int64
		)
		if err := rows.Scan(&e.ChatID, &e.Seq, &typ, &e.Role, &e.Name, &e.Content, &calls, &resps, &dat, &created); err != nil {
			return nil, fmt.Errorf("list events of chat %s: %w", id, err)
		}
		e.Type, e.Data, e.CreatedAt = chat.EventType(typ), nullableJSON(dat), fromNanos(created)
		if err := unmarshalCalls(calls, resps, &e); err != nil {
			return nil, fmt.Errorf("list events of chat %s: seq %d: %w", id, e.Seq, err)
		}
		es = append(es, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list events of chat %s: %w", id, translate(err))
	}
	return es, nil
}

func unmarshalCalls(calls, resps []byte, e *chat.Event) error {
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

// marshalCalls returns the tool_calls and tool_responses column values; an
// empty list is stored as NULL, like every absent value.
func marshalCalls(e *chat.Event) (calls, resps any, err error) {
	if len(e.ToolCalls) > 0 {
		b, err := json.Marshal(param.ToolCalls(e.ToolCalls))
		if err != nil {
			return nil, nil, fmt.Errorf("seq %d: tool_calls: %w", e.Seq, err)
		}
		calls = string(b)
	}
	if len(e.ToolResponses) > 0 {
		b, err := json.Marshal(param.ToolResponses(e.ToolResponses))
		if err != nil {
			return nil, nil, fmt.Errorf("seq %d: tool_responses: %w", e.Seq, err)
		}
		resps = string(b)
	}
	return calls, resps, nil
}

const insertEventSQL = `INSERT INTO events
	(chat_id, seq, type, role, name, content, tool_calls, tool_responses, data, created_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// insertEvents writes events of chat id with stmt, a transaction's prepared
// insertEventSQL (parsing the SQL once per transaction rather than per event
// is most of the cost of these small inserts). A zero CreatedAt becomes def.
func insertEvents(ctx context.Context, stmt *sql.Stmt, id string, events []chat.Event, def time.Time) error {
	for i := range events {
		e := &events[i]
		calls, resps, err := marshalCalls(e)
		if err != nil {
			return err
		}
		created := def
		if !e.CreatedAt.IsZero() {
			created = e.CreatedAt
		}
		if _, err := stmt.ExecContext(ctx, id, e.Seq, string(e.Type), nullString(param.Text(e.Role)), nullString(param.Text(e.Name)),
			nullString(param.Text(e.Content)), calls, resps, nullJSON(e.Data), nanos(created)); err != nil {
			return err
		}
	}
	return nil
}

// op is one member of the group commit: an append, or a chat's creation.
type op = param.Op[createOp]

// Append implements chat.Store. The append joins the group committer's next
// batch; see commitBatch.
func (s *Store) Append(ctx context.Context, p *chat.AppendParams) error {
	q, err := param.PrepareAppend(p, s.now)
	if err != nil {
		return err
	}
	if err := s.commit.Append(ctx, &op{Append: q}); err != nil {
		return fmt.Errorf("%s: %w", param.DescribeAppend(q), translate(err))
	}
	return nil
}

// appendChatSQL is the fencing check and the record update in one statement:
// it changes the row only if the caller's epoch is the chat's and its first
// seq follows the chat's last_seq, and, for the append that starts a queued
// run, only while that run is still queued with its key (see the Postgres
// store's appendsSQL). An append that ends a run clears its cancel and stop
// requests. Zero rows changed means fenced; the
// single writer connection means nothing can slip in between this statement
// and the event inserts that follow it in the same transaction.
const appendChatSQL = `UPDATE chats SET
	status = ?, stop_reason = ?, stop_detail = ?, error = ?,
	turns = ?, message_count = ?, prompt_tokens = ?, completion_tokens = ?,
	pending_input = ?, completed_at = ?, updated_at = ?, last_seq = ?,
	input_expires_at = ?, input_response = NULL,
	owner = CASE WHEN ? THEN NULL ELSE owner END,
	lease_expires_at = CASE WHEN ? THEN NULL ELSE lease_expires_at END,
	run = ?,
	cancel_requested = cancel_requested AND ? NOT IN ('completed', 'failed', 'cancelled'),
	stop_requested = stop_requested AND ? NOT IN ('completed', 'failed', 'cancelled')
	WHERE id = ? AND epoch = ? AND last_seq = ?
	  AND (? IS NULL OR EXISTS (SELECT 1 FROM chat_runs r WHERE r.chat_id = chats.id AND r.run = ? AND r.key = ?))`

// appendSteadySQL is appendChatSQL for the common append, one that leaves
// the chat's status as it is, neither ends nor starts a run and keeps the
// lease: it sets only the columns no index of chats covers. SQLite rewrites
// an index entry whenever an UPDATE names one of the index's columns in its
// SET, changed or not, so appendChatSQL (which names status, completed_at
// and lease_expires_at) pays for three indexes on every append; this one
// for none. Its extra conditions (the same status, no completed_at) make it
// change nothing where appendChatSQL would do more than it does; then
// commitBatch runs appendChatSQL, which also decides fencing. Where its
// conditions hold it sets what appendChatSQL would: status and completed_at
// keep their values, owner and lease are kept (no release), cancel and stop
// requests are kept (the status is not a final one) and there is no run's
// key to check (no StartKey).
const appendSteadySQL = `UPDATE chats SET
	stop_reason = ?, stop_detail = ?, error = ?,
	turns = ?, message_count = ?, prompt_tokens = ?, completion_tokens = ?,
	pending_input = ?, updated_at = ?, last_seq = ?,
	input_expires_at = ?, input_response = NULL, run = ?
	WHERE id = ? AND epoch = ? AND last_seq = ? AND status = ? AND completed_at IS NULL`

// steady reports whether p may take appendSteadySQL first.
func steady(p *chat.AppendParams) bool {
	u := &p.Update
	return !u.ReleaseLease && u.CompletedAt == nil && p.StartKey == "" && !u.Status.Terminal()
}

// insertChunks are the sizes of the multi-row event inserts the group commit
// prepares, largest first: a batch's events go out in as few statements as
// these sizes make (26 events: 16 + 4 + 4 + 1 + 1), rather than one
// statement per event, whose fixed cost (database/sql, the driver's bind
// and step, the VDBE's setup and halt) was most of an insert's.
var insertChunks = [...]int{64, 16, 4, 1}

// eventParams is the number of parameters of one event row.
const eventParams = 10

// insertEventsSQL is insertEventSQL with n rows.
func insertEventsSQL(n int) string {
	row := "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	return insertEventSQL[:strings.Index(insertEventSQL, "VALUES")] + "VALUES " + strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

// eventArgs appends the parameters of e's row to args; a zero CreatedAt
// becomes def.
func eventArgs(args []any, id string, e *chat.Event, def time.Time) ([]any, error) {
	calls, resps, err := marshalCalls(e)
	if err != nil {
		return nil, err
	}
	created := def
	if !e.CreatedAt.IsZero() {
		created = e.CreatedAt
	}
	return append(args, id, e.Seq, string(e.Type), nullString(param.Text(e.Role)), nullString(param.Text(e.Name)),
		nullString(param.Text(e.Content)), calls, resps, nullJSON(e.Data), nanos(created)), nil
}

// appendStmts are the group commit's statements, prepared on the writer
// connection by the first batch and kept for the store's life: parsing
// them again for every batch was a third to a half of a batch's time at
// 32 chats (BenchmarkAppend).
// Only the committer's one goroutine uses them (SQLite has one writer, so
// its committer has one batch in flight), and Close closes them.
type appendStmts struct {
	steady, upd, create, spec, deliver *sql.Stmt
	ins                                [len(insertChunks)]*sql.Stmt
}

// prepare prepares the statements if they are not yet.
func (a *appendStmts) prepare(ctx context.Context, db *sql.DB) error {
	if a.upd != nil {
		return nil
	}
	var (
		b   appendStmts
		err error
	)
	if b.steady, err = db.PrepareContext(ctx, appendSteadySQL); err == nil {
		b.upd, err = db.PrepareContext(ctx, appendChatSQL)
	}
	if err == nil {
		b.create, err = db.PrepareContext(ctx, createChatSQL)
	}
	if err == nil {
		b.spec, err = db.PrepareContext(ctx, insertSpecSQL)
	}
	if err == nil {
		b.deliver, err = db.PrepareContext(ctx, insertDeliverySQL)
	}
	for i, n := range insertChunks {
		if err == nil {
			b.ins[i], err = db.PrepareContext(ctx, insertEventsSQL(n))
		}
	}
	if err != nil {
		return errors.Join(err, b.close())
	}
	*a = b
	return nil
}

func (a *appendStmts) close() error {
	var errs []error
	for _, st := range append([]*sql.Stmt{a.steady, a.upd, a.create, a.spec, a.deliver}, a.ins[:]...) {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

// commitBatch is the groupcommit.CommitFunc: all appends and creates of
// the batch in one transaction, hence one fsync. Each append's chat record
// is updated (and fenced) with a statement of its own, each create's chat
// inserted; the events of all that were not fenced are then inserted
// together, and their webhook deliveries after them.
func (s *Store) commitBatch(ctx context.Context, batch []*op, fenced []bool) error {
	if err := s.stmts.prepare(ctx, s.writer); err != nil {
		return err
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	// On the writer's one connection, where they were prepared: the
	// transaction uses them as they are.
	var stmts appendStmts
	txStmt := func(st **sql.Stmt, prepared *sql.Stmt) *sql.Stmt {
		if *st == nil {
			*st = tx.StmtContext(ctx, prepared)
		}
		return *st
	}
	var rows []any
	for i, o := range batch {
		id, events, def := o.Chat(), []chat.Event(nil), time.Time{}
		if c := o.Create; c != nil {
			ch, err := scanChat(txStmt(&stmts.create, s.stmts.create).QueryRowContext(ctx, c.args...))
			if errors.Is(err, sql.ErrNoRows) {
				fenced[i] = true
				continue
			}
			if err != nil {
				return err
			}
			if err := withSpec(ctx, txStmt(&stmts.spec, s.stmts.spec), ch, c.p); err != nil {
				return err
			}
			c.chat, events, def = ch, c.p.Events, c.created
		} else {
			ok, err := s.updateChat(ctx, o.Append, func() *sql.Stmt { return txStmt(&stmts.steady, s.stmts.steady) },
				func() *sql.Stmt { return txStmt(&stmts.upd, s.stmts.upd) })
			if err != nil {
				return err
			}
			if !ok {
				fenced[i] = true
				continue
			}
			events, def = o.Append.Events, o.Append.Update.UpdatedAt
		}
		for j := range events {
			if rows, err = eventArgs(rows, id, &events[j], def); err != nil {
				return err
			}
		}
	}
	for n := len(rows) / eventParams; n > 0; {
		for i, size := range insertChunks {
			if size > n {
				continue
			}
			if _, err := txStmt(&stmts.ins[i], s.stmts.ins[i]).ExecContext(ctx, rows[:size*eventParams]...); err != nil {
				return err
			}
			rows, n = rows[size*eventParams:], n-size
			break
		}
	}
	// After the events: a delivery names its event.
	for i, o := range batch {
		if fenced[i] {
			continue
		}
		ds, at := []chat.Delivery(nil), time.Time{}
		if o.Create != nil {
			ds, at = o.Create.p.Deliveries, o.Create.created
		} else {
			ds, at = o.Append.Deliveries, o.Append.Update.UpdatedAt
		}
		if len(ds) > 0 {
			if err := insertDeliveries(ctx, txStmt(&stmts.deliver, s.stmts.deliver), o.Chat(), ds, at); err != nil {
				return err
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.ckpt.committed()
	return nil
}

// updateChat updates p's chat record, with the steady statement when p
// allows it and it matches, else with appendChatSQL; false means fenced.
func (s *Store) updateChat(ctx context.Context, p *chat.AppendParams, steadyStmt, fullStmt func() *sql.Stmt) (bool, error) {
	u := &p.Update
	first, last := p.Events[0].Seq, p.Events[len(p.Events)-1].Seq
	if steady(p) {
		res, err := steadyStmt().ExecContext(ctx,
			nullString(string(u.StopReason)), nullString(param.Text(u.StopDetail)), nullString(param.Text(u.Error)),
			u.Turns, u.MessageCount, u.PromptTokens, u.CompletionTokens,
			nullJSON(u.PendingInput), nanos(u.UpdatedAt), last,
			nullNanos(utcPtr(u.InputExpiresAt)), max(u.Run, 1),
			p.ChatID, p.Epoch, first-1, string(u.Status))
		if err != nil {
			return false, err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return n > 0, err
		}
	}
	release := 0
	if u.ReleaseLease {
		release = 1
	}
	res, err := fullStmt().ExecContext(ctx,
		string(u.Status), nullString(string(u.StopReason)), nullString(param.Text(u.StopDetail)), nullString(param.Text(u.Error)),
		u.Turns, u.MessageCount, u.PromptTokens, u.CompletionTokens,
		nullJSON(u.PendingInput), nullNanos(utcPtr(u.CompletedAt)), nanos(u.UpdatedAt), last,
		nullNanos(utcPtr(u.InputExpiresAt)),
		release, release,
		max(u.Run, 1), string(u.Status), string(u.Status),
		p.ChatID, p.Epoch, first-1,
		nullString(p.StartKey), max(u.Run, 1), nullString(p.StartKey))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
