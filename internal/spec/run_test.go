package spec

import (
	"reflect"
	"testing"
)

// TestDecodeRunRequest: decoding a run's body finds what is wrong with its
// shape, at its pointers, and keeps decoding past it; the body is kept as
// sent, for an Idempotency-Key.
func TestDecodeRunRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		want       map[string]string // path → message
		task       []TaskMessage
	}{
		{name: "empty", body: `{}`},
		{name: "text", body: `{"task": "hi", "if_busy": "enqueue", "max_round": 3}`,
			task: []TaskMessage{{Type: TypeTextMessage, Source: UserName, Content: "hi", Path: "/task"}}},
		{name: "list", body: `{"task": [{"type": "HandoffMessage", "target": "b", "content": "x"}, {"type": "TextMessage", "source": "ops", "content": "y"}]}`,
			task: []TaskMessage{{Type: TypeHandoffMessage, Source: UserName, Target: "b", Content: "x", Path: "/task/0"},
				{Type: TypeTextMessage, Source: "ops", Content: "y", Path: "/task/1"}}},
		{name: "not an object", body: `[1]`, want: map[string]string{"": `must be one JSON object: {"task"?, "if_busy"?, "max_round"?, "context_variables"?}`}},
		// The range of max_round is the server's: checked with the run.
		{name: "max_round", body: `{"max_round": "ten"}`, want: map[string]string{"/max_round": "must be an integer"}},
		{name: "every problem", body: `{"bogus/x": 1, "if_busy": "sometimes", "task": [{"type": "Note", "content": "a\u0000", "source": "no name"}, {"target": 1, "content": "c"}, {"type": "TextMessage", "target": "b", "content": "d"}]}`,
			want: map[string]string{
				"/bogus~1x":       "is not a field of a run: use task, if_busy, max_round, context_variables",
				"/if_busy":        `must be "reject" (the default), "enqueue" or "interrupt"`,
				"/task/0/type":    "must be TextMessage, MultiModalMessage or HandoffMessage",
				"/task/0/content": `must not contain the NUL character (\u0000), which the store cannot hold`,
				"/task/0/source":  "must be user or a name like an agent's (letters, digits, _ and -)",
				"/task/1/target":  "must be a string",
				"/task/2/target":  "only a HandoffMessage has a target",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := DecodeRunRequest([]byte(tc.body))
			got := map[string]string{}
			for _, p := range req.Problems {
				got[p.Path] = p.Message
			}
			if len(got) != len(tc.want) || (len(tc.want) > 0 && !reflect.DeepEqual(got, tc.want)) {
				t.Errorf("problems = %q, want %q", got, tc.want)
			}
			if len(tc.want) == 0 && !reflect.DeepEqual(req.Task, tc.task) {
				t.Errorf("task = %+v, want %+v", req.Task, tc.task)
			}
			if string(req.Body) != tc.body {
				t.Errorf("body = %s", req.Body)
			}
		})
	}
	if r := DecodeRunRequest([]byte(`{"task": "hi", "if_busy": "enqueue", "max_round": 3}`)); r.IfBusy != IfBusyEnqueue || r.MaxRound == nil || *r.MaxRound != 3 {
		t.Errorf("if_busy, max_round = %q, %v", r.IfBusy, r.MaxRound)
	}
	if r := DecodeRunRequest([]byte(`{}`)); r.IfBusy != IfBusyReject || r.Task != nil || r.MaxRound != nil {
		t.Errorf("a run without fields: if_busy %q, task %v", r.IfBusy, r.Task)
	}
}

// TestTextRun: a run made in code is the run its body would be, body
// included (a repeat with the same Idempotency-Key is the same request).
func TestTextRun(t *testing.T) {
	t.Parallel()
	got, want := TextRun("a \"quoted\" task"), DecodeRunRequest([]byte(`{"task":"a \"quoted\" task"}`))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("TextRun = %+v, want %+v", got, want)
	}
	if p := TextRun("nul \x00").Problems; len(p) != 1 || p[0].Path != "/task/content" {
		t.Errorf("a task with NUL: %v", p)
	}
}

// TestDecodeForkRequest: an empty fork body is a fork at the log's end; a
// body that is not the fork's object is one problem and nothing else is
// read; a run in it is decoded as a run's body, its problems relative to
// it.
func TestDecodeForkRequest(t *testing.T) {
	t.Parallel()
	if f := DecodeForkRequest(nil); f.AtSeq != nil || f.Run != nil || f.Problems != nil {
		t.Errorf("empty body: %+v", f)
	}
	if f := DecodeForkRequest([]byte(`{"at_seq": 4, "run": null}`)); f.AtSeq == nil || *f.AtSeq != 4 || f.Run != nil || f.Problems != nil {
		t.Errorf("at_seq 4: %+v", f)
	}
	f := DecodeForkRequest([]byte(`{"at_seq": 4, "run": {"task": 7}}`))
	if f.Problems != nil || f.Run == nil || len(f.Run.Problems) != 1 || f.Run.Problems[0].Path != "/task" {
		t.Errorf("a bad run: %+v", f)
	}
	f = DecodeForkRequest([]byte(`{"at": 4}`))
	if len(f.Problems) != 1 || f.Problems[0].Path != "" || f.Problems[0].Message != `must be {"at_seq"?, "run"?, "context_variables"?}: json: unknown field "at"` {
		t.Errorf("an unknown field: %+v", f.Problems)
	}
}
