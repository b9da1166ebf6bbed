package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(Wrap(m)) }

func TestURLGivesFreshDatabasesAndDropsThem(t *testing.T) {
	var names []string
	skipped := false
	t.Run("create", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		a, b := URL(t), URL(t)
		if a == b {
			t.Fatalf("two calls returned the same database %s", a)
		}
		for _, u := range []string{a, b} {
			conn, err := pgx.Connect(t.Context(), u)
			if err != nil {
				t.Fatal(err)
			}
			var tables int
			err = conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&tables)
			conn.Close(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if tables != 0 {
				t.Errorf("%s has %d tables, want an empty database", u, tables)
			}
			pu, _ := url.Parse(u)
			names = append(names, strings.TrimPrefix(pu.Path, "/"))
		}
	})
	switch {
	case skipped:
		// URL skipped (no Postgres here; in CI it fails instead): so is
		// this test, which has nothing to check, rather than passing.
		t.Skip("the databases could not be created, so their drop is not checked")
	case t.Failed():
		return
	case len(names) != 2:
		t.Fatalf("the subtest made %d databases, want 2", len(names))
	}
	// The subtest's cleanups have run: both databases must be gone.
	admin, err := adminURL()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var left int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_database WHERE datname = ANY($1)`, names).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d of the test's databases %v were not dropped", left, names)
	}
}

func TestFindBinDir(t *testing.T) {
	dir, err := findBinDir()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Postgres binaries here (CI=true: a failure, not a skip): %v", err)
		}
		t.Skipf("no Postgres binaries here: %v", err)
	}
	if !strings.HasSuffix(dir, "bin") {
		t.Errorf("findBinDir() = %q", dir)
	}
}

// fakeTB records Skip and Fatal instead of ending the goroutine.
type fakeTB struct {
	testing.TB
	skipped, fatal string
}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Skip(args ...any)  { f.skipped = fmt.Sprint(args...) }
func (f *fakeTB) Fatal(args ...any) { f.fatal = fmt.Sprint(args...) }

func TestUnavailableSkipsOrFailsInCI(t *testing.T) {
	err := fmt.Errorf("%w: no binaries", errUnavailable)
	local := &fakeTB{TB: t}
	unavailable(local, err, false)
	if local.skipped == "" || local.fatal != "" || !strings.Contains(local.skipped, EnvURL) {
		t.Errorf("without CI: skipped %q, fatal %q; want a skip naming %s", local.skipped, local.fatal, EnvURL)
	}
	ci := &fakeTB{TB: t}
	unavailable(ci, err, true)
	if ci.fatal == "" || ci.skipped != "" || !strings.Contains(ci.fatal, "CI=true") {
		t.Errorf("with CI=true: skipped %q, fatal %q; want a failure", ci.skipped, ci.fatal)
	}
}
