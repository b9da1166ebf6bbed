// Package groupcommit batches the appends of many chats into few database
// transactions (docs/architecture.md, group commit).
//
// Every chat's worker appends a few events per model turn and must wait until
// they are durable before it publishes them. One transaction per append costs
// one WAL flush (fsync) per append, which caps the whole server at a few
// hundred appends per second however many chats run. A Committer instead has
// one goroutine (or a few: Config.InFlight) that takes everything queued while the previous transaction
// was committing and commits it as one transaction, so under load the cost of
// a flush is shared by up to MaxBatch appends; with no load a batch is a
// single append and pays no extra latency (there is no waiting for a batch to
// fill).
package groupcommit

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/internal/chat"
)

// ErrStopped is returned by Append when the Committer is not running (not
// started yet, or stopping).
var ErrStopped = errors.New("store is closed")

// CommitFunc commits batch in one transaction. Each member is fenced on its
// own: when an append's chat epoch or last_seq does not match (or a create
// finds its idempotency key taken), the function skips that member, sets
// fenced[i] and goes on with the others. It returns a non-nil error only
// when the transaction as a whole failed, in which case nothing of the batch
// was committed.
//
// T is what a store queues: usually *chat.AppendParams; a store that also
// creates chats through the committer queues a type of its own that holds
// either.
type CommitFunc[T any] func(ctx context.Context, batch []T, fenced []bool) error

// Config configures a Committer.
type Config[T any] struct {
	// Commit writes a batch; required.
	Commit CommitFunc[T]
	// Key is the chat a member writes to; batches are ordered by it (see
	// commit). Default: members are taken as *chat.AppendParams.
	Key func(T) string
	// Isolate reports whether a failed batch should be retried one append at a
	// time because err may have been caused by a single member (a constraint
	// or encoding error). It should return false for errors that would fail
	// every retry alike (connection lost, timeout, disk full), so that a
	// broken database fails the batch once instead of len(batch) times. Nil
	// means always retry.
	Isolate func(err error) bool
	// MaxBatch caps the number of appends in one transaction; default 256.
	MaxBatch int
	// InFlight is how many batches may be committing at once; default 1.
	// With more than one, an append that arrives while a batch is waiting
	// for its WAL flush goes out at once in the next batch rather than
	// waiting for that flush as well; the database then flushes the WAL of
	// the batches in flight together. Appends to one chat never overlap
	// (its worker waits for each), and every batch locks chats in chat
	// order (see commit), so concurrent batches cannot deadlock each other.
	// Only for databases that commit concurrently (not SQLite's single
	// writer).
	InFlight int
	// Timeout bounds one transaction; default 30s. A caller whose append is
	// in flight waits for its outcome even when its own context ends (see
	// Append), so this is also the longest such a caller can wait.
	Timeout time.Duration
	// Logger receives batch failures; default slog.Default().
	Logger *slog.Logger
	// Trace is a member's chat.AppendTrace, if it asked for one (see
	// chat.AppendParams.Trace). Default: members are taken as
	// *chat.AppendParams.
	Trace func(T) *chat.AppendTrace
}

// Committer queues appends and commits them in batches from one goroutine
// (Config.InFlight goroutines). It
// has the Start/Stop lifecycle of every background component.
type Committer[T any] struct {
	cfg Config[T]

	mu     sync.Mutex
	state  int // stateNew, stateRunning, stateStopping
	queue  []*request[T]
	wake   chan struct{} // capacity 1: a pending wake-up, never blocks a sender
	done   chan struct{} // closed when the loops have exited
	loops  sync.WaitGroup
	cancel context.CancelFunc // set by Start; nil until then
	// requests are answered requests, kept for reuse: one per append
	// (with its channel) was a twentieth of the allocations of a busy
	// replica.
	requests sync.Pool

	// enqueued, if set (by tests, before Start), is called after each
	// append is queued, so that a test can wait for that event instead of
	// polling.
	enqueued func()
}

const (
	stateNew = iota
	stateRunning
	stateStopping
)

// A request moves from pending to taken (the committer owns it and will
// answer on done) or to abandoned (its caller gave up first; the committer
// drops it). The compare-and-swap between the two makes "did my append get
// written?" always answerable: an abandoned append is never written.
const (
	reqPending int32 = iota
	reqTaken
	reqAbandoned
)

type request[T any] struct {
	p     T
	state atomic.Int32
	done  chan error // capacity 1
}

// New returns a Committer; call Start before Append.
func New[T any](cfg Config[T]) *Committer[T] {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 256
	}
	if cfg.InFlight <= 0 {
		cfg.InFlight = 1
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Isolate == nil {
		cfg.Isolate = func(error) bool { return true }
	}
	if cfg.Trace == nil {
		cfg.Trace = func(p T) *chat.AppendTrace {
			if a, ok := any(p).(*chat.AppendParams); ok {
				return a.Trace
			}
			return nil
		}
	}
	if cfg.Key == nil {
		cfg.Key = func(p T) string {
			if a, ok := any(p).(*chat.AppendParams); ok {
				return a.ChatID
			}
			return ""
		}
	}
	return &Committer[T]{cfg: cfg, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// Start starts the committing goroutine. Starting twice is a no-op; a stopped
// Committer cannot be restarted.
func (c *Committer[T]) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != stateNew {
		return nil
	}
	// The loop's context is not ctx: a Start context typically ends when
	// startup is over. Stop cancels loopCtx only when draining takes longer
	// than Stop's own context allows.
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	c.state = stateRunning
	for range c.cfg.InFlight {
		c.loops.Add(1)
		go c.loop(loopCtx)
	}
	go func() {
		c.loops.Wait()
		close(c.done)
	}()
	return nil
}

// Stop stops accepting appends, commits everything already queued and waits
// for the goroutine to exit. If ctx ends first, the batch in flight is
// cancelled (its callers get an error) and Stop returns ctx.Err(). Stop is
// safe to call twice and before Start.
func (c *Committer[T]) Stop(ctx context.Context) error {
	c.mu.Lock()
	c.state = stateStopping
	started := c.cancel != nil
	c.mu.Unlock()
	if !started {
		return nil
	}
	c.signal()
	select {
	case <-c.done:
		c.cancel()
		return nil
	case <-ctx.Done():
		c.cancel()
		<-c.done
		return ctx.Err()
	}
}

// Append queues p and blocks until its transaction has committed (nil), p was
// fenced (chat.ErrFenced) or the commit failed.
//
// If ctx ends while p is still queued, p is withdrawn and Append returns
// ctx.Err(): nothing was written. If ctx ends after the committer has taken p
// into a transaction, Append still waits for the outcome (bounded by
// Config.Timeout), because returning early would leave the caller unable to
// tell whether its events are in the log.
func (c *Committer[T]) Append(ctx context.Context, p T) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r, _ := c.requests.Get().(*request[T])
	if r == nil {
		r = &request[T]{done: make(chan error, 1)}
	}
	r.p = p
	r.state.Store(reqPending)
	c.mu.Lock()
	if c.state != stateRunning {
		c.mu.Unlock()
		c.reuse(r)
		return ErrStopped
	}
	c.queue = append(c.queue, r)
	c.mu.Unlock()
	if c.enqueued != nil {
		c.enqueued()
	}
	c.signal()

	select {
	case err := <-r.done:
		c.reuse(r)
		return err
	case <-ctx.Done():
		if r.state.CompareAndSwap(reqPending, reqAbandoned) {
			// Still in the queue, where take will find it: not reused.
			return ctx.Err()
		}
		err := <-r.done
		c.reuse(r)
		return err
	}
}

// reuse keeps an answered request for the next Append. The committer is
// done with a request once it has sent its answer (or never queued it),
// and its channel is empty again.
func (c *Committer[T]) reuse(r *request[T]) {
	var zero T
	r.p = zero
	c.requests.Put(r)
}

func (c *Committer[T]) signal() {
	select {
	case c.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

func (c *Committer[T]) loop(ctx context.Context) {
	defer c.loops.Done()
	for {
		batch, stopping := c.take()
		if len(batch) > 0 {
			c.commit(ctx, batch)
			c.gather()
			continue
		}
		if stopping {
			// Stop's one wake-up is passed from loop to loop, so that
			// every loop sees it and exits.
			c.signal()
			return
		}
		<-c.wake
	}
}

// gather lets the appenders that the batch just answered run before the
// next batch is taken: they are runnable on this goroutine's processor,
// and each of them may be about to queue its next append. Taken at once,
// the next batch would hold the first few, and the rest would wait a
// whole commit for the batch after it. It yields while the queue grows,
// a few times at most; with nothing else runnable a yield returns at once.
func (c *Committer[T]) gather() {
	n := -1
	for range 4 {
		c.mu.Lock()
		m := len(c.queue)
		c.mu.Unlock()
		if m == n || m >= c.cfg.MaxBatch {
			return
		}
		n = m
		runtime.Gosched()
	}
}

// take removes up to MaxBatch live requests from the queue and marks them
// taken. stopping reports that no more requests can arrive.
func (c *Committer[T]) take() (batch []*request[T], stopping bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for n < len(c.queue) && len(batch) < c.cfg.MaxBatch {
		r := c.queue[n]
		n++
		if r.state.CompareAndSwap(reqPending, reqTaken) {
			batch = append(batch, r)
		}
	}
	// Copy the rest rather than reslicing, so the backing array does not
	// keep growing and does not pin answered requests.
	rest := c.queue[n:]
	c.queue = append(make([]*request[T], 0, len(rest)), rest...)
	if len(c.queue) > 0 {
		c.signal() // more than one batch's worth: another loop may take it
	}
	return batch, c.state == stateStopping
}

// commit runs one batch and answers every member.
func (c *Committer[T]) commit(ctx context.Context, batch []*request[T]) {
	// Sort by chat id (stably, so appends to one chat keep their order) so
	// that the batches of two replicas, which may both hold appends to one
	// chat (its stale and its new owner), lock chat rows in the same order
	// and do not deadlock each other. A deadlock with some other statement
	// remains possible; it fails the batch, whose members are then retried
	// one by one like after any statement error.
	sort.SliceStable(batch, func(i, j int) bool { return c.cfg.Key(batch[i].p) < c.cfg.Key(batch[j].p) })

	ps := make([]T, len(batch))
	for i, r := range batch {
		ps[i] = r.p
	}
	fenced := make([]bool, len(batch))
	taken := time.Now()
	err := c.run(ctx, ps, fenced)
	if err == nil {
		c.stamp(ps, taken)
		for i, r := range batch {
			r.done <- fencedErr(fenced[i])
		}
		return
	}
	if len(batch) == 1 || !c.cfg.Isolate(err) {
		// Every caller gets err and reports it in its own context; log here
		// only what no single caller caused: the database failing.
		if !c.cfg.Isolate(err) {
			c.cfg.Logger.Error("group commit failed", "appends", len(batch), "err", err)
		}
		for _, r := range batch {
			r.done <- err
		}
		return
	}
	// One bad append (say, data that is not valid JSON) aborts the whole
	// transaction. Retry each member alone, so that only the culprit fails.
	c.cfg.Logger.Warn("group commit failed, retrying appends one by one", "appends", len(batch), "err", err)
	for i, r := range batch {
		one := []bool{false}
		err := c.run(ctx, ps[i:i+1], one)
		if err != nil {
			r.done <- err
			continue
		}
		r.done <- fencedErr(one[0])
	}
}

// stamp fills in the traces of the members that asked for one.
func (c *Committer[T]) stamp(ps []T, taken time.Time) {
	var committed time.Time
	for _, p := range ps {
		if t := c.cfg.Trace(p); t != nil {
			if committed.IsZero() {
				committed = time.Now()
			}
			t.Taken, t.Committed, t.Batch = taken, committed, len(ps)
		}
	}
}

func (c *Committer[T]) run(ctx context.Context, ps []T, fenced []bool) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	clear(fenced)
	return c.cfg.Commit(ctx, ps, fenced)
}

func fencedErr(fenced bool) error {
	if fenced {
		return chat.ErrFenced
	}
	return nil
}
