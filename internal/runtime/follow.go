package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentd/agentd/internal/chat"
)

// Follow is how the protocol front-ends (internal/openaiapi, internal/agui)
// follow one run of a chat: its committed events and the deltas of the
// replies in progress, in the order a client must see them. Deltas are
// taken before the events a wake-up announces: a reply's deltas are
// queued before its message is committed. A delta of a reply that began
// after an event not yet handed over (its AfterSeq) waits until that event
// is: on a busy machine the next reply's first tokens can be queued before
// the follower has read the message before it, and a client that makes a
// message of a reply's first delta would show the two the wrong way round.
type Follow struct {
	Tenant, ChatID string
	// After is the seq the events start after.
	After int64
	// Wait bounds the whole follow: past it, Run returns ErrFollowWait.
	Wait time.Duration
	// Heartbeat is the interval of Idle calls while nothing happens (0:
	// none).
	Heartbeat time.Duration
	// Event takes each committed event; done ends the follow.
	Event func(chat.Event) (done bool, err error)
	// Delta takes each delta.
	Delta func(chat.Delta) error
	// Idle is called at each heartbeat.
	Idle func() error
}

// FollowSource is what Follow reads; *Runtime is one.
type FollowSource interface {
	Events(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Event, error)
	Stream(chatID string) (<-chan Wake, *DeltaQueue, func())
}

// Errors of Follow.Run besides the callbacks' and the context's.
var (
	// ErrFollowWait: the run did not end within Follow.Wait.
	ErrFollowWait = errors.New("the wait for the run is over")
	// ErrStopped: the runtime ended the subscription (shutting down).
	ErrStopped = errors.New("the server is shutting down")
)

// ServerEnded reports whether ctx, a request's, ended because the server
// ends its streams as it shuts down (the request's base context cancelled
// with ErrStopped as its cause), not because the client went away: a
// protocol stream then still has a client to tell why it ends, which SSE
// streams that resume by Last-Event-ID need not.
func ServerEnded(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrStopped)
}

// followPage is how many events one read takes.
const followPage = 256

// maxWaitingDeltas bounds the deltas that wait for their events (joined
// when they continue one another, so a handful per reply); past it a
// reply's text comes with its message.
const maxWaitingDeltas = 1024

// Run follows until Event reports the end, the wait passes, a callback
// fails or ctx ends.
func (f *Follow) Run(ctx context.Context, src FollowSource) error {
	signal, deltas, unsubscribe := src.Stream(f.ChatID)
	defer unsubscribe()
	timer := time.NewTimer(f.Wait)
	defer timer.Stop()
	var heartbeat <-chan time.Time
	if f.Heartbeat > 0 && f.Idle != nil {
		t := time.NewTicker(f.Heartbeat)
		defer t.Stop()
		heartbeat = t.C
	}
	after := f.After
	var taken, waiting []chat.Delta
	// release hands over the waiting deltas whose events are out, in
	// their order; it runs after each event, so they go out right after
	// the event they follow.
	release := func() error {
		keep := waiting[:0]
		for _, d := range waiting {
			if d.AfterSeq > after {
				keep = append(keep, d)
				continue
			}
			if err := f.Delta(d); err != nil {
				return err
			}
		}
		clear(waiting[len(keep):])
		waiting = keep
		return nil
	}
	take := func() error {
		taken = deltas.Take(taken[:0])
		for _, d := range taken {
			if d.AfterSeq <= after || len(waiting) < maxWaitingDeltas {
				waiting = JoinDeltas(waiting, d)
			}
		}
		clear(taken)
		return release()
	}
	for read := true; ; {
		if read {
			read = false
			if err := take(); err != nil {
				return err
			}
			for {
				evs, err := src.Events(ctx, f.Tenant, f.ChatID, after, followPage)
				if err != nil {
					return fmt.Errorf("read events of chat %s: %w", f.ChatID, err)
				}
				for _, e := range evs {
					after = e.Seq
					done, err := f.Event(e)
					if err != nil || done {
						return err
					}
					if len(waiting) > 0 {
						if err := release(); err != nil {
							return err
						}
					}
				}
				if len(evs) < followPage {
					break
				}
			}
		}
		select {
		case _, ok := <-signal:
			if !ok {
				return ErrStopped
			}
			read = true
		case <-deltas.Ready():
			if err := take(); err != nil {
				return err
			}
		case <-heartbeat:
			if err := f.Idle(); err != nil {
				return err
			}
		case <-timer.C:
			return ErrFollowWait
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
