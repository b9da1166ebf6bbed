package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
)

// followSource is a chat's log in memory with its wake-ups and deltas.
type followSource struct {
	mu     sync.Mutex
	log    []chat.Event
	signal chan Wake
	deltas *DeltaQueue
}

func newFollowSource() *followSource {
	return &followSource{signal: make(chan Wake, 1), deltas: NewDeltaQueue()}
}

func (s *followSource) Events(_ context.Context, _, _ string, after int64, limit int) ([]chat.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []chat.Event
	for _, e := range s.log {
		if e.Seq > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func (s *followSource) Stream(string) (<-chan Wake, *DeltaQueue, func()) {
	return s.signal, s.deltas, func() {}
}

// commit appends an event and wakes the follower.
func (s *followSource) commit(e chat.Event) {
	s.mu.Lock()
	s.log = append(s.log, e)
	s.mu.Unlock()
	select {
	case s.signal <- Wake{}:
	default:
	}
}

func TestFollowTakesDeltasBeforeTheirMessage(t *testing.T) {
	src := newFollowSource()
	for seq := int64(1); seq <= followPage+3; seq++ { // more than a page before the follow starts
		src.log = append(src.log, chat.Event{Seq: seq, Type: chat.EventSpeakerSelected})
	}
	var got []string
	f := &Follow{ChatID: "c", After: 2, Wait: time.Minute,
		Event: func(e chat.Event) (bool, error) {
			if e.Type == chat.EventMessage {
				got = append(got, "message:"+e.Content)
			}
			return e.Type.Terminal(), nil
		},
		Delta: func(d chat.Delta) error { got = append(got, "delta:"+d.Content); return nil }}
	done := make(chan error, 1)
	go func() { done <- f.Run(context.Background(), src) }()
	// The deltas are queued, then the message committed with one wake-up:
	// the deltas come first.
	last := int64(followPage + 3)
	src.deltas.Push(chat.Delta{Name: "a", Content: "He", AfterSeq: last})
	src.deltas.Push(chat.Delta{Name: "a", Content: "llo", AfterSeq: last})
	src.commit(chat.Event{Seq: last + 1, Type: chat.EventMessage, Content: "Hello"})
	src.commit(chat.Event{Seq: last + 2, Type: chat.EventChatCompleted})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The queue may have joined the fragments: what matters is that they
	// are all there, before the message.
	if len(got) == 0 {
		t.Fatal("nothing followed")
	}
	deltas := ""
	for _, g := range got[:len(got)-1] {
		deltas += strings.TrimPrefix(g, "delta:")
	}
	if deltas != "Hello" || got[len(got)-1] != "message:Hello" {
		t.Errorf("followed %v, want the deltas before the message", got)
	}
}

// The next reply's first tokens may be queued before the follower has
// read the message before them (a busy machine): they wait for the events
// they follow, and a reply's deltas keep their order while they wait.
func TestFollowHoldsADeltaUntilTheEventsBeforeIt(t *testing.T) {
	src := newFollowSource()
	src.log = append(src.log,
		chat.Event{Seq: 1, Type: chat.EventMessage, Name: "user", Content: "task"},
		chat.Event{Seq: 2, Type: chat.EventSpeakerSelected},
		chat.Event{Seq: 3, Type: chat.EventMessage, Name: "poet", Content: "Logs scroll."})
	// The follower takes these deltas before it reads any event: the
	// critic's reply began after seq 4, and a fragment of the poet's
	// after seq 2. Each goes out right after the event it follows.
	src.deltas.Push(chat.Delta{Name: "critic", Content: "Sh", AfterSeq: 4})
	src.deltas.Push(chat.Delta{Name: "poet", Content: "!", AfterSeq: 2})
	src.deltas.Push(chat.Delta{Name: "critic", Content: "ort", AfterSeq: 4})
	src.log = append(src.log, chat.Event{Seq: 4, Type: chat.EventSpeakerSelected})
	var got []string
	f := &Follow{ChatID: "c", Wait: time.Minute,
		Event: func(e chat.Event) (bool, error) {
			got = append(got, fmt.Sprintf("%d:%s", e.Seq, e.Content))
			return e.Type.Terminal(), nil
		},
		Delta: func(d chat.Delta) error { got = append(got, d.Name+"+"+d.Content); return nil }}
	done := make(chan error, 1)
	go func() { done <- f.Run(context.Background(), src) }()
	src.commit(chat.Event{Seq: 5, Type: chat.EventMessage, Name: "critic", Content: "Short."})
	src.commit(chat.Event{Seq: 6, Type: chat.EventChatCompleted})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := "1:task 2: poet+! 3:Logs scroll. 4: critic+Sh critic+ort 5:Short. 6:"
	if g := strings.Join(got, " "); g != want {
		t.Errorf("followed\n%s\nwant\n%s", g, want)
	}
}

func TestFollowEnds(t *testing.T) {
	never := func(chat.Event) (bool, error) { return false, nil }
	none := func(chat.Delta) error { return nil }

	src := newFollowSource()
	f := &Follow{ChatID: "c", Wait: 20 * time.Millisecond, Event: never, Delta: none}
	if err := f.Run(context.Background(), src); !errors.Is(err, ErrFollowWait) {
		t.Errorf("past the wait: %v, want ErrFollowWait", err)
	}

	src = newFollowSource()
	close(src.signal)
	f = &Follow{ChatID: "c", Wait: time.Minute, Event: never, Delta: none}
	if err := f.Run(context.Background(), src); !errors.Is(err, ErrStopped) {
		t.Errorf("a closed subscription: %v, want ErrStopped", err)
	}

	// An idle stream's heartbeat failing (the client went away) ends it.
	gone := errors.New("client gone")
	f = &Follow{ChatID: "c", Wait: time.Minute, Heartbeat: 5 * time.Millisecond, Event: never, Delta: none,
		Idle: func() error { return gone }}
	if err := f.Run(context.Background(), newFollowSource()); !errors.Is(err, gone) {
		t.Errorf("a failed heartbeat: %v", err)
	}
}

// TestServerEnded: a request's context ended by the server's shutdown
// (its base context cancelled with ErrStopped) is told from one whose
// client went away, through the contexts derived from it.
func TestServerEnded(t *testing.T) {
	t.Parallel()
	base, end := context.WithCancelCause(context.Background())
	req, cancelReq := context.WithCancel(base)
	defer cancelReq()
	if ServerEnded(req) {
		t.Error("a live request counts as ended by the server")
	}
	gone, leave := context.WithCancel(base)
	leave()
	if ServerEnded(gone) {
		t.Error("a request whose client went away counts as ended by the server")
	}
	end(ErrStopped)
	if !ServerEnded(req) {
		t.Error("a request of a server shutting down does not count as ended by it")
	}
}
