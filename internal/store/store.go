// Package store opens agentd's durable log and chat records: Postgres when
// the database URL is a postgres:// URL (any number of replicas), else an
// embedded SQLite file in the data directory (single node). Both implement
// chat.Store and pass the same conformance suite (storetest).
package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/store/postgres"
	"github.com/agentd/agentd/internal/store/sqlite"
)

// Config says which store to open.
type Config struct {
	// DatabaseURL is a postgres:// or postgresql:// URL; empty selects the
	// embedded SQLite store.
	DatabaseURL string
	// DataDir holds the SQLite file (agentd.db) and is created if missing;
	// default "agentd-data". Unused with Postgres.
	DataDir string
	// Logger receives the store's background failures; default: discarded.
	Logger *slog.Logger
	// ConnectWait is how long Open retries an unreachable Postgres before
	// giving up; zero tries once. Unused with SQLite.
	ConnectWait time.Duration
	// CommitsInFlight is how many group-commit batches may commit at once
	// on Postgres (see postgres.Config); zero is its default. Unused with
	// SQLite, which has one writer.
	CommitsInFlight int
}

// SQLiteFile is the name of the SQLite database file in Config.DataDir.
const SQLiteFile = "agentd.db"

// LockFile is the name of the lock file in Config.DataDir that one process at
// a time holds while it has the embedded store open.
const LockFile = "agentd.lock"

// ErrDataDirLocked is returned by Open when another process has the embedded
// store of the same data directory open.
var ErrDataDirLocked = errors.New("another agentd process is using this data directory (the embedded SQLite store is single-node: run one process per data directory, or use Postgres for several replicas)")

// DB is an open store: chat.Store plus what the program needs to run it.
type DB interface {
	chat.Store
	// Migrate applies the embedded migrations not applied yet; running it
	// again, or from several replicas at once, is safe.
	Migrate(ctx context.Context) error
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// Close commits the appends already queued and closes the database.
	Close() error
	// Kind is "postgres" or "sqlite".
	Kind() string
}

// Open opens the store cfg selects. It does not migrate.
//
// A DatabaseURL that is set but is not a Postgres URL is an error rather than
// a silent fall-back to SQLite: a typo in the URL must not make a replica run
// on a private embedded database.
func Open(ctx context.Context, cfg Config) (DB, error) {
	logger := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	switch {
	case isPostgresURL(cfg.DatabaseURL):
		return postgres.Open(ctx, postgres.Config{URL: cfg.DatabaseURL, Logger: logger, ConnectWait: cfg.ConnectWait, CommitsInFlight: cfg.CommitsInFlight})
	case cfg.DatabaseURL != "":
		return nil, errors.New("open store: the database URL must start with postgres:// or postgresql:// (leave it empty for the embedded SQLite store)")
	}
	dir := cmp.Or(cfg.DataDir, "agentd-data")
	// 0700: the log holds every prompt and reply.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open store: create data directory: %w", err)
	}
	lock, err := lockDataDir(filepath.Join(dir, LockFile))
	if err != nil {
		return nil, fmt.Errorf("open store in %s: %w", dir, err)
	}
	db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, SQLiteFile), Logger: logger})
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		return nil, err
	}
	return &lockedDB{Store: db, lock: lock}, nil
}

// lockedDB is the SQLite store together with its data directory's lock,
// released when the store is closed.
type lockedDB struct {
	*sqlite.Store
	lock *os.File
}

// Close closes the store, then releases the lock. Safe to call twice.
func (l *lockedDB) Close() error {
	err := l.Store.Close()
	if l.lock != nil {
		// Closing the file releases the flock; a second Close reports
		// os.ErrClosed, which is not news.
		if cerr := l.lock.Close(); cerr != nil && !errors.Is(cerr, os.ErrClosed) {
			err = errors.Join(err, fmt.Errorf("release data directory lock: %w", cerr))
		}
	}
	return err
}

func isPostgresURL(u string) bool {
	l := strings.ToLower(u)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}
