package postgres

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// analyzer keeps the planner's statistics of agentd's tables current while
// they are young, which autovacuum does not do soon enough.
//
// Why: each connection caches the plan of a prepared statement, and the
// plan made while a table was empty stays until the table's statistics
// change. The appends statement planned on a new database updates
// chat_state through a hash join over a sequential scan of it (the right
// plan for a few rows), and keeps doing so as the table grows to thousands
// of rows: the appends then ran at about 0.40× pgbench instead of 0.6–0.7×.
// Autovacuum replaces the statistics, and so the plans, only once a table
// changed by 10% and its nap (a minute) is over: the first minutes of a
// deployment ran slow. So while a table has fewer than youngRows rows, the
// store analyzes it whenever it has doubled since its statistics were
// taken (ANALYZE of a small table takes milliseconds; a handful of them
// cover a table's growth to youngRows). Past that, the plans no longer
// change with the size and autovacuum's pace is enough: the analyzer stops.
type analyzer struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	stop chan struct{}
	done chan struct{}
}

const (
	// analyzeEvery is how often the tables' sizes are looked at.
	analyzeEvery = 2 * time.Second
	// youngRows is the size from which a table's plans no longer change
	// with its growth (an index lookup beats a scan by far).
	youngRows = 10_000
	// analyzeFrom is the least number of rows worth analyzing for.
	analyzeFrom = 64
)

func startAnalyzer(pool *pgxpool.Pool, log *slog.Logger) *analyzer {
	a := &analyzer{pool: pool, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	go a.loop()
	return a
}

// close stops the analyzer; safe to call once.
func (a *analyzer) close() {
	close(a.stop)
	<-a.done
}

func (a *analyzer) loop() {
	defer close(a.done)
	t := time.NewTicker(analyzeEvery)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
		}
		if grown := a.check(); grown {
			return
		}
	}
}

// youngSQL lists agentd's tables (those that exist: the analyzer may run
// before migrations), with the rows their statistics counted (-1: never
// analyzed) and the rows they have now.
const youngSQL = `SELECT c.relname, c.reltuples, s.n_live_tup
	FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
	WHERE c.oid IN (SELECT to_regclass(t) FROM unnest(ARRAY['chats', 'chat_state', 'events']) AS t)`

// check analyzes the young tables that doubled; grown reports that every
// table is past youngRows.
func (a *analyzer) check() (grown bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		select {
		case <-a.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	rows, err := a.pool.Query(ctx, youngSQL)
	if err != nil {
		return false // the database is away; try again later
	}
	type table struct {
		name       string
		stat, live float64
	}
	var tables []table
	for rows.Next() {
		var t table
		if err := rows.Scan(&t.name, &t.stat, &t.live); err != nil {
			rows.Close()
			return false
		}
		tables = append(tables, t)
	}
	if rows.Err() != nil {
		return false
	}
	grown = len(tables) == 3
	for _, t := range tables {
		if t.stat < youngRows {
			grown = false
		}
		if t.stat >= youngRows || t.live < analyzeFrom || t.live < 2*t.stat {
			continue
		}
		start := time.Now()
		// The name comes from the fixed list above.
		if _, err := a.pool.Exec(ctx, "ANALYZE "+t.name); err != nil {
			a.log.Warn("analyze a young table", "table", t.name, "err", err)
			continue
		}
		a.log.Debug("analyzed a young table", "table", t.name, "rows", t.live, "took", time.Since(start))
	}
	return grown
}
