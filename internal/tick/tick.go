// Package tick runs the periodic work of agentd's background parts (lease
// renewal, the store probe, the sandbox reaper, the GC tuner) in one way.
package tick

import (
	"context"
	"time"
)

// Every calls f(ctx) every interval until ctx ends, the first time one
// interval after it is called, and returns once ctx has ended (never during
// a call of f). A call that takes longer than the interval is followed by
// the next one at once, and ticks it missed are dropped rather than run
// back to back (time.Ticker keeps one tick).
func Every(ctx context.Context, interval time.Duration, f func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ctx.Err() != nil {
			return
		}
		f(ctx)
	}
}
