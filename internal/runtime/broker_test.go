package runtime

import (
	"slices"
	"testing"

	"github.com/agentd/agentd/internal/chat"
)

// at is the wake-up of an append by a worker of this replica that left the
// chat running at seq.
func at(seq int64) Wake {
	return Wake{Progress: chat.Progress{Status: chat.StatusRunning, LastSeq: seq}, Known: true}
}

// A chat followed only for its progress (a wait for its end) keeps no tail
// of events; a reader that subscribes after that reads the store first,
// and the appends after it join the tail.
func TestTheTailIsKeptOnlyForReaders(t *testing.T) {
	b := newBroker(nil)
	const id = "c"
	b.workerStarted(id, chat.Progress{Status: chat.StatusQueued, LastSeq: 2})
	now, _, stopFollow := b.follow(id)
	defer stopFollow()
	if !now.Known || now.Progress.LastSeq != 2 {
		t.Fatalf("following started from %+v, want the worker's start at seq 2", now)
	}
	b.committed(id, nil, []chat.Event{{Seq: 3}, {Seq: 4}}, at(4))
	if tp := b.topics[id]; len(tp.tail) != 0 || !tp.stale {
		t.Fatalf("tail %v (stale %v) kept for a follower only", tp.tail, tp.stale)
	}
	now, _, stopRead := b.add(id, subRead)
	defer stopRead()
	if now.Progress.LastSeq != 4 {
		t.Fatalf("a new subscriber starts from %+v, want seq 4", now)
	}
	b.committed(id, nil, []chat.Event{{Seq: 5}}, at(5))
	if tp := b.topics[id]; len(tp.tail) != 1 || tp.tail[0].Seq != 5 || !tp.stale {
		t.Fatalf("tail %v (stale %v), want [5] still to be filled from the store", tp.tail, tp.stale)
	}
	if _, ok := b.topics[id].readTail(0, 10); ok {
		t.Fatal("the tail answered a read from seq 0, which it does not hold")
	}
}

// running is a broker where a worker of this replica runs chat id, at seq
// 2, with one reader subscribed.
func running(t *testing.T, id string) (*broker, <-chan Wake) {
	b := newBroker(nil)
	b.workerStarted(id, chat.Progress{Status: chat.StatusRunning, LastSeq: 2})
	wake, stop := b.subscribe(id)
	t.Cleanup(stop)
	return b, wake
}

// A wake-up with an unknown progress (an erasure, another replica's
// append) still pending is not replaced by a known one: the subscriber
// must still ask the store, which alone can tell it what the unknown one
// announced. A known wake-up pending is replaced by the latest.
func TestAnUnknownWakeUpIsNotReplacedByAKnownOne(t *testing.T) {
	const id = "c"
	b, wake := running(t, id)
	b.committed(id, nil, []chat.Event{{Seq: 3}}, at(3))
	b.committed(id, nil, []chat.Event{{Seq: 4}}, at(4))
	if wk := <-wake; !wk.Known || wk.Progress.LastSeq != 4 {
		t.Fatalf("woken with %+v, want the latest known progress (seq 4)", wk)
	}
	b.erased(id)
	b.committed(id, nil, []chat.Event{{Seq: 5}}, at(5))
	if wk := <-wake; wk.Known {
		t.Fatalf("woken with %+v after an erasure, want an unknown progress", wk)
	}
}

// A wake-up from an append brings the chat's latest events when the tail
// holds every one of them, so that a stream sends them without taking the
// chat's lock; one that may lack some (a tail still to be filled from the
// store, a notification from another replica) brings none, and a reader
// behind the tail is told to read.
func TestAWakeUpBringsTheEventsWhenTheTailIsCurrent(t *testing.T) {
	const id = "c"
	b, wake := running(t, id)
	b.committed(id, nil, []chat.Event{{Seq: 3}, {Seq: 4}}, at(4))
	if evs, ok := (<-wake).Events(2, 10); ok {
		t.Fatalf("a wake-up brought %v from a tail still to be filled", evs)
	}
	b.topics[id].stale = false // as a read of the store leaves it
	b.committed(id, nil, []chat.Event{{Seq: 5}}, at(5))
	wk := <-wake
	seqs := func(after int64, limit int) ([]int64, bool) {
		evs, ok := wk.Events(after, limit)
		var out []int64
		for _, e := range evs {
			out = append(out, e.Seq)
		}
		return out, ok
	}
	for _, c := range []struct {
		after, limit int64
		want         []int64
		ok           bool
	}{
		{2, 10, []int64{3, 4, 5}, true},
		{3, 10, []int64{4, 5}, true},
		{2, 2, []int64{3, 4}, true},
		{5, 10, nil, true},  // nothing new
		{1, 10, nil, false}, // seq 2 is not in the tail
	} {
		got, ok := seqs(c.after, int(c.limit))
		if ok != c.ok || !slices.Equal(got, c.want) {
			t.Errorf("Events(%d, %d) = %v, %v; want %v, %v", c.after, c.limit, got, ok, c.want, c.ok)
		}
	}
	// Later appends do not change what a wake-up brought.
	b.committed(id, nil, []chat.Event{{Seq: 6}}, at(6))
	if got, _ := seqs(2, 10); !slices.Equal(got, []int64{3, 4, 5}) {
		t.Errorf("after another append the wake-up brings %v, want [3 4 5]", got)
	}
	if evs, ok := (<-wake).Events(5, 10); !ok || len(evs) != 1 || evs[0].Seq != 6 {
		t.Errorf("the next wake-up brings %v, %v; want [6]", evs, ok)
	}
	b.notified(id) // ignored while a worker here runs the chat
	b.workerEnded(id, false)
	if evs, ok := (<-wake).Events(6, 10); ok {
		t.Fatalf("an unknown wake-up brought %v", evs)
	}
}

// A worker hands its deltas and commits to the topic it was given when it
// started, without a lookup; a topic that has left the broker since (no
// worker and no subscriber kept it) is not used: the chat's topic now is.
func TestAHeldTopicIsUsedOnlyWhileItIsTheChats(t *testing.T) {
	b := newBroker(nil)
	const id = "c"
	held := b.workerStarted(id, chat.Progress{Status: chat.StatusRunning, LastSeq: 2})
	_, s, stop := b.add(id, subStream)
	if b.topics[id] != held {
		t.Fatal("the stream's topic is not the one workerStarted returned")
	}
	b.publishDelta(id, held, 1, chat.Delta{Name: "a", Content: "x", AfterSeq: 2})
	if got := s.deltas.Take(nil); len(got) != 1 || got[0].Content != "x" {
		t.Fatalf("the stream got %+v through the held topic, want x", got)
	}
	stop()
	b.workerEnded(id, true)
	if _, ok := b.topics[id]; ok {
		t.Fatal("the topic stayed with no worker and no subscriber")
	}

	_, s, stop = b.add(id, subStream) // a new topic for the chat
	defer stop()
	b.publishDelta(id, held, 1, chat.Delta{Name: "a", Content: "y", AfterSeq: 2})
	if got := s.deltas.Take(nil); len(got) != 1 || got[0].Content != "y" {
		t.Fatalf("the new stream got %+v, want y: the gone topic was used", got)
	}
	b.committed(id, held, []chat.Event{{Seq: 3}}, at(3))
	if tp := b.topics[id]; tp == held || tp.reply.afterSeq != 2 || len(tp.reply.texts) != 0 {
		t.Fatalf("committed went to the gone topic, or the new one kept the reply: %+v", tp.reply)
	}
}
