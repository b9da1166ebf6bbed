// Command bench-compare measures agentd's chat log on Postgres side by side
// with pgbench on the same throwaway server: pgbench inserting one row per
// transaction, and the real agentd binary running round-robin replay chats
// over HTTP, at the same concurrencies, interleaved, with a third agentd on
// its embedded SQLite store under the same load. It prints one table of
// rates, latencies and per-message costs (CPU from /proc, statements from
// pg_stat_statements, commits and WAL from the WAL itself), then the memory
// per chat of many chats waiting on a slow model (a replay model's delay,
// and a streamed reply of a model on the OpenAI wire). See README.md beside this
// file for how to read it. Run it with `make bench-compare`.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentd/agentd/internal/store/pgtest"
)

type config struct {
	conc     []int
	rounds   int
	duration time.Duration
	warmup   time.Duration
	messages int
	waiting  int
	// history: completed chats put in the store before the first phase.
	history int
	agentd  string
	// statements: how many of agentd's statements to list per phase, by
	// calls per message (0: none).
	statements int
	// waits: sample what agentd's group-commit connection is doing this
	// often in each agentd phase on Postgres (0: not).
	waits time.Duration
	// hold keeps agentd running this long after the memory phase, with its
	// admin listener (pprof) on, so that the waiting chats can be profiled.
	hold time.Duration
	// phases are the parts to run: table, stream, idle, memory.
	phases map[string]bool
	// The streaming phase: chats at once, replies each, tokens a reply,
	// the first token after streamFirst, then one every streamEvery.
	streamChats, streamReplies, streamTokens int
	streamFirst, streamEvery                 time.Duration
	// streamRounds is how many measured rounds each system serves.
	streamRounds int
	// idle is how many idle event streams the idle phase opens.
	idle int
	// The scale phase: chats at once, each reply's tokens and time, the
	// share of chats followed, the warm-up after the creates and the
	// measured time.
	scaleChats, scaleTokens    int
	scaleReply                 time.Duration
	scaleFollow                float64
	scaleWarmup, scaleDuration time.Duration
	scaleCreateWithin          time.Duration
	// scaleStores are the stores the scale phase runs on, in order.
	scaleStores []string
	// scaleH2C: agentd speaks HTTP/2 to the model stand-in (h2c), else
	// HTTP/1.1.
	scaleH2C bool
	out      io.Writer
}

func main() {
	if relayed() {
		return
	}
	var (
		cfg  config
		conc string
	)
	flag.StringVar(&conc, "c", "1,8,32,128", "concurrencies: pgbench clients, and chats kept in flight")
	flag.DurationVar(&cfg.duration, "duration", 10*time.Second, "measured time of each phase")
	flag.IntVar(&cfg.rounds, "rounds", 3, "table: rounds at each C, pgbench and agentd alternating; the table gives the median round")
	flag.DurationVar(&cfg.warmup, "warmup", 2*time.Second, "unmeasured time before each agentd phase")
	flag.IntVar(&cfg.messages, "messages", 20, "messages per chat (the task and messages-1 agent turns)")
	flag.IntVar(&cfg.waiting, "waiting", 10000, "chats waiting on a slow model for the memory figure (0: skip)")
	flag.IntVar(&cfg.history, "history", 20000, "completed chats of 20 messages in the store before the first phase")
	flag.StringVar(&cfg.agentd, "agentd", "", "agentd binary (default: built from this checkout)")
	flag.IntVar(&cfg.statements, "statements", 0, "list agentd's N most frequent statements of each phase, per message")
	flag.DurationVar(&cfg.waits, "waits", 0, "table: sample what agentd's group-commit connection is doing (executing, flushing the WAL, idle between batches) this often in each agentd phase on Postgres, e.g. 1ms; each sample is a statement, so it costs Postgres some CPU")
	flag.DurationVar(&cfg.hold, "hold", 0, "after the memory phase, keep agentd running this long (or until interrupted) with pprof on its admin address")
	phases := flag.String("phases", "table,stream,idle,memory,scale", "the parts to run: table (agentd next to pgbench), stream, idle, memory, scale")
	flag.IntVar(&cfg.streamChats, "stream-chats", 200, "streaming phase: chats at once, each with one follower")
	flag.IntVar(&cfg.streamReplies, "stream-replies", 3, "streaming phase: replies of each chat")
	flag.IntVar(&cfg.streamRounds, "stream-rounds", 3, "streaming phase: measured rounds of each system (after a first round apart)")
	flag.IntVar(&cfg.streamTokens, "stream-tokens", 50, "streaming phase: tokens of each reply")
	flag.DurationVar(&cfg.streamFirst, "stream-first", 200*time.Millisecond, "streaming phase: the model's wait before a reply's first token")
	flag.DurationVar(&cfg.streamEvery, "stream-every", 20*time.Millisecond, "streaming phase: the model's pause between tokens")
	flag.IntVar(&cfg.idle, "idle", 10000, "idle phase: event streams held open on chats that wait")
	flag.IntVar(&cfg.scaleChats, "scale-chats", 10000, "scale phase: chats at once")
	flag.IntVar(&cfg.scaleTokens, "scale-tokens", 10, "scale phase: tokens of each streamed reply")
	flag.DurationVar(&cfg.scaleReply, "scale-reply", time.Second, "scale phase: the model's time for one reply")
	flag.Float64Var(&cfg.scaleFollow, "scale-follow", 0.1, "scale phase: share of the chats with an SSE follower")
	flag.DurationVar(&cfg.scaleWarmup, "scale-warmup", 5*time.Second, "scale phase: time after the creates before measuring")
	flag.DurationVar(&cfg.scaleCreateWithin, "scale-create-within", 2*time.Minute, "scale phase: the creates stop after this long; the phase measures the chats created by then")
	flag.DurationVar(&cfg.scaleDuration, "scale-duration", 60*time.Second, "scale phase: measured time on each store")
	flag.BoolVar(&cfg.scaleH2C, "scale-h2c", true, "scale phase: agentd calls the model over HTTP/2 (h2c on its endpoint, as hosted APIs speak HTTP/2); false: HTTP/1.1, a connection per call")
	cpuProfile := flag.String("cpuprofile", "", "write the benchmark's own CPU profile (its model stand-ins, followers and clients) to this file")
	scaleStores := flag.String("scale-stores", "postgres,sqlite", "scale phase: the stores to run on, in order")
	flag.Parse()
	for _, st := range strings.Split(*scaleStores, ",") {
		switch st = strings.TrimSpace(st); st {
		case "postgres", "sqlite":
			cfg.scaleStores = append(cfg.scaleStores, st)
		default:
			fmt.Fprintf(os.Stderr, "bench-compare: unknown store %q in -scale-stores (postgres, sqlite)\n", st)
			os.Exit(2)
		}
	}
	cfg.phases = map[string]bool{}
	for _, p := range strings.Split(*phases, ",") {
		switch p = strings.TrimSpace(p); p {
		case "table", "stream", "idle", "memory", "scale":
			cfg.phases[p] = true
		default:
			fmt.Fprintf(os.Stderr, "bench-compare: unknown phase %q in -phases\n", p)
			os.Exit(2)
		}
	}
	if cfg.streamRounds < 1 {
		fmt.Fprintf(os.Stderr, "bench-compare: -stream-rounds must be at least 1\n")
		os.Exit(2)
	}
	for _, f := range strings.Split(conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench-compare: bad -c %q\n", conc)
			os.Exit(2)
		}
		cfg.conc = append(cfg.conc, n)
	}
	cfg.out = os.Stdout
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench-compare: -cpuprofile: %v\n", err)
			os.Exit(2)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "bench-compare: %v\n", err)
		pprof.StopCPUProfile() // what it has is written (exit skips the defers)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config) error {
	tmp, err := os.MkdirTemp("", "agentd-bench-compare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := cfg.agentd
	if bin == "" {
		bin = filepath.Join(tmp, "agentd")
		fmt.Fprintln(os.Stderr, "building agentd …")
		b := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/agentd")
		b.Stdout, b.Stderr = os.Stderr, os.Stderr
		if err := b.Run(); err != nil {
			return fmt.Errorf("build agentd (run from the repository root): %w", err)
		}
	}

	fmt.Fprintln(os.Stderr, "starting a throwaway Postgres …")
	srv, err := pgtest.StartServer(
		"fsync=on", "synchronous_commit=on", "full_page_writes=on",
		"shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=all",
		"max_connections=400",
		// No checkpoint in the middle of a phase: its full-page images would
		// land on whichever system happened to run then.
		"max_wal_size=8GB", "checkpoint_timeout=1h",
	)
	if err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	defer srv.Remove()
	pg, err := openPG(ctx, srv)
	if err != nil {
		return err
	}
	defer pg.close()

	ag, err := startAgentd(ctx, bin, tmp, pg.url("agentd"), cfg, "agentd")
	if err != nil {
		return err
	}
	defer ag.stop()
	if err := pg.history(ctx, cfg.history, cfg.messages); err != nil {
		return fmt.Errorf("history: %w", err)
	}

	fmt.Fprintf(cfg.out, "bench-compare: %d-message round-robin replay chats (3 agents) vs pgbench one-row INSERTs; Postgres fsync on; %s per phase; %d CPUs; %d chats of history\n\n",
		cfg.messages, cfg.duration, runtime.NumCPU(), cfg.history)
	if err := tablePhase(ctx, pg, ag, bin, tmp, cfg); err != nil {
		return err
	}
	if cfg.phases["stream"] {
		if err := streamPhase(ctx, pg, bin, tmp, cfg); err != nil {
			return fmt.Errorf("streaming phase: %w", err)
		}
	}
	if cfg.phases["idle"] && cfg.idle > 0 {
		// On an agentd and a database of their own: run on the main
		// agentd, the memory the closed streams leave behind (freed, but
		// not yet given back) was counted against the memory phase's
		// chats, whose figures came out below zero.
		if _, err := pg.query(ctx, "postgres", `CREATE DATABASE agentd_idle`); err != nil {
			return err
		}
		idle, err := startAgentd(ctx, bin, tmp, pg.url("agentd_idle"), cfg, "agentd-idle")
		if err != nil {
			return err
		}
		m, err := idlePhase(ctx, idle, cfg.idle)
		idle.stop()
		if err != nil {
			return fmt.Errorf("idle phase: %w", err)
		}
		m.print(cfg.out)
	}
	if cfg.phases["memory"] && cfg.waiting > 0 {
		m, err := memoryPhase(ctx, ag, cfg.waiting)
		if err != nil {
			return fmt.Errorf("memory phase: %w", err)
		}
		m.print(cfg.out)
		if m, err = modelMemoryPhase(ctx, pg, bin, tmp, cfg, cfg.waiting); err != nil {
			return fmt.Errorf("memory phase, streamed replies: %w", err)
		}
		m.print(cfg.out)
	}
	if cfg.phases["scale"] && cfg.scaleChats > 0 {
		if err := scalePhase(ctx, pg, bin, tmp, cfg); err != nil {
			return fmt.Errorf("scale phase: %w", err)
		}
	}
	if cfg.hold > 0 {
		fmt.Fprintf(cfg.out, "\nagentd (pid %d) holds for %s; pprof at http://%s/debug/pprof/\n", ag.pid(), cfg.hold, ag.admin)
		select {
		case <-time.After(cfg.hold):
		case <-ctx.Done():
		}
	}
	return nil
}

// tablePhase runs pgbench, agentd on Postgres and agentd on SQLite at each
// concurrency, one after the other, and prints the table.
func tablePhase(ctx context.Context, pg *pgServer, ag *agentdProc, bin, tmp string, cfg config) error {
	if !cfg.phases["table"] {
		return nil
	}
	sq, err := startSQLiteAgentd(ctx, bin, tmp, cfg)
	if err != nil {
		return err
	}
	defer sq.stop()
	t := newTable(cfg.out, runtime.NumCPU())
	var tops []statementTop
	var waits []*commitWaits
	for _, c := range cfg.conc {
		// Rounds alternate the three, so that a stretch in which the
		// machine runs slower slows all of them; the table gives each
		// system's median round and the median of the rounds' ratios.
		var pbs, ars, sqs []result
		for round := range max(cfg.rounds, 1) {
			pb, err := pgbenchPhase(ctx, pg, c, cfg.duration, tmp)
			if err != nil {
				return fmt.Errorf("pgbench at C=%d: %w", c, err)
			}
			ar, err := agentdPhase(ctx, pg, ag, c, cfg)
			if err != nil {
				return fmt.Errorf("agentd at C=%d: %w", c, err)
			}
			sr, err := sqlitePhase(ctx, sq, c, cfg)
			if err != nil {
				return fmt.Errorf("agentd on SQLite at C=%d: %w", c, err)
			}
			pbs, ars, sqs = append(pbs, pb), append(ars, ar), append(sqs, sr)
			fmt.Fprintf(os.Stderr, "C=%d, round %d: pgbench %.0f rows/s, agentd %.0f msg/s (%.2f×), on SQLite %.0f msg/s (%.2f× Postgres)\n",
				c, round+1, pb.rate, ar.rate, ar.rate/pb.rate, sr.rate, sr.rate/ar.rate)
		}
		ar := medianResult(ars)
		agRatios, sqRatios := ratios(pbs, ars), ratios(ars, sqs)
		t.row(c, medianResult(pbs), ar, medianRatio(agRatios), roundRatios(agRatios))
		t.sqliteRow(c, medianResult(sqs), medianRatio(sqRatios), roundRatios(sqRatios))
		if ar.top != nil {
			tops = append(tops, *ar.top)
		}
		if ar.waits != nil {
			waits = append(waits, ar.waits)
		}
	}
	t.flush()
	for _, top := range tops {
		top.print(cfg.out)
	}
	for _, w := range waits {
		w.print(cfg.out)
	}
	return nil
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitHTTP polls url until it answers 200.
func waitHTTP(ctx context.Context, url string, exited <-chan struct{}) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return fmt.Errorf("agentd exited during startup")
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready after 60s", url)
}
