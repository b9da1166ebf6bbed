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
type notifier struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	// send sends the notifications of a flush (sendIDs; a test counts).
	send func(ids []string)

	mu      sync.Mutex
	pending map[string]struct{}
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

func newNotifier(pool *pgxpool.Pool, log *slog.Logger) *notifier {
	return startNotifier(pool, log, nil)
}

// startNotifier starts a notifier that sends with send, or with sendIDs.
func startNotifier(pool *pgxpool.Pool, log *slog.Logger, send func(ids []string)) *notifier {
	n := &notifier{pool: pool, log: log, pending: map[string]struct{}{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	n.send = send
	if send == nil {
		n.send = n.sendIDs
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

// flush sends every pending id in one statement: while one is being sent,
// the ids of later commits gather for the next.
func (n *notifier) flush() {
	n.mu.Lock()
	if len(n.pending) == 0 {
		n.mu.Unlock()
		return
	}
	ids := make([]string, 0, len(n.pending))
	for id := range n.pending {
		ids = append(ids, id)
	}
	clear(n.pending)
	n.mu.Unlock()
	n.send(ids)
}

// sendIDs notifies the listeners of every replica that the chats' logs grew.
func (n *notifier) sendIDs(ids []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A transaction that notifies gets a transaction id and so a commit
	// record, which synchronous_commit would flush to disk: an fsync for
	// nothing durable. Commit it asynchronously (set_config with is_local
	// true lasts for this transaction only; the CTE runs before the calls).
	if _, err := n.pool.Exec(ctx, `WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
		SELECT count(pg_notify('`+channelAppends+`', p)) FROM async, unnest($1::text[]) AS p`, payloads(ids)); err != nil {
		n.log.Warn("notify appends", "chats", len(ids), "err", err)
	}
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
