package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// agentdProc is the real agentd binary, serving on a port of its own with
// the benchmark's database.
type agentdProc struct {
	proc
	base   string
	client *http.Client
	// admin is the admin listener's address (pprof).
	admin string
}

// startAgentd starts the binary on dbURL, logging to name.log in tmp, with
// env added to its environment.
func startAgentd(ctx context.Context, bin, tmp, dbURL string, cfg config, name string, env ...string) (*agentdProc, error) {
	return retryPortClash(func() (*agentdProc, error) { return startAgentdOnce(ctx, bin, tmp, dbURL, cfg, name, env...) })
}

// retryPortClash calls start again, up to twice, while it fails because a
// port freePort chose was taken before the program bound it: on a busy
// machine another process's outgoing connection may take it in between.
func retryPortClash[T any](start func() (T, error)) (T, error) {
	for try := 1; ; try++ {
		v, err := start()
		if err == nil || try == 3 || !strings.Contains(err.Error(), "address already in use") {
			return v, err
		}
	}
}

func startAgentdOnce(ctx context.Context, bin, tmp, dbURL string, cfg config, name string, env ...string) (*agentdProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(tmp, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"AGENTD_ADDR=127.0.0.1:"+strconv.Itoa(port),
		"AGENTD_DATABASE_URL="+dbURL,
		"AGENTD_SANDBOX=none",
		"AGENTD_LOG_LEVEL=warn",
		"AGENTD_API_KEYS=", "AGENTD_API_KEYS_FILE=",
		// The benchmark is one client creating chats as fast as they complete,
		// each create waiting (wait_s) for its chat: the per-key limits on
		// requests and on waiting requests are not what it measures.
		"AGENTD_RATE_LIMIT=0", "AGENTD_MAX_STREAMS=0", "AGENTD_MAX_STREAMS_PER_KEY=0",
		"AGENTD_MAX_ACTIVE_CHATS="+strconv.Itoa(max(cfg.waiting+1000, 2000)),
	)
	cmd.Env = append(cmd.Env, env...)
	// The admin listener (pprof) tells the memory phase what the waiting
	// chats retain, and -hold leaves it open for profiling.
	ap, err := freePort()
	if err != nil {
		return nil, err
	}
	admin := "127.0.0.1:" + strconv.Itoa(ap)
	cmd.Env = append(cmd.Env, "AGENTD_ADMIN_ADDR="+admin)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start agentd: %w", err)
	}
	a := &agentdProc{proc: startedProc(cmd), base: fmt.Sprintf("http://127.0.0.1:%d", port), admin: admin,
		client: &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024}}}
	if err := waitHTTP(ctx, a.base+"/readyz", a.exited); err != nil {
		a.stop()
		log, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("%w:\n%s", err, log)
	}
	return a, nil
}

// proc is a program the benchmark started.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// startedProc waits for cmd, which has started, in the background.
func startedProc(cmd *exec.Cmd) proc {
	p := proc{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p
}

func (p proc) pid() int { return p.cmd.Process.Pid }

// stop ends the program: SIGTERM, then SIGKILL after a few seconds (the
// database is thrown away, so a slow hand-back of waiting chats is not
// worth waiting for).
func (p proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// chatSpec is the workload: three assistants taking turns in order
// (round_robin), each a replay model, messages-1 turns after the task, with
// system messages that make the spec about 5 KB like a real one.
func chatSpec(messages, delayMS int) []byte {
	sys := strings.Repeat("You review code for correctness, clarity and tests; answer briefly and name the line you mean. ", 6)
	var agents, models []string
	for _, name := range []string{"coder", "reviewer", "tester"} {
		var rs []string
		for i := range (messages + 2) / 3 {
			rs = append(rs, fmt.Sprintf(`{"content": "%s-%d: a reply of a replay model", "delay_ms": %d, "usage": {"prompt_tokens": 120, "completion_tokens": 12}}`, name, i, delayMS))
		}
		agents = append(agents, fmt.Sprintf(`{"name": %q, "type": "assistant", "description": "The %s.", "system_message": %q, "model": "m-%s"}`, name, name, sys, name))
		models = append(models, fmt.Sprintf(`"m-%s": {"provider": "replay", "responses": [%s]}`, name, strings.Join(rs, ", ")))
	}
	return fmt.Appendf(nil, `{"name": "bench", "task": "Review the change and agree on a verdict.",
		"agents": [%s], "models": {%s}, "speaker_selection": {"method": "round_robin"}, "max_round": %d,
		"metadata": {"bench": "compare"}}`, strings.Join(agents, ", "), strings.Join(models, ", "), messages-1)
}

// create posts a chat and returns its id and status; wait > 0 waits
// (wait_s) for it to end.
func (a *agentdProc) create(ctx context.Context, spec []byte, wait int) (id, status string, err error) {
	u := a.base + "/v1/chats"
	if wait > 0 {
		u += "?wait_s=" + strconv.Itoa(wait)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(spec))
	if err != nil {
		return "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return "", "", fmt.Errorf("POST /v1/chats: %s: %s", resp.Status, body)
	}
	var c struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return "", "", err
	}
	return c.ID, c.Status, nil
}

// chatLoad is c HTTP clients keeping a chat each in flight on an agentd:
// each creates a chat, waits (wait_s) for it to complete, and creates the
// next. It is the load of the table's agentd lines, on either store.
type chatLoad struct {
	stopLoad context.CancelFunc
	wg       sync.WaitGroup
	failures atomic.Int64
	firstErr atomic.Value
}

// startChatLoad starts the c clients on ag.
func startChatLoad(ctx context.Context, ag *agentdProc, c int, spec []byte) *chatLoad {
	lctx, stopLoad := context.WithCancel(ctx)
	l := &chatLoad{stopLoad: stopLoad}
	for range c {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for lctx.Err() == nil {
				// The request is not cut when the load stops: a chat in
				// flight runs to its end either way.
				_, st, err := ag.create(context.WithoutCancel(lctx), spec, 60)
				if err == nil && st != "completed" {
					err = fmt.Errorf("chat ended %s, want completed", st)
				}
				if err != nil {
					l.failures.Add(1)
					l.firstErr.CompareAndSwap(nil, err)
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	return l
}

// drain stops the clients and waits for their chats in flight to end.
func (l *chatLoad) drain() { l.stopLoad(); l.wg.Wait() }

// finish drains the load at the end of the interval and says why the
// interval does not count: ctx ended, or chats failed.
func (l *chatLoad) finish(ctx context.Context) error {
	l.drain()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if n := l.failures.Load(); n > 0 {
		return fmt.Errorf("%d chats failed; first: %v", n, l.firstErr.Load())
	}
	return nil
}

// warmUp waits out the warm-up; the load is drained if ctx ends first.
func (l *chatLoad) warmUp(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		l.drain()
		return ctx.Err()
	}
}

// agentdPhase keeps c chats in flight (each client creates a chat, waits
// for it to complete, and creates the next) and measures an interval of
// steady state after a warm-up. Messages are counted from the log itself:
// those whose created_at falls in the interval.
func agentdPhase(ctx context.Context, pg *pgServer, ag *agentdProc, c int, cfg config) (result, error) {
	load := startChatLoad(ctx, ag, c, chatSpec(cfg.messages, 0))
	drain := load.drain
	if err := load.warmUp(ctx, cfg.warmup); err != nil {
		return result{}, err
	}
	a, err := pg.snap(ctx, "agentd")
	var callsBefore map[string]statementCalls
	if err == nil && cfg.statements > 0 {
		callsBefore, err = pg.callsByStatement(ctx, "agentd")
	}
	if err != nil {
		drain()
		return result{}, err
	}
	if a.cpuPG, err = cpuOfTree(pg.srv.PID()); err == nil {
		a.cpuProc, err = cpuOf(ag.pid())
	}
	a.at = time.Now()
	if err != nil {
		drain()
		return result{}, err
	}
	stopWaits := func() (*commitWaits, error) { return nil, nil }
	if cfg.waits > 0 {
		stopWaits = sampleCommitWaits(ctx, pg.url("postgres"), c, cfg.waits)
	}
	select {
	case <-time.After(cfg.duration):
	case <-ctx.Done():
	}
	waits, err := stopWaits()
	if err != nil {
		drain()
		return result{}, err
	}
	b := snapshot{at: time.Now()}
	b.cpuPG, err = cpuOfTree(pg.srv.PID())
	if err == nil {
		b.cpuProc, err = cpuOf(ag.pid())
	}
	if err != nil {
		drain()
		return result{}, err
	}
	s, err := pg.snap(ctx, "agentd")
	var callsAfter map[string]statementCalls
	if err == nil && cfg.statements > 0 {
		callsAfter, err = pg.callsByStatement(ctx, "agentd")
	}
	if err := cmp.Or(err, load.finish(ctx)); err != nil {
		return result{}, err
	}
	s.at, s.cpuPG, s.cpuProc = b.at, b.cpuPG, b.cpuProc
	b = s
	win := fmt.Sprintf(`created_at >= '%s' AND created_at < '%s'`, a.at.UTC().Format(time.RFC3339Nano), b.at.UTC().Format(time.RFC3339Nano))
	rows, err := pg.query(ctx, "agentd", `WITH lagged AS (
			SELECT created_at, created_at - lag(created_at) OVER (PARTITION BY chat_id ORDER BY seq) AS d
			FROM events WHERE type = 'message' AND chat_id IN (SELECT chat_id FROM events WHERE type = 'message' AND `+win+`))
		SELECT count(*),
			coalesce(extract(epoch FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY d)), 0),
			coalesce(extract(epoch FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY d)), 0)
		FROM lagged WHERE `+win)
	if err != nil {
		return result{}, err
	}
	var res result
	res.units, _ = strconv.ParseFloat(rows[0][0], 64)
	p50, _ := strconv.ParseFloat(rows[0][1], 64)
	p99, _ := strconv.ParseFloat(rows[0][2], 64)
	res.p50, res.p99 = time.Duration(p50*float64(time.Second)), time.Duration(p99*float64(time.Second))
	res.rate = res.units / b.at.Sub(a.at).Seconds()
	commits, err := pg.commits(ctx, a, b)
	if err != nil {
		return result{}, err
	}
	res.fill(a, b, commits)
	if cfg.statements > 0 {
		res.top = topStatements(c, callsBefore, callsAfter, res.units, cfg.statements)
	}
	res.waits = waits
	return res, nil
}

// footprint is what some things (chats, streams) added to agentd.
type footprint struct {
	rss, heap, stack    int64
	live                int64 // heap added, after a garbage collection
	goroutines          float64
	rssBefore, rssAfter int64
}

// print writes the footprint per thing (unit names one) of n.
func (f footprint) print(w io.Writer, n int, unit string) {
	per := float64(n)
	fmt.Fprintf(w, "  RSS        %8.1f KB/%s  (%d MB → %d MB)\n", float64(f.rss)/per/1024, unit, f.rssBefore>>20, f.rssAfter>>20)
	fmt.Fprintf(w, "  heap inuse %8.1f KB/%s\n", float64(f.heap)/per/1024, unit)
	fmt.Fprintf(w, "  heap live  %8.1f KB/%s  (after a garbage collection)\n", float64(f.live)/per/1024, unit)
	fmt.Fprintf(w, "  stacks     %8.1f KB/%s\n", float64(f.stack)/per/1024, unit)
	fmt.Fprintf(w, "  goroutines %8.2f /%s\n", f.goroutines/per, unit)
}

// measureFootprint measures what add adds to agentd, once agentd has gone
// quiet after it.
func (a *agentdProc) measureFootprint(ctx context.Context, add func() error) (footprint, error) {
	before, err := a.metrics(ctx)
	if err != nil {
		return footprint{}, err
	}
	rssBefore, err := rssOf(a.pid())
	if err != nil {
		return footprint{}, err
	}
	liveBefore, err := a.liveHeap(ctx)
	if err != nil {
		return footprint{}, err
	}
	if err := add(); err != nil {
		return footprint{}, err
	}
	after, err := a.metrics(ctx)
	if err != nil {
		return footprint{}, err
	}
	rssAfter, err := rssOf(a.pid())
	if err != nil {
		return footprint{}, err
	}
	// Last, as it collects garbage (and shrinks stacks): what was added
	// retains, without the garbage its making left.
	liveAfter, err := a.liveHeap(ctx)
	if err != nil {
		return footprint{}, err
	}
	return footprint{rssBefore: rssBefore, rssAfter: rssAfter, rss: rssAfter - rssBefore, live: liveAfter - liveBefore,
		heap:       int64(after["go_memstats_heap_inuse_bytes"] - before["go_memstats_heap_inuse_bytes"]),
		stack:      int64(after["go_memstats_stack_inuse_bytes"] - before["go_memstats_stack_inuse_bytes"]),
		goroutines: after["go_goroutines"] - before["go_goroutines"],
	}, nil
}

// memory is the figure of many chats waiting on a slow model.
type memory struct {
	chats int
	footprint
	// model: the chats wait in a streamed reply of the OpenAI-wire
	// stand-in (see modelMemoryPhase), over HTTP/2 if h2c; else on a
	// replay model's delay.
	model, h2c bool
}

func (m memory) print(w io.Writer) {
	switch {
	case !m.model:
		fmt.Fprintf(w, "\nmemory: %d chats waiting on a slow model (replay delay_ms 600000), on one agentd\n", m.chats)
	case m.h2c:
		fmt.Fprintf(w, "\nmemory: %d chats waiting in a streamed reply (OpenAI wire, HTTP/2), on one agentd\n", m.chats)
	default:
		fmt.Fprintf(w, "\nmemory: %d chats waiting in a streamed reply (OpenAI wire, HTTP/1.1), on one agentd\n", m.chats)
	}
	m.footprint.print(w, m.chats, "chat")
}

// memoryPhase creates n chats whose first model call takes ten minutes and
// measures what they add to agentd once every one of them is waiting in it.
func memoryPhase(ctx context.Context, ag *agentdProc, n int) (memory, error) {
	f, err := ag.waitingFootprint(ctx, chatSpec(3, 600_000), n)
	return memory{chats: n, footprint: f}, err
}

// waitingFootprint creates n chats of spec, 16 at a time, and measures what
// they add to agentd once every one has a worker and agentd has gone quiet:
// then each worker is inside its model call.
func (a *agentdProc) waitingFootprint(ctx context.Context, spec []byte, n int) (footprint, error) {
	return a.measureFootprint(ctx, func() error {
		var (
			next  atomic.Int64
			wg    sync.WaitGroup
			errMu sync.Mutex
			first error
		)
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(n) && ctx.Err() == nil {
					if _, _, err := a.create(ctx, spec, 0); err != nil {
						errMu.Lock()
						first = err
						errMu.Unlock()
						return
					}
				}
			}()
		}
		wg.Wait()
		if first != nil {
			return first
		}
		return a.quiet(ctx, func(m map[string]float64) bool { return int(m["agentd_workers_active"]) >= n })
	})
}

// liveHeap is agentd's heap in use right after a garbage collection, which
// the heap profile's endpoint runs when asked (gc=1): the bytes of reachable
// objects (runtime.MemStats.HeapAlloc).
func (a *agentdProc) liveHeap(ctx context.Context) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.admin+"/debug/pprof/heap?gc=1&debug=1", nil)
	if err != nil {
		return 0, err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "# HeapAlloc = "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no HeapAlloc in agentd's heap profile")
}

// metrics scrapes the unlabelled samples of agentd's /metrics.
func (a *agentdProc) metrics(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.Contains(line, "{") {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			m[name] = v
		}
	}
	return m, sc.Err()
}
