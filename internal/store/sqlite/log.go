package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
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

// Append implements chat.Store. The append joins the group committer's next
// batch; see commitBatch.
func (s *Store) Append(ctx context.Context, p *chat.AppendParams) error {
	q, err := param.PrepareAppend(p, s.now)
	if err != nil {
		return err
	}
	if err := s.commit.Append(ctx, q); err != nil {
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

// appendStmts are the group commit's statements, prepared on the writer
// connection by the first batch and kept for the store's life: parsing
// them again for every batch was a third to a half of a batch's time at
// 32 chats (BenchmarkAppend).
// Only the committer's one goroutine uses them (SQLite has one writer, so
// its committer has one batch in flight), and Close closes them.
type appendStmts struct {
	upd, ins *sql.Stmt
}

// prepare prepares the statements if they are not yet.
func (a *appendStmts) prepare(ctx context.Context, db *sql.DB) error {
	if a.upd != nil {
		return nil
	}
	upd, err := db.PrepareContext(ctx, appendChatSQL)
	if err != nil {
		return err
	}
	ins, err := db.PrepareContext(ctx, insertEventSQL)
	if err != nil {
		upd.Close()
		return err
	}
	a.upd, a.ins = upd, ins
	return nil
}

func (a *appendStmts) close() error {
	if a.upd == nil {
		return nil
	}
	return errors.Join(a.upd.Close(), a.ins.Close())
}

// commitBatch is the groupcommit.CommitFunc: all appends of the batch in one
// transaction, hence one fsync.
func (s *Store) commitBatch(ctx context.Context, batch []*chat.AppendParams, fenced []bool) error {
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
	upd := tx.StmtContext(ctx, s.stmts.upd)
	ins := tx.StmtContext(ctx, s.stmts.ins)
	for i, p := range batch {
		u := &p.Update
		first, last := p.Events[0].Seq, p.Events[len(p.Events)-1].Seq
		release := 0
		if u.ReleaseLease {
			release = 1
		}
		res, err := upd.ExecContext(ctx,
			string(u.Status), nullString(string(u.StopReason)), nullString(param.Text(u.StopDetail)), nullString(param.Text(u.Error)),
			u.Turns, u.MessageCount, u.PromptTokens, u.CompletionTokens,
			nullJSON(u.PendingInput), nullNanos(utcPtr(u.CompletedAt)), nanos(u.UpdatedAt), last,
			nullNanos(utcPtr(u.InputExpiresAt)),
			release, release,
			max(u.Run, 1), string(u.Status), string(u.Status),
			p.ChatID, p.Epoch, first-1,
			nullString(p.StartKey), max(u.Run, 1), nullString(p.StartKey))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			fenced[i] = true
			continue
		}
		if err := insertEvents(ctx, ins, p.ChatID, p.Events, u.UpdatedAt); err != nil {
			return err
		}
		if len(p.Deliveries) > 0 {
			if err := insertDeliveries(ctx, tx, p.ChatID, p.Deliveries, u.UpdatedAt); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
