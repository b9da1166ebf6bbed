package runtime

import (
	"sync"

	"github.com/agentd/agentd/internal/chat"
)

// DeltaQueue holds the deltas of replies being streamed that one event
// stream has not written yet. A fragment that continues the one queued
// before it (the same agent's reply, no reset between) is joined to it, so
// a stream that falls behind gets fewer, longer fragments and never loses
// one: what it holds is bounded by the text of the replies under way.
type DeltaQueue struct {
	ready chan struct{}
	mu    sync.Mutex
	q     []queuedDelta
}

// queuedDelta is a delta in a queue; joined holds its content once a later
// fragment was joined to it.
type queuedDelta struct {
	chat.Delta
	joined []byte
}

// NewDeltaQueue returns an empty queue.
func NewDeltaQueue() *DeltaQueue {
	return &DeltaQueue{ready: make(chan struct{}, 1)}
}

// Ready receives a value (coalesced) when deltas were queued.
func (q *DeltaQueue) Ready() <-chan struct{} { return q.ready }

// Push queues a delta, as the broker does with each delta of the chat.
func (q *DeltaQueue) Push(d chat.Delta) {
	q.mu.Lock()
	if n := len(q.q); n > 0 && continues(q.q[n-1].Delta, d) {
		last := &q.q[n-1]
		if last.joined == nil {
			last.joined = append(make([]byte, 0, 2*(len(last.Content)+len(d.Content))), last.Content...)
		}
		last.joined = append(last.joined, d.Content...)
	} else {
		q.q = append(q.q, queuedDelta{Delta: d})
	}
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// continues reports whether fragment d goes on where fragment a stops.
func continues(a, d chat.Delta) bool {
	return !a.Reset && !d.Reset && a.Name == d.Name && a.AfterSeq == d.AfterSeq
}

// Take appends the queued deltas to dst, in order, and empties the queue.
func (q *DeltaQueue) Take(dst []chat.Delta) []chat.Delta {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, d := range q.q {
		if d.joined != nil {
			d.Content = string(d.joined)
		}
		dst = append(dst, d.Delta)
	}
	clear(q.q)
	if cap(q.q) > 16 {
		q.q = nil // a burst does not keep its room
	} else {
		q.q = q.q[:0]
	}
	return dst
}

// JoinDeltas appends d to ds, joined to the last delta when it continues it.
func JoinDeltas(ds []chat.Delta, d chat.Delta) []chat.Delta {
	if n := len(ds); n > 0 && continues(ds[n-1], d) {
		ds[n-1].Content += d.Content
		return ds
	}
	return append(ds, d)
}

// replyLog is the text of a chat's replies in progress: those a worker
// started after seq afterSeq, under lease epoch, one text per agent
// streaming (agents of one turn may reply concurrently). A stream that
// subscribes while a reply is under way gets its text so far, and so does
// a replica that starts to follow the chat.
type replyLog struct {
	epoch    int64
	afterSeq int64
	texts    []replyText
	// relayed says that the replicas that follow the chat have had the
	// replies from their start (see relay.send).
	relayed bool
	// awaitReplay: this replica began to follow the chat's replies, which
	// another replica runs, and has not had their text from the start yet
	// (a replay). The fragments relayed until then are dropped: they
	// continue a text it does not have, and the replay holds them.
	awaitReplay bool
}

type replyText struct {
	name string
	text []byte
}

func (r *replyLog) find(name string) *replyText {
	for i := range r.texts {
		if r.texts[i].name == name {
			return &r.texts[i]
		}
	}
	return nil
}

func (r *replyLog) add(name, content string) {
	if x := r.find(name); x != nil {
		x.text = append(x.text, content...)
		return
	}
	// A reply's text grows a token at a time: room for a few dozen
	// spares the first several growths.
	text := make([]byte, len(content), max(len(content), replyTextRoom))
	copy(text, content)
	r.texts = append(r.texts, replyText{name: name, text: text})
}

// replyTextRoom is the room a reply's text starts with, in bytes.
const replyTextRoom = 256

func (r *replyLog) set(name, content string) {
	r.drop(name)
	r.add(name, content)
}

func (r *replyLog) drop(name string) {
	if x := r.find(name); x != nil {
		x.text = x.text[:0]
	}
}

// clear forgets the texts; a reply that goes on later starts a new text.
func (r *replyLog) clear() {
	r.texts = nil
	r.relayed = false
}

// passed is told the chat's last committed seq: once it is past the seq
// the replies followed, their message is committed and their text is the
// log's.
func (r *replyLog) passed(seq int64) {
	if seq > r.afterSeq && len(r.texts) > 0 {
		r.clear()
	}
}

// deltas returns the texts as deltas, one per agent with text.
func (r *replyLog) deltas() []chat.Delta {
	var ds []chat.Delta
	for _, x := range r.texts {
		if len(x.text) > 0 {
			ds = append(ds, chat.Delta{Name: x.name, Content: string(x.text), AfterSeq: r.afterSeq})
		}
	}
	return ds
}

// replayTo queues the texts on a stream that just subscribed, each after a
// reset: the client may have shown part of the reply on a stream before
// this one (it reconnected), which the text so far replaces.
func (r *replyLog) replayTo(q *DeltaQueue) {
	for _, d := range r.deltas() {
		q.Push(chat.Delta{Name: d.Name, Reset: true, AfterSeq: d.AfterSeq})
		q.Push(d)
	}
}
