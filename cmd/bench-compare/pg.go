package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/store/pgtest"
)

// pgServer is the throwaway server as the benchmark sees it. It talks to the
// server with the client tools (psql, pg_waldump, pgbench) rather than a
// driver: the few queries per phase need no more, and the database driver
// stays inside internal/store.
type pgServer struct {
	srv  *pgtest.Server
	bin  string
	base *url.URL
}

func openPG(ctx context.Context, srv *pgtest.Server) (*pgServer, error) {
	bin, err := srv.BinDir()
	if err != nil {
		return nil, err
	}
	for _, tool := range []string{"psql", "pgbench", "pg_waldump"} {
		if _, err := os.Stat(filepath.Join(bin, tool)); err != nil {
			return nil, fmt.Errorf("%s not found beside the server binaries in %s", tool, bin)
		}
	}
	u, err := url.Parse(srv.URL())
	if err != nil {
		return nil, err
	}
	pg := &pgServer{srv: srv, bin: bin, base: u}
	for _, q := range []string{
		`CREATE EXTENSION pg_stat_statements`,
		`CREATE DATABASE agentd`,
		`CREATE DATABASE pgbench`,
	} {
		if _, err := pg.query(ctx, "postgres", q); err != nil {
			return nil, err
		}
	}
	// The row pgbench inserts is about the size of a short message event.
	if _, err := pg.query(ctx, "pgbench", `CREATE TABLE bench_rows (
		id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		chat bigint NOT NULL, content text NOT NULL,
		created_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, err
	}
	return pg, nil
}

func (pg *pgServer) close() {}

// url is the connection URL of database db.
func (pg *pgServer) url(db string) string {
	u := *pg.base
	u.Path = "/" + db
	return u.String()
}

// query runs sql in database db with psql and returns the rows, each a
// slice of fields.
func (pg *pgServer) query(ctx context.Context, db, sql string) ([][]string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(pg.bin, "psql"), "-X", "-q", "-A", "-t", "-F", "\t",
		"-v", "ON_ERROR_STOP=1", "-d", pg.url(db), "-c", sql)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("psql %q: %v: %s", firstLine(sql), err, strings.TrimSpace(errb.String()))
	}
	var rows [][]string
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if sc.Text() != "" {
			rows = append(rows, strings.Split(sc.Text(), "\t"))
		}
	}
	return rows, nil
}

func (pg *pgServer) scalar(ctx context.Context, db, sql string) (string, error) {
	rows, err := pg.query(ctx, db, sql)
	if err != nil {
		return "", err
	}
	if len(rows) != 1 || len(rows[0]) != 1 {
		return "", fmt.Errorf("psql %q: want one value, got %v", firstLine(sql), rows)
	}
	return rows[0][0], nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// snapshot is what a phase is measured by: differences between two of them.
type snapshot struct {
	at         time.Time
	lsn        uint64  // pg_current_wal_flush_lsn
	lsnText    string  // the same, as Postgres writes it (for pg_waldump)
	statements float64 // pg_stat_statements calls in the phase's database
	cpuPG      time.Duration
	cpuProc    time.Duration // the agentd process, when there is one
}

// take records the server's position. The CPU times are read last on the
// way in and first on the way out (see phase), so the psql calls fall
// mostly outside the measured interval.
func (pg *pgServer) snap(ctx context.Context, db string) (snapshot, error) {
	rows, err := pg.query(ctx, "postgres", fmt.Sprintf(`SELECT pg_current_wal_flush_lsn(),
		pg_current_wal_flush_lsn() - '0/0'::pg_lsn,
		(SELECT coalesce(sum(s.calls), 0) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = '%s')`, db))
	if err != nil {
		return snapshot{}, err
	}
	if len(rows) != 1 || len(rows[0]) != 3 {
		return snapshot{}, fmt.Errorf("snapshot: unexpected answer %v", rows)
	}
	var s snapshot
	s.lsnText = rows[0][0]
	if s.lsn, err = strconv.ParseUint(strings.Split(rows[0][1], ".")[0], 10, 64); err != nil {
		return snapshot{}, fmt.Errorf("snapshot: lsn %q: %w", rows[0][1], err)
	}
	if s.statements, err = strconv.ParseFloat(rows[0][2], 64); err != nil {
		return snapshot{}, fmt.Errorf("snapshot: statements %q: %w", rows[0][2], err)
	}
	return s, nil
}

// commits counts the commit records in the WAL between two snapshots: the
// durable transactions of that interval (read-only ones write none).
func (pg *pgServer) commits(ctx context.Context, a, b snapshot) (int64, error) {
	if a.lsn == b.lsn {
		return 0, nil
	}
	cmd := exec.CommandContext(ctx, filepath.Join(pg.bin, "pg_waldump"), "-p", filepath.Join(pg.srv.DataDir(), "pg_wal"),
		"-s", a.lsnText, "-e", b.lsnText, "--stats=record")
	out, err := cmd.CombinedOutput()
	// pg_waldump may complain at the end of the range; the statistics
	// before the complaint are still right.
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "Transaction/COMMIT" {
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("pg_waldump: %v: %s", err, out)
	}
	return 0, nil
}

// cpuOfTree is the CPU time used so far by the postmaster and all its
// children, living (their /proc/PID/stat) or exited (the postmaster's
// cutime and cstime, which hold the reaped children's time).
func cpuOfTree(root int) (time.Duration, error) {
	f, err := procStat(root)
	if err != nil {
		return 0, err
	}
	total := f.utime + f.stime + f.cutime + f.cstime
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == root {
			continue
		}
		c, err := procStat(pid)
		if err != nil || c.ppid != root {
			continue // gone meanwhile, or not ours
		}
		total += c.utime + c.stime
	}
	return ticks(total), nil
}

// cpuOf is the CPU time a process has used so far.
func cpuOf(pid int) (time.Duration, error) {
	f, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	return ticks(f.utime + f.stime), nil
}

type statFields struct {
	ppid                         int
	utime, stime, cutime, cstime int64
}

// procStat reads /proc/PID/stat (see proc(5)): the command name, in
// parentheses, may hold spaces, so fields are counted after its last ')'.
func procStat(pid int) (statFields, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return statFields{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return statFields{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); ppid is field 4, utime..cstime 14..17.
	if len(f) < 15 {
		return statFields{}, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	n := func(k int) int64 { v, _ := strconv.ParseInt(f[k-3], 10, 64); return v }
	return statFields{ppid: int(n(4)), utime: n(14), stime: n(15), cutime: n(16), cstime: n(17)}, nil
}

// clockTicks is USER_HZ, which is 100 on every Linux architecture Go runs on.
const clockTicks = 100

func ticks(n int64) time.Duration { return time.Duration(n) * time.Second / clockTicks }

// rssOf is a process's resident set size in bytes.
func rssOf(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// history puts n completed chats of messages messages each into agentd's
// store, straight into its tables, and analyzes them: the benchmark runs on
// the store of a server that has run a while, with indexes as deep as the
// past chats make them. -history 0 measures a freshly migrated database
// instead: the first minutes of a new deployment, whose plans the store
// renews itself as its tables grow (see internal/store/postgres/analyze.go).
func (pg *pgServer) history(ctx context.Context, n, messages int) error {
	if n <= 0 {
		return nil
	}
	_, err := pg.query(ctx, "agentd", fmt.Sprintf(`
		CREATE TEMP TABLE past AS SELECT gen_random_uuid() AS id,
			now() - interval '1 day' + i * interval '1 second' AS at FROM generate_series(1, %[1]d) AS i;
		INSERT INTO chats (id, tenant, name, spec, created_at)
			SELECT id, 'default', 'history', '{"agents": []}', at FROM past;
		INSERT INTO chat_state (id, status, stop_reason, last_seq, turns, message_count, epoch,
				created_at, updated_at, completed_at)
			SELECT id, 'completed', 'max_round', %[2]d, %[2]d - 1, %[2]d, 1, at, at, at FROM past;
		INSERT INTO events (chat_id, seq, type, role, name, content, created_at)
			SELECT id, seq, 'message', 'assistant', 'coder', 'a message of a past chat', at
			FROM past, generate_series(1, %[2]d) AS seq;
		ANALYZE;`, n, messages))
	return err
}
