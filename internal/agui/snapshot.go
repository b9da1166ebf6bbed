package agui

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/chat"
)

// A MESSAGES_SNAPSHOT replaces the messages the client holds, but
// HttpAgent merges it rather than taking it whole: it keeps the messages
// whose ids it already holds where they are, drops the ones the snapshot
// does not name, and appends the rest in the snapshot's order. A snapshot
// whose ids were all new would be taken whole; one that named a later
// message as the client holds it and an earlier one anew would reorder
// the thread (the earlier one would go to the end), and so would one that
// named two messages by the client's ids where the client holds them in
// the other order. So a snapshot names the messages the client holds by
// the client's ids as long as the client holds every message before them,
// in the thread's order; from the first message it lacks or holds out of
// order on, every message by an id the client does not hold: what it
// holds is a prefix of the thread, kept in place, and the rest follows in
// order.

// heldMessage is a message the client holds: its id, its role, for a
// user's message its text (a user's own message is known by its text),
// and for an assistant's the ids of its tool calls (a tool result goes
// after the message of its call).
type heldMessage struct {
	id, role, text string
	calls          []string
}

// heldOf reads the messages of a request.
func heldOf(msgs []inputMessage) []heldMessage {
	out := make([]heldMessage, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, heldOne(m))
	}
	return out
}

// heldOne reads one message of a request.
func heldOne(m inputMessage) heldMessage {
	h := heldMessage{id: m.ID, role: m.Role}
	if m.Role == "user" {
		h.text = contentText(m.Content)
	}
	for _, tc := range m.ToolCalls {
		h.calls = append(h.calls, tc.ID)
	}
	return h
}

// heldFrom adds the messages that events of a stream gave the client
// where HttpAgent puts them: a text message it starts, and the message a
// tool call starts, at the end unless it holds that id already; a tool
// result right after the message of its call and the results that follow
// that message. So a client may hold a run's messages in another order
// than the thread: parallel replies stream at once and are appended as
// they finish, a tool result lands after a sibling's reply.
func heldFrom(held []heldMessage, evs []Event) []heldMessage {
	for _, e := range evs {
		switch e.Type() {
		case typeTextMessageStart:
			id, _ := e["messageId"].(string)
			role, _ := e["role"].(string)
			if heldIndex(held, id) < 0 {
				held = append(held, heldMessage{id: id, role: role})
			}
		case typeToolCallStart:
			id, _ := e["parentMessageId"].(string)
			call, _ := e["toolCallId"].(string)
			if i := heldIndex(held, id); i >= 0 && held[i].role == "assistant" {
				held[i].calls = append(held[i].calls, call)
			} else {
				held = append(held, heldMessage{id: id, role: "assistant", calls: []string{call}})
			}
		case typeToolCallResult:
			id, _ := e["messageId"].(string)
			call, _ := e["toolCallId"].(string)
			h := heldMessage{id: id, role: "tool"}
			i := heldCall(held, call)
			if i < 0 {
				held = append(held, h)
				continue
			}
			for i++; i < len(held) && held[i].role == "tool"; i++ {
			}
			held = slices.Insert(held, i, h)
		}
	}
	return held
}

// heldIndex is where the client holds id, -1 for nowhere. The latest
// messages are the likeliest, so the search starts at the end.
func heldIndex(held []heldMessage, id string) int {
	for i := len(held) - 1; i >= 0; i-- {
		if held[i].id == id {
			return i
		}
	}
	return -1
}

// heldCall is where the client holds the assistant's message that made
// tool call id, -1 for nowhere.
func heldCall(held []heldMessage, id string) int {
	for i := len(held) - 1; i >= 0; i-- {
		if held[i].role == "assistant" && slices.Contains(held[i].calls, id) {
			return i
		}
	}
	return -1
}

// inOrder reports whether the client holds the messages ids (a run's, in
// the order they landed in the thread) in that order. A message it does
// not hold is skipped.
func inOrder(held []heldMessage, ids []string) bool {
	pos := make(map[string]int, len(ids))
	for _, id := range ids {
		pos[id] = -1
	}
	for i, h := range held {
		if p, ok := pos[h.id]; ok && p < 0 {
			pos[h.id] = i
		}
	}
	last := -1
	for _, id := range ids {
		if p := pos[id]; p >= 0 {
			if p < last {
				return false
			}
			last = p
		}
	}
	return true
}

// heldSnapshot is what the client holds once it has taken a snapshot.
func heldSnapshot(snap []map[string]any) []heldMessage {
	out := make([]heldMessage, 0, len(snap))
	for _, m := range snap {
		h := heldMessage{}
		h.id, _ = m["id"].(string)
		h.role, _ = m["role"].(string)
		if h.role == "user" {
			h.text, _ = m["content"].(string)
		}
		tcs, _ := m["toolCalls"].([]map[string]any)
		for _, tc := range tcs {
			id, _ := tc["id"].(string)
			h.calls = append(h.calls, id)
		}
		out = append(out, h)
	}
	return out
}

// snapshotEntry is one AG-UI message of a snapshot, before it is named.
type snapshotEntry struct {
	seq int64
	// part is the index of a tool result among its message's; -1 for the
	// message itself.
	part int
	// own: the task of a run or a human's message, which a client holds
	// under an id of its own.
	own  bool
	name string
	msg  map[string]any
}

func (e snapshotEntry) role() string { s, _ := e.msg["role"].(string); return s }

// snapshotEntries are a chat's messages as AG-UI messages (without their
// ids), for a MESSAGES_SNAPSHOT. An inner team's are left out.
func snapshotEntries(evs []chat.Event) []snapshotEntry {
	var out []snapshotEntry
	for _, e := range evs {
		msg, ok := chat.MessageFromEvent(e)
		if !ok || msg.Team != "" {
			continue
		}
		if len(msg.ToolResponses) > 0 {
			for i, tr := range msg.ToolResponses {
				out = append(out, snapshotEntry{seq: msg.Seq, part: i, name: msg.Name,
					msg: map[string]any{"role": "tool", "toolCallId": tr.ToolCallID, "content": tr.Content}})
			}
			continue
		}
		en := snapshotEntry{seq: msg.Seq, part: -1, name: msg.Name}
		switch msg.Role {
		case chat.RoleUser:
			var d chat.MessageData
			_ = chat.DecodeData(e, &d)
			en.own = d.Kind == chat.KindTask || d.Kind == chat.KindHuman
			en.msg = map[string]any{"role": "user", "name": msg.Name, "content": msg.Content}
		case chat.RoleSystem:
			en.msg = map[string]any{"role": "system", "content": msg.Content}
		default:
			en.msg = map[string]any{"role": "assistant", "name": msg.Name, "content": msg.Content}
			if len(msg.ToolCalls) > 0 {
				tcs := make([]map[string]any, 0, len(msg.ToolCalls))
				for _, tc := range msg.ToolCalls {
					tcs = append(tcs, map[string]any{"id": tc.ID, "type": "function",
						"function": map[string]any{"name": tc.Function.Name, "arguments": tc.Function.Arguments}})
				}
				en.msg["toolCalls"] = tcs
			}
		}
		out = append(out, en)
	}
	return out
}

// nameSnapshot names the entries for a client that holds held (see the
// top of this file) and returns the snapshot. pending, when not nil, is
// the client's message that the run takes as its task or answer but that
// the entries do not hold yet: it ends the snapshot, so that the client
// keeps it.
func nameSnapshot(entries []snapshotEntry, held []heldMessage, pending *heldMessage) []map[string]any {
	// pos is where the client holds each id (its first place).
	pos := make(map[string]int, len(held))
	for i := len(held) - 1; i >= 0; i-- {
		pos[held[i].id] = i
	}
	index := make(map[[2]int64]int, len(entries))
	for i, en := range entries {
		index[[2]int64{en.seq, int64(en.part)}] = i
	}
	// as is the id the client holds each entry by ("" for none).
	as := make([]string, len(entries))
	claimed := map[string]bool{}
	claim := func(i int, h heldMessage) {
		if as[i] == "" && !claimed[h.id] && entries[i].role() == h.role {
			as[i], claimed[h.id] = h.id, true
		}
	}
	// The ids this server gave: msg-<seq> (and its tool results' ids)
	// first, then a streamed reply's, which names the first message of
	// its agent after the seq it followed unless that message came whole
	// (a reply made again: the stream was a fragment).
	for _, h := range held {
		if seq, part, ok := parseMessageID(h.id); ok {
			if i, ok := index[[2]int64{seq, int64(part)}]; ok {
				claim(i, h)
			}
		}
	}
	// Entries by agent (replies) and by text (the client's own), in the
	// thread's order: a client holds up to 10,000 messages, so each is
	// found by a search, not a scan.
	replies, owns := map[string][]int{}, map[string][]int{}
	for i, en := range entries {
		switch {
		case en.part < 0 && en.role() == "assistant":
			replies[en.name] = append(replies[en.name], i)
		case en.own:
			text, _ := en.msg["content"].(string)
			owns[text] = append(owns[text], i)
		}
	}
	for _, h := range held {
		if after, name, ok := parseReplyID(h.id); ok {
			is := replies[name]
			if k := sort.Search(len(is), func(k int) bool { return entries[is[k]].seq > after }); k < len(is) {
				claim(is[k], h)
			}
		}
	}
	// The client's own messages, by their text, in order.
	next := 0
	for _, h := range held {
		if h.role != "user" || claimed[h.id] || isServerID(h.id) {
			continue
		}
		is := owns[h.text]
		if k := sort.SearchInts(is, next); k < len(is) && as[is[k]] == "" {
			claim(is[k], h)
			next = is[k] + 1
		}
	}

	used := map[string]bool{}
	fresh := func(id string) string {
		c := id
		for k := 2; ; k++ {
			if _, held := pos[c]; !held && !used[c] {
				return c
			}
			c = fmt.Sprintf("%s.%d", id, k)
		}
	}
	out := make([]map[string]any, 0, len(entries)+1)
	// The messages kept are those the client holds in the thread's order
	// (last is where the latest of them is): from the first it lacks, or
	// holds before one kept already, each is named anew.
	gap, last := false, -1
	for i, en := range entries {
		id := as[i]
		if !gap && id != "" && pos[id] > last {
			last = pos[id]
		} else {
			gap = true
			id = messageID(en.seq)
			if en.part >= 0 {
				id = toolResultID(en.seq, en.part)
			}
			id = fresh(id)
		}
		used[id] = true
		en.msg["id"] = id // each entry's message is its own
		out = append(out, en.msg)
	}
	if pending != nil && !claimed[pending.id] {
		id := pending.id
		if p, held := pos[id]; gap || (held && p < last) {
			id = fresh(id)
		}
		out = append(out, map[string]any{"id": id, "role": "user", "content": pending.text})
	}
	return out
}

// parseMessageID reads an id messageID made, or a tool result's
// (msg-<seq>-<i>), either with a suffix fresh added (.<k>).
func parseMessageID(id string) (seq int64, part int, ok bool) {
	rest, found := strings.CutPrefix(id, "msg-")
	if !found {
		return 0, 0, false
	}
	if i := strings.LastIndexByte(rest, '.'); i >= 0 {
		if _, err := strconv.Atoi(rest[i+1:]); err != nil {
			return 0, 0, false
		}
		rest = rest[:i]
	}
	s, p, hasPart := strings.Cut(rest, "-")
	seq, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	part = -1
	if hasPart {
		if part, err = strconv.Atoi(p); err != nil {
			return 0, 0, false
		}
	}
	return seq, part, true
}

// parseReplyID reads a streamed reply's id (reply-<seq it followed>-<agent>).
func parseReplyID(id string) (after int64, name string, ok bool) {
	rest, found := strings.CutPrefix(id, "reply-")
	if !found {
		return 0, "", false
	}
	s, name, found := strings.Cut(rest, "-")
	after, err := strconv.ParseInt(s, 10, 64)
	if !found || err != nil {
		return 0, "", false
	}
	return after, name, true
}

// isServerID reports whether an id is one this server gives.
func isServerID(id string) bool {
	_, _, msg := parseMessageID(id)
	_, _, reply := parseReplyID(id)
	return msg || reply
}

// replyID is the id of a reply streamed by agent after seq.
func replyID(after int64, agent string) string { return fmt.Sprintf("reply-%d-%s", after, agent) }
