package chat

import (
	"context"
	"slices"
	"sync"
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
type broker struct {
	store Store

	mu     sync.Mutex
	topics map[string]*topic
}

// Wake is what a subscriber is woken with. After an append by a worker of
// this replica, the chat's progress as that append left it (Known): a
// waiter needs no read of the store to see where the chat stands. After
// another replica's append, or when notifications may have been lost,
// Known is false and the store has the answer.
type Wake struct {
	Progress Progress
	Known    bool
	// ended is the record the append that ended the chat wrote, when this
	// wake comes from that append: see Ended.
	ended *ChatUpdate
}

// Ended returns chat c, as read before, as the append that ended it left
// it, when the wake comes from that append: what never changes after
// create is c's, the rest is what the append wrote. So a waiter for the end
// needs no read of the store either. A terminal chat changes no more, but
// for a cancel request, which no client sees.
func (wk Wake) Ended(c *Chat) (*Chat, bool) {
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

// topic is one chat's subscribers and its kept tail of events.
type topic struct {
	subs map[chan Wake]struct{}
	// readers counts the subscribers that read events (Subscribe, not
	// Follow): only for them is the tail kept.
	readers int
	deltas  map[chan Delta]struct{}
	// tail holds the latest committed events known here, consecutive seqs.
	tail []Event
	// stale says that events may have been committed after tail (another
	// replica appended): the next reader fills it from the store.
	stale bool
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
	// fill serialises catching up from the store, so concurrent readers
	// share one query.
	fill sync.Mutex
	refs int
}

func newBroker(store Store) *broker {
	return &broker{store: store, topics: map[string]*topic{}}
}

// topicLocked returns the chat's topic, creating it; b.mu is held.
func (b *broker) topicLocked(id string) *topic {
	t := b.topics[id]
	if t == nil {
		t = &topic{subs: map[chan Wake]struct{}{}, deltas: map[chan Delta]struct{}{}, tenants: map[string]bool{}, stale: true}
		b.topics[id] = t
	}
	return t
}

// dropLocked forgets a topic nobody uses any more; b.mu is held.
func (b *broker) dropLocked(id string, t *topic) {
	if len(t.subs) == 0 && len(t.deltas) == 0 && t.local == 0 && t.refs == 0 {
		delete(b.topics, id)
	}
}

func (b *broker) subscribe(id string) (<-chan Wake, func()) {
	_, ch, stop := b.add(id, true)
	return ch, stop
}

// follow subscribes to the chat's wake-ups only, not to its events, and
// returns, with the subscription, where the chat stands if a worker of
// this replica runs it (Known), as of the subscription: every later append
// wakes the subscriber.
func (b *broker) follow(id string) (Wake, <-chan Wake, func()) {
	return b.add(id, false)
}

// add subscribes to the chat's wake-ups; a reader also reads its events.
func (b *broker) add(id string, reader bool) (Wake, <-chan Wake, func()) {
	ch := make(chan Wake, 1)
	b.mu.Lock()
	t := b.topicLocked(id)
	t.subs[ch] = struct{}{}
	if reader {
		t.readers++
	}
	now := t.known
	b.mu.Unlock()
	var once sync.Once
	return now, ch, func() {
		once.Do(func() {
			b.mu.Lock()
			if t := b.topics[id]; t != nil {
				delete(t.subs, ch)
				if reader {
					t.readers--
				}
				b.dropLocked(id, t)
			}
			b.mu.Unlock()
		})
	}
}

func (b *broker) subscribeDeltas(id string) (<-chan Delta, func()) {
	ch := make(chan Delta, 64)
	b.mu.Lock()
	b.topicLocked(id).deltas[ch] = struct{}{}
	b.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			b.mu.Lock()
			if t := b.topics[id]; t != nil {
				delete(t.deltas, ch)
				b.dropLocked(id, t)
			}
			b.mu.Unlock()
		})
	}
}

func (b *broker) publishDelta(id string, d Delta) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topics[id]
	if t == nil {
		return
	}
	for ch := range t.deltas {
		select {
		case ch <- d:
		default: // ephemeral: a reader that cannot keep up misses fragments
		}
	}
}

// workerStarted and workerEnded track the chats this replica runs. When a
// worker ends before the chat did, whatever another owner may have
// appended meanwhile is looked for once; after a confirmed end nobody
// appends.
func (b *broker) workerStarted(id string, p Progress) {
	b.mu.Lock()
	t := b.topicLocked(id)
	t.local++
	t.known = Wake{Progress: p, Known: true}
	b.mu.Unlock()
}

func (b *broker) workerEnded(id string, chatEnded bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topics[id]
	if t == nil {
		return
	}
	t.local--
	if t.local == 0 {
		t.known = Wake{}
	}
	if !chatEnded {
		t.stale = true
		b.signalLocked(t, Wake{})
	}
	b.dropLocked(id, t)
}

// committed takes the events a worker of this replica just appended, and
// the chat's progress after them (wk): the events join the tail and the
// subscribers are woken with the progress.
func (b *broker) committed(id string, evs []Event, wk Wake) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topics[id]
	if t == nil {
		return
	}
	if t.local > 0 {
		t.known = wk
	}
	if len(t.subs) == 0 {
		return
	}
	if t.readers > 0 {
		t.extend(evs)
	} else {
		t.tail, t.stale = nil, true // a reader that comes fills it from the store
	}
	b.signalLocked(t, wk)
}

// notified is called when the store says the chat's log grew (on any
// replica). The echo of this replica's own append is ignored: its events
// were delivered when committed.
func (b *broker) notified(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topics[id]
	if t == nil || len(t.subs) == 0 || t.local > 0 {
		return
	}
	t.stale = true
	b.signalLocked(t, Wake{})
}

// notifiedAll is called when notifications may have been lost: every
// subscriber catches up from the store.
func (b *broker) notifiedAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range b.topics {
		t.stale = true
		b.signalLocked(t, Wake{})
	}
}

// signalLocked wakes every subscriber of t. A wake-up still pending is
// replaced: the latest says where the chat stands (an unknown progress
// after a known one makes the reader ask the store, as it should).
func (b *broker) signalLocked(t *topic, wk Wake) {
	for ch := range t.subs {
		select {
		case ch <- wk:
			continue
		default:
		}
		select {
		case <-ch:
		default:
		}
		select {
		case ch <- wk:
		default:
		}
	}
}

// extend adds committed events to the tail. Events that do not follow it
// (the tail missed some) restart it.
func (t *topic) extend(evs []Event) {
	if len(evs) == 0 {
		return
	}
	if n := len(t.tail); n > 0 && evs[0].Seq != t.tail[n-1].Seq+1 {
		if evs[len(evs)-1].Seq <= t.tail[n-1].Seq {
			return // already known
		}
		if evs[0].Seq > t.tail[n-1].Seq+1 {
			t.tail, t.stale = nil, true
		} else {
			evs = evs[t.tail[n-1].Seq+1-evs[0].Seq:]
		}
	}
	t.tail = append(t.tail, evs...)
	if over := len(t.tail) - tailSize; over > 0 {
		t.tail = slices.Clone(t.tail[over:])
	}
}

// read returns up to limit events after seq from the tail, if the tail
// holds every event after seq that is known to be committed.
func (t *topic) read(after int64, limit int) ([]Event, bool) {
	if t.stale || len(t.tail) == 0 {
		return nil, false
	}
	first, last := t.tail[0].Seq, t.tail[len(t.tail)-1].Seq
	if after < first-1 {
		return nil, false
	}
	if after >= last {
		return []Event{}, true
	}
	evs := t.tail[after+1-first:]
	if len(evs) > limit {
		evs = evs[:limit]
	}
	return slices.Clone(evs), true
}

// events returns up to limit events of the chat after seq for a reader
// allowed to read it as tenant: from the tail when it is current, else from
// the store. check verifies the tenant once per topic (the store's GetChat).
func (b *broker) events(ctx context.Context, tenant, id string, after int64, limit int, check func() error) ([]Event, error) {
	b.mu.Lock()
	t := b.topics[id]
	if t == nil || t.readers == 0 {
		b.mu.Unlock()
		if err := check(); err != nil {
			return nil, err
		}
		return b.store.ListEvents(ctx, &ListEventsParams{ChatID: id, After: after, Limit: limit})
	}
	t.refs++
	verified := t.tenants[tenant]
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		t.refs--
		b.dropLocked(id, t)
		b.mu.Unlock()
	}()
	if !verified {
		if err := check(); err != nil {
			return nil, err
		}
		b.mu.Lock()
		t.tenants[tenant] = true
		b.mu.Unlock()
	}
	if evs, ok := b.readTail(t, after, limit); ok {
		return evs, nil
	}
	// Catch up: one reader reads the store, the others wait for it and
	// then read the tail.
	t.fill.Lock()
	defer t.fill.Unlock()
	if evs, ok := b.readTail(t, after, limit); ok {
		return evs, nil
	}
	b.mu.Lock()
	within := len(t.tail) > 0 && after >= t.tail[0].Seq-1
	from := after
	if within {
		from = t.tail[len(t.tail)-1].Seq // the tail is good to its end; read what follows
	}
	// Notifications from here on mark the tail stale again.
	t.stale = false
	b.mu.Unlock()
	page := max(limit, tailSize)
	evs, err := b.store.ListEvents(ctx, &ListEventsParams{ChatID: id, After: from, Limit: page})
	if err != nil {
		b.mu.Lock()
		t.stale = true
		b.mu.Unlock()
		return nil, err
	}
	b.mu.Lock()
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
	if len(evs) == page {
		t.stale = true // there may be more than one page
	}
	b.mu.Unlock()
	if evs, ok := b.readTail(t, after, limit); ok {
		return evs, nil
	}
	// The reader is behind what the tail keeps: serve it from what was read.
	return b.store.ListEvents(ctx, &ListEventsParams{ChatID: id, After: after, Limit: limit})
}

func (b *broker) readTail(t *topic, after int64, limit int) ([]Event, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return t.read(after, limit)
}

// erased is called when a chat was erased (on any replica): what is kept
// of it goes, tenants are verified again (the store now answers not
// found), and every subscriber is woken to find out.
func (b *broker) erased(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topics[id]
	if t == nil {
		return
	}
	t.tail, t.stale, t.tenants = nil, true, map[string]bool{}
	b.signalLocked(t, Wake{})
}
