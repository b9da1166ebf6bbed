package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentd/agentd/internal/chat"
)

// BenchmarkAppend measures append throughput with 1, 32 and 256 chats
// appending at once, each from its own goroutine, one message event per
// append (the shape of a chat's log while agents talk). It reports msgs/s
// over all chats; the gap between 1 and 256 chats is what group commit buys.
// newStore must return a fresh store per call.
func BenchmarkAppend(b *testing.B, newStore func(tb testing.TB) chat.Store) {
	for _, chats := range []int{1, 32, 256} {
		b.Run(fmt.Sprintf("chats=%d", chats), func(b *testing.B) {
			s := newStore(b)
			ids := make([]string, chats)
			for i := range ids {
				c, _, err := s.CreateChat(b.Context(), createParams("bench", base))
				if err != nil {
					b.Fatal(err)
				}
				ids[i] = c.ID
			}
			content := "The quick brown fox jumps over the lazy dog. " +
				"A reply of a few hundred bytes is typical of an agent's turn; this one is about that long. " +
				"The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog."
			var (
				left = int64(b.N) // appends still to hand out
				wg   sync.WaitGroup
				errs = make(chan error, chats)
			)
			b.ResetTimer()
			for _, id := range ids {
				wg.Add(1)
				go func() {
					defer wg.Done()
					seq := int64(3) // after createParams' two events
					for atomic.AddInt64(&left, -1) >= 0 {
						err := s.Append(context.Background(), &chat.AppendParams{ChatID: id,
							Events: []chat.Event{message(seq, content, base)},
							Update: chat.ChatUpdate{Status: chat.StatusRunning, MessageCount: int(seq) - 1, UpdatedAt: base}})
						if err != nil {
							errs <- err
							return
						}
						seq++
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
