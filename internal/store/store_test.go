package store

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/store/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Wrap(m)) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestOpenSQLite(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "nested", "data")
	db, err := Open(t.Context(), Config{DataDir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Kind() != "sqlite" {
		t.Fatalf("Kind = %q, want sqlite", db.Kind())
	}
	if err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := db.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, SQLiteFile)); err != nil {
		t.Fatalf("database file: %v", err)
	}
}

func TestOpenPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	for _, u := range []string{url, "postgresql" + url[len("postgres"):]} {
		db, err := Open(t.Context(), Config{DatabaseURL: u, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if db.Kind() != "postgres" {
			t.Errorf("Open(%s): Kind = %q, want postgres", u, db.Kind())
		}
		if err := db.Migrate(t.Context()); err != nil {
			t.Error(err)
		}
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	}
}

func TestOpenRejectsOtherURLs(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"sqlite:///tmp/x.db", "mysql://db/agentd", "host=localhost dbname=agentd"} {
		if db, err := Open(t.Context(), Config{DatabaseURL: u, DataDir: t.TempDir(), Logger: quiet}); err == nil {
			db.Close()
			t.Errorf("Open(%q) succeeded; want an error, not a silent SQLite store", u)
		}
	}
}

// TestOpenSQLiteLocksTheDataDir checks that a second store on the same data
// directory is refused while the first is open, and allowed once it closed.
func TestOpenSQLiteLocksTheDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := Open(t.Context(), Config{DataDir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if second, err := Open(t.Context(), Config{DataDir: dir, Logger: quiet}); !errors.Is(err, ErrDataDirLocked) {
		if err == nil {
			second.Close()
		}
		t.Fatalf("second Open = %v, want ErrDataDirLocked", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	again, err := Open(t.Context(), Config{DataDir: dir, Logger: quiet})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	again.Close()
}
