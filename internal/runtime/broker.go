package runtime

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/agentd/agentd/internal/chat"
)

// tailSize is how many of a chat's latest committed events the broker keeps
// in memory while the chat has local subscribers.
const tailSize = 512

// broker hands a chat's committed events, and the deltas of replies being
// streamed, to the chat's local subscribers (SSE streams, long polls,
// wait_s). Events a worker of this replica committed come straight from the
// append that committed them (committed); the store is read only to catch
// up: after another replica's append (notified), after the notification
// listener reconnected, or for a reader that is behind the kept tail. So
// any number of viewers of one chat cost about one query per append.
//
// Deltas never touch the store: they come from this replica's worker
// (publishDelta) or, through the store's relay, from the replica that runs
// the chat (remoteDeltas; see relay.go).
//
// Locking: b.mu guards the topics map only; each topic has its own lock
// for its subscribers and what it keeps, so that the streams of one chat
// never wait on another chat. b.mu is taken before a topic's lock, never
// after.
type broker struct {
	store chat.Store
	relay *relay

	mu     sync.RWMutex
	topics map[string]*topic
}

// Wake is what a subscriber is woken with. After an append by a worker of
// this replica, the chat's progress as that append left it (Known): a
// waiter needs no read of the store to see where the chat stands. After
// another replica's append, or when notifications may have been lost,
// Known is false and the store has the answer.
type Wake struct {
	Progress chat.Progress
	Known    bool
	// ended is the record the append that ended the chat wrote, when this
	// wake comes from that append: see Ended.
	ended *chat.ChatUpdate
	// tail is the chat's latest events as the append left them in memory,
	// when the wake comes from an append and they are all there is: see
	// Events.
	tail []chat.Event
}

// Events returns up to limit of the chat's events after seq from those the
// wake-up brought, if it brought them all: after an append by a worker of
// this replica, the latest events kept in memory, up to where the append
// left the chat. A stream woken by an append then reads them without the
// chat's lock, which every stream of the chat would otherwise take at the
// same moment, a thousand of them for a thousand streams. ok is false when
// the wake-up brought none, or none back to seq: read them from the
// runtime (Runtime.Events). The events are shared and must not be changed.
// There is no tenant check: only a subscriber already allowed to read the
// chat has the wake-up.
func (wk Wake) Events(after int64, limit int) ([]chat.Event, bool) {
	return tailAfter(wk.tail, after, limit)
}

// Ended returns chat c, as read before, as the append that ended it left
// it, when the wake comes from that append: what never changes after
// create is c's, the rest is what the append wrote. So a waiter for the end
// needs no read of the store either. A terminal chat changes no more, but
// for a cancel request, which no client sees.
func (wk Wake) Ended(c *chat.Chat) (*chat.Chat, bool) {
	u := wk.ended
	if u == nil {
		return nil, false
	}
	e := *c
	e.Status, e.StopReason, e.StopDetail, e.Error = u.Status, u.StopReason, u.StopDetail, u.Error
	e.Turns, e.MessageCount = u.Turns, u.MessageCount
	e.PromptTokens, e.CompletionTokens = u.PromptTokens, u.CompletionTokens
	e.PendingInput, e.InputExpiresAt, e.InputResponse = u.PendingInput, u.InputExpiresAt, nil
	e.CompletedAt, e.UpdatedAt = u.CompletedAt, u.UpdatedAt
	e.LastSeq = wk.Progress.LastSeq
	if u.ReleaseLease {
		e.Owner, e.LeaseExpiresAt = "", nil
	}
	return &e, true
}

// subKind says what a subscriber takes besides wake-ups.
type subKind uint8

const (
	// subFollow: wake-ups only (a wait for the chat's progress).
	subFollow subKind = iota
	// subRead: wake-ups, and the subscriber reads events: the tail is kept.
	subRead
	// subStream: a reader that also takes the deltas of replies.
	subStream
)

// sub is one subscriber of a chat.
type sub struct {
	wake   chan Wake
	kind   subKind
	deltas *DeltaQueue // subStream only
}

// topic is one chat's subscribers, its kept tail of events and the text of
// its replies in progress.
type topic struct {
	id string
	mu sync.Mutex
	// dead is set, with both locks held, when the topic leaves the map:
	// whoever looked it up before treats it as absent.
	dead bool
	subs map[*sub]struct{}
	// readers counts the subscribers that read events (subRead and
	// subStream): only for them is the tail kept. streams counts those
	// that take deltas.
	readers, streams int
	// tail holds the latest committed events known here, consecutive seqs.
	tail []chat.Event
	// stale says that events may have been committed after tail (another
	// replica appended): the next reader fills it from the store. staled
	// counts the times it was set, so that a fill clears it only if no
	// notification came while it read.
	stale  bool
	staled uint64
	// filled is what staled was when the last complete fill began to read
	// the store: the tail holds what every notification up to there
	// announced.
	filled uint64
	// tenants are the tenants a reader was verified to read this chat as.
	tenants map[string]bool
	// local counts the workers of this replica running the chat: while one
	// runs, no other replica can append, so a notification is the echo of
	// our own append, already delivered.
	local int
	// known is where a worker of this replica has the chat while one runs:
	// as its lease found it, then as its last append left it. A new
	// subscriber starts from it instead of reading the store.
	known Wake
	// reply is the text of the replies being streamed, for streams that
	// subscribe while one is under way, and for other replicas.
	reply replyLog
	// fill serialises catching up from the store, so concurrent readers
	// share one query.
	fill sync.Mutex
	// refs counts the reads in progress that use the tail without a
	// subscription of their own.
	refs int
}

func newBroker(store chat.Store) *broker {
	return &broker{store: store, topics: map[string]*topic{}}
}

// locked returns t, the chat's topic as its caller holds it, locked, while
// it is the chat's; else the chat's topic looked up (see lookup).
func (b *broker) locked(id string, t *topic) *topic {
	if t != nil {
		t.mu.Lock()
		if !t.dead {
			return t
		}
		t.mu.Unlock()
	}
	return b.lookup(id)
}

// lookup returns the chat's topic, locked, or nil if there is none.
func (b *broker) lookup(id string) *topic {
	b.mu.RLock()
	t := b.topics[id]
	b.mu.RUnlock()
	if t == nil {
		return nil
	}
	t.mu.Lock()
	if t.dead {
		t.mu.Unlock()
		return nil
	}
	return t
}

// acquire returns the chat's topic, locked, creating it.
func (b *broker) acquire(id string) *topic {
	if t := b.lookup(id); t != nil {
		return t
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topics[id]
	if t == nil {
		// The maps are made by the first subscriber and the first reader:
		// most chats have neither while they run.
		t = &topic{id: id, stale: true}
		b.topics[id] = t
	}
	t.mu.Lock() // a topic in the map is never dead
	return t
}

// unusedLocked reports whether nobody uses the topic any more.
func (t *topic) unusedLocked() bool {
	return len(t.subs) == 0 && t.local == 0 && t.refs == 0
}

// release unlocks t and forgets it if nobody uses it any more.
func (b *broker) release(t *topic) {
	unused := t.unusedLocked()
	t.mu.Unlock()
	if !unused {
		return
	}
	b.mu.Lock()
	t.mu.Lock()
	if !t.dead && t.unusedLocked() {
		t.dead = true
		delete(b.topics, t.id)
	}
	t.mu.Unlock()
	b.mu.Unlock()
}

// add subscribes to the chat. It returns where the chat stands if a worker
// of this replica runs it (Known), as of the subscription: every later
// append wakes the subscriber. A stream gets the text of the replies under
// way at once.
func (b *broker) add(id string, kind subKind) (Wake, *sub, func()) {
	s := &sub{wake: make(chan Wake, 1), kind: kind}
	if kind == subStream {
		s.deltas = NewDeltaQueue()
	}
	t := b.acquire(id)
	if t.subs == nil {
		t.subs = map[*sub]struct{}{}
	}
	t.subs[s] = struct{}{}
	if kind != subFollow {
		t.readers++
	}
	first := false
	if kind == subStream {
		t.streams++
		first = t.streams == 1
		if first && t.local == 0 && b.relay.on() {
			t.reply.awaitReplay = true // see relay.announce, below
		}
		t.reply.replayTo(s.deltas)
	}
	now := t.known
	t.mu.Unlock()
	if first {
		b.relay.announce(id)
	}
	var once sync.Once
	return now, s, func() {
		once.Do(func() {
			t := b.lookup(id)
			if t == nil {
				return
			}
			if _, ok := t.subs[s]; ok {
				delete(t.subs, s)
				if len(t.subs) == 0 {
					t.subs = nil // a chat that outlives its followers keeps no map
				}
				if kind != subFollow {
					t.readers--
				}
				if kind == subStream {
					if t.streams--; t.streams == 0 && t.local == 0 {
						t.reply.clear() // kept for this replica's streams only
					}
				}
			}
			b.release(t)
		})
	}
}

func (b *broker) subscribe(id string) (<-chan Wake, func()) {
	_, s, stop := b.add(id, subRead)
	return s.wake, stop
}

// follow subscribes to the chat's wake-ups only, not to its events, and
// returns, with the subscription, where the chat stands if a worker of
// this replica runs it (Known), as of the subscription.
func (b *broker) follow(id string) (Wake, <-chan Wake, func()) {
	now, s, stop := b.add(id, subFollow)
	return now, s.wake, stop
}

// stream subscribes an event stream: wake-ups and events as subscribe,
// and the deltas of the chat's replies.
func (b *broker) stream(id string) (<-chan Wake, *DeltaQueue, func()) {
	_, s, stop := b.add(id, subStream)
	return s.wake, s.deltas, stop
}

// publishDelta takes a fragment of a reply that this replica's worker,
// under lease epoch, is streaming: the chat's streams here get it, and so
// do the replicas that follow the chat. held is the topic the worker was
// given (see workerStarted), or nil.
func (b *broker) publishDelta(id string, held *topic, epoch int64, d chat.Delta) {
	t := b.locked(id, held)
	if t == nil {
		return // no worker registered: nothing streams
	}
	if t.deltaLocked(epoch, d, false) {
		b.relay.send(t, epoch, d)
	}
	t.mu.Unlock()
}

// deltaLocked applies a delta of a worker under lease epoch to the replies
// in progress and hands it to the chat's streams here. A delta of an older
// epoch than one seen is dropped (a worker that lost the chat and has not
// stopped yet); the first of a newer epoch voids the text its predecessor
// streamed (a takeover: the reply starts again). A replay is a reply's
// whole text so far (see relay.go): the streams get what they lack of it,
// after a reset when the text they have is not its start. It reports
// whether the delta was taken.
func (t *topic) deltaLocked(epoch int64, d chat.Delta, replay bool) bool {
	r := &t.reply
	switch {
	case epoch < r.epoch:
		return false
	case epoch > r.epoch:
		t.voidLocked()
		r.epoch = epoch
	}
	if d.AfterSeq != r.afterSeq {
		r.clear()
		r.afterSeq = d.AfterSeq
	}
	switch {
	case replay:
		whole := d.Content
		if x := r.find(d.Name); x != nil && len(x.text) > 0 {
			if rest, ok := strings.CutPrefix(whole, string(x.text)); ok {
				// The replay repeats what the streams have had (the
				// deltas relayed before it): only the rest is news.
				d.Content = rest
			} else {
				t.pushLocked(chat.Delta{Name: d.Name, Reset: true, AfterSeq: d.AfterSeq})
			}
		}
		r.set(d.Name, whole)
	case d.Reset:
		r.drop(d.Name)
	default:
		r.add(d.Name, d.Content)
	}
	if !replay || d.Content != "" {
		t.pushLocked(d)
	}
	return true
}

// voidLocked tells the streams that the text of the replies in progress
// is void, and forgets it.
func (t *topic) voidLocked() {
	r := &t.reply
	for _, x := range r.texts {
		if len(x.text) > 0 {
			t.pushLocked(chat.Delta{Name: x.name, Reset: true, AfterSeq: r.afterSeq})
		}
	}
	r.clear()
}

// pushLocked queues a delta on every stream of the topic.
func (t *topic) pushLocked(d chat.Delta) {
	if t.streams == 0 {
		return
	}
	for s := range t.subs {
		if s.deltas != nil {
			s.deltas.Push(d)
		}
	}
}

// workerStarted and workerEnded track the chats this replica runs. When a
// worker ends before the chat did, whatever another owner may have
// appended meanwhile is looked for once; after a confirmed end nobody
// appends.
//
// workerStarted returns the chat's topic, which stays the chat's while the
// worker runs (local counts it): the worker passes it to publishDelta and
// committed.
func (b *broker) workerStarted(id string, p chat.Progress) *topic {
	t := b.acquire(id)
	t.local++
	t.known = Wake{Progress: p, Known: true}
	t.mu.Unlock()
	return t
}

func (b *broker) workerEnded(id string, chatEnded bool) {
	t := b.lookup(id)
	if t == nil {
		return
	}
	t.local--
	if t.local == 0 {
		t.known = Wake{}
		t.reply.relayed = false
		if t.streams == 0 {
			t.reply.clear()
		}
	}
	if !chatEnded {
		t.markStale()
		t.signalLocked(Wake{})
	}
	b.release(t)
}

// committed takes the events a worker of this replica just appended, and
// the chat's progress after them (wk): the events join the tail and the
// subscribers are woken with the progress. held is as for publishDelta.
func (b *broker) committed(id string, held *topic, evs []chat.Event, wk Wake) {
	t := b.locked(id, held)
	if t == nil {
		return
	}
	defer t.mu.Unlock()
	if t.local > 0 {
		t.known = wk
	}
	if len(evs) > 0 {
		t.reply.passed(evs[len(evs)-1].Seq)
	}
	if len(t.subs) == 0 {
		return
	}
	if t.readers > 0 {
		t.extend(evs)
		if !t.stale {
			// The tail holds every event to the append's: the readers
			// take them from the wake-up (Wake.Events). A slice capped at
			// its length never changes (see read).
			wk.tail = t.tail[:len(t.tail):len(t.tail)]
		}
	} else {
		t.tail = nil // a reader that comes fills it from the store
		t.markStale()
	}
	t.signalLocked(wk)
}

// notified is called when the store says the chat's log grew (on any
// replica). The echo of this replica's own append is ignored: its events
// were delivered when committed.
func (b *broker) notified(id string) {
	t := b.lookup(id)
	if t == nil {
		return
	}
	defer t.mu.Unlock()
	if len(t.subs) == 0 || t.local > 0 {
		return
	}
	t.markStale()
	t.signalLocked(Wake{})
}

// notifiedAll is called when notifications may have been lost: every
// subscriber catches up from the store, but those of chats a worker of this
// replica runs, which get every event when it is committed (as notified
// ignores their echoes, this ignores their loss).
func (b *broker) notifiedAll() {
	b.mu.RLock()
	ts := make([]*topic, 0, len(b.topics))
	for _, t := range b.topics {
		ts = append(ts, t)
	}
	b.mu.RUnlock()
	for _, t := range ts {
		t.mu.Lock()
		if !t.dead && t.local == 0 {
			t.markStale()
			t.signalLocked(Wake{})
		}
		t.mu.Unlock()
	}
}

// signalLocked wakes every subscriber of t. A wake-up still pending is
// replaced: the latest says where the chat stands (an unknown progress
// after a known one makes the reader ask the store, as it should), but a
// known progress after an unknown one leaves it unknown, for the reader
// to ask the store what the unknown one announced. The topic's lock
// serialises the signals, so the latest is the one left.
func (t *topic) signalLocked(wk Wake) {
	for s := range t.subs {
		ch := s.wake
		select {
		case ch <- wk:
			continue
		default:
		}
		next := wk
		select {
		case pending := <-ch:
			if !pending.Known {
				// An unknown progress stays unknown: it may announce
				// what a known one does not (an erasure, another
				// replica's append), which only the store can tell.
				next = Wake{}
			}
		default:
		}
		select {
		case ch <- next:
		default:
		}
	}
}

// markStale says that the tail may lack committed events.
func (t *topic) markStale() {
	t.stale = true
	t.staled++
}

// extend adds committed events to the tail. Events that do not follow it
// (the tail missed some) restart it. Each event gets the memo of its wire
// form (Event.Encoded), shared by every stream that sends it.
func (t *topic) extend(evs []chat.Event) {
	if len(evs) == 0 {
		return
	}
	t.reply.passed(evs[len(evs)-1].Seq)
	if n := len(t.tail); n > 0 && evs[0].Seq != t.tail[n-1].Seq+1 {
		if evs[len(evs)-1].Seq <= t.tail[n-1].Seq {
			return // already known
		}
		if evs[0].Seq > t.tail[n-1].Seq+1 {
			t.tail = nil
			t.markStale()
		} else {
			evs = evs[t.tail[n-1].Seq+1-evs[0].Seq:]
		}
	}
	from := len(t.tail)
	t.tail = append(t.tail, evs...)
	chat.MemoizeWire(t.tail[from:])
	if over := len(t.tail) - tailSize; over > 0 {
		t.tail = slices.Clone(t.tail[over:])
	}
}

// read returns up to limit events after seq from the tail, if the tail
// holds every event after seq that is known to be committed (current: the
// caller knows the tail to be current for it, stale or not). The events
// are the tail's own, in a slice capped at its length: the tail only
// grows past it or is replaced, so they never change under the caller.
func (t *topic) read(after int64, limit int, current bool) ([]chat.Event, bool) {
	if t.stale && !current {
		return nil, false
	}
	return tailAfter(t.tail, after, limit)
}

// tailAfter returns up to limit events after seq from tail (consecutive
// seqs), in a slice capped at its length, if tail holds every event after
// seq that it can: ok is false when tail is empty or begins after seq+1.
func tailAfter(tail []chat.Event, after int64, limit int) ([]chat.Event, bool) {
	if len(tail) == 0 {
		return nil, false
	}
	first, last := tail[0].Seq, tail[len(tail)-1].Seq
	switch {
	case after < first-1:
		return nil, false
	case after >= last:
		return []chat.Event{}, true
	}
	evs := tail[after+1-first:]
	if len(evs) > limit {
		evs = evs[:limit]
	}
	return evs[:len(evs):len(evs)], true
}

// events returns up to limit events of the chat after seq for a reader
// allowed to read it as tenant: from the tail when it is current, else from
// the store. check verifies the tenant once per topic (the store's GetChat).
func (b *broker) events(ctx context.Context, tenant, id string, after int64, limit int, check func() error) ([]chat.Event, error) {
	t := b.lookup(id)
	if t != nil && t.readers == 0 {
		t.mu.Unlock()
		t = nil
	}
	if t == nil {
		if err := check(); err != nil {
			return nil, err
		}
		return b.store.ListEvents(ctx, &chat.ListEventsParams{ChatID: id, After: after, Limit: limit})
	}
	if t.tenants[tenant] {
		if evs, ok := t.read(after, limit, false); ok {
			t.mu.Unlock()
			return evs, nil
		}
	}
	// The slow way: the topic is kept while this read uses it. seen is
	// how many notifications the tail had missed when this reader came:
	// the one that woke it among them.
	t.refs++
	verified := t.tenants[tenant]
	seen := t.staled
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.refs--
		b.release(t)
	}()
	if !verified {
		if err := check(); err != nil {
			return nil, err
		}
		t.mu.Lock()
		if t.tenants == nil {
			t.tenants = map[string]bool{}
		}
		t.tenants[tenant] = true
		t.mu.Unlock()
	}
	// Catch up: one reader reads the store, the others wait for it and
	// then read the tail, which a read that began after all the
	// notifications they came for made current for them (filled).
	t.fill.Lock()
	defer t.fill.Unlock()
	t.mu.Lock()
	if evs, ok := t.read(after, limit, t.filled >= seen); ok {
		t.mu.Unlock()
		return evs, nil
	}
	within := len(t.tail) > 0 && after >= t.tail[0].Seq-1
	from := after
	if within {
		from = t.tail[len(t.tail)-1].Seq // the tail is good to its end; read what follows
	}
	// The tail stays stale while the read is under way: a reader that
	// comes meanwhile waits for it (fill) rather than take the tail as it
	// is for current; it is current for those whose notifications came
	// before the read began. A notification during the read keeps it
	// stale after: the read may have missed what that one announced.
	staled := t.staled
	t.mu.Unlock()
	page := max(limit, tailSize)
	evs, err := b.store.ListEvents(ctx, &chat.ListEventsParams{ChatID: id, After: from, Limit: page})
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	if !within {
		// The read replaces the tail, but appends committed while it ran
		// joined the old one and are not in what was read (it may have
		// been taken before they committed): keep them after it. extend
		// drops what the read already has and marks a gap stale.
		meanwhile := t.tail
		t.tail = nil
		t.extend(evs)
		t.extend(meanwhile)
	} else {
		t.extend(evs)
	}
	current := len(evs) < page // else there may be more than one page
	if current {
		t.filled = staled
		if t.staled == staled {
			t.stale = false
		}
	} else {
		t.markStale()
	}
	evs, ok := t.read(after, limit, current)
	t.mu.Unlock()
	if ok {
		return evs, nil
	}
	// The reader is behind what the tail keeps: serve it from what was read.
	return b.store.ListEvents(ctx, &chat.ListEventsParams{ChatID: id, After: after, Limit: limit})
}

func (t *topic) readTail(after int64, limit int) ([]chat.Event, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.read(after, limit, false)
}

// erased is called when a chat was erased (on any replica): what is kept
// of it goes, tenants are verified again (the store now answers not
// found), and every subscriber is woken to find out.
func (b *broker) erased(id string) {
	t := b.lookup(id)
	if t == nil {
		return
	}
	defer t.mu.Unlock()
	t.tail, t.tenants = nil, nil
	t.markStale()
	t.reply.clear()
	t.signalLocked(Wake{})
}
