package sqlite

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"time"
)

// WAL checkpoints (copying the pages a commit wrote to the WAL into the
// database file, so that the WAL can start over) are SQLite's own business
// by default: the commit that takes the WAL past wal_autocheckpoint pages
// (1,000) does one before it returns. With the group commit that is the
// committer's one goroutine, so every few dozen batches one batch, and every
// append waiting for it, also paid for writing a few MB to the database file
// and an fsync of it. The store runs them on a connection of its own instead,
// as PASSIVE checkpoints (they never wait for, or stop, the writer or a
// reader), after commits, at most one every checkpointPause: they overlap
// the next batches, on another core if there is one, and a page the batches
// keep rewriting (a running chat's record) is copied once per pause rather
// than once per 1,000 pages.
//
// The writer keeps a wal_autocheckpoint, at writerAutoCheckpoint pages,
// only as the bound of the WAL should the background checkpoints fall
// behind (a reader holding an old snapshot keeps a PASSIVE checkpoint from
// finishing). Checkpoints do not touch durability: a commit is durable
// once its WAL frames are flushed, with synchronous=FULL, before it returns.
const (
	checkpointPause      = 200 * time.Millisecond
	writerAutoCheckpoint = 16000 // pages: 64 MB of 4 KB pages
)

// checkpointer runs the WAL checkpoints in the background. Its life is the
// store's: started by Open, stopped by Close, safe to stop twice.
type checkpointer struct {
	db   *sql.DB // one connection of its own
	log  *slog.Logger
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func newCheckpointer(db *sql.DB, log *slog.Logger) *checkpointer {
	c := &checkpointer{db: db, log: log, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// committed tells the checkpointer that a transaction committed; it never
// blocks.
func (c *checkpointer) committed() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer close(c.done)
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		}
		var busy, frames, done int64
		err := c.db.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &done)
		if err != nil {
			c.log.Error("sqlite WAL checkpoint failed; the writer checkpoints once the WAL is large",
				"err", err, "wal_autocheckpoint_pages", writerAutoCheckpoint)
		}
		select {
		case <-c.stop:
			return
		case <-time.After(checkpointPause):
		}
	}
}

// close stops the goroutine and closes the connection.
func (c *checkpointer) close() error {
	c.once.Do(func() { close(c.stop) })
	<-c.done
	return c.db.Close()
}
