package chat_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
)

// pausedReads is the real store, whose first log read of an armed chat
// returns only once the test lets it: what was read is held back while
// the chat goes on committing.
type pausedReads struct {
	chat.Store
	mu      sync.Mutex
	armed   string
	heldTo  int64 // the last seq the held read returned
	read    chan struct{}
	release chan struct{}
}

func (p *pausedReads) ListEvents(ctx context.Context, q *chat.ListEventsParams) ([]chat.Event, error) {
	evs, err := p.Store.ListEvents(ctx, q)
	p.mu.Lock()
	hold := p.armed != "" && p.armed == q.ChatID
	if hold {
		p.armed = ""
		if len(evs) > 0 {
			p.heldTo = evs[len(evs)-1].Seq
		}
	}
	p.mu.Unlock()
	if hold {
		close(p.read)
		<-p.release
	}
	return evs, err
}

// A follower that catches up from the store while the chat's last append
// commits still gets that append: the read must not replace what the
// append added to the broker's tail meanwhile.
func TestACatchUpKeepsWhatCommittedWhileItRead(t *testing.T) {
	db := openStore(t)
	paused := &pausedReads{Store: db, read: make(chan struct{}), release: make(chan struct{})}
	rt := newRuntime(t, paused)
	c, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: twoAgentSpec(1, 500, "")})
	if err != nil {
		t.Fatal(err)
	}
	sig, done := rt.Subscribe(c.ID)
	defer done()
	paused.mu.Lock()
	paused.armed = c.ID
	paused.mu.Unlock()
	first := make(chan []chat.Event, 1)
	go func() {
		evs, err := rt.Events(context.Background(), "", c.ID, 0, 100)
		if err != nil {
			t.Error(err)
		}
		first <- evs
	}()
	<-paused.read
	// The read is taken; the chat's one turn (selection, reply, stop)
	// commits while it is held back.
	end := waitTerminal(t, rt, c.ID, 10*time.Second)
	close(paused.release)
	evs := <-first
	if paused.heldTo >= end.LastSeq {
		t.Fatalf("the held read already saw the end (seq %d of %d); the test proves nothing", paused.heldTo, end.LastSeq)
	}
	after := evs[len(evs)-1].Seq
	for deadline := time.After(5 * time.Second); after < end.LastSeq; {
		more, err := rt.Events(context.Background(), "", c.ID, after, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(more) > 0 {
			after = more[len(more)-1].Seq
			continue
		}
		select {
		case <-sig:
		case <-deadline:
			t.Fatalf("follower stuck at seq %d; the chat ended at seq %d", after, end.LastSeq)
		}
	}
}
