package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// sqliteAgentd is the table's third system: the real agentd on its embedded
// SQLite store (AGENTD_DATA_DIR on a directory of the benchmark's, as the
// scale phase runs it), under the same load as the agentd on Postgres.
type sqliteAgentd struct {
	*agentdProc
	db string // the database file, read with the sqlite3 shell
}

// startSQLiteAgentd starts agentd on a fresh data directory in tmp. Like
// the Postgres side it talks to the database with the client tool (the
// sqlite3 shell), so the driver stays inside internal/store.
func startSQLiteAgentd(ctx context.Context, bin, tmp string, cfg config) (*sqliteAgentd, error) {
	if _, err := exec.LookPath("sqlite3"); err != nil {
		return nil, fmt.Errorf("the table's SQLite line reads agentd's database with the sqlite3 shell: %w", err)
	}
	dir := filepath.Join(tmp, "table-sqlite")
	ag, err := startAgentd(ctx, bin, tmp, "", cfg, "agentd-sqlite", "AGENTD_DATA_DIR="+dir)
	if err != nil {
		return nil, err
	}
	return &sqliteAgentd{agentdProc: ag, db: filepath.Join(dir, "agentd.db")}, nil
}

// sqlitePhase is agentdPhase on the SQLite agentd: the same load, warm-up
// and interval, messages and turn latencies counted from the log the same
// way. CPU is the agentd process's alone (the store is inside it); the
// columns that come from Postgres's statistics stay empty.
func sqlitePhase(ctx context.Context, ag *sqliteAgentd, c int, cfg config) (result, error) {
	load := startChatLoad(ctx, ag.agentdProc, c, chatSpec(cfg.messages, 0))
	if err := load.warmUp(ctx, cfg.warmup); err != nil {
		return result{}, err
	}
	cpuA, err := cpuOf(ag.pid())
	if err != nil {
		load.drain()
		return result{}, err
	}
	a := time.Now()
	select {
	case <-time.After(cfg.duration):
	case <-ctx.Done():
	}
	b := time.Now()
	cpuB, err := cpuOf(ag.pid())
	if err := cmp.Or(err, load.finish(ctx)); err != nil {
		return result{}, err
	}
	turns, err := ag.turns(ctx, a, b)
	if err != nil {
		return result{}, err
	}
	res := result{units: float64(turns.messages), rate: float64(turns.messages) / b.Sub(a).Seconds(),
		p50: percentile(turns.gaps, 0.5), p99: percentile(turns.gaps, 0.99)}
	if turns.messages > 0 {
		res.cpu = (cpuB - cpuA) / time.Duration(turns.messages)
	}
	return res, nil
}

// loggedTurns are the messages of an interval and the turn latencies among
// them (each message's created_at less its chat's previous message's).
type loggedTurns struct {
	messages int
	gaps     []time.Duration
}

// turns reads the messages created in [a, b) and their turn latencies from
// the log, as agentdPhase's query does on Postgres (created_at is unix
// nanoseconds here).
func (ag *sqliteAgentd) turns(ctx context.Context, a, b time.Time) (loggedTurns, error) {
	win := fmt.Sprintf(`created_at >= %d AND created_at < %d`, a.UnixNano(), b.UnixNano())
	q := `WITH lagged AS (
			SELECT created_at, created_at - lag(created_at) OVER (PARTITION BY chat_id ORDER BY seq) AS d
			FROM events WHERE type = 'message' AND chat_id IN (SELECT chat_id FROM events WHERE type = 'message' AND ` + win + `))
		SELECT coalesce(d, '') FROM lagged WHERE ` + win + `;`
	cmd := exec.CommandContext(ctx, "sqlite3", "-readonly", "-batch", "-noheader", ag.db, q)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return loggedTurns{}, fmt.Errorf("sqlite3 %s: %v: %s", ag.db, err, stderr.Bytes())
	}
	var t loggedTurns
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		t.messages++
		// The first message of a chat (its task) has no previous one.
		if line := strings.TrimSpace(sc.Text()); line != "" {
			ns, err := strconv.ParseInt(line, 10, 64)
			if err != nil {
				return loggedTurns{}, fmt.Errorf("sqlite3 %s: turn latency %q: %w", ag.db, line, err)
			}
			t.gaps = append(t.gaps, time.Duration(ns))
		}
	}
	return t, sc.Err()
}
