// Package postgres is the chat.Store on Postgres, through pgx v5 and its
// connection pool. Replicas of agentd share one database: chats are leased
// with FOR UPDATE SKIP LOCKED, every append is fenced by the chat's epoch and
// last_seq, and appends of many chats share transactions (group commit).
package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/store/internal/groupcommit"
	"github.com/agentd/agentd/migrations"
)

// Config configures a Store.
type Config struct {
	// URL is a postgres:// connection URL (or a libpq key=value string).
	URL string
	// Logger receives background failures; default: discarded.
	Logger *slog.Logger
	// Now is the clock for timestamps a caller left zero; default time.Now.
	Now func() time.Time
	// MaxConns caps the pool; 0 keeps pgxpool's default (or the URL's
	// pool_max_conns).
	MaxConns int32
	// ConnectWait is how long Open keeps retrying, with backoff, a database
	// that cannot be reached (not yet started, restarting) before it gives
	// up. Zero tries once. Errors the database answers with (a wrong
	// password, an unknown database) end the wait at once.
	ConnectWait time.Duration
	// CommitsInFlight is how many group-commit batches may be committing
	// at once (groupcommit.Config.InFlight); default
	// defaultCommitsInFlight.
	CommitsInFlight int
}

// Store is a chat.Store on Postgres. Create it with Open; it is safe for
// concurrent use.
type Store struct {
	log  *slog.Logger
	now  func() time.Time
	pool *pgxpool.Pool
	// writers are the connections of the group committer's batches and
	// of the notifier's flushes, apart from pool (see Open).
	writers *pgxpool.Pool
	commit  *groupcommit.Committer[*op]
	notify  *notifier
	young   *analyzer

	closeOnce sync.Once
	closeErr  error
}

var _ chat.Store = (*Store)(nil)

// Open connects to the database (checking it answers) and starts the group
// committer. It does not migrate; call Migrate.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.URL == "" {
		return nil, errors.New("open postgres store: no database URL")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.CommitsInFlight = cmp.Or(max(cfg.CommitsInFlight, 0), defaultCommitsInFlight)
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		// The error names the URL's parts, not the password.
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	switch {
	case cfg.MaxConns > 0:
		pc.MaxConns = cfg.MaxConns
	case !strings.Contains(cfg.URL, "pool_max_conns"):
		// pgxpool's default (the number of CPUs, at least 4) is too few
		// for the group committer's batches in flight plus the reads of
		// followers and claims on a small machine.
		pc.MaxConns = max(pc.MaxConns, defaultMaxConns)
	}
	if pc.ConnConfig.ConnectTimeout == 0 {
		// Without a timeout a dial to a host that drops packets hangs for
		// as long as the caller's context allows; with one, an unreachable
		// database is reported (and requests answered 503) in seconds.
		pc.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	s := &Store{log: cfg.Logger, now: cfg.Now}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	if err := waitReachable(ctx, pool, cfg.ConnectWait, cfg.Logger); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	s.pool = pool
	// The group committer's batches and the notifier's flushes have
	// connections of their own, one per batch in flight and one for the
	// notifier, so that neither ever waits for a connection. From the
	// pool they waited behind bursts of reads (200 streams opening at
	// once): every append of the server then waited for the batch (up to
	// 300 ms measured), and every delta relayed to other replicas for the
	// flush.
	wc := pc.Copy()
	wc.MaxConns = int32(cfg.CommitsInFlight) + 1
	// Opened when first used, whatever the URL asks of the main pool.
	wc.MinConns, wc.MinIdleConns = 0, 0
	writers, err := pgxpool.NewWithConfig(ctx, wc)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	s.writers = writers
	s.notify = newNotifier(writers, cfg.Logger.With("store", "postgres"))
	s.commit = groupcommit.New(groupcommit.Config[*op]{
		Commit:   s.commitBatch,
		Key:      (*op).Chat,
		Trace:    (*op).Trace,
		InFlight: cfg.CommitsInFlight,
		Isolate:  isolate,
		Logger:   cfg.Logger.With("store", "postgres"),
	})
	if err := s.commit.Start(ctx); err != nil {
		s.notify.close()
		writers.Close()
		pool.Close()
		return nil, err
	}
	s.young = startAnalyzer(pool, cfg.Logger.With("store", "postgres"))
	return s, nil
}

// waitReachable pings the database until it answers, retrying unreachable
// errors with exponential backoff (0.25 s doubling up to 5 s) for up to
// wait, so that replicas started together with their database (compose,
// a rolling restart of both) come up instead of crash-looping.
func waitReachable(ctx context.Context, pool *pgxpool.Pool, wait time.Duration, log *slog.Logger) error {
	deadline := time.Now().Add(wait)
	backoff := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := translate(pool.Ping(pctx))
		cancel()
		if err == nil || !errors.Is(err, chat.ErrUnavailable) {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("database still unreachable after %s (%d attempts; raise the connect wait to wait longer): %w", wait, attempt, err)
		}
		sleep := min(backoff, left)
		log.Warn("database unreachable; retrying", "store", "postgres", "attempt", attempt, "retry_in", sleep, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the database: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(sleep):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

const (
	// defaultCommitsInFlight is how many group-commit batches may wait for their
	// WAL flush at once (see groupcommit.Config.InFlight). More than one
	// lets an append wait for one flush rather than the one in progress and
	// then its own, which pays off where the disk's flush is slow and CPU
	// is plenty. Measured with bench-compare on a small, busy machine (2
	// cores; again once batches had connections of their own): the same
	// throughput, but smaller batches, 20% more CPU per message at C=8 and
	// C=32; what it bought was a shorter wait for the first commits when
	// 200 chats start at once. So one, for now.
	defaultCommitsInFlight = 1
	// defaultMaxConns is the pool's least size unless configured.
	defaultMaxConns = 16
)

// Kind returns "postgres".
func (s *Store) Kind() string { return "postgres" }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping postgres: %w", translate(err))
	}
	return nil
}

// Close commits the appends already queued, then closes the pool. It is safe
// to call twice; appends after Close fail.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.young.close()
		s.closeErr = s.commit.Stop(context.Background())
		s.notify.close()
		s.writers.Close()
		s.pool.Close()
	})
	return s.closeErr
}

// migrateLockKey is the advisory lock that serializes migrations across
// replicas starting at once ("agentd" in ASCII).
const migrateLockKey int64 = 0x616765_6e7464

// Migrate applies the embedded migrations not applied yet. Each runs in its
// own transaction together with its schema_migrations row, so a failure
// leaves no half-applied version and running Migrate again is a no-op.
//
// Every transaction first takes a transaction-scoped advisory lock: replicas
// that start together then apply each version once, in order, instead of
// racing on CREATE TABLE. The lock is released by COMMIT or ROLLBACK, so a
// crashed migrator cannot leave it held.
func (s *Store) Migrate(ctx context.Context) error {
	return s.migrateTo(ctx, math.MaxInt)
}

// migrateTo applies the embedded migrations not applied yet up to version
// last. Tests use it to build a database as an older release left it.
func (s *Store) migrateTo(ctx context.Context, last int) error {
	ms, err := migrations.List(migrations.Postgres)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.Version > last {
			break
		}
		applied, err := s.migrateOne(ctx, m)
		if err != nil {
			return fmt.Errorf("migrate postgres to %s: %w", m.Name, err)
		}
		if applied {
			s.log.Info("applied migration", "store", "postgres", "migration", m.Name)
		}
	}
	return nil
}

func (s *Store) migrateOne(ctx context.Context, m migrations.Migration) (applied bool, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx) // a no-op after Commit
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLockKey); err != nil {
		return false, err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    int PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return false, err
	}
	var done bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, m.Version).Scan(&done); err != nil {
		return false, err
	}
	if done {
		return false, nil
	}
	// Without arguments pgx sends the file with the simple query protocol,
	// which runs all of its statements (inside this transaction).
	if _, err := tx.Exec(ctx, m.SQL); err != nil {
		return false, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

// translate maps driver errors to the chat package's errors, once, here.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return chat.ErrNotFound
	}
	if unreachable(err) {
		// %v, not %w: the text (host, port, user) is for the log; callers
		// match chat.ErrUnavailable and answer without it.
		return fmt.Errorf("%w: %v", chat.ErrUnavailable, err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" { // unique_violation
		// %v, not %w: callers match chat.ErrConflict, never driver types.
		return fmt.Errorf("%w: %v", chat.ErrConflict, err)
	}
	if errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "22") || strings.HasPrefix(pe.Code, "54")) {
		// Data exception (a value text or jsonb cannot hold, a number out of
		// range) or program limit exceeded (a value too large): the same
		// call fails again. The message names the problem, never the value
		// (that is in pe.Detail, which is left out).
		return fmt.Errorf("%w: %s (SQLSTATE %s)", chat.ErrDataRejected, pe.Message, pe.Code)
	}
	return err
}

// unreachable reports whether err means the database could not be reached
// or went away, rather than that it rejected the statement: a failed dial,
// a connection lost mid-query, or the server refusing work while it starts,
// stops or is out of connections. Context errors of the caller are not: the
// caller gave up, the database did not.
func unreachable(err error) bool {
	if errors.Is(err, chat.ErrUnavailable) {
		return true
	}
	// The server's own answer first: a failed connect may wrap one (a
	// wrong password, an unknown database), and that is no outage.
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			pe.Code == "57P01", // admin_shutdown
			pe.Code == "57P02", // crash_shutdown
			pe.Code == "57P03", // cannot_connect_now (starting up, recovering)
			pe.Code == "53300": // too_many_connections
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err)
}

// isolate reports whether a failed batch is worth retrying append by append:
// yes when the server rejected a statement (bad data, a constraint, a
// deadlock), no when the connection, the server or the context failed, which
// every retry would run into as well.
func isolate(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || len(pe.Code) < 2 {
		return false
	}
	switch pe.Code[:2] {
	case "08", // connection exception
		"53", // insufficient resources (disk full, out of memory, too many connections)
		"57", // operator intervention (shutdown, query_canceled by a timeout)
		"58", // system error (I/O)
		"XX": // internal error
		return false
	}
	return true
}
