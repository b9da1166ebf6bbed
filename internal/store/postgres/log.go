package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
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

// eventSelect is the select list and FROM clause that turn the column
// arrays of eventColumns, bound from parameter $first on, into event rows.
// With ord, a leading int[] parameter tags each row with the append it
// belongs to (appendsSQL). Passing columns as arrays makes the insert one
// statement with a fixed text however many events there are: one prepared
// statement, one round trip, and a single statement that a fencing CTE can
// guard as a whole.
func eventSelect(first int, ord bool) string {
	types := []string{"bigint", "text", "text", "text", "text", "text", "text", "text", "timestamptz"}
	names := "seq, type, role, name, content, tool_calls, tool_responses, data, created_at"
	if ord {
		types = append([]string{"int"}, types...)
		names = "ord, " + names
	}
	params := make([]string, len(types))
	for i, t := range types {
		params[i] = fmt.Sprintf("$%d::%s[]", first+i, t)
	}
	return `e.seq, e.type, e.role, e.name, e.content,
		e.tool_calls::jsonb, e.tool_responses::jsonb, e.data::jsonb, e.created_at
		FROM unnest(` + strings.Join(params, ", ") + `) AS e(` + names + `)`
}

// eventColumns are events as the column arrays of eventSelect. Absent
// values are NULL (nil pointers).
type eventColumns struct {
	seqs                                        []int64
	types                                       []string
	roles, names, contents, calls, resps, datas []*string
	created                                     []time.Time
}

// add appends events to the columns; a zero CreatedAt becomes def.
func (c *eventColumns) add(events []chat.Event, def time.Time) error {
	for i := range events {
		e := &events[i]
		var calls, resps *string
		if len(e.ToolCalls) > 0 {
			b, err := json.Marshal(param.ToolCalls(e.ToolCalls))
			if err != nil {
				return fmt.Errorf("seq %d: tool_calls: %w", e.Seq, err)
			}
			calls = optText(string(b))
		}
		if len(e.ToolResponses) > 0 {
			b, err := json.Marshal(param.ToolResponses(e.ToolResponses))
			if err != nil {
				return fmt.Errorf("seq %d: tool_responses: %w", e.Seq, err)
			}
			resps = optText(string(b))
		}
		created := def
		if !e.CreatedAt.IsZero() {
			created = e.CreatedAt
		}
		c.seqs = append(c.seqs, e.Seq)
		c.types = append(c.types, string(e.Type))
		c.roles = append(c.roles, optText(param.Text(e.Role)))
		c.names = append(c.names, optText(param.Text(e.Name)))
		c.contents = append(c.contents, optText(param.Text(e.Content)))
		c.calls = append(c.calls, calls)
		c.resps = append(c.resps, resps)
		c.datas = append(c.datas, optText(string(e.Data)))
		c.created = append(c.created, created)
	}
	return nil
}

// args are the columns as eventSelect's parameters, in order.
func (c *eventColumns) args() []any {
	return []any{c.seqs, c.types, c.roles, c.names, c.contents, c.calls, c.resps, c.datas, c.created}
}

// optText is s, or NULL when empty.
func optText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
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

// appendsSQL is every append of a batch, each fenced on its own, as one
// statement: one parse, bind and execution for the batch instead of one
// per append. Each append is a row of the arrays $1..$18, numbered by ord;
// its events are rows of the arrays from $19 on, tagged with the same ord.
// The UPDATE changes a chat's state row only if the append's epoch is the
// chat's and its first seq follows the chat's last_seq; events are
// inserted only for the appends the UPDATE returned. So a fenced append
// inserts nothing, without failing the statement, and its batch-mates are
// unaffected; the statement returns the ords of the appends that took.
//
// The UPDATE's row lock keeps a concurrent append to the same chat (a
// stale worker on another replica) from interleaving: it waits, then
// re-checks epoch and last_seq against the committed row and finds itself
// fenced. The same join is what keeps events from naming a chat that does
// not exist, now that events have no foreign key (migration 0003). Two
// appends of one batch never match the same chat row: one worker has one
// append in flight, and a stale worker's append carries another epoch.
//
// The UPDATE touches chat_state only, and an ordinary append changes no
// indexed column there (status and owner change a few times per chat), so
// it is a HOT update of a ~150-byte row.
var appendsSQL = `WITH a AS (
	SELECT * FROM unnest($1::int[], $2::uuid[], $3::bigint[], $4::bigint[], $5::text[], $6::text[], $7::text[],
		$8::text[], $9::int[], $10::int[], $11::bigint[], $12::bigint[], $13::text[], $14::timestamptz[],
		$15::timestamptz[], $16::bigint[], $17::boolean[], $18::timestamptz[])
	AS a(ord, id, epoch, prev_seq, status, stop_reason, stop_detail, error, turns, message_count, prompt_tokens,
		completion_tokens, pending_input, completed_at, updated_at, last_seq, release, input_expires_at)
), fenced_update AS (
	UPDATE chat_state s SET
		status = a.status, stop_reason = a.stop_reason, stop_detail = a.stop_detail, error = a.error,
		turns = a.turns, message_count = a.message_count, prompt_tokens = a.prompt_tokens,
		completion_tokens = a.completion_tokens, pending_input = a.pending_input::jsonb,
		completed_at = a.completed_at, updated_at = a.updated_at, last_seq = a.last_seq,
		owner = CASE WHEN a.release THEN NULL ELSE s.owner END,
		lease_expires_at = CASE WHEN a.release THEN NULL ELSE s.lease_expires_at END,
		input_expires_at = a.input_expires_at, input_response = NULL
	FROM a
	WHERE s.id = a.id AND s.epoch = a.epoch AND s.last_seq = a.prev_seq
	RETURNING a.ord, s.id
), inserted AS (
	INSERT INTO events (chat_id, seq, type, role, name, content, tool_calls, tool_responses, data, created_at)
	SELECT u.id, ` + eventSelect(19, true) + ` JOIN fenced_update u ON u.ord = e.ord
)
SELECT ord FROM fenced_update`

// commitBatch is the groupcommit.CommitFunc. The appends and creates go to
// the server as one pipelined pgx.Batch: one round trip, and, since a batch
// not wrapped in BEGIN/COMMIT runs as one implicit transaction, one commit
// and one WAL flush for all of them. If any statement fails, the server
// rolls back the whole batch and the committer retries its members one by
// one.
func (s *Store) commitBatch(ctx context.Context, batch []*op, fenced []bool) error {
	b := &pgx.Batch{}
	var (
		ids     []string
		appends appendRows
		ords    []int // batch index of each append row
	)
	for i, o := range batch {
		if o.create != nil {
			b.Queue(createSQL, o.create.args...)
			continue
		}
		ids = append(ids, o.append.ChatID)
		if err := appends.add(len(ords), o.append); err != nil {
			return err
		}
		ords = append(ords, i)
	}
	if len(ords) > 0 {
		b.Queue(appendsSQL, appends.args()...)
	}
	br := s.pool.SendBatch(ctx, b)
	for i, o := range batch {
		if o.create == nil {
			continue
		}
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return err
		}
		// Zero rows: its idempotency key is taken.
		fenced[i] = tag.RowsAffected() == 0
	}
	if len(ords) > 0 {
		for _, i := range ords {
			fenced[i] = true
		}
		rows, err := br.Query()
		if err != nil {
			br.Close()
			return err
		}
		for rows.Next() {
			var ord int32
			if err := rows.Scan(&ord); err != nil {
				rows.Close()
				br.Close()
				return err
			}
			fenced[ords[ord]] = false // the append took
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			br.Close()
			return err
		}
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

// appendRows gathers the appends of a batch into the column arrays of
// appendsSQL.
type appendRows struct {
	ord, turns, msgs                      []int32
	id                                    [][16]byte
	epoch, prevSeq, lastSeq, prompt, comp []int64
	status                                []string
	stopReason, stopDetail, errText, pend []*string
	completed, inputExpires               []*time.Time
	updated                               []time.Time
	release                               []bool
	// evOrd is the ord of each event's append; ev are the events.
	evOrd []int32
	ev    eventColumns
}

func (r *appendRows) add(ord int, p *chat.AppendParams) error {
	u := &p.Update
	id, ok := param.UUID(p.ChatID)
	if !ok {
		return fmt.Errorf("chat %q: %w: not a chat id", p.ChatID, param.ErrInvalid)
	}
	if err := r.ev.add(p.Events, u.UpdatedAt); err != nil {
		return fmt.Errorf("chat %s: %w", p.ChatID, err)
	}
	for range p.Events {
		r.evOrd = append(r.evOrd, int32(ord))
	}
	r.ord = append(r.ord, int32(ord))
	r.id = append(r.id, id)
	r.epoch = append(r.epoch, p.Epoch)
	r.prevSeq = append(r.prevSeq, p.Events[0].Seq-1)
	r.lastSeq = append(r.lastSeq, p.Events[len(p.Events)-1].Seq)
	r.status = append(r.status, string(u.Status))
	r.stopReason = append(r.stopReason, optText(string(u.StopReason)))
	r.stopDetail = append(r.stopDetail, optText(param.Text(u.StopDetail)))
	r.errText = append(r.errText, optText(param.Text(u.Error)))
	r.turns = append(r.turns, int32(u.Turns))
	r.msgs = append(r.msgs, int32(u.MessageCount))
	r.prompt = append(r.prompt, int64(u.PromptTokens))
	r.comp = append(r.comp, int64(u.CompletionTokens))
	r.pend = append(r.pend, optText(string(u.PendingInput)))
	r.completed = append(r.completed, u.CompletedAt)
	r.updated = append(r.updated, u.UpdatedAt)
	r.release = append(r.release, u.ReleaseLease)
	r.inputExpires = append(r.inputExpires, u.InputExpiresAt)
	return nil
}

// args are appendsSQL's parameters, in order.
func (r *appendRows) args() []any {
	return append([]any{r.ord, r.id, r.epoch, r.prevSeq, r.status, r.stopReason, r.stopDetail, r.errText,
		r.turns, r.msgs, r.prompt, r.comp, r.pend, r.completed, r.updated, r.lastSeq, r.release, r.inputExpires,
		r.evOrd}, r.ev.args()...)
}
