// Package sqlite is the embedded chat.Store: one SQLite file, through the pure
// Go driver modernc.org/sqlite (no cgo), for single-node deployments and
// development. It passes the same conformance suite as the Postgres store.
//
// SQLite lets one connection write at a time. Rather than have many pooled
// connections fight over the write lock (SQLITE_BUSY, busy-wait loops), the
// store has one single-connection pool that does every write, in the order
// the Go runtime hands it out, and a separate pool of read-only connections
// that, thanks to WAL mode, read concurrently with the writer and with each
// other.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"time"

	msqlite "modernc.org/sqlite" // registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/store/internal/groupcommit"
	"github.com/agentd/agentd/migrations"
)

// Config configures a Store.
type Config struct {
	// Path is the database file; it is created if missing, its directory is not.
	Path string
	// Logger receives background failures; default: discarded.
	Logger *slog.Logger
	// Now is the clock for timestamps a caller left zero; default time.Now.
	Now func() time.Time
	// Readers is the number of read connections; default max(4, GOMAXPROCS).
	Readers int
}

// Store is a chat.Store on one SQLite file. Create it with Open; it is safe
// for concurrent use.
type Store struct {
	log    *slog.Logger
	now    func() time.Time
	writer *sql.DB // exactly one connection: every write goes through it
	reader *sql.DB // read-only connections
	commit *groupcommit.Committer[*op]
	stmts  appendStmts // the committer's
	ckpt   *checkpointer

	closeOnce sync.Once
	closeErr  error
}

var _ chat.Store = (*Store)(nil)

// busyTimeoutMS is how long a connection waits for a lock held by another
// process (agentd migrate next to a running server, a backup) before failing
// with SQLITE_BUSY. Inside this process writes never contend: they share one
// connection.
const busyTimeoutMS = 10000

// Open opens (creating if needed) the database file and starts the group
// committer. It does not migrate; call Migrate.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Path == "" {
		return nil, errors.New("open sqlite store: no database path")
	}
	// The driver splits the DSN at the first '?' to find its options.
	if strings.ContainsRune(cfg.Path, '?') {
		return nil, fmt.Errorf("open sqlite store: path %q must not contain '?'", cfg.Path)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Readers <= 0 {
		cfg.Readers = max(4, runtime.GOMAXPROCS(0))
	}

	common := url.Values{}
	common.Set("_busy_timeout", fmt.Sprint(busyTimeoutMS))
	common.Set("_foreign_keys", "1")

	// The writer:
	//   journal_mode=WAL: readers do not block the writer nor it them.
	//   synchronous=FULL: a commit is on disk when it returns, as Append
	//     promises (NORMAL may lose the last commits on power loss in WAL
	//     mode). Group commit is what keeps this affordable: one fsync per
	//     batch, not per append.
	//   _txlock=immediate: transactions take the write lock at BEGIN, so a
	//     transaction never fails half-way when upgrading from read to write
	//     while another process writes.
	w := url.Values{}
	for k, v := range common {
		w[k] = v
	}
	w.Set("_journal_mode", "WAL")
	w.Set("_synchronous", "FULL")
	w.Set("_txlock", "immediate")
	//   wal_autocheckpoint: only the WAL's bound; the checkpoints run in the
	//     background (see checkpointer).
	w.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", writerAutoCheckpoint))
	writer, err := sql.Open("sqlite", cfg.Path+"?"+w.Encode())
	if err != nil {
		return nil, fmt.Errorf("open sqlite store %s: %w", cfg.Path, err)
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	writer.SetConnMaxIdleTime(0)
	// The writer connection creates the file and switches it to WAL before
	// any reader opens it.
	if err := writer.PingContext(ctx); err != nil {
		writer.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", cfg.Path, err)
	}
	if err := probeWrite(ctx, writer); err != nil {
		writer.Close()
		return nil, fmt.Errorf("open sqlite store %s: the database cannot be written (check the permissions of the file and its directory, which holds the -wal and -shm files): %w", cfg.Path, err)
	}

	r := url.Values{}
	for k, v := range common {
		r[k] = v
	}
	r.Set("_query_only", "1") // a bug that writes through the read pool fails loudly
	reader, err := sql.Open("sqlite", cfg.Path+"?"+r.Encode())
	if err != nil {
		writer.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", cfg.Path, err)
	}
	reader.SetMaxOpenConns(cfg.Readers)
	reader.SetMaxIdleConns(cfg.Readers)
	if err := reader.PingContext(ctx); err != nil {
		reader.Close()
		writer.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", cfg.Path, err)
	}

	c := url.Values{}
	for k, v := range common {
		c[k] = v
	}
	c.Set("_synchronous", "FULL")
	ckpt, err := sql.Open("sqlite", cfg.Path+"?"+c.Encode())
	if err != nil {
		reader.Close()
		writer.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", cfg.Path, err)
	}
	ckpt.SetMaxOpenConns(1)
	ckpt.SetMaxIdleConns(1)
	ckpt.SetConnMaxLifetime(0)
	ckpt.SetConnMaxIdleTime(0)

	s := &Store{log: cfg.Logger, now: cfg.Now, writer: writer, reader: reader,
		ckpt: newCheckpointer(ckpt, cfg.Logger.With("store", "sqlite"))}
	s.commit = groupcommit.New(groupcommit.Config[*op]{
		Commit:  s.commitBatch,
		Key:     (*op).Chat,
		Trace:   (*op).Trace,
		Isolate: isolate,
		Logger:  cfg.Logger.With("store", "sqlite"),
	})
	if err := s.commit.Start(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// probeWrite writes to the database and rolls the write back. SQLite opens a
// file it may not write read-only without a word, so without this a
// read-only file (or a directory where the WAL cannot be created) would give
// a server that starts, reports ready and fails every write.
func probeWrite(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // the point is to undo the probe
	_, err = tx.ExecContext(ctx, `CREATE TABLE agentd_write_probe (x INTEGER)`)
	return err
}

// Kind returns "sqlite".
func (s *Store) Kind() string { return "sqlite" }

// Ping checks that the database file can be read and written.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.writer.PingContext(ctx); err != nil {
		return fmt.Errorf("ping sqlite writer: %w", err)
	}
	if err := s.reader.PingContext(ctx); err != nil {
		return fmt.Errorf("ping sqlite reader: %w", err)
	}
	return nil
}

// Close commits the appends already queued, then closes the database. It is
// safe to call twice; appends after Close fail.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = errors.Join(
			s.commit.Stop(context.Background()),
			s.ckpt.close(),
			s.stmts.close(),
			s.reader.Close(),
			s.writer.Close(),
		)
	})
	return s.closeErr
}

// Migrate applies the embedded migrations not applied yet, each in its own
// transaction with its schema_migrations row, so a failed migration leaves no
// trace and running Migrate again is a no-op. BEGIN IMMEDIATE takes the
// database's write lock, so concurrent migrations (another agentd process on
// the same file) apply each version once.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := migrations.List(migrations.SQLite)
	if err != nil {
		return err
	}
	if _, err := s.writer.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY NOT NULL,
		name       TEXT NOT NULL,
		applied_at INTEGER NOT NULL -- unix nanoseconds
	) STRICT`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	for _, m := range ms {
		applied, err := s.migrateOne(ctx, m)
		if err != nil {
			return fmt.Errorf("migrate sqlite to %s: %w", m.Name, err)
		}
		if applied {
			s.log.Info("applied migration", "store", "sqlite", "migration", m.Name)
		}
	}
	return nil
}

func (s *Store) migrateOne(ctx context.Context, m migrations.Migration) (applied bool, err error) {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback() // a no-op after Commit
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
		return false, err
	}
	if n > 0 {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, m.Name, s.now().UnixNano()); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

// translate maps driver errors to the chat package's errors, once, here.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return chat.ErrNotFound
	}
	var se *msqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			// %v, not %w: callers match chat.ErrConflict, never driver types.
			return fmt.Errorf("%w: %v", chat.ErrConflict, err)
		case sqlite3.SQLITE_TOOBIG:
			// A value over the database's size limit: the same call fails again.
			return fmt.Errorf("%w: string or blob too big", chat.ErrDataRejected)
		}
	}
	return err
}

// isolate reports whether a failed batch is worth retrying append by append:
// yes for errors a single statement causes (a constraint, malformed JSON), no
// for errors every retry would hit too (I/O, disk full, locked, cancelled).
func isolate(err error) bool {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff { // the primary result code
	case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_ERROR, sqlite3.SQLITE_MISMATCH,
		sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_RANGE:
		return true
	}
	return false
}
