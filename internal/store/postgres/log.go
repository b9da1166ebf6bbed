package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/store/internal/param"
)

// ListEvents implements chat.Store. An unknown chat has no events.
func (s *Store) ListEvents(ctx context.Context, p *chat.ListEventsParams) ([]chat.Event, error) {
	id, ok := param.ChatID(p.ChatID)
	if !ok {
		return nil, nil
	}
	limit := param.Limit(p.Limit, param.DefaultListEvents, param.MaxListEvents)
	rows, err := s.pool.Query(ctx, `SELECT chat_id::text, seq, type, coalesce(role, ''), coalesce(name, ''),
			coalesce(content, ''), tool_calls, tool_responses, data, created_at
		FROM events WHERE chat_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, id, p.After, limit)
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
		)
		if err := rows.Scan(&e.ChatID, &e.Seq, &typ, &e.Role, &e.Name, &e.Content, &calls, &resps, &dat, &e.CreatedAt); err != nil {
			return nil, fmt.Errorf("list events of chat %s: %w", id, err)
		}
		e.Type, e.Data, e.CreatedAt = chat.EventType(typ), nullableJSON(dat), e.CreatedAt.UTC()
		if len(calls) > 0 {
			if err := json.Unmarshal(calls, &e.ToolCalls); err != nil {
				return nil, fmt.Errorf("list events of chat %s: seq %d: tool_calls: %w", id, e.Seq, err)
			}
		}
		if len(resps) > 0 {
			if err := json.Unmarshal(resps, &e.ToolResponses); err != nil {
				return nil, fmt.Errorf("list events of chat %s: seq %d: tool_responses: %w", id, e.Seq, err)
			}
		}
		es = append(es, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list events of chat %s: %w", id, translate(err))
	}
	return es, nil
}

// eventSelect is the select list and FROM clause that turn the nine column
// arrays of eventArrays, bound from parameter $first on, into event rows.
// Passing columns as arrays makes the insert one statement with a fixed
// text however many events an append has: one prepared statement, one
// round trip, and a single statement that the append's fencing CTE can
// guard as a whole.
func eventSelect(first int) string {
	return fmt.Sprintf(`e.seq, e.type, e.role, e.name, e.content,
		e.tool_calls::jsonb, e.tool_responses::jsonb, e.data::jsonb, e.created_at
		FROM unnest($%d::bigint[], $%d::text[], $%d::text[], $%d::text[], $%d::text[],
			$%d::text[], $%d::text[], $%d::text[], $%d::timestamptz[])
		AS e(seq, type, role, name, content, tool_calls, tool_responses, data, created_at)`,
		first, first+1, first+2, first+3, first+4, first+5, first+6, first+7, first+8)
}

// eventArrays returns the column arrays for eventSelect. Absent values are
// NULL (nil pointers); a zero CreatedAt becomes def.
func eventArrays(events []chat.Event, def time.Time) ([]any, error) {
	n := len(events)
	var (
		seqs                   = make([]int64, n)
		types                  = make([]string, n)
		roles, names, contents = make([]*string, n), make([]*string, n), make([]*string, n)
		calls, resps, data     = make([]*string, n), make([]*string, n), make([]*string, n)
		created                = make([]time.Time, n)
	)
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	for i := range events {
		e := &events[i]
		seqs[i], types[i] = e.Seq, string(e.Type)
		roles[i], names[i], contents[i] = opt(param.Text(e.Role)), opt(param.Text(e.Name)), opt(param.Text(e.Content))
		if len(e.ToolCalls) > 0 {
			b, err := json.Marshal(param.ToolCalls(e.ToolCalls))
			if err != nil {
				return nil, fmt.Errorf("seq %d: tool_calls: %w", e.Seq, err)
			}
			calls[i] = opt(string(b))
		}
		if len(e.ToolResponses) > 0 {
			b, err := json.Marshal(param.ToolResponses(e.ToolResponses))
			if err != nil {
				return nil, fmt.Errorf("seq %d: tool_responses: %w", e.Seq, err)
			}
			resps[i] = opt(string(b))
		}
		data[i] = opt(string(e.Data))
		created[i] = def
		if !e.CreatedAt.IsZero() {
			created[i] = e.CreatedAt
		}
	}
	return []any{seqs, types, roles, names, contents, calls, resps, data, created}, nil
}

// op is one member of a group commit: an append, or the creation of a chat.
type op struct {
	append *chat.AppendParams
	create *createOp
}

// opChat is the chat an op writes to, the group committer's sort key.
func opChat(o *op) string {
	if o.append != nil {
		return o.append.ChatID
	}
	return o.create.id
}

// Append implements chat.Store. The append joins the group committer's next
// batch; see commitBatch.
func (s *Store) Append(ctx context.Context, p *chat.AppendParams) error {
	q, err := param.PrepareAppend(p, s.now)
	if err != nil {
		return err
	}
	if err := s.commit.Append(ctx, &op{append: q}); err != nil {
		return fmt.Errorf("%s: %w", param.DescribeAppend(q), translate(err))
	}
	return nil
}

// appendSQL is one append, fenced, as one statement. The CTE updates the
// chat's state row only if the caller's epoch is the chat's and its first
// seq follows the chat's last_seq; the events are inserted only for the row
// the CTE returned. So a fenced append inserts nothing (0 rows affected)
// without failing the statement, and its batch-mates are unaffected. The
// UPDATE's row lock also keeps a concurrent append to the same chat (a stale
// worker) from interleaving: it waits, then re-checks epoch and last_seq
// against the committed row and finds itself fenced. The same join is what
// keeps events from naming a chat that does not exist, now that events have
// no foreign key (migration 0003).
//
// The UPDATE touches chat_state only, and an ordinary append changes no
// indexed column there (status and owner change a few times per chat), so
// it is a HOT update of a ~150-byte row.
var appendSQL = `WITH fenced_update AS (
	UPDATE chat_state SET
		status = $3, stop_reason = $4, stop_detail = $5, error = $6,
		turns = $7, message_count = $8, prompt_tokens = $9, completion_tokens = $10,
		pending_input = $11, completed_at = $12, updated_at = $13, last_seq = $14,
		owner = CASE WHEN $15::boolean THEN NULL ELSE owner END,
		lease_expires_at = CASE WHEN $15::boolean THEN NULL ELSE lease_expires_at END,
		input_expires_at = $17, input_response = NULL
	WHERE id = $1 AND epoch = $2 AND last_seq = $16
	RETURNING id
)
INSERT INTO events (chat_id, seq, type, role, name, content, tool_calls, tool_responses, data, created_at)
SELECT u.id, ` + eventSelect(18) + ` CROSS JOIN fenced_update u`

// commitBatch is the groupcommit.CommitFunc. The appends and creates go to
// the server as one pipelined pgx.Batch: one round trip, and, since a batch
// not wrapped in BEGIN/COMMIT runs as one implicit transaction, one commit
// and one WAL flush for all of them. If any statement fails, the server
// rolls back the whole batch and the committer retries its members one by
// one.
func (s *Store) commitBatch(ctx context.Context, batch []*op, fenced []bool) error {
	b := &pgx.Batch{}
	var ids []string
	for _, o := range batch {
		if o.create != nil {
			b.Queue(createSQL, o.create.args...)
			continue
		}
		p := o.append
		ids = append(ids, p.ChatID)
		u := &p.Update
		evs, err := eventArrays(p.Events, u.UpdatedAt)
		if err != nil {
			return fmt.Errorf("chat %s: %w", p.ChatID, err)
		}
		first, last := p.Events[0].Seq, p.Events[len(p.Events)-1].Seq
		args := []any{
			p.ChatID, p.Epoch,
			string(u.Status), nullString(string(u.StopReason)), nullString(param.Text(u.StopDetail)), nullString(param.Text(u.Error)),
			u.Turns, u.MessageCount, u.PromptTokens, u.CompletionTokens,
			nullJSON(u.PendingInput), u.CompletedAt, u.UpdatedAt, last,
			u.ReleaseLease, first - 1, u.InputExpiresAt,
		}
		b.Queue(appendSQL, append(args, evs...)...)
	}
	br := s.pool.SendBatch(ctx, b)
	for i := range batch {
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return err
		}
		// Zero rows: an append fenced, or a create whose idempotency key
		// is taken.
		fenced[i] = tag.RowsAffected() == 0
	}
	// Close reads up to the end of the pipeline, which includes the implicit
	// COMMIT: only now are the appends durable.
	if err := br.Close(); err != nil {
		return err
	}
	// Tell every replica's listeners which logs grew, now that they did
	// (see notifier). A fenced append only costs a spurious wake-up; a new
	// chat has no followers yet, so creates notify no one.
	if len(ids) > 0 {
		s.notify.add(ids)
	}
	return nil
}
