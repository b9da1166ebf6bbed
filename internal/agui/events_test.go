package agui

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/chat"
)

func ev(seq int64, typ chat.EventType, data any) chat.Event {
	e := chat.Event{Seq: seq, Type: typ}
	if data != nil {
		e.Data, _ = json.Marshal(data)
	}
	return e
}

func msg(seq int64, role, name, content, kind string) chat.Event {
	e := ev(seq, chat.EventMessage, chat.MessageData{Kind: kind})
	e.Role, e.Name, e.Content = role, name, content
	return e
}

// run feeds a mapper the events and returns the AG-UI events it made,
// and whether the run ended at the last one.
func run(t *testing.T, m *mapper, items ...any) ([]Event, bool) {
	t.Helper()
	var out []Event
	done := false
	for _, it := range items {
		if done {
			t.Fatalf("an event after the run ended: %+v", it)
		}
		switch x := it.(type) {
		case chat.Event:
			var evs []Event
			evs, done = m.event(x)
			out = append(out, evs...)
		case chat.Delta:
			out = append(out, m.delta(x)...)
		}
	}
	return out, done
}

func types(evs []Event) string {
	ts := make([]string, len(evs))
	for i, e := range evs {
		ts[i] = e.Type()
		if n, ok := e["stepName"].(string); ok {
			ts[i] += ":" + n
		}
	}
	return strings.Join(ts, " ")
}

// texts adds up each message's content by message id, checking that
// every CONTENT and END is of a started message and every message ends.
func texts(t *testing.T, evs []Event) map[string]string {
	t.Helper()
	open := map[string]bool{}
	got := map[string]string{}
	for _, e := range evs {
		id, _ := e["messageId"].(string)
		switch e.Type() {
		case typeTextMessageStart:
			if open[id] {
				t.Fatalf("message %s started twice", id)
			}
			open[id], got[id] = true, ""
		case typeTextMessageContent:
			if !open[id] {
				t.Fatalf("content of message %s outside its start and end", id)
			}
			got[id] += e["delta"].(string)
		case typeTextMessageEnd:
			if !open[id] {
				t.Fatalf("end of message %s that is not open", id)
			}
			delete(open, id)
		}
	}
	if len(open) > 0 {
		t.Fatalf("messages never ended: %v", open)
	}
	return got
}

func TestMapperTurnsAndToolCalls(t *testing.T) {
	m := newMapper("thread-1", "run-1", 1)
	call := msg(4, chat.RoleAssistant, "coder", "", chat.KindModel)
	call.ToolCalls = []chat.ToolCall{{ID: "call_1", Type: "function", Function: chat.FunctionCall{Name: "add", Arguments: `{"a":1,"b":2}`}}}
	result := msg(5, chat.RoleTool, "coder", "3", chat.KindTool)
	result.ToolResponses = []chat.ToolResponse{{ToolCallID: "call_1", Role: chat.RoleTool, Content: "3"}}
	out, done := run(t, m,
		ev(1, chat.EventChatCreated, nil),
		ev(2, chat.EventRunStarted, chat.RunData{Run: 1}),
		msg(3, chat.RoleUser, "user", "add 1 and 2", chat.KindTask),
		call, result,
		msg(6, chat.RoleAssistant, "coder", "It is 3.", chat.KindModel),
		msg(7, chat.RoleAssistant, "critic", "APPROVE", chat.KindModel),
		ev(8, chat.EventChatCompleted, chat.TerminalData{Status: chat.StatusCompleted}),
	)
	if !done {
		t.Fatal("the run did not end at chat.completed")
	}
	want := "STATE_SNAPSHOT STEP_STARTED:coder TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END TOOL_CALL_RESULT " +
		"TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END STEP_FINISHED:coder " +
		"STEP_STARTED:critic TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END STEP_FINISHED:critic RUN_FINISHED"
	if got := types(out); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	if got := texts(t, out); !reflect.DeepEqual(got, map[string]string{"msg-6": "It is 3.", "msg-7": "APPROVE"}) {
		t.Errorf("messages = %v", got)
	}
	if out[2]["toolCallName"] != "add" || out[3]["delta"] != `{"a":1,"b":2}` || out[5]["content"] != "3" || out[5]["toolCallId"] != "call_1" {
		t.Errorf("tool call events = %v %v %v", out[2], out[3], out[5])
	}
	last := out[len(out)-1]
	if last["threadId"] != "thread-1" || last["runId"] != "run-1" || !reflect.DeepEqual(last["outcome"], map[string]any{"type": "success"}) {
		t.Errorf("RUN_FINISHED = %v", last)
	}
}

func TestMapperStreamedReply(t *testing.T) {
	tests := []struct {
		name   string
		deltas []chat.Delta
		want   map[string]string
	}{
		{"the deltas are the message", []chat.Delta{{Name: "a", Content: "Hel", AfterSeq: 2}, {Name: "a", Content: "lo", AfterSeq: 2}},
			map[string]string{"reply-2-a": "Hello"}},
		{"the message says more than streamed", []chat.Delta{{Name: "a", Content: "He", AfterSeq: 2}},
			map[string]string{"reply-2-a": "Hello"}},
		// A retried model call streams again from its start: what was
		// sent is closed and the message comes whole under its own id.
		{"a reset", []chat.Delta{{Name: "a", Content: "Bye", AfterSeq: 2}, {Name: "a", Reset: true, AfterSeq: 2}, {Name: "a", Content: "Hel", AfterSeq: 2}},
			map[string]string{"reply-2-a": "Bye", "msg-3": "Hello"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMapper("t", "r", 1)
			items := []any{ev(2, chat.EventRunStarted, chat.RunData{Run: 1})}
			for _, d := range tt.deltas {
				items = append(items, d)
			}
			items = append(items, msg(3, chat.RoleAssistant, "a", "Hello", chat.KindModel), ev(4, chat.EventChatCompleted, nil))
			out, done := run(t, m, items...)
			if !done {
				t.Fatal("the run did not end")
			}
			if got := texts(t, out); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("messages = %v, want %v", got, tt.want)
			}
			if want := len(tt.want) > 1; m.voided != want {
				t.Errorf("voided = %v, want %v: the client holds a fragment the thread does not", m.voided, want)
			}
			if want := "STATE_SNAPSHOT STEP_STARTED:a TEXT_MESSAGE_START"; types(out)[:len(want)] != want {
				t.Errorf("events = %s", types(out))
			}
		})
	}
}

func TestMapperEnds(t *testing.T) {
	pending := chat.PendingInput{RequestID: "req-1", Kind: chat.InputMessage, Agent: "human", Reason: "the human's turn"}
	tests := []struct {
		name    string
		last    chat.Event
		want    string
		outcome any
	}{
		{"input ends the run with an interrupt", ev(5, chat.EventInputRequested, pending), typeRunFinished,
			map[string]any{"type": "interrupt", "interrupts": []interrupt{{ID: "req-1", Reason: "agentd:message", Message: "the human's turn",
				Metadata: map[string]any{"kind": "message", "agent": "human"}}}}},
		{"a cancelled run", ev(5, chat.EventChatCancelled, chat.TerminalData{Status: chat.StatusCancelled}), typeRunFinished, map[string]any{"type": "cancelled"}},
		{"a failed run", ev(5, chat.EventChatFailed, chat.TerminalData{Status: chat.StatusFailed, Error: "model unreachable"}), typeRunError, nil},
		{"the next run started", ev(5, chat.EventRunStarted, chat.RunData{Run: 2}), typeRunFinished, map[string]any{"type": "success"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMapper("t", "r", 1)
			// A reply left half streamed and an open step are closed
			// before the run's end, as the client requires.
			out, done := run(t, m, ev(2, chat.EventRunStarted, chat.RunData{Run: 1}),
				msg(3, chat.RoleAssistant, "a", "hi", chat.KindModel), chat.Delta{Name: "b", Content: "par", AfterSeq: 3}, tt.last)
			if !done {
				t.Fatal("the run did not end")
			}
			texts(t, out)
			last := out[len(out)-1]
			if last.Type() != tt.want || out[len(out)-2].Type() != typeStepFinished {
				t.Fatalf("events = %s", types(out))
			}
			if tt.want == typeRunError {
				if !strings.Contains(last["message"].(string), "model unreachable") {
					t.Errorf("RUN_ERROR = %v", last)
				}
				return
			}
			if !reflect.DeepEqual(last["outcome"], tt.outcome) {
				t.Errorf("outcome = %#v, want %#v", last["outcome"], tt.outcome)
			}
		})
	}
}

func TestMapperIgnoresOtherRuns(t *testing.T) {
	m := newMapper("t", "r", 2)
	out, done := run(t, m, ev(2, chat.EventRunStarted, chat.RunData{Run: 1}), msg(3, chat.RoleAssistant, "a", "old", chat.KindModel),
		chat.Delta{Name: "a", Content: "old", AfterSeq: 3}, ev(4, chat.EventChatCompleted, nil))
	if done || len(out) != 0 {
		t.Fatalf("run 1's events made %s (done %v)", types(out), done)
	}
}

func TestSnapshotMessages(t *testing.T) {
	call := msg(4, chat.RoleAssistant, "coder", "", chat.KindModel)
	call.ToolCalls = []chat.ToolCall{{ID: "c1", Type: "function", Function: chat.FunctionCall{Name: "add", Arguments: "{}"}}}
	result := msg(5, chat.RoleTool, "coder", "3", chat.KindTool)
	result.ToolResponses = []chat.ToolResponse{{ToolCallID: "c1", Role: chat.RoleTool, Content: "3"}}
	got := nameSnapshot(snapshotEntries([]chat.Event{ev(1, chat.EventChatCreated, nil), msg(3, chat.RoleUser, "user", "add", chat.KindTask), call, result}), nil, nil)
	want := []map[string]any{
		{"id": "msg-3", "role": "user", "name": "user", "content": "add"},
		{"id": "msg-4", "role": "assistant", "name": "coder", "content": "", "toolCalls": []map[string]any{{"id": "c1", "type": "function", "function": map[string]any{"name": "add", "arguments": "{}"}}}},
		{"id": "msg-5-0", "role": "tool", "toolCallId": "c1", "content": "3"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("snapshot =\n%v\nwant\n%v", got, want)
	}
}

func TestMapperToolCallOfAStreamedReply(t *testing.T) {
	m := newMapper("t", "r", 1)
	call := msg(3, chat.RoleAssistant, "a", "Let me add.", chat.KindModel)
	call.ToolCalls = []chat.ToolCall{{ID: "c1", Type: "function", Function: chat.FunctionCall{Name: "add", Arguments: "{}"}}}
	out, _ := run(t, m, ev(2, chat.EventRunStarted, chat.RunData{Run: 1}), chat.Delta{Name: "a", Content: "Let me add.", AfterSeq: 2}, call)
	if got := texts(t, out); !reflect.DeepEqual(got, map[string]string{"reply-2-a": "Let me add."}) {
		t.Errorf("messages = %v", got)
	}
	// The call's parent is the message as the client knows it: its stream.
	last := out[len(out)-1]
	if last.Type() != typeToolCallEnd || out[len(out)-3]["parentMessageId"] != "reply-2-a" {
		t.Errorf("events %s, TOOL_CALL_START %v", types(out), out[len(out)-3])
	}
}

// TestMapperStateSnapshots: the AG-UI state is the chat's context
// variables, sent whole when the run starts (the variables the log left
// before it: a spec's, a PATCH's) and again after each change during the
// run (the run's own, a tool's), so the client's state ends equal to the
// chat's.
func TestMapperStateSnapshots(t *testing.T) {
	m := newMapper("t", "r", 2)
	m.vars = map[string]json.RawMessage{"tier": json.RawMessage(`"silver"`)}
	out, done := run(t, m,
		ev(5, chat.EventContextUpdated, chat.ContextUpdate{Set: map[string]json.RawMessage{"lang": json.RawMessage(`"en"`)}, By: chat.ContextBy{Client: chat.ContextByPatch}}),
		ev(6, chat.EventRunStarted, chat.RunData{Run: 2}),
		ev(7, chat.EventContextUpdated, chat.ContextUpdate{Set: map[string]json.RawMessage{"tier": json.RawMessage(`"gold"`)}, By: chat.ContextBy{Client: chat.ContextByRun}}),
		msg(8, chat.RoleAssistant, "a", "ok", chat.KindModel),
		ev(9, chat.EventContextUpdated, chat.ContextUpdate{Set: map[string]json.RawMessage{"n": json.RawMessage(`1`)}, Removed: []string{"lang"}, By: chat.ContextBy{Agent: "a", Tool: "count"}}),
		ev(10, chat.EventChatCompleted, nil),
	)
	if !done {
		t.Fatal("the run did not end")
	}
	var snaps []string
	for _, e := range out {
		if e.Type() == typeStateSnapshot {
			b, _ := json.Marshal(e["snapshot"])
			snaps = append(snaps, string(b))
		}
	}
	want := []string{`{"lang":"en","tier":"silver"}`, `{"lang":"en","tier":"gold"}`, `{"n":1,"tier":"gold"}`}
	if !reflect.DeepEqual(snaps, want) {
		t.Errorf("state snapshots %q, want %q", snaps, want)
	}
	if types(out)[:len("STATE_SNAPSHOT STATE_SNAPSHOT STEP_STARTED:a")] != "STATE_SNAPSHOT STATE_SNAPSHOT STEP_STARTED:a" {
		t.Errorf("events = %s", types(out))
	}
}

func TestChangedVars(t *testing.T) {
	vars := map[string]json.RawMessage{"a": json.RawMessage(`{"x":1,"y":[1,2]}`), "b": json.RawMessage(`"s"`)}
	state := map[string]json.RawMessage{"a": json.RawMessage(`{"y": [1, 2], "x": 1}`), "b": json.RawMessage(`"t"`),
		"c": json.RawMessage(`3`), "b2": json.RawMessage(` null`)}
	got := changedVars(state, vars)
	if len(got) != 2 || string(got["b"]) != `"t"` || string(got["c"]) != "3" {
		t.Errorf("changed %s, want b and c only (a is the same value, b2 removes nothing)", got)
	}
	if got := changedVars(map[string]json.RawMessage{"b": json.RawMessage(`null`)}, vars); string(got["b"]) != "null" {
		t.Errorf("the removal of a variable set: %s", got)
	}
	if changedVars(map[string]json.RawMessage{"b": json.RawMessage(`"s"`)}, vars) != nil {
		t.Error("a state equal to the variables changes something")
	}
}
