package runtime_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/runtime/runtimetest"

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
	db := runtimetest.OpenSQLite(t)
	paused := &pausedReads{Store: db, read: make(chan struct{}), release: make(chan struct{})}
	rt := runtimetest.New(t, paused)
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

// A reader woken by another replica's append while another reader of the
// same replica is catching up from the store must not take the tail as it
// was for current: it waits for that read, and gets the new events. (It
// used to find the tail marked fresh as soon as the other read began, get
// nothing, and wait for an append that, at the chat's end, never came.)
func TestAReaderWaitsForACatchUpInProgress(t *testing.T) {
	db := runtimetest.OpenPostgres(t)
	rt1 := runtimetest.New(t, db)
	paused := &pausedReads{Store: db, read: make(chan struct{}), release: make(chan struct{})}
	// The second replica hears the first's appends through the store.
	type pausedShared struct {
		*pausedReads
		chat.Notifier
	}
	rt2 := runtimetest.New(t, pausedShared{paused, db.(chat.Notifier)}, func(c *runtime.Config) { c.PollInterval = time.Hour }) // it only reads
	c := create(t, rt1, string(twoAgentSpec(2, 1500, "")))
	sigA, doneA := rt2.Subscribe(c.ID)
	defer doneA()
	sigB, doneB := rt2.Subscribe(c.ID)
	defer doneB()
	read := func(after int64) []chat.Event {
		evs, err := rt2.Events(context.Background(), "", c.ID, after, 100)
		if err != nil {
			t.Error(err)
		}
		return evs
	}
	// Both readers have read the chat so far (the tail is filled and their
	// tenant verified).
	evs := read(0)
	last := evs[len(evs)-1].Seq
	// A wake-up of an append the reads above took in is left in the
	// channels (a loaded machine may append while the test subscribes):
	// drop it, and read again until nothing is new, so that the wake-ups
	// waited for below are of an append made after the store was paused.
	for {
		for _, sig := range []<-chan runtime.Wake{sigA, sigB} {
			select {
			case <-sig:
			default:
			}
		}
		more := read(last)
		if len(more) == 0 {
			break
		}
		last = more[len(more)-1].Seq
	}
	paused.mu.Lock()
	paused.armed = c.ID
	paused.mu.Unlock()
	// The first reply is committed on the other replica: both are woken.
	for _, sig := range []<-chan runtime.Wake{sigA, sigB} {
		select {
		case <-sig:
		case <-time.After(10 * time.Second):
			t.Fatal("no wake-up for the other replica's append")
		}
	}
	// A wake-up may still be the late notification of an append read
	// above (a notification can come after a read that already saw its
	// append): wait until the store holds the next append, so that the
	// reads below find it whichever notification woke them.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		next, err := db.ListEvents(context.Background(), &chat.ListEventsParams{ChatID: c.ID, After: last, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(next) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no append after seq %d", last)
		}
	}
	// A catches up from the store; its read is held back.
	gotA := make(chan []chat.Event, 1)
	go func() { gotA <- read(last) }()
	select {
	case <-paused.read:
	case <-time.After(10 * time.Second):
		t.Fatal("the catch-up did not read the store")
	}
	gotB := make(chan []chat.Event, 1)
	go func() { gotB <- read(last) }()
	select {
	case evs := <-gotB:
		if len(evs) == 0 {
			t.Fatal("B took the tail as it was for current and got nothing, while A's read was under way")
		}
	case <-time.After(300 * time.Millisecond):
		// B waits for A's read, as it should.
	}
	close(paused.release)
	for name, got := range map[string]chan []chat.Event{"A": gotA, "B": gotB} {
		select {
		case evs := <-got:
			if len(evs) == 0 || evs[0].Seq != last+1 {
				t.Fatalf("%s read %d events after seq %d", name, len(evs), last)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s's read did not return", name)
		}
	}
}
