package runtime_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/runtime/runtimetest"
	"github.com/agentd/agentd/internal/store"

	"github.com/agentd/agentd/internal/chat"
)

// BenchmarkChatThroughput runs N concurrent replay chats of 20 turns each to
// completion and reports messages appended per second across all of them
// (each turn also appends a speaker.selected event, so events/s is twice
// that, plus the lifecycle events).
func BenchmarkChatThroughput(b *testing.B) {
	const rounds = 20
	sp := twoAgentSpec(rounds, 0, "")
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, n := range []int{1, 32, 256} {
			b.Run(fmt.Sprintf("%s/chats=%d", backend, n), func(b *testing.B) {
				db := runtimetest.Open(b, backend)
				rt := runtimetest.New(b, db, func(c *runtime.Config) { c.LeaseDuration = 30 * time.Second })
				messages := 0
				b.ResetTimer()
				start := time.Now()
				for range b.N {
					var wg sync.WaitGroup
					for range n {
						c, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: sp})
						if err != nil {
							b.Fatal(err)
						}
						wg.Add(1)
						go func() {
							defer wg.Done()
							waitTerminal(b, rt, c.ID, 5*time.Minute)
						}()
					}
					wg.Wait()
					messages += n * rounds
				}
				b.ReportMetric(float64(messages)/time.Since(start).Seconds(), "msgs/s")
			})
		}
	}
}

// BenchmarkTurnCycle keeps 32 chats of instant replay models in flight (each
// done chat replaced by a new one, as bench-compare's clients do) for a few
// seconds after a warm-up, reports messages per second, and logs where a
// turn's time goes: every worker's turn cycle timed at each hand-off (see
// cycleRecorder), from the publication of one append to that of the next.
// On Postgres it runs with one group-commit batch in flight and with two.
func BenchmarkTurnCycle(b *testing.B) {
	for _, c := range []struct {
		backend  string
		inFlight int
	}{{"sqlite", 0}, {"postgres", 1}, {"postgres", 2}} {
		name := c.backend
		if c.inFlight > 0 {
			name += fmt.Sprintf("/inflight=%d", c.inFlight)
		}
		b.Run(name+"/chats=32", func(b *testing.B) {
			for range b.N {
				turnCycles(b, runtimetest.OpenWith(b, c.backend, store.Config{CommitsInFlight: c.inFlight}), 32)
			}
		})
	}
}

// turnCycles is one round of BenchmarkTurnCycle on db.
func turnCycles(b *testing.B, db store.DB, chats int) {
	const (
		rounds = 20
		warmup = time.Second
		steady = 3 * time.Second
	)
	sp := twoAgentSpec(rounds, 0, "")
	models, err := llm.New(llm.Config{})
	if err != nil {
		b.Fatal(err)
	}
	rt, err := runtime.New(runtime.Config{Store: db, Models: models, LeaseDuration: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	cycles := runtime.RecordTurnCycles(rt)
	if err := rt.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	var (
		done atomic.Bool
		wg   sync.WaitGroup
	)
	for range chats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				c, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: sp})
				if err != nil {
					b.Error(err)
					return
				}
				waitEnded(b, rt, c.ID)
			}
		}()
	}
	time.Sleep(warmup)
	cycles.Reset()
	start := time.Now()
	time.Sleep(steady)
	cycles.Pause()
	elapsed := time.Since(start)
	done.Store(true)
	wg.Wait()
	stopRuntime(b, rt)
	b.ReportMetric(float64(cycles.Turns())/elapsed.Seconds(), "msgs/s")
	b.Logf("%s, %d chats in flight, %s", db.Kind(), chats, strings.TrimSuffix(cycles.Report(), "\n"))
}

// waitEnded waits for the chat's end as the server's waiting requests do:
// from the wake-ups of this replica's appends, reading the store only when
// a wake-up does not say (waitTerminal reads it at every wake-up, a query
// per turn that the benchmark would count as the runtime's).
func waitEnded(b *testing.B, rt *runtime.Runtime, id string) {
	wk, wakes, done := rt.Follow(id)
	defer done()
	deadline := time.After(time.Minute)
	for {
		if wk.Known && wk.Progress.Status.Terminal() {
			return
		}
		if !wk.Known {
			c, err := rt.Get(context.Background(), "", id)
			if err != nil {
				b.Fatal(err)
			}
			if c.Status.Terminal() {
				return
			}
		}
		select {
		case wk = <-wakes:
		case <-deadline:
			b.Fatalf("chat %s did not end within a minute", id)
		}
	}
}

// BenchmarkMemoryPerRunningChat starts 256 chats whose first model call
// waits a minute, so each holds a worker mid-turn, and reports the heap and
// goroutines they add per chat.
func BenchmarkMemoryPerRunningChat(b *testing.B) {
	const n = 256
	for range b.N {
		db := runtimetest.OpenSQLite(b)
		rt := runtimetest.New(b, db, func(c *runtime.Config) { c.LeaseDuration = 30 * time.Second })
		before, stacksBefore := heap()
		goroutines := goruntime.NumGoroutine()
		ids := startWaitingChats(b, rt, db, n, "")
		after, stacksAfter := heap()
		b.ReportMetric(float64(after-before)/n, "heap-bytes/chat")
		b.ReportMetric(float64(stacksAfter-stacksBefore)/n, "stack-bytes/chat")
		b.ReportMetric(float64(goruntime.NumGoroutine()-goroutines)/n, "goroutines/chat")
		for _, id := range ids {
			if _, _, err := rt.Cancel(context.Background(), "", id); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// startWaitingChats creates n chats whose first model call takes a minute
// and returns once every one of them is in it.
func startWaitingChats(tb testing.TB, rt *runtime.Runtime, db chat.Store, n int, extra string) []string {
	sp := twoAgentSpec(2, 60000, extra)
	var ids []string
	for range n {
		c, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: sp})
		if err != nil {
			tb.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	for _, id := range ids { // every chat is in its first model call
		sig, done := rt.Subscribe(id)
		for {
			evs, err := db.ListEvents(context.Background(), &chat.ListEventsParams{ChatID: id, Limit: 100})
			if err != nil {
				tb.Fatal(err)
			}
			if evs[len(evs)-1].Type == chat.EventSpeakerSelected {
				break
			}
			<-sig
		}
		done()
	}
	return ids
}

// heap is the live heap and the stacks in use after two collections: the
// second lets the collector shrink the stacks of goroutines that waited
// through the first.
func heap() (live, stacks int64) {
	goruntime.GC()
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return int64(m.HeapAlloc), int64(m.StackInuse)
}
