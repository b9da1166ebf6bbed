package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/openaitest"
	"github.com/agentd/agentd/internal/spec"
)

// The streaming phase: C chats whose one assistant streams its replies
// from a model on the OpenAI wire (openaitest, in this process), each
// followed by one SSE client, and the same load through a bare relay that
// only turns the model's stream into SSE. Every token names itself
// ("<id>") and the model notes when it left; a client notes when it came.

// tokenClock hands out token ids and notes when each left the model.
type tokenClock struct {
	next atomic.Int64
	mu   sync.Mutex
	sent map[int64]int64 // id → unix ns
}

func newTokenClock() *tokenClock { return &tokenClock{sent: map[int64]int64{}} }

// reply is one streamed reply of n tokens, every apart, the first after first.
func (c *tokenClock) reply(n int, first, every time.Duration) openaitest.Reply {
	from := c.next.Add(int64(n)) - int64(n)
	pieces := make([]string, n)
	for i := range pieces {
		pieces[i] = "<" + strconv.FormatInt(from+int64(i), 10) + ">"
	}
	return openaitest.Reply{Pieces: pieces, Delay: first, PieceDelay: every, Sent: func(i int) {
		at := time.Now().UnixNano()
		c.mu.Lock()
		c.sent[from+int64(i)] = at
		c.mu.Unlock()
	}}
}

// tokenLog notes when each token reached a client (the first time).
type tokenLog struct {
	mu     sync.Mutex
	got    map[int64]int64
	resets int
}

func newTokenLog() *tokenLog { return &tokenLog{got: map[int64]int64{}} }

// take notes the tokens of a delta's content.
func (l *tokenLog) take(content string, at int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		i := strings.IndexByte(content, '<')
		if i < 0 {
			return
		}
		j := strings.IndexByte(content[i:], '>')
		if j < 0 {
			return
		}
		if id, err := strconv.ParseInt(content[i+1:i+j], 10, 64); err == nil {
			if _, ok := l.got[id]; !ok {
				l.got[id] = at
			}
		}
		content = content[i+j+1:]
	}
}

// streamResult is one line of the streaming table.
type streamResult struct {
	name              string
	emitted, received int
	p50, p99          time.Duration
	cpu, cpuPG        time.Duration
	hasPG             bool
	messages, want    int
	resets            int
}

// result compares what left the model during a run with what clients got.
func (c *tokenClock) result(name string, from, to int64, l *tokenLog) streamResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := streamResult{name: name, resets: l.resets}
	var lat []time.Duration
	for id := from; id < to; id++ {
		sent, ok := c.sent[id]
		if !ok {
			continue
		}
		r.emitted++
		if at, ok := l.got[id]; ok {
			r.received++
			lat = append(lat, time.Duration(max(at-sent, 0)))
		}
	}
	slices.Sort(lat)
	r.p50, r.p99 = percentile(lat, 0.50), percentile(lat, 0.99)
	return r
}

// sseEvent is one event of a stream the clients read.
type sseEvent struct {
	event string
	data  []byte
}

// readSSE calls f for each event of r until f returns true or r ends.
func readSSE(r io.Reader, f func(sseEvent) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if ev.event != "" && f(ev) {
				return nil
			}
			ev = sseEvent{}
		case bytes.HasPrefix(line, []byte("event: ")):
			ev.event = string(line[len("event: "):])
		case bytes.HasPrefix(line, []byte("data: ")):
			ev.data = append([]byte(nil), line[len("data: "):]...)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}

// follow reads one chat's (or relay's) stream: deltas go to the log,
// messages of the writer are counted; it returns at the terminal event.
// opened, if not nil, is called at the first event.
func follow(ctx context.Context, client *http.Client, url string, l *tokenLog, opened func()) (messages int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return 0, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	err = readSSE(resp.Body, func(ev sseEvent) bool {
		if opened != nil {
			opened()
			opened = nil
		}
		switch ev.event {
		case "message.delta":
			var d chat.Delta
			if json.Unmarshal(ev.data, &d) == nil {
				if d.Reset {
					l.mu.Lock()
					l.resets++
					l.mu.Unlock()
				}
				l.take(d.Content, time.Now().UnixNano())
			}
		case "message":
			var m struct{ Name string }
			if json.Unmarshal(ev.data, &m) == nil && m.Name == "writer" {
				messages++
			}
		case "chat.completed", "chat.failed", "chat.cancelled":
			if ev.event != "chat.completed" {
				err = fmt.Errorf("%s: %s", ev.event, ev.data)
			}
			return true
		}
		return false
	})
	return messages, err
}

// streamSpec is the workload's chat: one assistant, a streaming model,
// replies turns. The task names the chat's follower (see gates).
func streamSpec(replies int, follower string) []byte {
	return fmt.Appendf(nil, `{"name": "bench-stream", "task": "Write. [%s]", "max_round": %d,
		"agents": [{"name": "writer", "type": "assistant", "model": {"provider": "openai", "model": "bench"}}]}`, follower, replies)
}

// gates hold a chat's first reply until its follower has opened its stream:
// the latencies are those of a client that watches, not of one that came
// late (a late one gets the reply so far at once, which would count the
// time it was not there). A request names its follower in its task.
type gates struct{ m sync.Map } // follower → chan struct{}

func (g *gates) open(follower string) chan struct{} {
	ch := make(chan struct{})
	g.m.Store(follower, ch)
	return ch
}

// of returns the gate of a request's follower, nil for none or after the
// first reply.
func (g *gates) of(r openaitest.Request) <-chan struct{} {
	if r.Chat == nil || len(r.Chat.Messages) == 0 {
		return nil
	}
	task := r.Chat.Messages[len(r.Chat.Messages)-1].Text()
	i, j := strings.LastIndexByte(task, '['), strings.LastIndexByte(task, ']')
	if i < 0 || j < i {
		return nil
	}
	ch, ok := g.m.LoadAndDelete(task[i+1 : j])
	if !ok {
		return nil
	}
	return ch.(chan struct{})
}

// streamPhase measures the bare relay, agentd on one replica, and agentd on
// two with each follower on the replica that does not run its chat, and
// prints the table.
//
// Each system serves one round first that is printed apart and left out of
// the medians: its process has just started (connections to open,
// statements to prepare, a heap to grow), a cost paid once, not per token.
// Then -stream-rounds rounds each; the relay's alternate with agentd's, and
// each agentd round is compared with the relay round just before it, so
// that a machine that runs slower for a while slows both.
func streamPhase(ctx context.Context, pg *pgServer, bin, tmp string, cfg config) error {
	clock := newTokenClock()
	fake := openaitest.New()
	defer fake.Close()
	var held gates
	fake.Respond(func(r openaitest.Request) openaitest.Reply {
		reply := clock.reply(cfg.streamTokens, cfg.streamFirst, cfg.streamEvery)
		reply.Hold = held.of(r)
		return reply
	})

	relay, err := startRelay(ctx, tmp, fake.URL())
	if err != nil {
		return err
	}
	defer relay.stop()
	const relayName = "bare relay (go-openai → SSE)"
	relayRound := func() (streamResult, error) {
		r, err := runStream(ctx, clock, relayName, []int{relay.pid()}, 0, cfg, func(ctx context.Context, l *tokenLog) (int, error) {
			return follow(ctx, relay.client, relay.base+"/relay?replies="+strconv.Itoa(cfg.streamReplies), l, nil)
		})
		if err != nil {
			return r, fmt.Errorf("bare relay: %w", err)
		}
		return r, nil
	}

	if _, err := pg.query(ctx, "postgres", `CREATE DATABASE agentd_stream`); err != nil {
		return err
	}
	env := []string{"OPENAI_BASE_URL=" + fake.URL(), "OPENAI_API_KEY=bench"}
	a, err := startAgentd(ctx, bin, tmp, pg.url("agentd_stream"), cfg, "agentd-stream-a", env...)
	if err != nil {
		return err
	}
	defer a.stop()
	var followers atomic.Int64
	agentdRound := func(name string, owner, follower *agentdProc, pids []int) (streamResult, error) {
		r, err := runStream(ctx, clock, name, pids, pg.srv.PID(), cfg, func(ctx context.Context, l *tokenLog) (int, error) {
			who := strconv.FormatInt(followers.Add(1), 10)
			gate := held.open(who)
			id, _, err := owner.create(ctx, streamSpec(cfg.streamReplies, who), 0)
			if err != nil {
				return 0, err
			}
			return follow(ctx, follower.client, follower.base+"/v1/chats/"+id+"/events", l, sync.OnceFunc(func() { close(gate) }))
		})
		if err != nil {
			return r, fmt.Errorf("%s: %w", name, err)
		}
		return r, nil
	}

	var first []streamResult
	var relays, one, two []streamRound
	// rounds runs the first round of a system, then its measured rounds,
	// each after a relay round.
	rounds := func(into *[]streamRound, round func() (streamResult, error)) error {
		r, err := round()
		if err != nil {
			return err
		}
		first = append(first, r)
		for range cfg.streamRounds {
			rr, err := relayRound()
			if err != nil {
				return err
			}
			relays = append(relays, streamRound{streamResult: rr, relay: rr})
			r, err := round()
			if err != nil {
				return err
			}
			*into = append(*into, streamRound{streamResult: r, relay: rr})
		}
		return nil
	}
	r, err := relayRound()
	if err != nil {
		return err
	}
	first = append(first, r)
	if err := rounds(&one, func() (streamResult, error) {
		return agentdRound("agentd, one replica", a, a, []int{a.pid()})
	}); err != nil {
		return err
	}
	b, err := startAgentd(ctx, bin, tmp, pg.url("agentd_stream"), cfg, "agentd-stream-b", env...)
	if err != nil {
		return err
	}
	defer b.stop()
	if err := rounds(&two, func() (streamResult, error) {
		return agentdRound("agentd, two replicas", a, b, []int{a.pid(), b.pid()})
	}); err != nil {
		return err
	}
	printStream(cfg, [][]streamRound{relays, one, two}, first)
	return nil
}

// streamRound is one measured round of a system, with the relay round
// before it.
type streamRound struct {
	streamResult
	relay streamResult
}

// runStream starts c followers at once, each driving one chat (or one
// relay stream) to its end, and measures the CPU of pids (and of the
// Postgres server, pgPID, if not 0) over the run.
func runStream(ctx context.Context, clock *tokenClock, name string, pids []int, pgPID int, cfg config,
	drive func(context.Context, *tokenLog) (int, error)) (streamResult, error) {
	l := newTokenLog()
	cpu := func() (proc, pgCPU time.Duration, err error) {
		for _, pid := range pids {
			c, err := cpuOf(pid)
			if err != nil {
				return 0, 0, err
			}
			proc += c
		}
		if pgPID != 0 {
			pgCPU, err = cpuOfTree(pgPID)
		}
		return proc, pgCPU, err
	}
	cpu0, pg0, err := cpu()
	if err != nil {
		return streamResult{}, err
	}
	from := clock.next.Load()
	var (
		wg       sync.WaitGroup
		messages atomic.Int64
		errMu    sync.Mutex
		first    error
	)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for range cfg.streamChats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := drive(rctx, l)
			messages.Add(int64(n))
			if err != nil {
				errMu.Lock()
				if first == nil {
					first = err
				}
				errMu.Unlock()
			}
		}()
	}
	wg.Wait()
	cpu1, pg1, err := cpu()
	if err != nil {
		return streamResult{}, err
	}
	if first != nil {
		return streamResult{}, first
	}
	r := clock.result(name, from, clock.next.Load(), l)
	r.cpu, r.cpuPG, r.hasPG = cpu1-cpu0, pg1-pg0, pgPID != 0
	r.messages, r.want = int(messages.Load()), cfg.streamChats*cfg.streamReplies
	fmt.Fprintf(os.Stderr, "%s: %d of %d tokens, p99 %v\n", name, r.received, r.emitted, r.p99)
	return r, nil
}

func printStream(cfg config, systems [][]streamRound, first []streamResult) {
	fmt.Fprintf(cfg.out, "\nstreaming: %d chats at once, each %d replies of %d tokens (the first after %v, then one every %v) from an OpenAI-wire model, one SSE follower per chat; %d rounds of each system, after a first round apart (below)\n",
		cfg.streamChats, cfg.streamReplies, cfg.streamTokens, cfg.streamFirst, cfg.streamEvery, cfg.streamRounds)
	per1k := func(d time.Duration, n int) float64 { return ms(d) * 1000 / float64(max(n, 1)) }
	w := tabwriter.NewWriter(cfg.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "system\ttokens\treceived (least)\tp50 ms\tp99 ms\tp99 range\tCPU ms/1k tokens\t×relay\t×relay range\tof which PG\tmessages\tresets\t")
	for _, rounds := range systems {
		if len(rounds) == 0 {
			continue
		}
		var (
			tokens, messages, want, resets int
			received                       = 1.0
			p50, p99, cpu, ratio, pgCPU    []float64
		)
		for _, r := range rounds {
			tokens += r.emitted
			messages, want, resets = messages+r.messages, want+r.want, resets+r.resets
			received = min(received, float64(r.received)/float64(max(r.emitted, 1)))
			p50, p99 = append(p50, ms(r.p50)), append(p99, ms(r.p99))
			cpu = append(cpu, per1k(r.cpu, r.emitted))
			ratio = append(ratio, per1k(r.cpu, r.emitted)/per1k(r.relay.cpu, r.relay.emitted))
			pgCPU = append(pgCPU, per1k(r.cpuPG, r.emitted))
		}
		pgCol := "-"
		if rounds[0].hasPG {
			pgCol = fmt.Sprintf("%.1f", median(pgCPU))
		}
		fmt.Fprintf(w, "%s\t%d\t%.2f%%\t%.1f\t%.1f\t%.1f–%.1f\t%.1f\t%.2f×\t%.2f–%.2f\t%s\t%d/%d\t%d\t\n", rounds[0].name, tokens,
			100*received, median(p50), median(p99), slices.Min(p99), slices.Max(p99), median(cpu),
			median(ratio), slices.Min(ratio), slices.Max(ratio), pgCol, messages, want, resets)
	}
	w.Flush()
	fmt.Fprintln(cfg.out, "  (medians of the rounds; ×relay: each round against the relay round just before it; two replicas: chats run on one, each follower streams from the other, CPU is both replicas')")
	fmt.Fprintln(cfg.out, "first round of each system, its process just started (not in the medians above):")
	w = tabwriter.NewWriter(cfg.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "system\ttokens\treceived\tp50 ms\tp99 ms\tCPU ms/1k tokens\tof which PG\tmessages\tresets\t")
	for _, r := range first {
		pgCol := "-"
		if r.hasPG {
			pgCol = fmt.Sprintf("%.1f", per1k(r.cpuPG, r.emitted))
		}
		fmt.Fprintf(w, "%s\t%d\t%.2f%%\t%.1f\t%.1f\t%.1f\t%s\t%d/%d\t%d\t\n", r.name, r.emitted,
			100*float64(r.received)/float64(max(r.emitted, 1)), ms(r.p50), ms(r.p99), per1k(r.cpu, r.emitted), pgCol, r.messages, r.want, r.resets)
	}
	w.Flush()
}

// median is the middle value of xs (the mean of the middle two for an
// even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// relayEnv, set to "ADDR MODEL_URL", makes this program (or its test) the
// bare relay of the streaming phase: the benchmark starts itself again
// with it.
const relayEnv = "BENCH_COMPARE_RELAY"

// relayed serves the bare relay and exits if relayEnv says so; false
// otherwise.
func relayed() bool {
	v := os.Getenv(relayEnv)
	if v == "" {
		return false
	}
	addr, model, _ := strings.Cut(v, " ")
	if err := serveRelay(addr, model); err != nil {
		fmt.Fprintf(os.Stderr, "bench-compare relay: %v\n", err)
		os.Exit(1)
	}
	return true
}

// relayProc is the bare relay: this program started again with relayEnv.
type relayProc struct {
	proc
	base   string
	client *http.Client
}

func startRelay(ctx context.Context, tmp, modelURL string) (*relayProc, error) {
	return retryPortClash(func() (*relayProc, error) { return startRelayOnce(ctx, tmp, modelURL) })
}

func startRelayOnce(ctx context.Context, tmp, modelURL string) (*relayProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(tmp, "relay.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), relayEnv+"="+addr+" "+modelURL)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the relay: %w", err)
	}
	r := &relayProc{proc: startedProc(cmd), base: "http://" + addr,
		client: &http.Client{Transport: &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096}}}
	if err := waitHTTP(ctx, r.base+"/ready", r.exited); err != nil {
		r.stop()
		log, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("%w:\n%s", err, log)
	}
	return r, nil
}

// serveRelay is the bare relay: GET /relay?replies=N makes N streaming
// calls to the model through agentd's own model client (go-openai) and
// writes each fragment as an SSE message.delta event, flushed, as agentd
// frames them, then each reply as a message event: what agentd does for a
// follower, without the chat around it.
func serveRelay(addr, modelURL string) error {
	models, err := llm.New(llm.Config{OpenAI: llm.OpenAIConfig{BaseURL: modelURL, APIKey: "bench"}})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ready", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("GET /relay", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("replies"))
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		rc := http.NewResponseController(w)
		event := func(name string, v any) {
			data, _ := json.Marshal(v)
			_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
			_ = rc.Flush()
		}
		for range n {
			req := &chat.ModelRequest{Caller: "writer", Config: spec.Model{Provider: "openai", Model: "bench"},
				Messages: []chat.ModelMessage{{Role: chat.RoleUser, Content: "Write."}},
				OnDelta:  func(s string) { event("message.delta", chat.Delta{Name: "writer", Content: s}) }}
			resp, err := models.Complete(r.Context(), req)
			if err != nil {
				event("chat.failed", map[string]string{"error": err.Error()})
				return
			}
			event("message", map[string]string{"name": "writer", "content": resp.Content})
		}
		event("chat.completed", map[string]string{})
	})
	srv := &http.Server{Addr: addr, Handler: mux}
	return srv.ListenAndServe()
}
