package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// idleStreams is the figure of many event streams open on chats where
// nothing happens.
type idleStreams struct {
	streams, chats int
	footprint
}

func (m idleStreams) print(w io.Writer) {
	fmt.Fprintf(w, "\nidle streams: %d SSE streams open on %d chats that wait on a slow model, on one agentd (stream caps lifted)\n", m.streams, m.chats)
	m.footprint.print(w, m.streams, "stream")
}

// idlePhase opens n event streams, a hundred per chat, on chats whose first
// model call takes ten minutes, and measures what they add to agentd once
// every stream has read the chat's events so far and waits.
func idlePhase(ctx context.Context, ag *agentdProc, n int) (idleStreams, error) {
	chats := max(1, (n+99)/100)
	spec := chatSpec(3, 600_000)
	var ids []string
	for range chats {
		id, _, err := ag.create(ctx, spec, 0)
		if err != nil {
			return idleStreams{}, err
		}
		ids = append(ids, id)
	}
	if err := ag.quiet(ctx, func(m map[string]float64) bool { return m["agentd_workers_active"] >= float64(chats) }); err != nil {
		return idleStreams{}, err
	}
	sctx, closeStreams := context.WithCancel(ctx)
	defer closeStreams()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1, DisableKeepAlives: true}}
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	open := make(chan struct{}, 64) // streams being opened at once
	f, err := ag.measureFootprint(ctx, func() error {
		for i := range n {
			select {
			case open <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequestWithContext(sctx, http.MethodGet, ag.base+"/v1/chats/"+ids[i%chats]+"/events", nil)
				resp, err := client.Do(req)
				<-open
				if err == nil && resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("GET events: %s", resp.Status)
					resp.Body.Close()
				}
				if err != nil {
					errMu.Lock()
					if first == nil && sctx.Err() == nil {
						first = err
					}
					errMu.Unlock()
					return
				}
				defer resp.Body.Close()
				_, _ = io.Copy(io.Discard, resp.Body) // until the stream is closed
			}()
		}
		// Open streams send a heartbeat every 15 s: n of them are never
		// quite quiet.
		err := ag.quietWithin(ctx, 30*time.Millisecond+time.Duration(n)*5*time.Microsecond,
			func(m map[string]float64) bool { return m["agentd_sse_streams_open"] >= float64(n) })
		errMu.Lock()
		defer errMu.Unlock()
		if first != nil {
			return first
		}
		return err
	})
	if err != nil {
		return idleStreams{}, err
	}
	closeStreams()
	wg.Wait()
	if err := ag.quiet(ctx, func(m map[string]float64) bool { return m["agentd_sse_streams_open"] == 0 }); err != nil {
		return idleStreams{}, err
	}
	return idleStreams{streams: n, chats: chats, footprint: f}, nil
}

// quiet waits until cond holds of agentd's metrics and agentd has gone
// quiet (under 30 ms of CPU in a second).
func (a *agentdProc) quiet(ctx context.Context, cond func(map[string]float64) bool) error {
	return a.quietWithin(ctx, 30*time.Millisecond, cond)
}

// quietWithin waits until cond holds of agentd's metrics and agentd uses
// less than busy of CPU in a second.
func (a *agentdProc) quietWithin(ctx context.Context, busy time.Duration, cond func(map[string]float64) bool) error {
	deadline := time.Now().Add(5 * time.Minute)
	var held bool
	var used time.Duration
	for {
		m, err := a.metrics(ctx)
		if err != nil {
			return err
		}
		c0, _ := cpuOf(a.pid())
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
		c1, _ := cpuOf(a.pid())
		held, used = cond(m), c1-c0
		if held && used < busy {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("agentd did not settle within 5 minutes (condition met: %v; CPU %v in the last second)", held, used)
		}
	}
}
