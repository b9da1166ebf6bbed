package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

// The scale phase: many chats at once on a model that takes its time, as
// teams run them. Every chat is one assistant that talks on and on (its
// max_round is out of reach within the phase); the model is a stand-in on
// the OpenAI wire, in this process, that streams each reply as
// -scale-tokens tokens spread evenly over -scale-reply. A tenth of the
// chats (-scale-follow) have an SSE follower. After every chat has been
// created and a warm-up, -scale-duration is measured, on each store.

// scaleModel is the model stand-in. It notes, per chat, when a reply's
// last byte left and when the chat's next request came: the difference is
// what agentd added to the turn beyond the model's own time (committing
// the reply, planning the next turn, sending the request).
type scaleModel struct {
	srv    *http.Server
	url    string
	tokens int
	reply  time.Duration
	// chunks are the events of a reply, written once: token i's, then the
	// end (finish reason, usage, [DONE]). Every reply is the same.
	chunks [][]byte

	measuring atomic.Bool
	mu        sync.Mutex
	lastEnd   map[int]time.Time
	added     []time.Duration
}

// startScaleModel serves the stand-in (see serveModel).
func startScaleModel(tokens int, reply time.Duration) (*scaleModel, error) {
	m := &scaleModel{tokens: max(tokens, 1), reply: reply, lastEnd: map[int]time.Time{}}
	for i := range m.tokens {
		m.chunks = append(m.chunks, fmt.Appendf(nil, scaleChunk, "tok"+strconv.Itoa(i)+" "))
	}
	m.chunks = append(m.chunks, fmt.Appendf(nil, scaleEnd, m.tokens, 100+m.tokens))
	var err error
	m.srv, m.url, err = serveModel(http.HandlerFunc(m.serve))
	return m, err
}

// serveModel serves a model stand-in, h, on a port of 127.0.0.1: HTTP/1.1,
// and HTTP/2 without TLS to a client that speaks it with prior knowledge
// (agentd with h2c set on the endpoint), as hosted APIs speak HTTP/2. url
// is its API root.
func serveModel(h http.Handler) (srv *http.Server, url string, err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	// 100 streams a connection (the least RFC 9113 advises a server to
	// allow; net/http's default is 250): its write scheduler visits every
	// stream of the connection for each frame it sends, so that with 250
	// streams of which few have a token ready, the visits were a third of
	// the stand-in's CPU.
	srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 100}
	go func() { _ = srv.Serve(l) }()
	return srv, "http://" + l.Addr().String() + "/v1", nil
}

func (m *scaleModel) close() { _ = m.srv.Close() }

// marker is what a chat's task carries so that the model knows the chat.
func scaleMarker(n int) string { return "[scale-" + strconv.Itoa(n) + "]" }

// chatOf finds the marker in a request body; -1 without one.
func chatOf(body []byte) int {
	i := bytes.Index(body, []byte("[scale-"))
	if i < 0 {
		return -1
	}
	rest := body[i+len("[scale-"):]
	j := bytes.IndexByte(rest, ']')
	if j < 0 {
		return -1
	}
	n, err := strconv.Atoi(string(rest[:j]))
	if err != nil {
		return -1
	}
	return n
}

const scaleChunk = `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"bench","choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]}` + "\n\n"

const scaleEnd = `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"bench","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
	`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"bench","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":%d,"total_tokens":%d}}` + "\n\n" +
	"data: [DONE]\n\n"

func (m *scaleModel) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	at := time.Now()
	n := chatOf(body)
	m.mu.Lock()
	if end, ok := m.lastEnd[n]; ok && n >= 0 && m.measuring.Load() {
		m.added = append(m.added, at.Sub(end))
	}
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	every := m.reply / time.Duration(m.tokens)
	t := time.NewTimer(every)
	defer t.Stop()
	for i := range m.tokens {
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
		t.Reset(every)
		_, _ = w.Write(m.chunks[i])
		if i < m.tokens-1 && fl != nil {
			fl.Flush()
		}
	}
	_, _ = w.Write(m.chunks[m.tokens])
	if fl != nil {
		fl.Flush()
	}
	m.mu.Lock()
	m.lastEnd[n] = time.Now()
	m.mu.Unlock()
}

// takeAdded returns the added times noted while measuring, and stops.
func (m *scaleModel) takeAdded() []time.Duration {
	m.measuring.Store(false)
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.added
	m.added = nil
	return a
}

// scaleResult is one store's line of the scale table.
type scaleResult struct {
	store              string
	chats, want        int // chats created, of those asked for
	rate, ideal        float64
	addedP50, addedP99 time.Duration
	rssPerChat         float64 // bytes
	goroutinesPerChat  float64
	cpuPerMsg          time.Duration // agentd, plus Postgres on Postgres
	benchPerMsg        time.Duration // this process: the model stand-in and the followers
	deltas             int64
	followers          int
	created            time.Duration
}

// scalePhase runs the load on Postgres and on SQLite, one after the other,
// each on an agentd of its own, and prints the table.
func scalePhase(ctx context.Context, pg *pgServer, bin, tmp string, cfg config) error {
	model, err := startScaleModel(cfg.scaleTokens, cfg.scaleReply)
	if err != nil {
		return err
	}
	defer model.close()
	models := filepath.Join(tmp, "scale-models.yaml")
	file := fmt.Appendf(nil, "endpoints:\n  - name: bench\n    kind: openai\n    base_url: %s\n    max_concurrency: %d\n", model.url, cfg.scaleChats)
	if cfg.scaleH2C {
		file = append(file, "    h2c: true\n"...)
	}
	if err := os.WriteFile(models, file, 0o600); err != nil {
		return err
	}
	env := []string{"AGENTD_MODELS_FILE=" + models, "AGENTD_MAX_ROUND_LIMIT=100000",
		"AGENTD_MAX_ACTIVE_CHATS=" + strconv.Itoa(cfg.scaleChats+100)}
	var results []scaleResult
	if _, err := pg.query(ctx, "postgres", `CREATE DATABASE agentd_scale`); err != nil {
		return err
	}
	for _, store := range cfg.scaleStores {
		url, extra := pg.url("agentd_scale"), env
		if store == "sqlite" {
			url = ""
			extra = append(slices.Clone(env), "AGENTD_DATA_DIR="+filepath.Join(tmp, "scale-sqlite"))
		}
		ag, err := startAgentd(ctx, bin, tmp, url, cfg, "agentd-scale-"+store, extra...)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "scale, %s: agentd (pid %d), pprof at http://%s/debug/pprof/\n", store, ag.pid(), ag.admin)
		pgPID := 0
		if store == "postgres" {
			pgPID = pg.srv.PID()
		}
		r, err := scaleRun(ctx, ag, model, pgPID, cfg)
		ag.stop()
		if err != nil {
			return fmt.Errorf("%s: %w", store, err)
		}
		r.store = store
		results = append(results, r)
		fmt.Fprintf(os.Stderr, "scale, %s: %.0f of %.0f msg/s, p99 added %v\n", store, r.rate, r.ideal, r.addedP99)
	}
	printScale(cfg, results)
	return nil
}

// scaleRun creates the chats on ag, opens their followers, waits out the
// warm-up and measures.
func scaleRun(ctx context.Context, ag *agentdProc, model *scaleModel, pgPID int, cfg config) (scaleResult, error) {
	res := scaleResult{want: cfg.scaleChats}
	rss0, err := rssOf(ag.pid())
	if err != nil {
		return res, err
	}
	m0, err := ag.metrics(ctx)
	if err != nil {
		return res, err
	}
	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	streams := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var (
		next, deltas atomic.Int64
		followers    atomic.Int64
		created      atomic.Int64
		wg, fwg      sync.WaitGroup
		errMu        sync.Mutex
		first        error
	)
	fail := func(err error) {
		errMu.Lock()
		if first == nil && lctx.Err() == nil {
			first = err
		}
		errMu.Unlock()
	}
	start := time.Now()
	// A server that cannot keep up with the chats it has creates the rest
	// slowly (each create waits behind the appends of all the others):
	// after -scale-create-within the phase measures the chats it has.
	createBy := start.Add(cfg.scaleCreateWithin)
	every := 0
	if cfg.scaleFollow > 0 {
		every = max(1, int(1/cfg.scaleFollow+0.5))
	}
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := int(next.Add(1)) - 1
				if n >= cfg.scaleChats || lctx.Err() != nil || time.Now().After(createBy) {
					return
				}
				spec := fmt.Appendf(nil, `{"name": "bench-scale", "task": "Write on. %s", "max_round": 100000,
					"agents": [{"name": "writer", "type": "assistant", "model": {"provider": "openai", "model": "bench"}}]}`, scaleMarker(n))
				id, _, err := ag.create(lctx, spec, 0)
				if err != nil {
					fail(err)
					return
				}
				created.Add(1)
				if every > 0 && n%every == 0 {
					followers.Add(1)
					fwg.Add(1)
					go func() {
						defer fwg.Done()
						scaleFollow(lctx, streams, ag.base+"/v1/chats/"+id+"/events", &deltas, fail)
					}()
				}
			}
		}()
	}
	wg.Wait()
	res.created = time.Since(start)
	res.followers = int(followers.Load())
	res.chats = int(created.Load())
	res.ideal = float64(res.chats) / cfg.scaleReply.Seconds()
	if err := firstOf(&errMu, &first); err != nil {
		return res, err
	}
	select {
	case <-time.After(cfg.scaleWarmup):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	// Nearly every chat waits on its model now: what they hold is what
	// agentd added since before the first create.
	rss1, err := rssOf(ag.pid())
	if err != nil {
		return res, err
	}
	m1, err := ag.metrics(ctx)
	if err != nil {
		return res, err
	}
	res.rssPerChat = float64(rss1-rss0) / float64(max(res.chats, 1))
	res.goroutinesPerChat = (m1["go_goroutines"] - m0["go_goroutines"]) / float64(max(res.chats, 1))
	cpu0, err := scaleCPU(ag.pid(), pgPID)
	if err != nil {
		return res, err
	}
	bench0, err := cpuOf(os.Getpid())
	if err != nil {
		return res, err
	}
	d0 := deltas.Load()
	model.takeAdded()
	model.measuring.Store(true)
	at := time.Now()
	select {
	case <-time.After(cfg.scaleDuration):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	m2, err := ag.metrics(ctx)
	if err != nil {
		return res, err
	}
	cpu1, err := scaleCPU(ag.pid(), pgPID)
	if err != nil {
		return res, err
	}
	bench1, err := cpuOf(os.Getpid())
	if err != nil {
		return res, err
	}
	elapsed := time.Since(at)
	added := model.takeAdded()
	res.deltas = deltas.Load() - d0
	stopLoad()
	fwg.Wait()
	if err := firstOf(&errMu, &first); err != nil {
		return res, err
	}
	msgs := m2["agentd_messages_appended_total"] - m1["agentd_messages_appended_total"]
	if msgs == 0 {
		// No reply made it into a chat: the model calls fail (see agentd's
		// log), and every other figure would describe chats that do nothing.
		return res, fmt.Errorf("no message appended in the %s measured", cfg.scaleDuration)
	}
	res.rate = msgs / elapsed.Seconds()
	if msgs > 0 {
		res.cpuPerMsg = time.Duration(float64(cpu1-cpu0) / msgs)
		res.benchPerMsg = time.Duration(float64(bench1-bench0) / msgs)
	}
	slices.Sort(added)
	res.addedP50, res.addedP99 = percentile(added, 0.50), percentile(added, 0.99)
	return res, nil
}

func firstOf(mu *sync.Mutex, err *error) error {
	mu.Lock()
	defer mu.Unlock()
	return *err
}

// scaleCPU is the CPU time of agentd, plus the Postgres server's if pgPID
// is not 0.
func scaleCPU(pid, pgPID int) (time.Duration, error) {
	c, err := cpuOf(pid)
	if err != nil || pgPID == 0 {
		return c, err
	}
	p, err := cpuOfTree(pgPID)
	return c + p, err
}

// scaleFollow reads a chat's event stream until ctx ends, counting deltas.
func scaleFollow(ctx context.Context, client *http.Client, url string, deltas *atomic.Int64, fail func(error)) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fail(err)
		return
	}
	resp, err := client.Do(req)
	if err != nil {
		fail(err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fail(fmt.Errorf("GET %s: %s", url, resp.Status))
		return
	}
	_ = readSSE(resp.Body, func(ev sseEvent) bool {
		if ev.event == "message.delta" {
			deltas.Add(1)
		}
		return false
	})
}

// cpusFor is how many CPUs a rate of messages costs at perMsg of CPU
// each: the ideal rate at the measured cost per message is what agentd, its
// store and the benchmark's own model stand-in and followers would need
// between them to keep up with every chat. More than the machine has
// means the ideal rate cannot be reached here, however fast each turn.
func cpusFor(rate float64, perMsg time.Duration) float64 {
	return rate * perMsg.Seconds()
}

func printScale(cfg config, rs []scaleResult) {
	proto := "HTTP/1.1, a connection per call"
	if cfg.scaleH2C {
		proto = "HTTP/2 (h2c)"
	}
	fmt.Fprintf(cfg.out, "\nscale: %d chats (created within %s), one assistant each, on a model that streams each reply as %d tokens over %s, called over %s; %.0f%% followed over SSE; %s measured after %s\n",
		cfg.scaleChats, cfg.scaleCreateWithin, cfg.scaleTokens, cfg.scaleReply, proto, 100*cfg.scaleFollow, cfg.scaleDuration, cfg.scaleWarmup)
	w := tabwriter.NewWriter(cfg.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "store\tchats\tmsg/s\tideal\tof ideal\tadded p50 ms\tadded p99 ms\tRSS KB/waiting chat\tgoroutines/chat\tCPU ms/msg\tmodel+followers CPU ms/msg\tCPUs at ideal\tdeltas/s followed\tcreates s\t")
	for _, r := range rs {
		fmt.Fprintf(w, "%s\t%d/%d\t%.0f\t%.0f\t%.1f%%\t%.1f\t%.1f\t%.1f\t%.2f\t%.3f\t%.3f\t%.2f of %d\t%.0f\t%.1f\t\n", r.store, r.chats, r.want, r.rate, r.ideal, 100*r.rate/r.ideal,
			ms(r.addedP50), ms(r.addedP99), r.rssPerChat/1024, r.goroutinesPerChat, ms(r.cpuPerMsg), ms(r.benchPerMsg),
			cpusFor(r.ideal, r.cpuPerMsg+r.benchPerMsg), runtime.NumCPU(), float64(r.deltas)/cfg.scaleDuration.Seconds(), r.created.Seconds())
	}
	w.Flush()
}
