package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// result is one system's figures at one concurrency.
type result struct {
	rate       float64 // rows or messages per second
	p50, p99   time.Duration
	cpu        time.Duration // per row or message: the process plus its Postgres backends
	cpuPG      time.Duration // of which Postgres
	statements float64       // per row or message
	commits    float64
	wal        float64 // bytes per row or message
	units      float64 // rows or messages measured
	top        *statementTop
	waits      *commitWaits // agentd on Postgres, with -waits
}

// pgbenchScript inserts one row per transaction (pgbench wraps nothing in
// BEGIN/COMMIT itself): the cost of one durable row, the floor a log that
// commits per append would have.
const pgbenchScript = `\set c random(1, 100000)
INSERT INTO bench_rows (chat, content) VALUES (:c, 'a-7: a reply of a replay model');
`

var tpsRe = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)

func pgbenchPhase(ctx context.Context, pg *pgServer, c int, d time.Duration, tmp string) (result, error) {
	dir, err := os.MkdirTemp(tmp, "pgbench-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "insert.sql")
	if err := os.WriteFile(script, []byte(pgbenchScript), 0o644); err != nil {
		return result{}, err
	}
	rowsBefore, err := pg.scalar(ctx, "pgbench", `SELECT count(*) FROM bench_rows`)
	if err != nil {
		return result{}, err
	}
	a, err := pg.snap(ctx, "pgbench")
	if err != nil {
		return result{}, err
	}
	if a.cpuPG, err = cpuOfTree(pg.srv.PID()); err != nil {
		return result{}, err
	}
	a.at = time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(pg.bin, "pgbench"), "-n", "-M", "prepared",
		"-c", strconv.Itoa(c), "-j", strconv.Itoa(min(c, 4)), "-T", strconv.Itoa(int(d.Seconds())),
		"-f", script, "--log", "--log-prefix", filepath.Join(dir, "log"), pg.url("pgbench"))
	out, err := cmd.CombinedOutput()
	// pgbench's backends exit after pgbench did; their CPU time reaches the
	// postmaster (cutime) only once they are gone.
	pg.waitBackendsGone(ctx, "pgbench")
	cpuB, cerr := cpuOfTree(pg.srv.PID())
	if err != nil {
		return result{}, fmt.Errorf("%v: %s", err, out)
	}
	if cerr != nil {
		return result{}, cerr
	}
	b, err := pg.snap(ctx, "pgbench")
	if err != nil {
		return result{}, err
	}
	b.cpuPG = cpuB
	m := tpsRe.FindSubmatch(out)
	if m == nil {
		return result{}, fmt.Errorf("no tps in pgbench output:\n%s", out)
	}
	rowsAfter, err := pg.scalar(ctx, "pgbench", `SELECT count(*) FROM bench_rows`)
	if err != nil {
		return result{}, err
	}
	r0, _ := strconv.ParseFloat(rowsBefore, 64)
	r1, _ := strconv.ParseFloat(rowsAfter, 64)
	var res result
	res.units = r1 - r0
	res.rate, _ = strconv.ParseFloat(string(m[1]), 64)
	lat, err := pgbenchLatencies(dir)
	if err != nil {
		return result{}, err
	}
	res.p50, res.p99 = percentile(lat, 0.50), percentile(lat, 0.99)
	commits, err := pg.commits(ctx, a, b)
	if err != nil {
		return result{}, err
	}
	res.fill(a, b, commits)
	return res, nil
}

// pgbenchLatencies reads pgbench's per-transaction logs (one per thread):
// the third field of each line is the latency in microseconds.
func pgbenchLatencies(dir string) ([]time.Duration, error) {
	files, err := filepath.Glob(filepath.Join(dir, "log.*"))
	if err != nil {
		return nil, err
	}
	var lat []time.Duration
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 3 {
				continue
			}
			us, err := strconv.ParseInt(fs[2], 10, 64)
			if err == nil {
				lat = append(lat, time.Duration(us)*time.Microsecond)
			}
		}
		f.Close()
	}
	return lat, nil
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(p*float64(len(ds))))]
}

// fill sets the per-unit costs from two snapshots around res.units units.
func (res *result) fill(a, b snapshot, commits int64) {
	n := res.units
	if n <= 0 {
		return
	}
	res.cpuPG = time.Duration(float64(b.cpuPG-a.cpuPG) / n)
	res.cpu = time.Duration(float64(b.cpuPG-a.cpuPG+b.cpuProc-a.cpuProc) / n)
	res.statements = (b.statements - a.statements) / n
	res.commits = float64(commits) / n
	res.wal = float64(b.lsn-a.lsn) / n
}

// waitBackendsGone waits (up to two seconds) until no session of db is
// left, so that their CPU time has been added to the postmaster's.
func (pg *pgServer) waitBackendsGone(ctx context.Context, db string) {
	for range 100 {
		n, err := pg.scalar(ctx, "postgres", fmt.Sprintf(`SELECT count(*) FROM pg_stat_activity WHERE datname = '%s'`, db))
		if err != nil || n == "0" {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
