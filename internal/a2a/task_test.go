package a2a

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
)

// logOf numbers events as a chat's log does.
func logOf(evs ...chat.Event) []chat.Event {
	for i := range evs {
		evs[i].Seq = int64(i + 1)
		evs[i].ChatID = "c1"
		evs[i].CreatedAt = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	}
	return evs
}

func ev(typ chat.EventType, data string) chat.Event {
	e := chat.Event{Type: typ}
	if data != "" {
		e.Data = json.RawMessage(data)
	}
	return e
}

func msg(role, name, content string) chat.Event {
	return chat.Event{Type: chat.EventMessage, Role: role, Name: name, Content: content}
}

// twoRuns is a chat whose run 1 asked a human and completed, and whose
// run 2 is under way.
var twoRuns = logOf(
	ev(chat.EventChatCreated, `{"status":"queued"}`),
	ev(chat.EventRunStarted, `{"run":1}`),
	msg(chat.RoleUser, "user", "task one"),
	ev(chat.EventChatRunning, `{"status":"running"}`),
	msg(chat.RoleAssistant, "writer", "draft"),
	ev(chat.EventInputRequested, `{"request_id":"r1","kind":"message","agent":"editor","reason":"Provide feedback."}`),
	ev(chat.EventChatRunning, `{"status":"running"}`),
	msg(chat.RoleUser, "editor", "more"),
	chat.Event{Type: chat.EventMessage, Role: chat.RoleAssistant, Name: "writer", ToolCalls: []chat.ToolCall{{ID: "t1"}}},
	msg(chat.RoleTool, "writer", "tool result"),
	msg(chat.RoleAssistant, "writer", "final"),
	ev(chat.EventChatCompleted, `{"status":"completed","stop_reason":"max_round","run":1}`),
	ev(chat.EventRunStarted, `{"run":2}`),
	msg(chat.RoleUser, "user", "task two"),
	ev(chat.EventChatRunning, `{"status":"running"}`),
	msg(chat.RoleAssistant, "writer", "working on two"),
)

// fold folds the first n events of the log into run's view and returns
// the kinds and states of the stream events they made.
func fold(run, n int) (*runView, []string) {
	v := newRunView("c1", run)
	var out []string
	for _, e := range twoRuns[:n] {
		for _, r := range v.apply(e) {
			switch {
			case r.StatusUpdate != nil:
				out = append(out, "status:"+r.StatusUpdate.Status.State)
			case r.ArtifactUpdate != nil:
				out = append(out, "artifact")
			}
		}
	}
	return v, out
}

func TestRunViewFoldsOneRunOfTheLog(t *testing.T) {
	tests := []struct {
		name        string
		run, n      int
		state       string
		history     []string
		stream      []string
		settledFrom int64 // settledAfter(s) holds for s < this seq, 0: never
	}{
		{"before the worker runs it", 1, 3, StateSubmitted, []string{"task one"}, nil, 0},
		{"the team replies", 1, 5, StateWorking, []string{"task one", "draft"}, []string{"status:" + StateWorking, "status:" + StateWorking}, 0},
		{"a human is asked", 1, 6, StateInputRequired, []string{"task one", "draft"},
			[]string{"status:" + StateWorking, "status:" + StateWorking, "status:" + StateInputRequired}, 6},
		{"run 1 completes: tool messages are left out", 1, len(twoRuns), StateCompleted, []string{"task one", "draft", "more", "final"},
			[]string{"status:" + StateWorking, "status:" + StateWorking, "status:" + StateInputRequired, "status:" + StateWorking,
				"status:" + StateWorking, "status:" + StateWorking, "artifact", "status:" + StateCompleted}, 12},
		{"run 2 sees only its own events", 2, len(twoRuns), StateWorking, []string{"task two", "working on two"},
			[]string{"status:" + StateWorking, "status:" + StateWorking}, 0},
		{"a run not started yet is submitted", 3, len(twoRuns), StateSubmitted, nil, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, stream := fold(tt.run, tt.n)
			task := v.task(nil)
			if task.Status.State != tt.state {
				t.Errorf("state %s, want %s", task.Status.State, tt.state)
			}
			var texts []string
			for _, m := range task.History {
				texts = append(texts, *m.Parts[0].Text)
			}
			if !slices.Equal(texts, tt.history) {
				t.Errorf("history %q, want %q", texts, tt.history)
			}
			if !slices.Equal(stream, tt.stream) {
				t.Errorf("stream %q, want %q", stream, tt.stream)
			}
			for since := int64(0); since <= int64(tt.n); since++ {
				want := tt.settledFrom > 0 && since < tt.settledFrom
				if got := v.settledAfter(since); got != want {
					t.Errorf("settledAfter(%d) = %v, want %v", since, got, want)
				}
			}
		})
	}
}

func TestCompletedTaskCarriesTheFinalMessage(t *testing.T) {
	v, _ := fold(1, len(twoRuns))
	one := 1
	task := v.task(&one)
	if len(task.History) != 1 || *task.History[0].Parts[0].Text != "final" {
		t.Errorf("historyLength 1: %+v", task.History)
	}
	if len(task.Artifacts) != 1 || *task.Artifacts[0].Parts[0].Text != "final" || *task.Status.Message.Parts[0].Text != "final" {
		t.Errorf("result %+v, status %+v", task.Artifacts, task.Status)
	}
	zero := 0
	if h := v.task(&zero).History; h != nil {
		t.Errorf("historyLength 0: %+v", h)
	}
	if task.ID != "c1-run-1" || task.ContextID != "c1" || task.History[0].Role != RoleAgent {
		t.Errorf("task %s in %s, role %s", task.ID, task.ContextID, task.History[0].Role)
	}
}

func TestParseTaskID(t *testing.T) {
	for _, tt := range []struct {
		id   string
		chat string
		run  int
		ok   bool
	}{
		{TaskID("01a2-b3", 7), "01a2-b3", 7, true},
		{"c1-run-0", "", 0, false},
		{"c1-run-01", "", 0, false},
		{"c1-run-", "", 0, false},
		{"-run-1", "", 0, false},
		{"c1", "", 0, false},
	} {
		c, r, ok := ParseTaskID(tt.id)
		if c != tt.chat || r != tt.run || ok != tt.ok {
			t.Errorf("ParseTaskID(%q) = %q, %d, %v", tt.id, c, r, ok)
		}
	}
}
