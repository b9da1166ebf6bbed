package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
)

// BenchmarkAppend measures append throughput with 1, 32 and 256 chats
// appending at once, each from its own goroutine, one message event per
// append (the shape of a chat's log while agents talk). It reports msgs/s
// over all chats; the gap between 1 and 256 chats is what group commit buys.
// newStore must return a fresh store per call.
func BenchmarkAppend(b *testing.B, newStore func(tb testing.TB) chat.Store) {
	for _, chats := range []int{1, 32, 256} {
		b.Run(fmt.Sprintf("chats=%d", chats), func(b *testing.B) { benchmarkAppend(b, newStore, chats, noWebhook) })
	}
	// Every append with a webhook delivery in the outbox (written in the
	// same transaction), then the same while a dispatcher claims and
	// records them as fast as it can: what webhooks cost a chat's appends,
	// and what delivering them adds on top.
	b.Run("chats=32/outbox", func(b *testing.B) { benchmarkAppend(b, newStore, 32, outboxOnly) })
	b.Run("chats=32/outbox+dispatch", func(b *testing.B) { benchmarkAppend(b, newStore, 32, outboxDispatched) })
}

// What a BenchmarkAppend case does with webhooks.
const (
	noWebhook = iota
	outboxOnly
	outboxDispatched
)

// benchmarkAppend is one BenchmarkAppend case: chats appending at once,
// every event with a webhook delivery unless webhook is noWebhook.
func benchmarkAppend(b *testing.B, newStore func(tb testing.TB) chat.Store, chats int, webhook int) {
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
				ev := message(seq, content, base)
				p := &chat.AppendParams{ChatID: id, Events: []chat.Event{ev},
					Update: chat.ChatUpdate{Status: chat.StatusRunning, MessageCount: int(seq) - 1, UpdatedAt: base}}
				if webhook != noWebhook {
					p.Deliveries = deliveries("https://hooks.example.com/bench", ev)
				}
				err := s.Append(context.Background(), p)
				if err != nil {
					errs <- err
					return
				}
				seq++
			}
		}()
	}
	stopDispatch, delivered := make(chan struct{}), make(chan int, 1)
	if webhook == outboxDispatched {
		go dispatch(s, stopDispatch, delivered)
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	if webhook == outboxDispatched {
		close(stopDispatch)
		b.ReportMetric(float64(<-delivered)/b.Elapsed().Seconds(), "delivered/s")
	}
}

// dispatch claims webhook deliveries and records them delivered, as the
// dispatcher does when every receiver answers at once, until stop; it
// sends how many it recorded.
func dispatch(s chat.Store, stop <-chan struct{}, delivered chan<- int) {
	n := 0
	defer func() { delivered <- n }()
	for {
		select {
		case <-stop:
			return
		default:
		}
		now := time.Now()
		claimed, err := s.ClaimDeliveries(context.Background(), &chat.ClaimDeliveriesParams{Now: now, LeaseUntil: now.Add(time.Minute), Limit: 100})
		if err != nil || len(claimed) == 0 {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		for _, cd := range claimed {
			if err := s.FinishDelivery(context.Background(), &chat.FinishDeliveryParams{ChatID: cd.Event.ChatID, Seq: cd.Seq, URL: cd.URL,
				Attempts: cd.Attempts, Status: chat.DeliveryDelivered, LastStatusCode: 204, NextAttemptAt: now, Now: now}); err == nil {
				n++
			}
		}
	}
}
