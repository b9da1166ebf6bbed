package chat

import "testing"

// at is the wake-up of an append by a worker of this replica that left the
// chat running at seq.
func at(seq int64) Wake {
	return Wake{Progress: Progress{Status: StatusRunning, LastSeq: seq}, Known: true}
}

// A chat followed only for its progress (a wait for its end) keeps no tail
// of events; a reader that subscribes after that reads the store first,
// and the appends after it join the tail.
func TestTheTailIsKeptOnlyForReaders(t *testing.T) {
	b := newBroker(nil)
	const id = "c"
	b.workerStarted(id, Progress{Status: StatusQueued, LastSeq: 2})
	now, _, stopFollow := b.follow(id)
	defer stopFollow()
	if !now.Known || now.Progress.LastSeq != 2 {
		t.Fatalf("following started from %+v, want the worker's start at seq 2", now)
	}
	b.committed(id, []Event{{Seq: 3}, {Seq: 4}}, at(4))
	if tp := b.topics[id]; len(tp.tail) != 0 || !tp.stale {
		t.Fatalf("tail %v (stale %v) kept for a follower only", tp.tail, tp.stale)
	}
	now, _, stopRead := b.add(id, subRead)
	defer stopRead()
	if now.Progress.LastSeq != 4 {
		t.Fatalf("a new subscriber starts from %+v, want seq 4", now)
	}
	b.committed(id, []Event{{Seq: 5}}, at(5))
	if tp := b.topics[id]; len(tp.tail) != 1 || tp.tail[0].Seq != 5 || !tp.stale {
		t.Fatalf("tail %v (stale %v), want [5] still to be filled from the store", tp.tail, tp.stale)
	}
	if _, ok := b.topics[id].readTail(0, 10); ok {
		t.Fatal("the tail answered a read from seq 0, which it does not hold")
	}
}

// A wake-up with an unknown progress (an erasure, another replica's
// append) still pending is not replaced by a known one: the subscriber
// must still ask the store, which alone can tell it what the unknown one
// announced. A known wake-up pending is replaced by the latest.
func TestAnUnknownWakeUpIsNotReplacedByAKnownOne(t *testing.T) {
	b := newBroker(nil)
	const id = "c"
	b.workerStarted(id, Progress{Status: StatusRunning, LastSeq: 2})
	wake, stop := b.subscribe(id)
	defer stop()
	b.committed(id, []Event{{Seq: 3}}, at(3))
	b.committed(id, []Event{{Seq: 4}}, at(4))
	if wk := <-wake; !wk.Known || wk.Progress.LastSeq != 4 {
		t.Fatalf("woken with %+v, want the latest known progress (seq 4)", wk)
	}
	b.erased(id)
	b.committed(id, []Event{{Seq: 5}}, at(5))
	if wk := <-wake; wk.Known {
		t.Fatalf("woken with %+v after an erasure, want an unknown progress", wk)
	}
}
