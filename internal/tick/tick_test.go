package tick_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/tick"
)

// TestEveryCallsUntilTheContextEnds: f runs again and again; once ctx has
// ended, Every returns and f is not called again.
func TestEveryCallsUntilTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	calls := make(chan struct{})
	var after atomic.Int64
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		tick.Every(ctx, time.Millisecond, func(fctx context.Context) {
			if fctx.Err() != nil {
				after.Add(1)
				return
			}
			select {
			case calls <- struct{}{}:
			case <-fctx.Done():
			}
		})
	}()
	for range 3 {
		select {
		case <-calls:
		case <-time.After(10 * time.Second):
			t.Fatal("f was not called three times")
		}
	}
	cancel()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return after its context ended")
	}
	if n := after.Load(); n != 0 {
		t.Fatalf("f was called %d times with an ended context", n)
	}
}

// TestEveryWaitsOneIntervalFirst: nothing runs before the first interval
// has passed.
func TestEveryWaitsOneIntervalFirst(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	start := time.Now()
	first := make(chan time.Duration, 1)
	go tick.Every(ctx, 50*time.Millisecond, func(context.Context) {
		select {
		case first <- time.Since(start):
		default:
		}
		cancel()
	})
	select {
	case d := <-first:
		if d < 50*time.Millisecond {
			t.Fatalf("first call after %v, before the interval", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("f was never called")
	}
}
