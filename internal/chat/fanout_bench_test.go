package chat_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/server"
)

// countingStore is the real store; it counts the reads that serve streams
// and notes when each seq was confirmed.
type countingStore struct {
	chat.Store
	reads, appends atomic.Int64
	mu             sync.Mutex
	committed      map[int64]time.Time
	// messages are the times message events were confirmed, in order.
	messages []time.Time
}

func (s *countingStore) ListEvents(ctx context.Context, p *chat.ListEventsParams) ([]chat.Event, error) {
	s.reads.Add(1)
	return s.Store.ListEvents(ctx, p)
}

func (s *countingStore) GetChat(ctx context.Context, tenant, id string) (*chat.Chat, error) {
	s.reads.Add(1)
	return s.Store.GetChat(ctx, tenant, id)
}

func (s *countingStore) Append(ctx context.Context, p *chat.AppendParams) error {
	err := s.Store.Append(ctx, p)
	if err == nil {
		now := time.Now()
		s.appends.Add(1)
		s.mu.Lock()
		for _, e := range p.Events {
			s.committed[e.Seq] = now
			if e.Type == chat.EventMessage {
				s.messages = append(s.messages, now)
			}
		}
		s.mu.Unlock()
	}
	return err
}

// BenchmarkSSEFanOut: 1,000 SSE streams (the real HTTP handler) follow one
// chat on Postgres. It reports how long after its append was confirmed an
// event reached the streams (p50, p99), how many store reads each append
// cost, all streams together (committed events go to local subscribers
// from memory, so that is about one, not one per stream), and the chat's
// own pace: the median time between its messages, each a 20 ms model call
// and an append.
func BenchmarkSSEFanOut(b *testing.B) {
	const viewers = 1000
	pg := openBackend(b, "postgres")
	cs := &countingStore{Store: pg, committed: map[int64]time.Time{}}
	rt := newRuntime(b, cs, func(c *chat.RuntimeConfig) { c.LeaseDuration = 30 * time.Second })
	// One address opens every stream: the per-key and total caps on
	// streams, and the rate limit, are lifted for the benchmark.
	srv, err := server.New(server.Config{Guard: server.Guard{RateLimit: -1, MaxStreams: -1, MaxStreamsPerKey: -1}}, rt, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	b.Cleanup(ts.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: viewers, MaxConnsPerHost: 0}}
	b.Cleanup(client.CloseIdleConnections)

	for range b.N {
		// The first reply comes after the streams had time to open; then
		// 30 turns follow 20 ms apart. Only events confirmed after every
		// stream was open are measured.
		responses := []string{`{"content": "turn 1", "delay_ms": 4000}`}
		for i := 2; i <= 30; i++ {
			responses = append(responses, fmt.Sprintf(`{"content": "turn %d", "delay_ms": 20}`, i))
		}
		sp := fmt.Sprintf(`{"task": "go", "max_round": 30, "agents": [{"name": "a", "type": "assistant",
			"model": {"provider": "replay", "responses": [%s]}}]}`, strings.Join(responses, ","))
		c, _, err := rt.Create(context.Background(), &chat.CreateParams{Tenant: server.DefaultTenant, Body: []byte(sp)})
		if err != nil {
			b.Fatal(err)
		}
		type got struct {
			seq int64
			at  time.Time
		}
		results := make([][]got, viewers)
		var ready, wg sync.WaitGroup
		ready.Add(viewers)
		for v := range viewers {
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
					b.Error(err)
					return
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("stream: %s", resp.Status)
					return
				}
				// The client reads lines in place: its own cost is in the
				// latencies measured, on the same two cores.
				r := bufio.NewReaderSize(resp.Body, 64<<10)
				for {
					line, err := r.ReadSlice('\n')
					if err == bufio.ErrBufferFull {
						continue // the rest of a long data line
					}
					if err == io.EOF {
						return
					}
					if err != nil {
						b.Error(err)
						return
					}
					if seq, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("id: ")); ok {
						n, _ := strconv.ParseInt(string(seq), 10, 64)
						results[v] = append(results[v], got{n, time.Now()})
						if first {
							first = false
							ready.Done()
						}
					}
				}
			}()
		}
		ready.Wait()
		readsBefore, appendsBefore := cs.reads.Load(), cs.appends.Load()
		start := time.Now()
		wg.Wait() // every stream ends after the chat's terminal event
		reads, appends := cs.reads.Load()-readsBefore, cs.appends.Load()-appendsBefore
		var lat, turns []time.Duration
		cs.mu.Lock()
		for i := 1; i < len(cs.messages); i++ {
			if cs.messages[i-1].After(start) {
				turns = append(turns, cs.messages[i].Sub(cs.messages[i-1]))
			}
		}
		for _, rs := range results {
			for _, g := range rs {
				if at, ok := cs.committed[g.seq]; ok && at.After(start) {
					lat = append(lat, max(g.at.Sub(at), 0))
				}
			}
		}
		cs.mu.Unlock()
		if len(lat) == 0 || appends == 0 || len(turns) == 0 {
			b.Fatalf("no events measured (%d appends)", appends)
		}
		slices.Sort(lat)
		slices.Sort(turns)
		p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
		b.ReportMetric(float64(p(0.50).Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(p(0.99).Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(reads)/float64(appends), "reads/append")
		// The chat's own pace: a turn is a 20 ms model call and its append.
		turn := turns[len(turns)/2]
		b.ReportMetric(float64(turn.Microseconds())/1000, "turn-ms")
		b.Logf("%d streams, %d appends, %d deliveries: p50 %v, p99 %v; %d store reads (%.2f per append); a turn took %v (median; its model call 20ms)",
			viewers, appends, len(lat), p(0.5), p(0.99), reads, float64(reads)/float64(appends), turn)
	}
}

// TestSubscribersAreServedFromMemory: 200 subscribers following one chat,
// as SSE streams do (subscribe, then read after every signal), get every
// event once and in order, while the store is read about once per append
// for all of them together, not once per subscriber.
func TestSubscribersAreServedFromMemory(t *testing.T) {
	for name, db := range map[string]chat.Store{"sqlite": openStore(t), "postgres": openPostgres(t)} {
		t.Run(name, func(t *testing.T) {
			cs := &countingStore{Store: db, committed: map[int64]time.Time{}}
			rt := newRuntime(t, cs)
			responses := []string{`{"content": "turn 1", "delay_ms": 2500}`} // time for 200 first reads on a busy machine
			for i := 2; i <= 10; i++ {
				responses = append(responses, fmt.Sprintf(`{"content": "turn %d", "delay_ms": 10}`, i))
			}
			c := create(t, rt, fmt.Sprintf(`{"task": "go", "max_round": 10, "agents": [{"name": "a", "type": "assistant",
				"model": {"provider": "replay", "responses": [%s]}}]}`, strings.Join(responses, ",")))
			const subscribers = 200
			var wg, ready sync.WaitGroup
			ready.Add(subscribers)
			seen := make([][]int64, subscribers)
			for i := range subscribers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sig, done := rt.Subscribe(c.ID)
					defer done()
					var after int64
					for first := true; ; first = false {
						evs, err := rt.Events(context.Background(), "", c.ID, after, 200)
						if err != nil {
							t.Error(err)
							return
						}
						for _, e := range evs {
							seen[i] = append(seen[i], e.Seq)
							after = e.Seq
							if e.Type.Terminal() {
								if first {
									ready.Done()
								}
								return
							}
						}
						if first {
							ready.Done()
						}
						select {
						case <-sig:
						case <-time.After(10 * time.Second):
							t.Error("no signal within 10s")
							return
						}
					}
				}()
			}
			ready.Wait()
			reads, appends := cs.reads.Load(), cs.appends.Load()
			wg.Wait()
			reads, appends = cs.reads.Load()-reads, cs.appends.Load()-appends
			for i, s := range seen {
				for j := range s {
					if s[j] != int64(j+1) {
						t.Fatalf("subscriber %d saw seqs %v", i, s)
					}
				}
			}
			// Some appends may come before every subscriber is ready on a
			// loaded machine; what is measured must still be a few.
			if appends < 5 || float64(reads)/float64(appends) > 3 {
				t.Fatalf("%d store reads for %d appends and %d subscribers: not served from memory", reads, appends, subscribers)
			}
			t.Logf("%d store reads for %d appends and %d subscribers", reads, appends, subscribers)
		})
	}
}
