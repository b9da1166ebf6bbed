package postgres

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// notifier sends the "logs grew" notifications of committed batches, after
// their commit and outside their transaction.
//
// Why not NOTIFY inside the batch's transaction: Postgres serializes the
// commits of notifying transactions with a database-wide lock that is held
// through the commit's WAL flush, so batches that notify cannot share a
// flush, and group-commit batches in flight would wait for one another. A
// transaction that only notifies is committed asynchronously (see flush):
// it holds the lock briefly and costs no flush.
//
// Sending after the commit keeps "committed before published": a listener
// that reads the log on a notification finds the events there. What is
// given up is a notification lost when this process dies between a commit
// and its notification; the chat's next append (by whichever replica takes
// it over) notifies again, and a listener that reconnects re-reads
// everything.
//
// Flushes are at least notifyInterval apart: under load the ids of many
// batches share one statement, which would otherwise cost as much as the
// batch it announces. Another replica's follower learns of an append that
// much later at most; one on this replica is woken by the append itself.
//
// The notifier also carries what replicas relay to each other between
// commits (relay.go): the deltas of replies being streamed and which chats'
// deltas a replica follows. They go in the same flushes, before the
// appends: a reply's deltas are queued before its message commits, so a
// listener gets them before the notification that the message is there.
type notifier struct {
	// pool has a connection for the notifier alone (Store.writers).
	pool *pgxpool.Pool
	log  *slog.Logger
	// send sends a flush (sendFlush; a test counts).
	send func(f *flush)

	mu      sync.Mutex
	pending map[string]struct{}
	relayed relayQueue
	// relayFailed is told how many deltas a failed flush dropped (set by
	// Listen from its handler).
	relayFailed func(n int, err error)
	wake        chan struct{}
	stop        chan struct{}
	done        chan struct{}
}

// flush is what one flush sends: notifications on channels, in order. The
// last appends notifications (the chat ids of channelAppends) come last.
type flush struct {
	channels, payloads []string
	// appendsFrom is the index of the first appends notification.
	appendsFrom int
	// deltas counts the deltas the flush carries.
	deltas int
	ids    []string
}

func newNotifier(pool *pgxpool.Pool, log *slog.Logger) *notifier {
	return startNotifier(pool, log, nil)
}

// startNotifier starts a notifier that sends with send, or with sendFlush.
func startNotifier(pool *pgxpool.Pool, log *slog.Logger, send func(f *flush)) *notifier {
	n := &notifier{pool: pool, log: log, pending: map[string]struct{}{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	n.send = send
	if send == nil {
		n.send = n.sendFlush
	}
	go n.loop()
	return n
}

// notifyInterval is the least time between two flushes.
const notifyInterval = 10 * time.Millisecond

// add queues notifications for chat ids; it never blocks on the database.
func (n *notifier) add(ids []string) {
	n.mu.Lock()
	for _, id := range ids {
		n.pending[id] = struct{}{}
	}
	n.mu.Unlock()
	n.kick()
}

func (n *notifier) kick() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// close sends what is pending and stops; call it before closing the pool.
func (n *notifier) close() {
	close(n.stop)
	<-n.done
}

func (n *notifier) loop() {
	defer close(n.done)
	pause := time.NewTimer(0)
	<-pause.C
	for {
		select {
		case <-n.wake:
		case <-n.stop:
			n.flush()
			return
		}
		start := time.Now()
		n.flush()
		pause.Reset(time.Until(start.Add(notifyInterval)))
		select {
		case <-pause.C:
		case <-n.stop:
			n.flush()
			return
		}
	}
}

// flush sends every pending notification in one statement: while one is
// being sent, those of later commits gather for the next.
func (n *notifier) flush() {
	n.mu.Lock()
	if len(n.pending) == 0 && n.relayed.empty() {
		n.mu.Unlock()
		return
	}
	f := &flush{}
	n.relayed.take(f)
	ids := make([]string, 0, len(n.pending))
	for id := range n.pending {
		ids = append(ids, id)
	}
	clear(n.pending)
	n.mu.Unlock()
	f.ids = ids
	f.appendsFrom = len(f.payloads)
	for _, p := range payloads(ids) {
		f.channels, f.payloads = append(f.channels, channelAppends), append(f.payloads, p)
	}
	n.send(f)
}

// notifySQL sends notifications in order. A transaction that notifies gets
// a transaction id and so a commit record, which synchronous_commit would
// flush to disk: an fsync for nothing durable. It is committed
// asynchronously (set_config with is_local true lasts for this transaction
// only; the CTE runs before the calls).
const notifySQL = `WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
	SELECT count(pg_notify(n.c, n.p)) FROM async, unnest($1::text[], $2::text[]) AS n(c, p)`

// sendFlush notifies the listeners of every replica. A flush with relayed
// deltas that fails is sent again without them: the deltas are best effort,
// the appends notifications are what streams on other replicas need to
// see every message.
func (n *notifier) sendFlush(f *flush) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := n.pool.Exec(ctx, notifySQL, f.channels, f.payloads)
	if err == nil {
		return
	}
	if f.appendsFrom > 0 {
		n.mu.Lock()
		failed := n.relayFailed
		n.mu.Unlock()
		if failed != nil && f.deltas > 0 {
			failed(f.deltas, err)
		} else {
			n.log.Warn("notify relayed deltas", "err", err)
		}
		if f.appendsFrom == len(f.payloads) {
			return
		}
		_, err = n.pool.Exec(ctx, notifySQL, f.channels[f.appendsFrom:], f.payloads[f.appendsFrom:])
		if err == nil {
			return
		}
	}
	n.log.Warn("notify appends", "chats", len(f.ids), "err", err)
}

// maxPayload is how long a notification's payload may be: Postgres takes
// less than 8000 bytes.
const maxPayload = 7999

// payloads joins chat ids with commas into as few payloads as fit.
func payloads(ids []string) []string {
	var out []string
	var b strings.Builder
	for _, id := range ids {
		if b.Len() > 0 && b.Len()+1+len(id) > maxPayload {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(id)
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}
