package agui

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/agentd/agentd/internal/chat"
)

// merge takes a snapshot as HttpAgent 1.0.0 does: the messages it holds
// that the snapshot names stay where they are (as the snapshot has them),
// the others go, and the snapshot's other messages follow in its order.
// It returns the texts the client then holds.
func merge(held []heldMessage, snap []map[string]any) []string {
	byID := map[string]map[string]any{}
	for _, m := range snap {
		byID[m["id"].(string)] = m
	}
	var out []map[string]any
	kept := map[string]bool{}
	for _, h := range held {
		if m, ok := byID[h.id]; ok && !kept[h.id] {
			out, kept[h.id] = append(out, m), true
		}
	}
	for _, m := range snap {
		if !kept[m["id"].(string)] {
			out = append(out, m)
		}
	}
	texts := make([]string, len(out))
	for i, m := range out {
		texts[i], _ = m["content"].(string)
	}
	return texts
}

func ids(snap []map[string]any) []string {
	var out []string
	for _, m := range snap {
		out = append(out, m["id"].(string))
	}
	return out
}

// TestSnapshotKeepsTheThreadsOrderInTheClient: whatever the client holds
// (its own ids, replies it got streamed or whole, fragments, a message it
// never got), once it has taken the snapshot it holds the thread in the
// thread's order.
func TestSnapshotKeepsTheThreadsOrderInTheClient(t *testing.T) {
	user := func(id, text string) heldMessage { return heldMessage{id: id, role: "user", text: text} }
	reply := func(id string) heldMessage { return heldMessage{id: id, role: "assistant"} }
	twoRuns := []chat.Event{ev(2, chat.EventRunStarted, chat.RunData{Run: 1}), msg(3, chat.RoleUser, "user", "first", chat.KindTask),
		msg(6, chat.RoleAssistant, "a", "one", chat.KindModel), msg(8, chat.RoleAssistant, "b", "two", chat.KindModel),
		ev(10, chat.EventRunStarted, chat.RunData{Run: 2}), msg(11, chat.RoleUser, "user", "second", chat.KindTask),
		msg(12, chat.RoleAssistant, "a", "three", chat.KindModel)}
	answered := []chat.Event{msg(3, chat.RoleUser, "user", "draft", chat.KindTask), msg(4, chat.RoleAssistant, "w", "draft one", chat.KindModel),
		msg(6, chat.RoleUser, "editor", "one more pass", chat.KindHuman), msg(7, chat.RoleAssistant, "w", "draft two", chat.KindModel)}
	tests := []struct {
		name    string
		evs     []chat.Event
		held    []heldMessage
		pending *heldMessage
		want    []string // the snapshot's ids
		texts   []string
	}{
		{"a later run, its task not in the thread yet", twoRuns[:4], []heldMessage{user("u-0", "first"), reply("msg-6"), reply("msg-8"), user("u-1", "second")},
			&heldMessage{id: "u-1", role: "user", text: "second"},
			[]string{"u-0", "msg-6", "msg-8", "u-1"}, []string{"first", "one", "two", "second"}},
		{"a later run, its task in the thread", twoRuns[:6], []heldMessage{user("u-0", "first"), reply("msg-6"), reply("msg-8"), user("u-1", "second")},
			&heldMessage{id: "u-1", role: "user", text: "second"},
			[]string{"u-0", "msg-6", "msg-8", "u-1"}, []string{"first", "one", "two", "second"}},
		{"streamed replies", twoRuns, []heldMessage{user("u-0", "first"), reply("reply-3-a"), reply("reply-6-b"), user("u-1", "second"), reply("reply-11-a")}, nil,
			[]string{"u-0", "reply-3-a", "reply-6-b", "u-1", "reply-11-a"}, []string{"first", "one", "two", "second", "three"}},
		{"a reply made again: its fragment, then the message whole", twoRuns[:4], []heldMessage{user("u-0", "first"), reply("reply-3-a"), reply("reply-6-b"), reply("msg-8")}, nil,
			[]string{"u-0", "reply-3-a", "msg-8"}, []string{"first", "one", "two"}},
		{"a client that keeps nothing", twoRuns[:4], []heldMessage{user("u-9", "second")}, &heldMessage{id: "u-9", role: "user", text: "second"},
			[]string{"msg-3", "msg-6", "msg-8", "u-9.2"}, []string{"first", "one", "two", "second"}},
		// The human's answer came in a resume, not as a message: from it on
		// every message is named anew, a message held as msg-7 too.
		{"a message the client never got", answered, []heldMessage{user("u-0", "draft"), reply("msg-4"), reply("msg-7")}, nil,
			[]string{"u-0", "msg-4", "msg-6", "msg-7.2"}, []string{"draft", "draft one", "one more pass", "draft two"}},
		// Replies streamed side by side: the client holds b's, which
		// began first, before a's, which landed first.
		{"replies held in another order", twoRuns[:4], []heldMessage{user("u-0", "first"), reply("reply-3-b"), reply("reply-3-a")}, nil,
			[]string{"u-0", "reply-3-a", "msg-8"}, []string{"first", "one", "two"}},
		{"a later run's task held before the replies of the run before", twoRuns[:4], []heldMessage{user("u-0", "first"), user("u-1", "second"), reply("msg-6"), reply("msg-8")},
			&heldMessage{id: "u-1", role: "user", text: "second"},
			[]string{"u-0", "msg-6", "msg-8", "u-1.2"}, []string{"first", "one", "two", "second"}},
		{"a tool call and its result", []chat.Event{msg(3, chat.RoleUser, "user", "add", chat.KindTask), toolCall(4), toolResult(5), msg(6, chat.RoleAssistant, "calc", "3", chat.KindModel)},
			[]heldMessage{user("u-0", "add"), reply("msg-4"), {id: "msg-5-0", role: "tool"}, reply("reply-5-calc")}, nil,
			[]string{"u-0", "msg-4", "msg-5-0", "reply-5-calc"}, []string{"add", "", "3", "3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := nameSnapshot(snapshotEntries(tt.evs), tt.held, tt.pending)
			if got := ids(snap); !slices.Equal(got, tt.want) {
				t.Errorf("ids %q, want %q", got, tt.want)
			}
			if got := merge(tt.held, snap); !slices.Equal(got, tt.texts) {
				t.Errorf("the client holds %q, want %q", got, tt.texts)
			}
		})
	}
}

func toolCall(seq int64) chat.Event {
	e := msg(seq, chat.RoleAssistant, "calc", "", chat.KindModel)
	e.ToolCalls = []chat.ToolCall{{ID: "c1", Type: "function", Function: chat.FunctionCall{Name: "add", Arguments: "{}"}}}
	return e
}

func toolResult(seq int64) chat.Event {
	e := msg(seq, chat.RoleTool, "calc", "3", chat.KindTool)
	e.ToolResponses = []chat.ToolResponse{{ToolCallID: "c1", Role: chat.RoleTool, Content: "3"}}
	return e
}

// TestHeldFromAStream: what a stream's events give the client, where
// HttpAgent puts it: a tool call on the message it holds already, a tool
// result right after the message of its call and the results after it.
func TestHeldFromAStream(t *testing.T) {
	start := func(id string) Event {
		return Event{"type": typeTextMessageStart, "messageId": id, "role": "assistant"}
	}
	evs := []Event{start("reply-2-a"), {"type": typeTextMessageContent, "messageId": "reply-2-a", "delta": "x"},
		{"type": typeToolCallStart, "toolCallId": "c1", "parentMessageId": "reply-2-a"}, start("reply-2-b"),
		{"type": typeToolCallStart, "toolCallId": "c2", "parentMessageId": "msg-4"},
		{"type": typeToolCallResult, "messageId": "msg-5-0", "toolCallId": "c1"}, {"type": typeToolCallResult, "messageId": "msg-6-0", "toolCallId": "c1"},
		start("reply-2-b"), {"type": typeToolCallResult, "messageId": "msg-7-0", "toolCallId": "c9"}}
	want := []heldMessage{{id: "reply-2-a", role: "assistant", calls: []string{"c1"}}, {id: "msg-5-0", role: "tool"}, {id: "msg-6-0", role: "tool"},
		{id: "reply-2-b", role: "assistant"}, {id: "msg-4", role: "assistant", calls: []string{"c2"}}, {id: "msg-7-0", role: "tool"}}
	if got := heldFrom(nil, evs); !reflect.DeepEqual(got, want) {
		t.Errorf("held %+v\nwant %+v", got, want)
	}
}

func TestInOrder(t *testing.T) {
	held := []heldMessage{{id: "u-0"}, {id: "a"}, {id: "b"}, {id: "c"}}
	for _, c := range []struct {
		ids  []string
		want bool
	}{{[]string{"a", "b", "c"}, true}, {[]string{"a", "x", "c"}, true}, {nil, true}, {[]string{"b", "a", "c"}, false}, {[]string{"a", "c", "b"}, false}} {
		if got := inOrder(held, c.ids); got != c.want {
			t.Errorf("inOrder(%q) = %v, want %v", c.ids, got, c.want)
		}
	}
}

func TestParseIDs(t *testing.T) {
	for _, c := range []struct {
		id        string
		seq       int64
		part      int
		ok, reply bool
	}{
		{"msg-12", 12, -1, true, false}, {"msg-12-3", 12, 3, true, false}, {"msg-12.2", 12, -1, true, false}, {"msg-12-0.3", 12, 0, true, false},
		{"msg-x", 0, 0, false, false}, {"msg-12.x", 0, 0, false, false}, {"u-1", 0, 0, false, false}, {"reply-4-writer-two", 0, 0, false, true},
	} {
		seq, part, ok := parseMessageID(c.id)
		if ok != c.ok || (ok && (seq != c.seq || part != c.part)) {
			t.Errorf("parseMessageID(%q) = %d, %d, %v", c.id, seq, part, ok)
		}
		if after, name, ok := parseReplyID(c.id); ok != c.reply || (ok && (after != 4 || name != "writer-two")) {
			t.Errorf("parseReplyID(%q) = %d, %q, %v", c.id, after, name, ok)
		}
	}
}

// TestSnapshotPutsAnyClientInOrder: whatever a client holds of a thread
// (any of its messages, under any id the stream or the client could have
// given it, in any order, among messages the thread does not have, with a
// task of its own still to be run), once it has taken the snapshot it
// holds the thread, in the thread's order, and then its task.
func TestSnapshotPutsAnyClientInOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(46, 7))
	for n := range 3000 {
		var evs []chat.Event
		var names [][]heldMessage // the ids each message may be held by
		var texts []string
		seq := int64(1)
		for i := range 2 + rng.IntN(10) {
			seq++
			switch rng.IntN(5) {
			case 0:
				text := fmt.Sprintf("task %d", rng.IntN(3)) // the same text, at times
				evs = append(evs, msg(seq, chat.RoleUser, "user", text, chat.KindTask))
				names = append(names, []heldMessage{{id: fmt.Sprintf("u-%d", i), role: "user", text: text}})
				texts = append(texts, text)
			case 1:
				e := toolCall(seq)
				e.ToolCalls[0].ID = fmt.Sprintf("c%d", seq)
				r := msg(seq+1, chat.RoleTool, "calc", fmt.Sprintf("result %d", seq), chat.KindTool)
				r.ToolResponses = []chat.ToolResponse{{ToolCallID: e.ToolCalls[0].ID, Role: chat.RoleTool, Content: r.Content}}
				evs = append(evs, e, r)
				names = append(names, []heldMessage{{id: messageID(seq), role: "assistant", calls: []string{e.ToolCalls[0].ID}}},
					[]heldMessage{{id: toolResultID(seq+1, 0), role: "tool"}})
				texts = append(texts, "", r.Content)
				seq++
			default:
				name := []string{"a", "b", "c"}[rng.IntN(3)]
				text := fmt.Sprintf("%s at %d", name, seq)
				evs = append(evs, msg(seq, chat.RoleAssistant, name, text, chat.KindModel))
				names = append(names, []heldMessage{{id: messageID(seq), role: "assistant"}, {id: replyID(seq-1, name), role: "assistant"}})
				texts = append(texts, text)
			}
		}
		var held []heldMessage
		for _, ns := range names {
			if rng.IntN(10) < 8 {
				held = append(held, ns[rng.IntN(len(ns))])
			}
			if rng.IntN(10) == 0 { // a fragment, or a message of the client's the thread lacks
				held = append(held, []heldMessage{{id: replyID(seq+1, "z"), role: "assistant"}, {id: "u-x", role: "user", text: "lost"}}[rng.IntN(2)])
			}
		}
		for range rng.IntN(3) {
			i, j := rng.IntN(len(held)+1), rng.IntN(len(held)+1)
			if i < len(held) && j < len(held) {
				held[i], held[j] = held[j], held[i]
			}
		}
		var pending *heldMessage
		if rng.IntN(4) == 0 {
			pending = &heldMessage{id: "u-new", role: "user", text: "queued"}
			held = slices.Insert(held, rng.IntN(len(held)+1), *pending)
		}
		snap := nameSnapshot(snapshotEntries(evs), held, pending)
		want := texts
		if pending != nil {
			want = append(slices.Clip(texts), "queued")
		}
		if got := merge(held, snap); !slices.Equal(got, want) {
			t.Fatalf("case %d: the client held %+v\nsnapshot ids %q\nit holds %q\nwant %q", n, held, ids(snap), got, want)
		}
	}
}
