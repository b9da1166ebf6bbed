package postgres

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/agentd/agentd/internal/chat"
)

// Relay channels (chat.DeltaRelay). A payload starts with the sender's name
// and a newline, so that a listener skips its own without decoding them.
//
//   - channelDeltas: then a JSON array of deltas (wireDelta), as many as fit.
//   - channelFollows: then "1" (replay) or "0", a newline, and chat ids
//     separated by commas (none: a question, see RelayFollows).
const (
	channelDeltas  = "agentd_deltas"
	channelFollows = "agentd_follows"
)

var _ chat.DeltaRelay = (*Store)(nil)

// maxRelayQueued bounds the text of the relayed deltas waiting for a flush
// (while the database does not answer, say): past it, deltas are dropped
// and counted as not relayed.
const maxRelayQueued = 4 << 20

var errRelayFull = errors.New("too many relayed deltas wait for the database")

// RelayDelta implements chat.DeltaRelay: the delta goes with the next
// flush of notifications (at most notifyInterval away).
func (s *Store) RelayDelta(from string, d chat.RelayedDelta) {
	n := s.notify
	n.mu.Lock()
	ok := n.relayed.addDelta(from, d)
	failed := n.relayFailed
	n.mu.Unlock()
	if !ok {
		if failed != nil {
			failed(1, errRelayFull)
		}
		return
	}
	n.kick()
}

// RelayFollows implements chat.DeltaRelay.
func (s *Store) RelayFollows(from string, chatIDs []string, replay bool) {
	n := s.notify
	n.mu.Lock()
	n.relayed.follows = append(n.relayed.follows, followNote{from: from, replay: replay, ids: chatIDs})
	n.mu.Unlock()
	n.kick()
}

// relayQueue is what a notifier holds of what replicas relay, between two
// flushes.
type relayQueue struct {
	deltas []queuedRelay
	// last is the index in deltas of each chat's last delta: a fragment
	// that continues it is joined to it, so that a flush carries one entry
	// per reply, not one per fragment.
	last    map[string]int
	text    int // bytes of text queued
	follows []followNote
}

type queuedRelay struct {
	from string
	d    chat.RelayedDelta
	// joined is the text once a later fragment was joined.
	joined []byte
}

type followNote struct {
	from   string
	replay bool
	ids    []string
}

func (q *relayQueue) empty() bool { return len(q.deltas) == 0 && len(q.follows) == 0 }

// addDelta queues d; false if the queue is full.
func (q *relayQueue) addDelta(from string, d chat.RelayedDelta) bool {
	if q.text+len(d.Content) > maxRelayQueued {
		return false
	}
	q.text += len(d.Content)
	if i, ok := q.last[d.ChatID]; ok {
		p := &q.deltas[i]
		if p.from == from && p.d.Epoch == d.Epoch && p.d.AfterSeq == d.AfterSeq && p.d.Name == d.Name &&
			!p.d.Reset && !d.Reset && !d.Replay {
			// A replay stays one: its text so far, and then this.
			if p.joined == nil {
				p.joined = append(make([]byte, 0, 2*(len(p.d.Content)+len(d.Content))), p.d.Content...)
			}
			p.joined = append(p.joined, d.Content...)
			return true
		}
	}
	if q.last == nil {
		q.last = map[string]int{}
	}
	q.last[d.ChatID] = len(q.deltas)
	q.deltas = append(q.deltas, queuedRelay{from: from, d: d})
	return true
}

// take moves what is queued into the flush's notifications, follows
// first, and empties the queue.
func (q *relayQueue) take(f *flush) {
	for _, fn := range q.follows {
		for _, p := range followPayloads(fn) {
			f.channels, f.payloads = append(f.channels, channelFollows), append(f.payloads, p)
		}
	}
	for _, p := range deltaPayloads(q.deltas) {
		f.channels, f.payloads = append(f.channels, channelDeltas), append(f.payloads, p)
	}
	f.deltas = len(q.deltas)
	*q = relayQueue{}
}

// followPayloads writes a follow note into as few payloads as fit.
func followPayloads(fn followNote) []string {
	head := fn.from + "\n0\n"
	if fn.replay {
		head = fn.from + "\n1\n"
	}
	if len(fn.ids) == 0 {
		return []string{head} // a question: what do the others follow
	}
	var out []string
	var b strings.Builder
	for _, id := range fn.ids {
		if b.Len() > 0 && b.Len()+1+len(id) > maxPayload {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() == 0 {
			b.WriteString(head)
		} else {
			b.WriteByte(',')
		}
		b.WriteString(id)
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// wireDelta is a relayed delta in a payload.
type wireDelta struct {
	Chat   string `json:"c"`
	Epoch  int64  `json:"e"`
	After  int64  `json:"a"`
	Name   string `json:"n"`
	Text   string `json:"t,omitempty"`
	Reset  bool   `json:"r,omitempty"`
	Replay bool   `json:"p,omitempty"`
}

// deltaPayloads writes queued deltas into as few payloads as fit, in
// order; a text too long for one payload is split across several (its
// pieces after the first are fragments that continue it).
func deltaPayloads(ds []queuedRelay) []string {
	var (
		out  []string
		buf  bytes.Buffer
		from string
		b    []byte // the payload being filled
		n    int    // entries in b
	)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	encode := func(w wireDelta) []byte {
		buf.Reset()
		_ = enc.Encode(w) // a struct of strings, numbers and booleans always encodes
		return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	end := func() {
		if n > 0 {
			out = append(out, string(append(b, ']')))
		}
		b, n = nil, 0
	}
	put := func(entry []byte) {
		if n > 0 && len(b)+1+len(entry)+1 > maxPayload {
			end()
		}
		if n == 0 {
			b = append(append(append(b[:0], from...), '\n'), '[')
		} else {
			b = append(b, ',')
		}
		b = append(b, entry...)
		n++
	}
	for _, q := range ds {
		if q.from != from {
			end()
			from = q.from
		}
		w := wireDelta{Chat: q.d.ChatID, Epoch: q.d.Epoch, After: q.d.AfterSeq, Name: q.d.Name, Text: q.d.Content,
			Reset: q.d.Reset, Replay: q.d.Replay}
		if q.joined != nil {
			w.Text = string(q.joined)
		}
		// Room for the entry in an empty payload: the sender, brackets.
		room := maxPayload - len(from) - 3
		if entry := encode(w); len(entry) <= room {
			put(entry)
			continue
		}
		// Escaping makes a byte at most six (\u00XX), and the rest of the
		// entry is short: pieces of this many bytes always fit.
		piece := max((room-len(encode(wireDelta{Chat: w.Chat, Epoch: w.Epoch, After: w.After, Name: w.Name, Replay: true})))/6, 4)
		for text := w.Text; text != ""; {
			cut := min(piece, len(text))
			for cut < len(text) && cut > 0 && !utf8.RuneStart(text[cut]) {
				cut--
			}
			w.Text, text = text[:cut], text[cut:]
			put(encode(w))
			w.Replay = false
		}
	}
	end()
	return out
}

// decodeDeltas reads the deltas of a payload (after the sender's line).
func decodeDeltas(body string) ([]chat.RelayedDelta, error) {
	var ws []wireDelta
	if err := json.Unmarshal([]byte(body), &ws); err != nil {
		return nil, err
	}
	ds := make([]chat.RelayedDelta, len(ws))
	for i, w := range ws {
		ds[i] = chat.RelayedDelta{ChatID: w.Chat, Epoch: w.Epoch, Replay: w.Replay,
			Delta: chat.Delta{Name: w.Name, Content: w.Text, Reset: w.Reset, AfterSeq: w.After}}
	}
	return ds, nil
}

// decodeFollows reads a follows payload (after the sender's line).
func decodeFollows(body string) (ids []string, replay bool, ok bool) {
	flag, list, ok := strings.Cut(body, "\n")
	if !ok || (flag != "0" && flag != "1") {
		return nil, false, false
	}
	if list == "" {
		return nil, flag == "1", true
	}
	return strings.Split(list, ","), flag == "1", true
}
