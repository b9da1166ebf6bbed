package sqlite

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/store/storetest"
	"github.com/agentd/agentd/migrations"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// openStore opens a store on a new file in a test directory, unmigrated.
func openStore(tb testing.TB) *Store {
	tb.Helper()
	s, err := Open(tb.Context(), Config{
		Path:   filepath.Join(tb.TempDir(), "agentd.db"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

func newStore(tb testing.TB) chat.Store {
	s := openStore(tb)
	if err := s.Migrate(tb.Context()); err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) chat.Store { return newStore(t) },
		storetest.WithExec(func(t *testing.T, s chat.Store, sql string) error {
			_, err := s.(*Store).writer.ExecContext(t.Context(), sql)
			return err
		}),
		storetest.WithCount(func(t *testing.T, s chat.Store, sql string) (n int64, err error) {
			err = s.(*Store).reader.QueryRowContext(t.Context(), sql).Scan(&n)
			return n, err
		}, "events.chat_id", "chats.id", "webhook_deliveries.chat_id", "messages.chat_id", "chat_runs.chat_id", "chat_erasures.chat_id"))
}

func BenchmarkAppend(b *testing.B) { storetest.BenchmarkAppend(b, newStore) }

func TestMigrateTwiceAndConcurrently(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "agentd.db")
	// Two stores on one file, as with `agentd migrate` next to a server:
	// each version must be applied exactly once.
	var stores []*Store
	for range 2 {
		s, err := Open(t.Context(), Config{Path: path, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores = append(stores, s)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = stores[i%2].Migrate(context.Background())
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if err := stores[0].Migrate(t.Context()); err != nil {
		t.Fatalf("third Migrate: %v", err)
	}
	ms, err := migrations.List(migrations.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	var n, maxVersion int
	if err := stores[0].reader.QueryRowContext(t.Context(),
		`SELECT count(*), max(version) FROM schema_migrations`).Scan(&n, &maxVersion); err != nil {
		t.Fatal(err)
	}
	if n != len(ms) || maxVersion != len(ms) {
		t.Fatalf("schema_migrations has %d rows up to version %d, want %d", n, maxVersion, len(ms))
	}
}

func TestPragmas(t *testing.T) {
	t.Parallel()
	s := newStore(t).(*Store)
	for _, tc := range []struct {
		db     string
		pragma string
		want   string
	}{
		{"writer", "journal_mode", "wal"},
		{"writer", "synchronous", "2"}, // FULL
		{"writer", "foreign_keys", "1"},
		{"writer", "busy_timeout", "10000"},
		{"reader", "foreign_keys", "1"},
		{"reader", "query_only", "1"},
		{"reader", "busy_timeout", "10000"},
	} {
		db := s.writer
		if tc.db == "reader" {
			db = s.reader
		}
		var got string
		if err := db.QueryRowContext(t.Context(), "PRAGMA "+tc.pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s: PRAGMA %s = %s, want %s", tc.db, tc.pragma, got, tc.want)
		}
	}
	if _, err := s.reader.ExecContext(t.Context(), "DELETE FROM chats"); err == nil {
		t.Error("the read pool accepted a write")
	}
}

func TestCloseDrainsAndRefuses(t *testing.T) {
	t.Parallel()
	s := newStore(t).(*Store)
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s.Kind() != "sqlite" {
		t.Fatalf("Kind = %q", s.Kind())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	err := s.Append(t.Context(), &chat.AppendParams{ChatID: "6d9c7b36-5a2b-4f34-9f4e-0d0c8b7f2a11",
		Events: []chat.Event{{Seq: 1, Type: chat.EventChatRunning}}, Update: chat.ChatUpdate{Status: chat.StatusRunning}})
	if err == nil {
		t.Fatal("Append after Close succeeded")
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"", filepath.Join(t.TempDir(), "a?b.db"), filepath.Join(t.TempDir(), "missing", "dir", "agentd.db")} {
		if s, err := Open(t.Context(), Config{Path: path}); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", path)
		}
	}
}
