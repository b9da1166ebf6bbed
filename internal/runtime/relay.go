package runtime

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/tick"

	"github.com/prometheus/client_golang/prometheus"
)

// How replicas learn which chats' deltas others want: a replica whose
// streams follow a chat says so when its first stream subscribes, and
// again every followEvery while one is open; the replica that runs the
// chat relays its deltas while the last word is younger than followTTL.
// Every replica keeps what it heard, so one that takes a chat over knows
// at once who follows it; one that just started has heard nothing yet, and
// relays every chat's deltas until the others had time to tell it
// (followGrace).
const (
	followEvery = 5 * time.Second
	followTTL   = 3 * followEvery
)

// followGrace is how long after its listener listens a replica relays the
// deltas of every chat it runs, followed or not: the time for the other
// replicas to answer its question of what they follow. A replica that
// takes a chat over as soon as it starts (a rolling restart, a replica
// that replaces one that died) would otherwise stream the reply before it
// heard that a stream elsewhere waits for it, and that stream would see
// the reply only as its message.
const followGrace = 2 * time.Second

// relayLogEvery bounds the log lines about deltas that could not be
// relayed: one per interval, with the count since the last.
const relayLogEvery = 10 * time.Second

// relay carries the deltas of replies between this replica and the others
// through the store (DeltaRelay), so that a stream sees a reply being typed
// whichever replica it is connected to.
//
// The replica that runs a chat relays its deltas only while another
// replica follows the chat, and the first time a reply reaches followers it
// sends the reply's whole text so far (a replay), so a follower that joins
// late, or whose notifications were lost, still gets the reply from its
// start. Each delta carries the lease epoch of the worker that streamed it:
// a follower drops deltas of an older epoch and, at the first delta of a
// newer one (a takeover after the replica that ran the chat died), tells
// its streams that the text so far is void (a reset), as a retried model
// call does. Nothing here is durable: a delta lost on the way costs a
// stream that fragment until the message event, which holds the whole
// reply, comes through the log as always.
//
// A nil *relay, or one without a DeltaRelay, relays nothing.
type relay struct {
	out  chat.DeltaRelay
	self string
	b    *broker
	now  func() time.Time
	log  *slog.Logger
	m    *metrics
	// sent and got are agentd_deltas_relayed_total's two series.
	sent, got prometheus.Counter

	mu       sync.Mutex
	interest map[string]time.Time // chat → until when another replica follows it
	// listened is when the listener last started to listen; until
	// followGrace after it (and before it) every chat counts as followed.
	listened time.Time
	lost     int // deltas not relayed since the last log line
	loggedAt time.Time
}

func newRelay(out chat.DeltaRelay, self string, b *broker, now func() time.Time, log *slog.Logger, m *metrics) *relay {
	return &relay{out: out, self: self, b: b, now: now, log: log, m: m, interest: map[string]time.Time{},
		sent: m.deltasRelayed.WithLabelValues("sent"), got: m.deltasRelayed.WithLabelValues("received")}
}

func (r *relay) on() bool { return r != nil && r.out != nil }

// hasFollowers reports whether another replica follows the chat's deltas, or
// may, as far as this replica can tell yet (see followGrace).
func (r *relay) hasFollowers(id string) bool {
	now := r.now()
	r.mu.Lock()
	until, ok := r.interest[id]
	unsure := r.listened.IsZero() || now.Before(r.listened.Add(followGrace))
	r.mu.Unlock()
	return unsure || ok && now.Before(until)
}

// send relays a delta that this replica's worker streamed (t is locked,
// and d applied to it), if another replica follows the chat. See relay.
func (r *relay) send(t *topic, epoch int64, d chat.Delta) {
	if !r.on() {
		return
	}
	if !r.hasFollowers(t.id) {
		t.reply.relayed = false
		return
	}
	if t.reply.relayed {
		r.out.RelayDelta(r.self, chat.RelayedDelta{ChatID: t.id, Epoch: epoch, Delta: d})
		r.sent.Inc()
		return
	}
	if d.Reset {
		r.out.RelayDelta(r.self, chat.RelayedDelta{ChatID: t.id, Epoch: epoch, Delta: d})
	}
	r.replayLocked(t)
}

// replayLocked relays the replies in progress of t, a chat this replica
// runs, from their start.
func (r *relay) replayLocked(t *topic) {
	for _, d := range t.reply.deltas() {
		r.out.RelayDelta(r.self, chat.RelayedDelta{ChatID: t.id, Epoch: t.reply.epoch, Delta: d, Replay: true})
		r.sent.Inc()
	}
	t.reply.relayed = true
}

// received takes deltas another replica relayed: the chats this replica
// has streams of, and does not run itself, get them.
func (r *relay) received(from string, ds []chat.RelayedDelta) {
	if from == r.self {
		return
	}
	for _, d := range ds {
		t := r.b.lookup(d.ChatID)
		if t == nil {
			continue
		}
		if t.streams > 0 && t.local == 0 && (d.Replay || !t.reply.awaitReplay) && t.deltaLocked(d.Epoch, d.Delta, d.Replay) {
			if d.Replay {
				t.reply.awaitReplay = false
			}
			r.got.Inc()
		}
		t.mu.Unlock()
	}
}

// heard takes another replica's word that its streams follow the chats;
// with replay, the replies in progress of those this replica runs are
// relayed from their start.
func (r *relay) heard(from string, ids []string, replay bool) {
	if from == r.self {
		return
	}
	if len(ids) == 0 {
		// A replica that just started asks what the others follow.
		if mine := r.b.streamed(); len(mine) > 0 && r.on() {
			r.out.RelayFollows(r.self, mine, false)
		}
		return
	}
	until := r.now().Add(followTTL)
	r.mu.Lock()
	for _, id := range ids {
		r.interest[id] = until
	}
	r.mu.Unlock()
	if !replay || !r.on() {
		return
	}
	for _, id := range ids {
		if t := r.b.lookup(id); t != nil {
			if t.local > 0 {
				r.replayLocked(t)
			}
			t.mu.Unlock()
		}
	}
}

// announce says, for a chat whose first stream just subscribed here, that
// this replica wants its deltas, from the start of the reply in progress.
func (r *relay) announce(id string) {
	if r.on() {
		r.out.RelayFollows(r.self, []string{id}, true)
	}
}

// listening is called each time this replica's notification listener
// starts to listen, at start and after it lost its connection: what was
// relayed before is lost. It asks the other replicas what they follow
// (this replica may take over a chat whose reply a stream elsewhere waits
// for; until followGrace has passed it relays every chat's deltas), and
// asks again for the replies in progress of the chats its own streams
// follow, from their start.
func (r *relay) listening() {
	if !r.on() {
		return
	}
	r.mu.Lock()
	r.listened = r.now()
	r.mu.Unlock()
	r.out.RelayFollows(r.self, nil, false)
	if ids := r.b.streamed(); len(ids) > 0 {
		r.out.RelayFollows(r.self, ids, true)
	}
}

// loop says every followEvery which chats this replica's streams follow,
// and forgets what other replicas follow no more, until ctx ends.
func (r *relay) loop(ctx context.Context) {
	if !r.on() {
		return
	}
	tick.Every(ctx, followEvery, func(context.Context) {
		if ids := r.b.streamed(); len(ids) > 0 {
			r.out.RelayFollows(r.self, ids, false)
		}
		now := r.now()
		r.mu.Lock()
		for id, until := range r.interest {
			if !now.Before(until) {
				delete(r.interest, id)
			}
		}
		r.mu.Unlock()
	})
}

// failed is told that n relayed deltas could not be sent: the streams on
// other replicas miss those fragments (they still get every message).
func (r *relay) failed(n int, err error) {
	r.m.deltaRelayFailures.Add(float64(n))
	now := r.now()
	r.mu.Lock()
	r.lost += n
	lost := r.lost
	due := now.Sub(r.loggedAt) >= relayLogEvery
	if due {
		r.lost, r.loggedAt = 0, now
	}
	r.mu.Unlock()
	if due {
		r.log.Warn("deltas could not be relayed to the other replicas; their streams get these replies as whole messages only",
			"deltas", lost, "err", err)
	}
}

// streamed returns the chats that have streams on this replica.
func (b *broker) streamed() []string {
	b.mu.RLock()
	ts := make([]*topic, 0, len(b.topics))
	for _, t := range b.topics {
		ts = append(ts, t)
	}
	b.mu.RUnlock()
	var ids []string
	for _, t := range ts {
		t.mu.Lock()
		if !t.dead && t.streams > 0 {
			ids = append(ids, t.id)
		}
		t.mu.Unlock()
	}
	return ids
}
