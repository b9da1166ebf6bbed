package postgres

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	typeFilter, err := param.EventTypeFilter(p.Type)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT chat_id::text, seq, type, coalesce(role, ''), coalesce(name, ''),
			coalesce(content, ''), tool_calls, tool_responses, coalesce(data_json::text, data::text), created_at
		FROM events WHERE chat_id = $1 AND seq > $2`+typeFilter+` ORDER BY seq LIMIT $3`, id, p.After, limit)
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
		e.tool_calls::jsonb, e.tool_responses::jsonb, e.data::json, e.created_at
		FROM unnest(` + strings.Join(params, ", ") + `) AS e(` + names + `)`
}

// eventInsertColumns are the columns eventSelect's rows are inserted
// into, after the chat's id. Data goes to data_json (migration 0012).
const eventInsertColumns = "chat_id, seq, type, role, name, content, tool_calls, tool_responses, data_json, created_at"

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

// appendsSQL is every append of a batch, each fenced on its own, as one
// statement: one parse, bind and execution for the batch instead of one
// per append. Each append is a row of the arrays $1..$20, numbered by ord;
// its events are rows of the arrays from $21 on, tagged with the same ord.
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
// An append that starts a queued run (start_key set: its run.started) takes
// only while that run's row is still in chat_runs with its key: a cancel
// or an interrupt that dropped the run deleted the row (and an interrupt
// may have queued another run under the same number), and the worker that
// was about to start it is fenced. An append that ends a run (a terminal
// status) clears the chat's cancel and stop requests, which were that
// run's; a request that an interrupt makes after it, for a run that has
// ended, it never sets (see SubmitRun).
//
// The UPDATE touches chat_state only, and an ordinary append changes no
// indexed column there (status and owner change a few times per chat), so
// it is a HOT update of a ~150-byte row.
var appendsSQL = `WITH a AS (
	SELECT * FROM unnest($1::int[], $2::uuid[], $3::bigint[], $4::bigint[], $5::text[], $6::text[], $7::text[],
		$8::text[], $9::int[], $10::int[], $11::bigint[], $12::bigint[], $13::text[], $14::timestamptz[],
		$15::timestamptz[], $16::bigint[], $17::boolean[], $18::timestamptz[], $19::int[], $20::uuid[])
	AS a(ord, id, epoch, prev_seq, status, stop_reason, stop_detail, error, turns, message_count, prompt_tokens,
		completion_tokens, pending_input, completed_at, updated_at, last_seq, release, input_expires_at, run, start_key)
), fenced_update AS (
	UPDATE chat_state s SET
		status = a.status, stop_reason = a.stop_reason, stop_detail = a.stop_detail, error = a.error,
		turns = a.turns, message_count = a.message_count, prompt_tokens = a.prompt_tokens,
		completion_tokens = a.completion_tokens, pending_input = a.pending_input::jsonb,
		completed_at = a.completed_at, updated_at = a.updated_at, last_seq = a.last_seq,
		owner = CASE WHEN a.release THEN NULL ELSE s.owner END,
		lease_expires_at = CASE WHEN a.release THEN NULL ELSE s.lease_expires_at END,
		input_expires_at = a.input_expires_at, input_response = NULL, run = a.run,
		cancel_requested = s.cancel_requested AND a.status NOT IN ('completed', 'failed', 'cancelled'),
		stop_requested = s.stop_requested AND a.status NOT IN ('completed', 'failed', 'cancelled')
	FROM a
	WHERE s.id = a.id AND s.epoch = a.epoch AND s.last_seq = a.prev_seq
	  AND (a.start_key IS NULL OR EXISTS (
		SELECT 1 FROM chat_runs r WHERE r.chat_id = a.id AND r.run = a.run AND r.key = a.start_key))
	RETURNING a.ord, s.id
), inserted AS (
	INSERT INTO events (` + eventInsertColumns + `)
	SELECT u.id, ` + eventSelect(21, true) + ` JOIN fenced_update u ON u.ord = e.ord
)
SELECT ord FROM fenced_update`

// appendsOutboxSQL is appendsSQL that also writes webhook deliveries to the
// outbox: from $31, a row per delivery tagged with its append's ord, which
// is inserted only if that append took (the same join as its events). The
// batches without deliveries, nearly all, keep appendsSQL: the outbox costs
// the append path nothing unless an event goes to a webhook.
var appendsOutboxSQL = strings.Replace(appendsSQL, `
SELECT ord FROM fenced_update`, `, outbox AS (
	INSERT INTO webhook_deliveries (chat_id, seq, url, tenant, event, source, created_at, updated_at, next_attempt_at)
	SELECT u.id, o.seq, o.url, c.tenant, o.event, o.source, a.updated_at, a.updated_at, a.updated_at
	FROM unnest($31::int[], $32::bigint[], $33::text[], $34::text[], $35::text[]) AS o(ord, seq, url, event, source)
	JOIN fenced_update u ON u.ord = o.ord
	JOIN a ON a.ord = o.ord
	JOIN chats c ON c.id = u.id
	ON CONFLICT DO NOTHING
)
SELECT ord FROM fenced_update`, 1)

// Names of the group committer's statements, prepared once per connection.
const (
	appendsStmt       = "agentd_appends"
	appendsOutboxStmt = "agentd_appends_outbox"
	createStmt        = "agentd_create"
	createOutboxStmt  = "agentd_create_outbox"
)

// outboxColumns are webhook deliveries as the arrays createOutboxSQL takes.
type outboxColumns struct {
	seqs                  []int64
	urls, events, sources []string
}

func (o *outboxColumns) add(ds []chat.Delivery) {
	for _, d := range ds {
		o.seqs = append(o.seqs, d.Seq)
		o.urls = append(o.urls, d.URL)
		o.events = append(o.events, string(d.Event))
		o.sources = append(o.sources, d.Source)
	}
}

// batchBuffers are what one batch is encoded in: kept between batches
// (batchPool), so a batch of the usual size allocates nothing for its
// parameters.
type batchBuffers struct {
	arrays arrayWriter
	params [][]byte
	// formats are the parameters' formats: all binary.
	formats []int16
	// ords is the batch index of each append, in the order of the arrays.
	ords []int
	// create encodes a create's parameters through pgx.
	create pgx.ExtendedQueryBuilder
	// outbox: an append of the batch has webhook deliveries, written as
	// appendsOutboxSQL's parameters from $31.
	outbox bool
}

var batchPool = sync.Pool{New: func() any { return new(batchBuffers) }}

// maxKeptBatch bounds the buffer a batch leaves for the next: an event may
// hold 8 MiB, and a batch that carried a few is not kept for ordinary ones.
const maxKeptBatch = 1 << 20

func putBatchBuffers(bb *batchBuffers) {
	if cap(bb.arrays.buf) <= maxKeptBatch {
		batchPool.Put(bb)
	}
}

// binaryFormat is the result format of appendsSQL's one int column.
var binaryFormat = []int16{pgx.BinaryFormatCode}

// commitBatch is the groupcommit.CommitFunc. The appends and creates go to
// the server as one pipelined batch: one round trip, and, since a batch
// not wrapped in BEGIN/COMMIT runs as one implicit transaction, one commit
// and one WAL flush for all of them. If any statement fails, the server
// rolls back the whole batch and the committer retries its members one by
// one.
//
// The batch goes through pgconn, below pgx's own batches, with the
// appends' parameters written by writeAppends into buffers of ours; the
// creates' parameters are still encoded by pgx.
func (s *Store) commitBatch(ctx context.Context, batch []*op, fenced []bool) error {
	bb := batchPool.Get().(*batchBuffers)
	defer putBatchBuffers(bb)
	bb.ords = bb.ords[:0]
	for i, o := range batch {
		if o.Append != nil {
			bb.ords = append(bb.ords, i)
		}
	}
	if len(bb.ords) > 0 {
		if err := bb.writeAppends(batch); err != nil {
			return err
		}
	}
	conn, err := s.writers.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	c := conn.Conn()
	if len(bb.ords) > 0 && len(bb.ords) == len(batch) {
		// Appends alone, the usual batch, are one statement: sent through
		// the connection's own buffer, where a pgconn.Batch would grow one
		// of its own, twice the parameters' size, on every commit.
		sd, err := prepareAppends(ctx, c, bb)
		if err != nil {
			return err
		}
		rr := c.PgConn().ExecPrepared(ctx, sd.Name, bb.params, bb.formats, binaryFormat)
		if err := readAppends(rr, fenced, bb.ords); err != nil {
			_, _ = rr.Close()
			return err
		}
		// Close reads up to the ReadyForQuery that follows the statement's
		// implicit COMMIT: only now are the appends durable.
		if _, err := rr.Close(); err != nil {
			return err
		}
		s.notifyAppends(batch, bb.ords)
		return nil
	}
	var b pgconn.Batch
	if len(bb.ords) < len(batch) {
		plain, err := c.Prepare(ctx, createStmt, createSQL)
		if err != nil {
			return err
		}
		for _, o := range batch {
			if o.Create == nil {
				continue
			}
			sd := plain
			if o.Create.outbox {
				if sd, err = c.Prepare(ctx, createOutboxStmt, createOutboxSQL); err != nil {
					return err
				}
			}
			if err := bb.create.Build(c.TypeMap(), sd, o.Create.args); err != nil {
				return fmt.Errorf("create chat %s: %w", o.Create.id, err)
			}
			// The batch copies the parameters: the builder is free again.
			b.ExecStatement(sd, bb.create.ParamValues, bb.create.ParamFormats, bb.create.ResultFormats)
		}
	}
	if len(bb.ords) > 0 {
		sd, err := prepareAppends(ctx, c, bb)
		if err != nil {
			return err
		}
		b.ExecStatement(sd, bb.params, bb.formats, binaryFormat)
	}
	res := c.PgConn().ExecBatch(ctx, &b)
	if err := readBatch(res, batch, fenced, bb.ords); err != nil {
		res.Close()
		return err
	}
	// Close reads up to the end of the batch, which includes the implicit
	// COMMIT: only now are the appends durable.
	if err := res.Close(); err != nil {
		return err
	}
	s.notifyAppends(batch, bb.ords)
	return nil
}

// prepareAppends is the appends' statement, prepared on c.
func prepareAppends(ctx context.Context, c *pgx.Conn, bb *batchBuffers) (*pgconn.StatementDescription, error) {
	name, sql := appendsStmt, appendsSQL
	if bb.outbox {
		name, sql = appendsOutboxStmt, appendsOutboxSQL
	}
	return c.Prepare(ctx, name, sql)
}

// notifyAppends tells every replica's listeners which logs grew, now that
// they did (see notifier). A fenced append only costs a spurious wake-up;
// a new chat has no followers yet, so creates notify no one.
func (s *Store) notifyAppends(batch []*op, ords []int) {
	if len(ords) == 0 {
		return
	}
	ids := make([]string, len(ords))
	for k, i := range ords {
		ids[k] = batch[i].Append.ChatID
	}
	s.notify.add(ids)
}

// readBatch reads the results of commitBatch's statements, in the order
// they were queued: each create's, then the appends'. It sets fenced.
func readBatch(res *pgconn.MultiResultReader, batch []*op, fenced []bool, ords []int) error {
	for i, o := range batch {
		if o.Create == nil {
			continue
		}
		if !res.NextResult() {
			return cmp.Or(res.Close(), errors.New("create: no result"))
		}
		tag, err := res.ResultReader().Close()
		if err != nil {
			return err
		}
		// Zero rows: its idempotency key is taken.
		fenced[i] = tag.RowsAffected() == 0
	}
	if len(ords) == 0 {
		return nil
	}
	if !res.NextResult() {
		return cmp.Or(res.Close(), errors.New("appends: no result"))
	}
	return readAppends(res.ResultReader(), fenced, ords)
}

// readAppends reads the rows of the appends' statement: the ord of each
// append that took. It sets fenced at ords, the appends.
func readAppends(rr *pgconn.ResultReader, fenced []bool, ords []int) error {
	for _, i := range ords {
		fenced[i] = true
	}
	for rr.NextRow() {
		v := rr.Values()
		if len(v) != 1 || len(v[0]) != 4 {
			rr.Close()
			return fmt.Errorf("appends: unexpected row %q", v)
		}
		ord := int32(binary.BigEndian.Uint32(v[0]))
		if ord < 0 || int(ord) >= len(ords) {
			rr.Close()
			return fmt.Errorf("appends: returned ord %d of %d", ord, len(ords))
		}
		fenced[ords[ord]] = false // the append took
	}
	_, err := rr.Close()
	return err
}

// writeAppends writes the appends of batch (at bb.ords) as appendsSQL's
// parameters: $1..$20 a row per append, numbered by ord; from $21 a row
// per event, tagged with its append's ord.
func (bb *batchBuffers) writeAppends(batch []*op) error {
	w := &bb.arrays
	w.reset()
	// perAppend and perEvent write one array: an element per append, or
	// per event of each append in turn.
	perAppend := func(oid uint32, f func(p *chat.AppendParams)) {
		w.begin(oid)
		for _, i := range bb.ords {
			f(batch[i].Append)
		}
		w.end()
	}
	perEvent := func(oid uint32, f func(ord int, p *chat.AppendParams, e *chat.Event)) {
		w.begin(oid)
		for ord, i := range bb.ords {
			p := batch[i].Append
			for k := range p.Events {
				f(ord, p, &p.Events[k])
			}
		}
		w.end()
	}
	// jsonColumn writes the JSON of v(e), NULL when it is nil, keeping
	// the first error.
	var err error
	jsonColumn := func(column string, v func(e *chat.Event) any) {
		perEvent(oidText, func(_ int, p *chat.AppendParams, e *chat.Event) {
			x := v(e)
			if x == nil {
				w.nullElem()
				return
			}
			b, merr := json.Marshal(x)
			if merr != nil && err == nil {
				err = fmt.Errorf("chat %s: seq %d: %s: %w", p.ChatID, e.Seq, column, merr)
			}
			w.text(string(b))
		})
	}

	// $1 ord, $2 id
	ord := int32(0)
	perAppend(oidInt4, func(*chat.AppendParams) { w.int4(ord); ord++ })
	perAppend(oidUUID, func(p *chat.AppendParams) {
		id, ok := param.UUID(p.ChatID)
		if !ok && err == nil {
			err = fmt.Errorf("chat %q: %w: not a chat id", p.ChatID, param.ErrInvalid)
		}
		w.uuid(id)
	})
	// $3 epoch, $4 prev_seq
	perAppend(oidInt8, func(p *chat.AppendParams) { w.int8(p.Epoch) })
	perAppend(oidInt8, func(p *chat.AppendParams) { w.int8(p.Events[0].Seq - 1) })
	// $5 status, $6 stop_reason, $7 stop_detail, $8 error
	perAppend(oidText, func(p *chat.AppendParams) { w.text(string(p.Update.Status)) })
	perAppend(oidText, func(p *chat.AppendParams) { w.optText(string(p.Update.StopReason)) })
	perAppend(oidText, func(p *chat.AppendParams) { w.optText(param.Text(p.Update.StopDetail)) })
	perAppend(oidText, func(p *chat.AppendParams) { w.optText(param.Text(p.Update.Error)) })
	// $9 turns, $10 message_count, $11 prompt_tokens, $12 completion_tokens
	perAppend(oidInt4, func(p *chat.AppendParams) { w.int4(int32(p.Update.Turns)) })
	perAppend(oidInt4, func(p *chat.AppendParams) { w.int4(int32(p.Update.MessageCount)) })
	perAppend(oidInt8, func(p *chat.AppendParams) { w.int8(int64(p.Update.PromptTokens)) })
	perAppend(oidInt8, func(p *chat.AppendParams) { w.int8(int64(p.Update.CompletionTokens)) })
	// $13 pending_input, $14 completed_at, $15 updated_at, $16 last_seq,
	// $17 release, $18 input_expires_at
	perAppend(oidText, func(p *chat.AppendParams) { w.optBytes(p.Update.PendingInput) })
	perAppend(oidTimestamptz, func(p *chat.AppendParams) { w.optTime(p.Update.CompletedAt) })
	perAppend(oidTimestamptz, func(p *chat.AppendParams) { w.time(p.Update.UpdatedAt) })
	perAppend(oidInt8, func(p *chat.AppendParams) { w.int8(p.Events[len(p.Events)-1].Seq) })
	perAppend(oidBool, func(p *chat.AppendParams) { w.bool(p.Update.ReleaseLease) })
	perAppend(oidTimestamptz, func(p *chat.AppendParams) { w.optTime(p.Update.InputExpiresAt) })
	// $19 run, $20 start_key
	perAppend(oidInt4, func(p *chat.AppendParams) { w.int4(int32(max(p.Update.Run, 1))) })
	perAppend(oidUUID, func(p *chat.AppendParams) {
		if p.StartKey == "" {
			w.nullElem()
			return
		}
		key, ok := param.UUID(p.StartKey)
		if !ok && err == nil {
			err = fmt.Errorf("chat %s: %w: run key %q", p.ChatID, param.ErrInvalid, p.StartKey)
		}
		w.uuid(key)
	})
	// $21 the events' ords, then eventSelect's columns.
	perEvent(oidInt4, func(ord int, _ *chat.AppendParams, _ *chat.Event) { w.int4(int32(ord)) })
	perEvent(oidInt8, func(_ int, _ *chat.AppendParams, e *chat.Event) { w.int8(e.Seq) })
	perEvent(oidText, func(_ int, _ *chat.AppendParams, e *chat.Event) { w.text(string(e.Type)) })
	perEvent(oidText, func(_ int, _ *chat.AppendParams, e *chat.Event) { w.optText(param.Text(e.Role)) })
	perEvent(oidText, func(_ int, _ *chat.AppendParams, e *chat.Event) { w.optText(param.Text(e.Name)) })
	perEvent(oidText, func(_ int, _ *chat.AppendParams, e *chat.Event) { w.optText(param.Text(e.Content)) })
	jsonColumn("tool_calls", func(e *chat.Event) any {
		if len(e.ToolCalls) == 0 {
			return nil
		}
		return param.ToolCalls(e.ToolCalls)
	})
	jsonColumn("tool_responses", func(e *chat.Event) any {
		if len(e.ToolResponses) == 0 {
			return nil
		}
		return param.ToolResponses(e.ToolResponses)
	})
	perEvent(oidText, func(_ int, _ *chat.AppendParams, e *chat.Event) { w.optBytes(e.Data) })
	perEvent(oidTimestamptz, func(_ int, p *chat.AppendParams, e *chat.Event) {
		if e.CreatedAt.IsZero() {
			w.time(p.Update.UpdatedAt)
		} else {
			w.time(e.CreatedAt)
		}
	})
	if err != nil {
		return err
	}
	bb.outbox = false
	for _, i := range bb.ords {
		if len(batch[i].Append.Deliveries) > 0 {
			bb.outbox = true
			break
		}
	}
	if bb.outbox {
		// $31 the deliveries' ords, $32 seq, $33 url, $34 event, $35 source.
		perDelivery := func(oid uint32, f func(ord int, d *chat.Delivery)) {
			w.begin(oid)
			for ord, i := range bb.ords {
				ds := batch[i].Append.Deliveries
				for k := range ds {
					f(ord, &ds[k])
				}
			}
			w.end()
		}
		perDelivery(oidInt4, func(ord int, _ *chat.Delivery) { w.int4(int32(ord)) })
		perDelivery(oidInt8, func(_ int, d *chat.Delivery) { w.int8(d.Seq) })
		perDelivery(oidText, func(_ int, d *chat.Delivery) { w.text(param.Text(d.URL)) })
		perDelivery(oidText, func(_ int, d *chat.Delivery) { w.text(string(d.Event)) })
		perDelivery(oidText, func(_ int, d *chat.Delivery) { w.text(d.Source) })
	}
	bb.params = w.params(bb.params[:0])
	bb.formats = bb.formats[:0]
	for range bb.params {
		bb.formats = append(bb.formats, pgx.BinaryFormatCode)
	}
	return nil
}
