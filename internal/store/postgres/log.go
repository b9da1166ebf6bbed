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

// eventSelectOrd is eventSelect with a leading int[] parameter, ord,
// that tags each event row with the append it belongs to.
func eventSelectOrd(first int) string {
	return fmt.Sprintf(`e.seq, e.type, e.role, e.name, e.content,
		e.tool_calls::jsonb, e.tool_responses::jsonb, e.data::jsonb, e.created_at
		FROM unnest($%d::int[], $%d::bigint[], $%d::text[], $%d::text[], $%d::text[], $%d::text[],
			$%d::text[], $%d::text[], $%d::text[], $%d::timestamptz[])
		AS e(ord, seq, type, role, name, content, tool_calls, tool_responses, data, created_at)`,
		first, first+1, first+2, first+3, first+4, first+5, first+6, first+7, first+8, first+9)
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
	SELECT u.id, ` + eventSelectOrd(19) + ` JOIN fenced_update u ON u.ord = e.ord
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
	id                                    []string
	epoch, prevSeq, lastSeq, prompt, comp []int64
	status                                []string
	stopReason, stopDetail, errText, pend []*string
	completed, inputExpires               []*time.Time
	updated                               []time.Time
	release                               []bool
	// ev holds the event columns, led by the ord of their append.
	evOrd                                               []int32
	evSeq                                               []int64
	evType                                              []string
	evRole, evName, evContent, evCalls, evResps, evData []*string
	evCreated                                           []time.Time
}

func (r *appendRows) add(ord int, p *chat.AppendParams) error {
	u := &p.Update
	evs, err := eventArrays(p.Events, u.UpdatedAt)
	if err != nil {
		return fmt.Errorf("chat %s: %w", p.ChatID, err)
	}
	r.ord = append(r.ord, int32(ord))
	r.id = append(r.id, p.ChatID)
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
	for range p.Events {
		r.evOrd = append(r.evOrd, int32(ord))
	}
	r.evSeq = append(r.evSeq, evs[0].([]int64)...)
	r.evType = append(r.evType, evs[1].([]string)...)
	r.evRole = append(r.evRole, evs[2].([]*string)...)
	r.evName = append(r.evName, evs[3].([]*string)...)
	r.evContent = append(r.evContent, evs[4].([]*string)...)
	r.evCalls = append(r.evCalls, evs[5].([]*string)...)
	r.evResps = append(r.evResps, evs[6].([]*string)...)
	r.evData = append(r.evData, evs[7].([]*string)...)
	r.evCreated = append(r.evCreated, evs[8].([]time.Time)...)
	return nil
}

// args are appendsSQL's parameters, in order.
func (r *appendRows) args() []any {
	return []any{r.ord, r.id, r.epoch, r.prevSeq, r.status, r.stopReason, r.stopDetail, r.errText,
		r.turns, r.msgs, r.prompt, r.comp, r.pend, r.completed, r.updated, r.lastSeq, r.release, r.inputExpires,
		r.evOrd, r.evSeq, r.evType, r.evRole, r.evName, r.evContent, r.evCalls, r.evResps, r.evData, r.evCreated}
}

// optText is s, or NULL when empty.
func optText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
