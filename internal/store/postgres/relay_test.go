package postgres

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentd/agentd/internal/chat"
)

// The deltas of a flush go in payloads that Postgres takes, each with its
// sender, and come out as they went in: fragments of one reply joined, a
// text too long for one payload split across several (its replay flag on
// the first piece only), and any text at all (quotes, NUL, invalid UTF-8
// replaced, as JSON does) intact.
func TestRelayedDeltasFitAndComeBackWhole(t *testing.T) {
	a, b := uuid.NewString(), uuid.NewString()
	long := strings.Repeat("é\x00\"<\n", 20000) + "end"
	var q relayQueue
	in := []struct {
		from string
		d    chat.RelayedDelta
	}{
		{"r1", chat.RelayedDelta{ChatID: a, Epoch: 2, Delta: chat.Delta{Name: "w", Content: "Hel", AfterSeq: 3}, Replay: true}},
		{"r1", chat.RelayedDelta{ChatID: b, Epoch: 1, Delta: chat.Delta{Name: "x", Content: long, AfterSeq: 9}, Replay: true}},
		{"r1", chat.RelayedDelta{ChatID: a, Epoch: 2, Delta: chat.Delta{Name: "w", Content: "lo", AfterSeq: 3}}},
		{"r1", chat.RelayedDelta{ChatID: a, Epoch: 2, Delta: chat.Delta{Name: "w", Reset: true, AfterSeq: 3}}},
		{"r2", chat.RelayedDelta{ChatID: a, Epoch: 3, Delta: chat.Delta{Name: "w", Content: "Hi", AfterSeq: 3}}},
	}
	for _, x := range in {
		if !q.addDelta(x.from, x.d) {
			t.Fatal("the queue refused a delta")
		}
	}
	var f flush
	q.take(&f)
	if f.deltas != 4 || !q.empty() {
		t.Fatalf("the flush carries %d deltas (want 4: two joined), queue empty %v", f.deltas, q.empty())
	}
	type got struct {
		from string
		d    chat.RelayedDelta
	}
	var out []got
	for i, p := range f.payloads {
		if f.channels[i] != channelDeltas || len(p) > maxPayload {
			t.Fatalf("payload %d on %s of %d bytes", i, f.channels[i], len(p))
		}
		from, body, _ := strings.Cut(p, "\n")
		ds, err := decodeDeltas(body)
		if err != nil {
			t.Fatalf("payload %d: %v", i, err)
		}
		for _, d := range ds {
			out = append(out, got{from, d})
		}
	}
	if len(f.payloads) < 4 {
		t.Fatalf("%d payloads: the long text was not split", len(f.payloads))
	}
	// Join the pieces again: what a receiver's streams make of them.
	var joined []got
	for _, g := range out {
		if n := len(joined); n > 0 && joined[n-1].d.ChatID == g.d.ChatID && !g.d.Replay && !g.d.Reset && !joined[n-1].d.Reset {
			if g.d.Name == joined[n-1].d.Name && g.d.Epoch == joined[n-1].d.Epoch {
				joined[n-1].d.Content += g.d.Content
				continue
			}
		}
		joined = append(joined, g)
	}
	want := []got{
		{"r1", chat.RelayedDelta{ChatID: a, Epoch: 2, Delta: chat.Delta{Name: "w", Content: "Hello", AfterSeq: 3}, Replay: true}},
		{"r1", chat.RelayedDelta{ChatID: b, Epoch: 1, Delta: chat.Delta{Name: "x", Content: long, AfterSeq: 9}, Replay: true}},
		{"r1", chat.RelayedDelta{ChatID: a, Epoch: 2, Delta: chat.Delta{Name: "w", Reset: true, AfterSeq: 3}}},
		{"r2", chat.RelayedDelta{ChatID: a, Epoch: 3, Delta: chat.Delta{Name: "w", Content: "Hi", AfterSeq: 3}}},
	}
	if !slices.Equal(joined, want) {
		for i := range max(len(joined), len(want)) {
			if i >= len(joined) || i >= len(want) || joined[i] != want[i] {
				t.Fatalf("delta %d differs (%d out, %d want)", i, len(joined), len(want))
			}
		}
	}
}

// Follows and the question of a replica that starts fit and come back.
func TestRelayedFollowsComeBack(t *testing.T) {
	var ids []string
	for range 300 {
		ids = append(ids, uuid.NewString())
	}
	var got []string
	for _, p := range followPayloads(followNote{from: "r1", replay: true, ids: ids}) {
		if len(p) > maxPayload {
			t.Fatalf("payload of %d bytes", len(p))
		}
		from, body, _ := strings.Cut(p, "\n")
		more, replay, ok := decodeFollows(body)
		if from != "r1" || !replay || !ok {
			t.Fatalf("payload from %q, replay %v, ok %v", from, replay, ok)
		}
		got = append(got, more...)
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("%d ids came back of %d", len(got), len(ids))
	}
	ps := followPayloads(followNote{from: "r2"})
	_, body, _ := strings.Cut(ps[0], "\n")
	if more, _, ok := decodeFollows(body); len(ps) != 1 || !ok || more != nil {
		t.Fatalf("the question came back as %q, %v", more, ok)
	}
}

// What one replica relays reaches the listeners of the others through
// Postgres, and not its own.
func TestRelayedDeltasReachTheOtherReplicas(t *testing.T) {
	t.Parallel()
	s := newStore(t).(*Store)
	ctx, cancel := context.WithCancel(t.Context())
	type note struct {
		from   string
		deltas []chat.RelayedDelta
		ids    []string
	}
	got := make(chan note, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Listen(ctx, chat.NotifyHandler{Self: "me",
			Deltas:  func(from string, ds []chat.RelayedDelta) { got <- note{from: from, deltas: ds} },
			Follows: func(from string, ids []string, replay bool) { got <- note{from: from, ids: ids} },
		})
	}()
	defer func() { cancel(); <-done }()
	id := uuid.NewString()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case n := <-got:
			if n.from != "other" {
				t.Fatalf("a note from %q reached its own sender", n.from)
			}
			if len(n.deltas) == 1 && n.deltas[0].ChatID == id && n.deltas[0].Content == "typed" {
				return
			}
		case <-tick.C:
			// Until the listener listens.
			s.RelayDelta("me", chat.RelayedDelta{ChatID: id, Epoch: 1, Delta: chat.Delta{Name: "w", Content: "mine"}})
			s.RelayFollows("me", []string{id}, true)
			s.RelayDelta("other", chat.RelayedDelta{ChatID: id, Epoch: 1, Delta: chat.Delta{Name: "w", Content: "typed"}})
		case <-deadline:
			t.Fatal("no relayed delta came through")
		}
	}
}
