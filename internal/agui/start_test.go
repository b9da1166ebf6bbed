package agui

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/spec"
)

// threadRuntime is a Runtime holding one thread's chat: made by the run
// r1, its run 1 over, three events long. It records the runs posted and
// answers a repeat of a key with the chat as the key's first post left it.
type threadRuntime struct {
	Runtime
	ch     *chat.Chat
	events []chat.Event // the chat's log, when not the three events above
	posts  []string     // the keys of SubmitRun's calls
	runs   map[string]int
}

func (f *threadRuntime) Get(_ context.Context, _, id string) (*chat.Chat, error) {
	if id != f.ch.ID {
		return nil, chat.ErrNotFound
	}
	return f.ch, nil
}

func (f *threadRuntime) List(context.Context, *chat.ListChatsParams) ([]*chat.Chat, string, error) {
	return []*chat.Chat{f.ch}, "", nil
}

func (f *threadRuntime) Events(_ context.Context, _, _ string, after int64, _ int) ([]chat.Event, error) {
	log := f.events
	if log == nil {
		log = []chat.Event{ev(1, chat.EventRunStarted, chat.RunData{Run: 1}), msg(2, chat.RoleUser, "user", "task", chat.KindTask),
			msg(3, chat.RoleAssistant, "a", "answer", chat.KindModel)}
	}
	var out []chat.Event
	for _, e := range log {
		if e.Seq > after {
			out = append(out, e)
		}
	}
	return out, nil
}

func (f *threadRuntime) SubmitRun(_ context.Context, _, _, key string, _ *spec.RunRequest) (*chat.Chat, int, error) {
	f.posts = append(f.posts, key)
	if n, ok := f.runs[key]; ok {
		return &chat.Chat{ID: f.ch.ID, LastSeq: 3, Run: n - 1}, n, nil // as the first post left it
	}
	f.runs[key] = len(f.runs) + 2
	return &chat.Chat{ID: f.ch.ID, LastSeq: 3, Run: 1}, f.runs[key], nil
}

func (f *threadRuntime) RunOfKey(_ context.Context, _, _, key string) (*chat.Chat, int, error) {
	if n, ok := f.runs[key]; ok {
		return &chat.Chat{ID: f.ch.ID, LastSeq: 3, Run: n - 1}, n, nil
	}
	return nil, 0, nil
}

// TestStartKeysRuns: the run that made a thread's chat, posted again, is
// that run from its start (no post; a snapshot of its task); another run is posted
// keyed by its runId, or by the Idempotency-Key when there is one, and a
// repeat is the same run, after the same snapshot.
func TestStartKeysRuns(t *testing.T) {
	md, _ := json.Marshal(map[string]string{threadKey: "t1", firstRunKey: "ag-ui-run:r1"})
	f := &threadRuntime{ch: &chat.Chat{ID: "c1", Team: &chat.TeamRef{Name: "team"}, Status: chat.StatusCompleted, Run: 1, LastSeq: 3, Metadata: md},
		runs: map[string]int{}}
	h := &Handler{rt: f}
	input := func(runID string) *runAgentInput {
		return &runAgentInput{ThreadID: "t1", RunID: runID, Messages: []inputMessage{{ID: "m", Role: "user", Content: json.RawMessage(`"more"`)}}}
	}
	for _, c := range []struct {
		name, runID, key string
		run              int
		after            int64
		snapshot         int
		posts            int
	}{
		// The first run again: its stream replays it, after a snapshot
		// of the thread as it began (its task).
		{"the first run again", "r1", "", 1, 0, 1, 0},
		// The snapshot: the thread's two messages, then the run's task,
		// which the thread holds once the run starts.
		{"the first run's runId with a key", "r1", "k0", 2, 3, 3, 1},
		{"a next run", "r2", "", 3, 3, 3, 2},
		{"the next run again", "r2", "", 3, 3, 3, 3},
		{"a run with a key", "r3", "k", 4, 3, 3, 4},
		{"the key again, another runId", "r4", "k", 4, 3, 3, 5},
	} {
		st, err := h.start(context.Background(), "acme", "team", c.key, input(c.runID))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if st.chatID != "c1" || st.run != c.run || st.after != c.after || len(st.snapshot) != c.snapshot || len(f.posts) != c.posts {
			t.Errorf("%s: run %d after %d, %d snapshot messages, %d posts; want run %d after %d, %d, %d",
				c.name, st.run, st.after, len(st.snapshot), len(f.posts), c.run, c.after, c.snapshot, c.posts)
		}
	}
	if want := []string{"k0", "ag-ui-run:r2", "ag-ui-run:r2", "k", "k"}; !slices.Equal(f.posts, want) {
		t.Errorf("runs posted with keys %q, want %q", f.posts, want)
	}
	// A client that got some of run r2's messages posts it again: they
	// follow its task, and the run is found by its key, not posted. An
	// unknown runId with such messages has no task.
	in := input("r2")
	in.Messages = append(in.Messages, inputMessage{ID: "reply-3-a", Role: "assistant", Content: json.RawMessage(`"par"`)})
	st, err := h.start(context.Background(), "acme", "team", "", in)
	if err != nil || st.run != 3 || st.after != 3 || !st.repeated || len(f.posts) != 5 {
		t.Errorf("r2 again after its messages: %+v, %v, %d posts", st, err, len(f.posts))
	} else if last := st.snapshot[len(st.snapshot)-1]; last["content"] != "more" {
		t.Errorf("the snapshot ends with %v, want the run's task", last)
	}
	in.RunID = "r9"
	if _, err := h.start(context.Background(), "acme", "team", "", in); err == nil || !strings.Contains(err.Error(), "must be the user's") {
		t.Errorf("an unknown run without a task: %v", err)
	}
}

// TestStartReplaysAnsweredResume: a resume naming an interrupt the chat no
// longer waits for (its answer landed, the client lost the stream) is
// the run from that interrupt on, never a new run; an interrupt the
// thread never had is a conflict.
func TestStartReplaysAnsweredResume(t *testing.T) {
	md, _ := json.Marshal(map[string]string{threadKey: "t1", firstRunKey: "ag-ui-run:r1"})
	f := &threadRuntime{ch: &chat.Chat{ID: "c1", Team: &chat.TeamRef{Name: "team"}, Status: chat.StatusCompleted, Run: 2, LastSeq: 8, Metadata: md},
		runs: map[string]int{}, events: []chat.Event{
			ev(1, chat.EventRunStarted, chat.RunData{Run: 1}), msg(2, chat.RoleUser, "user", "task", chat.KindTask),
			msg(3, chat.RoleAssistant, "a", "draft", chat.KindModel), ev(4, chat.EventInputRequested, chat.PendingInput{RequestID: "q1", Kind: chat.InputMessage}),
			msg(5, chat.RoleUser, "human", "more", chat.KindHuman), msg(6, chat.RoleAssistant, "a", "done", chat.KindModel),
			ev(7, chat.EventRunStarted, chat.RunData{Run: 2}), msg(8, chat.RoleUser, "user", "again", chat.KindTask)}}
	h := &Handler{rt: f}
	in := &runAgentInput{ThreadID: "t1", RunID: "r2", Resume: []resumeEntry{{InterruptID: "q1", Status: resumeResolve, Payload: json.RawMessage(`"more"`)}}}
	st, err := h.start(context.Background(), "acme", "team", "", in)
	if err != nil {
		t.Fatal(err)
	}
	if st.run != 1 || st.after != 4 || !st.answered || len(st.snapshot) != 2 || len(f.posts) != 0 {
		t.Errorf("run %d after %d (answered %v), %d snapshot messages, %d posts; want run 1 after 4, answered, 2, 0",
			st.run, st.after, st.answered, len(st.snapshot), len(f.posts))
	}
	in.Resume[0].InterruptID = "nope"
	if _, err := h.start(context.Background(), "acme", "team", "", in); !errors.Is(err, chat.ErrNoPendingInput) {
		t.Errorf("an interrupt the thread never had: %v, want ErrNoPendingInput", err)
	}
}

// logRuntime serves a chat's log in two parts, and between them the
// deltas of a reply as a replica that took the chat over after the reply
// had begun would: its first fragments, a reset, the reply made again.
type logRuntime struct {
	threadRuntime
	deltas []chat.Delta
	queue  *runtime.DeltaQueue
	wake   chan runtime.Wake
}

func (f *logRuntime) Stream(string) (<-chan runtime.Wake, *runtime.DeltaQueue, func()) {
	f.queue, f.wake = runtime.NewDeltaQueue(), make(chan runtime.Wake, 1)
	return f.wake, f.queue, func() {}
}

func (f *logRuntime) Events(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Event, error) {
	if after < 2 { // the run's start; then the reply is typed
		for _, d := range f.deltas {
			f.queue.Push(d)
		}
		f.wake <- runtime.Wake{}
		return f.events[:2], nil
	}
	return f.threadRuntime.Events(ctx, tenant, id, after, limit)
}

// TestStreamEndsRunWithSnapshotWhenTheClientHoldsOtherwise: a run whose
// streamed reply was made again, or whose messages the client holds in
// another order than the thread (replies streamed side by side, a tool
// result after a sibling's reply), ends with a snapshot of the thread
// right before RUN_FINISHED, so that the client drops the fragment and
// holds the thread in order; a run the client holds as the thread does
// ends without one.
func TestStreamEndsRunWithSnapshotWhenTheClientHoldsOtherwise(t *testing.T) {
	start := []chat.Event{ev(1, chat.EventRunStarted, chat.RunData{Run: 1}), msg(2, chat.RoleUser, "user", "task", chat.KindTask)}
	end := func(seq int64) chat.Event {
		return ev(seq, chat.EventChatCompleted, chat.TerminalData{Status: chat.StatusCompleted})
	}
	call, result := toolCall(3), toolResult(5)
	call.Name, result.Name = "a", "a"
	tests := []struct {
		name     string
		events   []chat.Event
		deltas   []chat.Delta
		snapshot bool
		texts    []string
	}{
		{"a reply made again", append(start, msg(3, chat.RoleAssistant, "a", "Hi there", chat.KindModel), end(4)),
			[]chat.Delta{{Name: "a", Content: "Hel", AfterSeq: 2}, {Name: "a", Reset: true, AfterSeq: 2}, {Name: "a", Content: "Hi there", AfterSeq: 2}},
			true, []string{"task", "Hi there"}},
		{"replies side by side, the later one landed first", append(start, msg(3, chat.RoleAssistant, "a", "A.", chat.KindModel), msg(4, chat.RoleAssistant, "b", "B.", chat.KindModel), end(5)),
			[]chat.Delta{{Name: "b", Content: "B", AfterSeq: 2}, {Name: "a", Content: "A", AfterSeq: 2}},
			true, []string{"task", "A.", "B."}},
		{"replies side by side, landed as they began", append(start, msg(3, chat.RoleAssistant, "a", "A.", chat.KindModel), msg(4, chat.RoleAssistant, "b", "B.", chat.KindModel), end(5)),
			[]chat.Delta{{Name: "a", Content: "A", AfterSeq: 2}, {Name: "b", Content: "B", AfterSeq: 2}},
			false, []string{"task", "A.", "B."}},
		{"a tool result after a sibling's reply", append(start, call, msg(4, chat.RoleAssistant, "b", "B.", chat.KindModel), result, end(6)), nil,
			true, []string{"task", "", "B.", "3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &logRuntime{threadRuntime: threadRuntime{ch: &chat.Chat{ID: "c1"}, events: tt.events}, deltas: tt.deltas}
			h := &Handler{rt: f, cfg: Config{RunWait: time.Minute}, log: slog.New(slog.DiscardHandler), outcome: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x"}, []string{"outcome"})}
			w := httptest.NewRecorder()
			task := heldMessage{id: "u-0", role: "user", text: "task"}
			h.stream(w, httptest.NewRequest("POST", "/ag-ui/team", nil), "acme", &runAgentInput{ThreadID: "t1", RunID: "r1"}, &started{chatID: "c1", run: 1, held: []heldMessage{task}})
			// What the client holds: its task, then as the events give
			// it (heldFrom is HttpAgent's placement), then the snapshot.
			held, texts := []heldMessage{task}, map[string]string{"u-0": "task"}
			var snapshot []map[string]any
			for line := range strings.Lines(w.Body.String()) {
				data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
				if !ok {
					continue
				}
				var e Event
				if err := json.Unmarshal([]byte(data), &e); err != nil {
					t.Fatal(err)
				}
				held = heldFrom(held, []Event{e})
				switch e.Type() {
				case typeTextMessageContent:
					texts[e["messageId"].(string)] += e["delta"].(string)
				case typeToolCallResult:
					texts[e["messageId"].(string)] = e["content"].(string)
				case typeMessagesSnapshot:
					for _, m := range e["messages"].([]any) {
						snapshot = append(snapshot, m.(map[string]any))
					}
				}
			}
			if (snapshot != nil) != tt.snapshot {
				t.Fatalf("a snapshot: %v, want %v", snapshot != nil, tt.snapshot)
			}
			var got []string
			if snapshot != nil {
				got = merge(held, snapshot)
			} else {
				for _, m := range held {
					got = append(got, texts[m.id])
				}
			}
			if !slices.Equal(got, tt.texts) {
				t.Errorf("the client holds %q, want %q", got, tt.texts)
			}
		})
	}
}
