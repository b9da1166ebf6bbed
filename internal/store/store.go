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
}

// SQLiteFile is the name of the SQLite database file in Config.DataDir.
const SQLiteFile = "agentd.db"

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
		return postgres.Open(ctx, postgres.Config{URL: cfg.DatabaseURL, Logger: logger, ConnectWait: cfg.ConnectWait})
	case cfg.DatabaseURL != "":
		return nil, errors.New("open store: the database URL must start with postgres:// or postgresql:// (leave it empty for the embedded SQLite store)")
	}
	dir := cmp.Or(cfg.DataDir, "agentd-data")
	// 0700: the log holds every prompt and reply.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open store: create data directory: %w", err)
	}
	return sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, SQLiteFile), Logger: logger})
}

func isPostgresURL(u string) bool {
	l := strings.ToLower(u)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}
