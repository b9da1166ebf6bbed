package runtime

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"

	"github.com/prometheus/client_golang/prometheus"
)

// sentDeltas is a DeltaRelay that keeps what it was given to send.
type sentDeltas struct {
	mu     sync.Mutex
	deltas []chat.RelayedDelta
}

func (s *sentDeltas) RelayDelta(_ string, d chat.RelayedDelta) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deltas = append(s.deltas, d)
}

func (s *sentDeltas) RelayFollows(string, []string, bool) {}

func (s *sentDeltas) take() []chat.RelayedDelta {
	s.mu.Lock()
	defer s.mu.Unlock()
	ds := s.deltas
	s.deltas = nil
	return ds
}

// newRelayedBroker is a broker whose relay sends into out, on clock.
func newRelayedBroker(t *testing.T, out chat.DeltaRelay, clock func() time.Time) *broker {
	t.Helper()
	m, err := newMetrics(prometheus.NewRegistry(), nil, time.Second, clock)
	if err != nil {
		t.Fatal(err)
	}
	b := newBroker(nil)
	b.relay = newRelay(out, "self", b, clock, slog.New(slog.DiscardHandler), m)
	return b
}

// A stream on a replica that does not run the chat, which subscribed in
// the middle of a reply, gets the reply from its start: the fragments
// relayed before the replay it asked for are dropped (they continue a
// text it does not have), and a replay that repeats what the stream has
// adds only the rest, without a reset.
func TestAFollowerTakesTheReplyFromItsStart(t *testing.T) {
	b := newRelayedBroker(t, &sentDeltas{}, time.Now)
	const id = "c"
	_, q, stop := b.stream(id)
	defer stop()
	got := func(want ...chat.Delta) {
		t.Helper()
		ds := q.Take(nil)
		if len(ds) != len(want) {
			t.Fatalf("the stream got %+v, want %+v", ds, want)
		}
		for i := range ds {
			if ds[i] != want[i] {
				t.Fatalf("the stream got %+v, want %+v", ds, want)
			}
		}
	}
	piece := func(s string) chat.Delta { return chat.Delta{Name: "a", Content: s, AfterSeq: 2} }
	relayed := func(d chat.Delta, replay bool) {
		b.relay.received("owner", []chat.RelayedDelta{{ChatID: id, Epoch: 1, Delta: d, Replay: replay}})
	}

	relayed(piece("w3 "), false) // the reply's start is not here yet
	got()
	relayed(piece("w0 w1 w2 w3 "), true)
	got(piece("w0 w1 w2 w3 "))
	relayed(piece("w4 "), false)
	got(piece("w4 "))
	relayed(piece("w0 w1 w2 w3 w4 w5 "), true) // asked for by another replica
	got(piece("w5 "))
	relayed(piece("x0 "), true) // a text that is not the stream's
	got(chat.Delta{Name: "a", Reset: true, AfterSeq: 2}, piece("x0 "))
}

// A replica that just started cannot know yet which chats other replicas'
// streams follow: until its listener listened and followGrace passed, the
// deltas of every chat it runs go out (the first as a replay of the reply
// so far), so a chat it takes over at once is typed on the other replicas.
// After that, only followed chats' deltas go out.
func TestAReplicaThatJustStartedRelaysEveryChat(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	out := &sentDeltas{}
	b := newRelayedBroker(t, out, func() time.Time { return now })
	const id = "c"
	tp := b.workerStarted(id, chat.Progress{Status: chat.StatusRunning, LastSeq: 2})
	piece := func(s string) chat.Delta { return chat.Delta{Name: "a", Content: s, AfterSeq: 2} }
	sent := func(want ...chat.RelayedDelta) {
		t.Helper()
		got := out.take()
		if len(got) != len(want) {
			t.Fatalf("relayed %+v, want %+v", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("relayed %+v, want %+v", got, want)
			}
		}
	}

	b.publishDelta(id, tp, 1, piece("x")) // not listening yet
	sent(chat.RelayedDelta{ChatID: id, Epoch: 1, Delta: piece("x"), Replay: true})
	b.relay.listening()
	now = now.Add(followGrace / 2)
	b.publishDelta(id, tp, 1, piece("y"))
	sent(chat.RelayedDelta{ChatID: id, Epoch: 1, Delta: piece("y")})

	now = now.Add(followGrace) // no replica said it follows the chat
	b.publishDelta(id, tp, 1, piece("z"))
	sent()

	b.relay.heard("other", []string{id}, false)
	b.publishDelta(id, tp, 1, piece("w"))
	sent(chat.RelayedDelta{ChatID: id, Epoch: 1, Delta: piece("xyzw"), Replay: true})

	now = now.Add(followTTL) // the other replica's word expired
	b.publishDelta(id, tp, 1, piece("v"))
	sent()

	b.relay.listening() // the listener lost its connection and listens again
	b.publishDelta(id, tp, 1, piece("u"))
	sent(chat.RelayedDelta{ChatID: id, Epoch: 1, Delta: piece("xyzwvu"), Replay: true})
}
