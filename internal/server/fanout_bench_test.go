package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/api"
	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/runtime/runtimetest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/internal/chat"
)

// BenchmarkSSEFanOut: 1,000 SSE streams (the real HTTP handler) follow one
// chat on Postgres. It reports how long after its append was confirmed an
// event reached the streams' reader (p50, p99), how many store reads each
// append cost, all streams together (committed events go to local
// subscribers from memory, so that is none, not one per stream), and the
// chat's own pace: the median time between its messages, each a 20 ms
// model call and an append. Beside them, bare-p50 and bare-p99 are the
// same figures for a bare SSE server that serves the same commits, made
// as far apart, to the same reader: the most a server with a goroutine per
// stream gets from this machine at that moment, as the machine's speed
// varies from run to run.
//
// The streams are read by another process (fanOutReader, this test binary
// run again), as clients are: on the same two cores, so that their reads
// are in the latencies measured, but scheduled by the kernel beside the
// server rather than by the server's own Go runtime. In one process, the
// runtime runs the server's 1,000 runnable stream goroutines before it
// polls the network for the readers', so each event reached its reader a
// whole fan-out after it was written — a cost of the benchmark, not of
// serving streams.
func BenchmarkSSEFanOut(b *testing.B) {
	const viewers = 1000
	pg := runtimetest.Open(b, "postgres")
	cs := runtimetest.Counting(pg)
	rt := runtimetest.New(b, cs, func(c *runtime.Config) { c.LeaseDuration = 30 * time.Second })
	ts := streamServer(b, rt)

	for range b.N {
		// The first reply comes after the streams had time to open; then
		// 30 turns follow 20 ms apart. Only events confirmed after every
		// stream was open are measured.
		sp := runtimetest.TurnsSpec(30, 4000, 20)
		c, _, err := rt.Create(context.Background(), &chat.CreateParams{Tenant: DefaultTenant, Body: []byte(sp)})
		if err != nil {
			b.Fatal(err)
		}
		reader := startFanOutReader(b, ts.URL+"/v1/chats/"+c.ID+"/events", viewers)
		readsBefore, appendsBefore := cs.Reads.Load(), cs.Appends.Load()
		start := time.Now()
		received := reader.wait(b) // every stream ends after the chat's terminal event
		reads, appends := cs.Reads.Load()-readsBefore, cs.Appends.Load()-appendsBefore
		var lat, turns []time.Duration
		messages := cs.Messages()
		for i := 1; i < len(messages); i++ {
			if messages[i-1].After(start) {
				turns = append(turns, messages[i].Sub(messages[i-1]))
			}
		}
		for _, g := range received {
			if at, ok := cs.Committed(g.seq); ok && at.After(start) {
				lat = append(lat, max(time.Duration(g.at-at.UnixNano()), 0))
			}
		}
		if len(lat) == 0 || appends == 0 || len(turns) == 0 {
			b.Fatalf("no events measured (%d appends)", appends)
		}
		commits := commitsOf(b, rt, cs, c.ID, start)
		slices.Sort(turns)
		p50, p99 := percentiles(lat)
		b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(reads)/float64(appends), "reads/append")
		// The chat's own pace: a turn is a 20 ms model call and its append.
		turn := turns[len(turns)/2]
		b.ReportMetric(float64(turn.Microseconds())/1000, "turn-ms")
		// The same commits (frames, sizes and times apart) served by a bare
		// SSE server to the same reader: what the machine gives any server
		// with a goroutine per stream, in the same run.
		bare50, bare99 := bareFanOut(b, commits, viewers)
		b.ReportMetric(float64(bare50.Microseconds())/1000, "bare-p50-ms")
		b.ReportMetric(float64(bare99.Microseconds())/1000, "bare-p99-ms")
		b.Logf("%d streams, %d appends, %d deliveries: p50 %v, p99 %v; %d store reads (%.2f per append); a turn took %v (median; its model call 20ms); the same commits from a bare SSE server: p50 %v, p99 %v",
			viewers, appends, len(lat), p50, p99, reads, float64(reads)/float64(appends), turn, bare50, bare99)
	}
}

// percentiles returns the median and the 99th percentile of lat, sorting it.
func percentiles(lat []time.Duration) (p50, p99 time.Duration) {
	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	return p(0.50), p(0.99)
}

// commit is one append of the chat, as SSE frames; at is how long after
// the measurement's start it was confirmed (zero: before it).
type commit struct {
	at     time.Duration
	seqs   []int64
	frames [][]byte
}

// commitsOf returns the chat's log as the commits that appended it.
func commitsOf(b *testing.B, rt *runtime.Runtime, cs *runtimetest.CountingStore, id string, start time.Time) []commit {
	evs, err := rt.Events(context.Background(), DefaultTenant, id, 0, 10000)
	if err != nil {
		b.Fatal(err)
	}
	var commits []commit
	var last time.Time
	for _, e := range evs {
		data, err := json.Marshal(api.EventPayload(e))
		if err != nil {
			b.Fatal(err)
		}
		frame := fmt.Appendf(nil, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Type, data)
		at, _ := cs.Committed(e.Seq)
		if len(commits) == 0 || !at.Equal(last) {
			commits = append(commits, commit{at: max(at.Sub(start), 0)})
			last = at
		}
		c := &commits[len(commits)-1]
		c.seqs, c.frames = append(c.seqs, e.Seq), append(c.frames, frame)
	}
	return commits
}

// bareFanOut serves commits to viewers streams of a bare SSE server — a
// goroutine per stream, woken on each commit to write its frames and
// flush, as agentd's streams are, and nothing else — and returns the p50
// and p99 of the delivery of the commits made after every stream was
// open, made as far apart as they were.
func bareFanOut(b *testing.B, commits []commit, viewers int) (p50, p99 time.Duration) {
	var (
		mu sync.Mutex // publish's, and subs'
		// log is the frames committed so far, in a slice capped at its
		// length: the streams read it without a lock, as agentd's read
		// the events a wake-up brings.
		log  atomic.Pointer[[][]byte]
		subs []chan struct{}
		// at is when each seq was committed, for those after the start.
		at    = map[int64]time.Time{}
		total int
	)
	for _, c := range commits {
		total += len(c.frames)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		wake := make(chan struct{}, 1)
		mu.Lock()
		subs = append(subs, wake)
		mu.Unlock()
		rc := http.NewResponseController(w)
		for sent := 0; ; {
			frames := (*log.Load())[sent:]
			for _, f := range frames {
				if _, err := w.Write(f); err != nil {
					return
				}
			}
			sent += len(frames)
			if err := rc.Flush(); err != nil || sent == total {
				return
			}
			select {
			case <-wake:
			case <-r.Context().Done():
				return
			}
		}
	}))
	defer ts.Close()
	publish := func(c commit, measured bool) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		frames := *log.Load()
		for k, f := range c.frames {
			frames = append(frames, f)
			if measured {
				at[c.seqs[k]] = now
			}
		}
		frames = frames[:len(frames):len(frames)]
		log.Store(&frames)
		for _, wake := range subs {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}
	log.Store(&[][]byte{})
	// The commits before the start are the log the streams open on.
	i := 0
	for ; i < len(commits) && commits[i].at == 0; i++ {
		publish(commits[i], false)
	}
	reader := startFanOutReader(b, ts.URL, viewers)
	start := time.Now()
	for _, c := range commits[i:] {
		time.Sleep(time.Until(start.Add(c.at)))
		publish(c, true)
	}
	var lat []time.Duration
	for _, g := range reader.wait(b) {
		if t, ok := at[g.seq]; ok {
			lat = append(lat, max(time.Duration(g.at-t.UnixNano()), 0))
		}
	}
	if len(lat) == 0 {
		b.Fatal("bare fan-out: no events measured")
	}
	return percentiles(lat)
}

// streamServer serves rt's HTTP API with the caps on streams and the rate
// limit lifted: one address opens every stream.
func streamServer(t testing.TB, rt *runtime.Runtime) *httptest.Server {
	t.Helper()
	srv, err := New(Config{Guard: Guard{RateLimit: -1, MaxStreams: -1, MaxStreamsPerKey: -1}}, rt, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// fanOutReaderEnv, set to a stream's URL, makes this test binary the
// reader of BenchmarkSSEFanOut's streams (see TestMain).
const fanOutReaderEnv = "AGENTD_FANOUT_READER_URL"

// receipt is one event reaching one stream's reader: its seq, and when
// (Unix nanoseconds: the two processes share the system's clock).
type receipt struct {
	seq int64
	at  int64
}

// fanOutReaderProc is the reader process of one benchmark iteration.
type fanOutReaderProc struct {
	cmd    *exec.Cmd
	out    *bufio.Reader
	stderr bytes.Buffer
}

// startFanOutReader starts the reader process on viewers streams of url
// and returns once every stream has its first event.
func startFanOutReader(b *testing.B, url string, viewers int) *fanOutReaderProc {
	b.Helper()
	r := &fanOutReaderProc{cmd: exec.Command(os.Args[0], "-test.run=^$")}
	r.cmd.Env = append(os.Environ(), fanOutReaderEnv+"="+url, "AGENTD_FANOUT_READER_STREAMS="+strconv.Itoa(viewers))
	r.cmd.Stderr = &r.stderr
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	r.out = bufio.NewReader(stdout)
	if line, err := r.out.ReadString('\n'); err != nil || line != "ready\n" {
		_ = r.cmd.Wait()
		b.Fatalf("fan-out reader: %q, %v; its stderr: %s", line, err, r.stderr.String())
	}
	return r
}

// wait returns every receipt once the reader process ended.
func (r *fanOutReaderProc) wait(b *testing.B) []receipt {
	b.Helper()
	var got []receipt
	for {
		var g receipt
		_, err := fmt.Fscan(r.out, &g.seq, &g.at)
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatalf("fan-out reader output: %v", err)
		}
		got = append(got, g)
	}
	if err := r.cmd.Wait(); err != nil {
		b.Fatalf("fan-out reader: %v; its stderr: %s", err, r.stderr.String())
	}
	return got
}

// fanOutReader is the reader process: it opens the streams, says "ready"
// once each has its first event, reads every stream to its end, then
// writes one line per event received ("seq unix-nanoseconds"). Its exit
// code says whether every stream ended cleanly.
func fanOutReader(url string) int {
	streams, err := strconv.Atoi(os.Getenv("AGENTD_FANOUT_READER_STREAMS"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "streams:", err)
		return 2
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams}}
	results := make([][]receipt, streams)
	// ready: every stream has its first event; ended: its terminal one.
	var ready, ended, wg sync.WaitGroup
	var failed atomic.Bool
	// A stream reads past its terminal event (its clean end) once every
	// stream has that event: as a chat ends for all its streams at once,
	// the reader's work of closing them is not in the latencies of the
	// last events.
	release := make(chan struct{})
	ready.Add(streams)
	ended.Add(streams)
	for v := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			first, last := true, false
			defer func() {
				if first {
					ready.Done()
				}
				if !last {
					ended.Done()
				}
			}()
			fail := func(err any) {
				fmt.Fprintln(os.Stderr, "stream:", err)
				failed.Store(true)
			}
			resp, err := client.Get(url)
			if err != nil {
				fail(err)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				fail(resp.Status)
				return
			}
			// Lines are read in place: the reader's own cost is in the
			// latencies measured, on the same two cores.
			r := bufio.NewReaderSize(resp.Body, 64<<10)
			for {
				line, err := r.ReadSlice('\n')
				if err == bufio.ErrBufferFull {
					continue // the rest of a long data line
				}
				if err == io.EOF {
					if !last {
						fail("the stream ended before the chat's terminal event")
					}
					return
				}
				if err != nil {
					fail(err)
					return
				}
				line = bytes.TrimSpace(line)
				if seq, ok := bytes.CutPrefix(line, []byte("id: ")); ok {
					n, _ := strconv.ParseInt(string(seq), 10, 64)
					results[v] = append(results[v], receipt{n, time.Now().UnixNano()})
					if first {
						first = false
						ready.Done()
					}
				} else if name, ok := bytes.CutPrefix(line, []byte("event: ")); ok && !last && chat.EventType(name).Terminal() {
					last = true
					ended.Done()
					<-release
				}
			}
		}()
	}
	ready.Wait()
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "ready")
	if err := out.Flush(); err != nil {
		return 2
	}
	ended.Wait()
	close(release)
	wg.Wait()
	for _, rs := range results {
		for _, g := range rs {
			fmt.Fprintln(out, g.seq, g.at)
		}
	}
	if err := out.Flush(); err != nil || failed.Load() {
		return 1
	}
	return 0
}

// TestStreamsAreServedFromMemory: SSE streams (the real handler) following
// a chat whose turns are appended in two commits close together (the
// selection alone, then the reply) get every event once, in order, and
// the store is not read for them: the events come from memory. A stream
// often reads both commits on the first wake-up; the second then
// finds nothing new, and must not ask the store whether the chat was
// erased (a wake-up from this replica's own append says it was not).
func TestStreamsAreServedFromMemory(t *testing.T) {
	for name, db := range map[string]chat.Store{"sqlite": runtimetest.OpenSQLite(t), "postgres": runtimetest.OpenPostgres(t)} {
		t.Run(name, func(t *testing.T) {
			cs := runtimetest.Counting(db)
			// No selection is held: every turn is two appends.
			rt := runtimetest.New(t, cs, func(c *runtime.Config) { c.HoldSelection = -1 })
			ts := streamServer(t, rt)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 100}}
			t.Cleanup(client.CloseIdleConnections)
			// 2.5 s: time for the streams to open on a busy machine.
			c, _, err := rt.Create(t.Context(), &chat.CreateParams{Tenant: DefaultTenant, Body: []byte(runtimetest.TurnsSpec(10, 2500, 0))})
			if err != nil {
				t.Fatal(err)
			}
			const streams = 100
			var wg, ready sync.WaitGroup
			ready.Add(streams)
			seen := make([][]int64, streams)
			for i := range streams {
				wg.Add(1)
				go func() {
					defer wg.Done()
					first := true
					defer func() {
						if first {
							ready.Done()
						}
					}()
					resp, err := client.Get(ts.URL + "/v1/chats/" + c.ID + "/events")
					if err != nil {
						t.Error(err)
						return
					}
					defer resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Errorf("stream: %s", resp.Status)
						return
					}
					sc := bufio.NewScanner(resp.Body)
					for sc.Scan() {
						if seq, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
							n, _ := strconv.ParseInt(seq, 10, 64)
							seen[i] = append(seen[i], n)
							if first {
								first = false
								ready.Done()
							}
						}
					}
					if err := sc.Err(); err != nil {
						t.Error(err)
					}
				}()
			}
			ready.Wait()
			reads, appends := cs.Reads.Load(), cs.Appends.Load()
			wg.Wait()
			reads, appends = cs.Reads.Load()-reads, cs.Appends.Load()-appends
			end, err := rt.Get(t.Context(), DefaultTenant, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			runtimetest.CheckSeqs(t, seen, end.LastSeq)
			// Every wake-up comes from this replica's own appends, whose
			// events the streams take from memory: none needs the store.
			if appends < 10 || reads > 2 {
				t.Fatalf("%d store reads for %d appends and %d streams: not served from memory", reads, appends, streams)
			}
			t.Logf("%d store reads for %d appends and %d streams", reads, appends, streams)
		})
	}
}
