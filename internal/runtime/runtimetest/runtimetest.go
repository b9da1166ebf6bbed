// Package runtimetest starts what tests and benchmarks of the runtime and
// of the packages above it need: a fresh real store (SQLite in a temp dir,
// or a database of its own on the test Postgres) and a started runtime on
// it, stopped when the test ends. No fakes: a test that needs one wraps
// the store it gets.
package runtimetest

import (
	"context"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/pgtest"
)

// OpenSQLite opens a fresh SQLite store in a temp dir, migrated, closed
// when the test ends.
func OpenSQLite(tb testing.TB) store.DB {
	tb.Helper()
	return open(tb, store.Config{DataDir: tb.TempDir()})
}

// OpenPostgres opens a fresh database of the test Postgres (pgtest.URL:
// the test skips without one, or fails under CI=true), migrated, closed
// when the test ends. A test binary that uses it runs pgtest.Wrap in its
// TestMain.
func OpenPostgres(tb testing.TB) store.DB {
	tb.Helper()
	return open(tb, store.Config{DatabaseURL: pgtest.URL(tb)})
}

// Open opens a fresh store of a backend: "sqlite" or "postgres".
func Open(tb testing.TB, backend string) store.DB {
	tb.Helper()
	switch backend {
	case "sqlite":
		return OpenSQLite(tb)
	case "postgres":
		return OpenPostgres(tb)
	}
	tb.Fatalf("no store backend %q: sqlite or postgres", backend)
	return nil
}

// OpenWith opens a fresh store of a backend with cfg's settings (the
// benchmarks' group-commit knobs); its location is the test's own.
func OpenWith(tb testing.TB, backend string, cfg store.Config) store.DB {
	tb.Helper()
	switch backend {
	case "sqlite":
		cfg.DataDir = tb.TempDir()
	case "postgres":
		cfg.DatabaseURL = pgtest.URL(tb)
	default:
		tb.Fatalf("no store backend %q: sqlite or postgres", backend)
	}
	return open(tb, cfg)
}

func open(tb testing.TB, cfg store.Config) store.DB {
	tb.Helper()
	db, err := store.Open(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := db.Migrate(context.Background()); err != nil {
		db.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// New starts a runtime on db with the scripted model providers (replay),
// 5 s leases and a 50 ms poll, changed by opts; it is stopped when the test
// ends. The lease is long enough that a renewal delayed on a loaded machine
// (the race detector, suites run side by side) does not hand a chat to
// another claim mid-turn, which would redo the turn and its tool calls; a
// test that wants a lease to run out sets a shorter one.
func New(tb testing.TB, db chat.Store, opts ...func(*runtime.Config)) *runtime.Runtime {
	tb.Helper()
	models, err := llm.New(llm.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	cfg := runtime.Config{Store: db, Models: models, LeaseDuration: 5 * time.Second, PollInterval: 50 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	rt, err := runtime.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := rt.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Stop(ctx); err != nil {
			tb.Error(err)
		}
	})
	return rt
}
