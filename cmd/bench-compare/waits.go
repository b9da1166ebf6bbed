package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// commitWaits is what agentd's group-commit connection was doing during an
// agentd phase on Postgres, from pg_stat_activity sampled at a fixed
// period: the database's side of the turn cycle. Time the connection
// spends idle is time agentd spends between two batches (answering the
// last one's appenders, which make the next one's appends); the rest is
// the batch in the database: executing (or waiting for a CPU), writing and
// flushing the WAL, and the rare lock or data-file wait.
type commitWaits struct {
	c       int
	samples int // samples that found the connection
	by      map[string]int
}

// waitKinds are commitWaits' categories, in the order printed.
var waitKinds = []string{"executing", "WAL write and flush", "receiving the batch", "locks", "other I/O", "other", "idle: agentd between batches"}

// waitKind puts a pg_stat_activity row of the committer's connection into
// one of waitKinds.
func waitKind(state, waitType, wait string) string {
	switch {
	case state != "active":
		return "idle: agentd between batches"
	case waitType == "":
		return "executing"
	case strings.HasPrefix(wait, "WAL"):
		return "WAL write and flush"
	case waitType == "Client":
		return "receiving the batch"
	case waitType == "LWLock" || waitType == "Lock":
		return "locks"
	case waitType == "IO":
		return "other I/O"
	}
	return "other"
}

// committerActivity finds the group commit's connection in the agentd
// database by its last statement: the batch's appends or a create (the
// notifier's connection, of the same pool, sends pg_notify).
const committerActivity = `SELECT state, coalesce(wait_event_type, ''), coalesce(wait_event, '')
	FROM pg_stat_activity
	WHERE datname = 'agentd' AND pid <> pg_backend_pid() AND backend_type = 'client backend'
	  AND query NOT LIKE '%pg_notify%' AND (query LIKE '%fenced_update%' OR query LIKE '%new_chat%')`

// sampleCommitWaits samples the committer's connection every period on a
// connection of its own until stop is called. Each sample is a statement,
// so it costs Postgres some CPU: it is off unless asked for (-waits).
func sampleCommitWaits(ctx context.Context, url string, c int, every time.Duration) (stop func() (*commitWaits, error)) {
	ctx, cancel := context.WithCancel(ctx)
	w := &commitWaits{c: c, by: map[string]int{}}
	done := make(chan error, 1)
	go func() {
		err := w.sample(ctx, url, every)
		if ctx.Err() != nil {
			err = nil // stopped, whatever it was doing: the samples so far count
		}
		done <- err
	}()
	return func() (*commitWaits, error) {
		cancel()
		if err := <-done; err != nil {
			return nil, fmt.Errorf("waits: %w", err)
		}
		return w, nil
	}
}

// sample adds a sample to w every period until ctx ends or a query fails.
func (w *commitWaits) sample(ctx context.Context, url string, every time.Duration) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		rows, err := conn.Query(ctx, committerActivity)
		if err != nil {
			return err
		}
		var state, typ, wait string
		_, err = pgx.ForEachRow(rows, []any{&state, &typ, &wait}, func() error {
			w.by[waitKind(state, typ, wait)]++
			w.samples++
			return nil
		})
		if err != nil {
			return err
		}
	}
}

// print writes the shares of the samples.
func (w *commitWaits) print(out io.Writer) {
	fmt.Fprintf(out, "\nagentd's group-commit connection at C=%d (%d samples): ", w.c, w.samples)
	if w.samples == 0 {
		fmt.Fprintln(out, "not found")
		return
	}
	var parts []string
	for _, k := range waitKinds {
		if n := w.by[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f%%", k, 100*float64(n)/float64(w.samples)))
		}
	}
	fmt.Fprintln(out, strings.Join(parts, ", "))
}
