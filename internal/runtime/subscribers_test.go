package runtime_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/runtime/runtimetest"
)

// TestSubscribersAreServedFromMemory: 200 subscribers following one chat,
// as SSE streams do (subscribe, then read after every signal), get every
// event once and in order, while the store is read about once per append
// for all of them together, not once per subscriber.
func TestSubscribersAreServedFromMemory(t *testing.T) {
	for name, db := range map[string]chat.Store{"sqlite": runtimetest.OpenSQLite(t), "postgres": runtimetest.OpenPostgres(t)} {
		t.Run(name, func(t *testing.T) {
			cs := runtimetest.Counting(db)
			rt := runtimetest.New(t, cs)
			c := create(t, rt, runtimetest.TurnsSpec(10, 2500, 10)) // 2.5 s: time for 200 first reads on a busy machine
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
			reads, appends := cs.Reads.Load(), cs.Appends.Load()
			wg.Wait()
			reads, appends = cs.Reads.Load()-reads, cs.Appends.Load()-appends
			runtimetest.CheckSeqs(t, seen, 0)
			// Some appends may come before every subscriber is ready on a
			// loaded machine; what is measured must still be a few.
			if appends < 5 || float64(reads)/float64(appends) > 3 {
				t.Fatalf("%d store reads for %d appends and %d subscribers: not served from memory", reads, appends, subscribers)
			}
			t.Logf("%d store reads for %d appends and %d subscribers", reads, appends, subscribers)
		})
	}
}
