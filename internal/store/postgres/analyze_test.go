package postgres

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// On a new database, the appends statement is planned for an empty
// chat_state (a scan of it); once the table has grown to thousands of
// rows, its statistics are renewed at once, not after autovacuum's nap,
// and the statement is planned again with the index.
func TestYoungTablesAreAnalyzedAsTheyGrow(t *testing.T) {
	t.Parallel()
	s := newStore(t).(*Store)
	ctx := t.Context()
	// plan is the generic plan of the appends statement: the one each
	// connection keeps for it.
	plan := func() string {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck
		if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "PREPARE young_appends AS "+appendsSQL); err != nil {
			t.Fatal(err)
		}
		params := 0
		for _, m := range regexp.MustCompile(`\$(\d+)`).FindAllStringSubmatch(appendsSQL, -1) {
			n, _ := strconv.Atoi(m[1])
			params = max(params, n)
		}
		nulls := strings.TrimSuffix(strings.Repeat("NULL, ", params), ", ")
		rows, err := tx.Query(ctx, "EXPLAIN EXECUTE young_appends("+nulls+")")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var lines []string
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, l)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "DEALLOCATE young_appends"); err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "\n")
	}
	if p := plan(); !strings.Contains(p, "Seq Scan on chat_state") {
		t.Fatalf("the plan for an empty chat_state does not scan it; the test would prove nothing:\n%s", p)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO chats (id, tenant, spec, created_at)
			SELECT gen_random_uuid(), 't', '{}', now() FROM generate_series(1, 5000);
		INSERT INTO chat_state (id, status, created_at, updated_at) SELECT id, 'completed', now(), now() FROM chats`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var stat float64
		if err := s.pool.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE oid = 'chat_state'::regclass`).Scan(&stat); err != nil {
			t.Fatal(err)
		}
		if stat >= 2500 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("chat_state of 5000 rows still has statistics of %v rows after 30 s", stat)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if p := plan(); strings.Contains(p, "Seq Scan on chat_state") || !strings.Contains(p, "chat_state_pkey") {
		t.Fatalf("after the growth, the appends still scan chat_state:\n%s", p)
	}
}
