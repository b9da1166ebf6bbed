package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/runtime/runtimetest"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/chat/engine"
	"github.com/agentd/agentd/internal/spec"
)

// waitRun waits until the chat's run n has ended.
func waitRun(t testing.TB, rt *runtime.Runtime, id string, n int) *chat.Chat {
	t.Helper()
	sig, done := rt.Subscribe(id)
	defer done()
	deadline := time.After(10 * time.Second)
	for {
		c, err := rt.Get(context.Background(), "", id)
		if err != nil {
			t.Fatal(err)
		}
		if c.Run == n && c.Status.Terminal() {
			return c
		}
		select {
		case <-sig:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("run %d of chat %s has not ended: run %d, %s", n, id, c.Run, c.Status)
		}
	}
}

func submitRun(t testing.TB, rt *runtime.Runtime, id, body string) int {
	t.Helper()
	_, n, err := rt.SubmitRun(context.Background(), "", id, "", spec.DecodeRunRequest([]byte(body)))
	if err != nil {
		t.Fatalf("SubmitRun(%s): %v", body, err)
	}
	return n
}

// runEvents summarises a log: run.started and terminal events as
// "run N" and "end N: detail", messages as "name:content".
func runEvents(t testing.TB, db chat.Store, id string) []string {
	t.Helper()
	evs, err := db.ListEvents(context.Background(), &chat.ListEventsParams{ChatID: id, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		var d struct {
			Run        int    `json:"run"`
			StopDetail string `json:"stop_detail"`
		}
		_ = json.Unmarshal(e.Data, &d)
		switch {
		case e.Type == chat.EventRunStarted:
			out = append(out, fmt.Sprintf("run %d", d.Run))
		case e.Type == chat.EventChatCompleted:
			out = append(out, fmt.Sprintf("end %d: %s", d.Run, d.StopDetail))
		case e.Type.Terminal():
			// How a run ended matters (an interrupted run is cancelled).
			out = append(out, fmt.Sprintf("%s %d: %s", strings.TrimPrefix(string(e.Type), "chat."), d.Run, d.StopDetail))
		case e.Type == chat.EventMessage:
			out = append(out, e.Name+":"+e.Content)
		}
	}
	return out
}

func threeAgents(maxRound int, extra string) string {
	return fmt.Sprintf(`{"task": "count", "max_round": %d,
		"agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["a1", "a2", "a3"]}},
		           {"name": "b", "type": "assistant", "model": {"provider": "replay", "responses": ["b1", "b2", "b3"]}},
		           {"name": "c", "type": "assistant", "model": {"provider": "replay", "responses": ["c1", "c2", "c3"]}}]%s}`, maxRound, extra)
}

// TestRunsGoOnAsAgentChatRunsATeamAgain: the round-robin position and the
// replay positions carry over; the turn count restarts per run; a run
// without a task adds no message; every run opens with run.started and
// ends with a terminal event naming it.
func TestRunsGoOnAsAgentChatRunsATeamAgain(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	c := create(t, rt, threeAgents(2, ""))
	waitRun(t, rt, c.ID, 1)
	if n := submitRun(t, rt, c.ID, `{"task": "again"}`); n != 2 {
		t.Fatalf("posted run %d, want 2", n)
	}
	waitRun(t, rt, c.ID, 2)
	if n := submitRun(t, rt, c.ID, `{"max_round": 1}`); n != 3 {
		t.Fatalf("posted run %d, want 3", n)
	}
	got := waitRun(t, rt, c.ID, 3)
	want := []string{"run 1", "user:count", "a:a1", "b:b1", "end 1: Maximum number of turns 2 reached.",
		"run 2", "user:again", "c:c1", "a:a2", "end 2: Maximum number of turns 2 reached.",
		"run 3", "b:b2", "end 3: Maximum number of turns 1 reached."}
	if ev := runEvents(t, db, c.ID); !slices.Equal(ev, want) {
		t.Fatalf("log =\n%s\nwant\n%s", strings.Join(ev, "\n"), strings.Join(want, "\n"))
	}
	if got.Run != 3 || got.QueuedRuns != 0 || got.Turns != 5 || got.StopReason != chat.StopMaxRound || got.MessageCount != 7 {
		t.Fatalf("chat = run %d, queued %d, turns %d, %s, %d messages", got.Run, got.QueuedRuns, got.Turns, got.StopReason, got.MessageCount)
	}
}

// TestTerminationRestartsPerRun: max_messages counts from the run's task,
// as AgentChat resets its conditions when a run stops.
func TestTerminationRestartsPerRun(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	c := create(t, rt, threeAgents(10, `, "termination": {"max_messages": 2}`))
	waitRun(t, rt, c.ID, 1)
	submitRun(t, rt, c.ID, `{"task": [{"type": "TextMessage", "content": "one"}, {"type": "TextMessage", "source": "boss", "content": "two"}]}`)
	waitRun(t, rt, c.ID, 2)
	submitRun(t, rt, c.ID, `{"task": "three"}`)
	waitRun(t, rt, c.ID, 3)
	want := []string{"run 1", "user:count", "a:a1", "end 1: Maximum number of messages 2 reached, current message count: 2",
		"run 2", "user:one", "boss:two", "end 2: Maximum number of messages 2 reached, current message count: 2",
		"run 3", "user:three", "b:b1", "end 3: Maximum number of messages 2 reached, current message count: 2"}
	if ev := runEvents(t, db, c.ID); !slices.Equal(ev, want) {
		t.Fatalf("log =\n%s\nwant\n%s", strings.Join(ev, "\n"), strings.Join(want, "\n"))
	}
}

// TestIfBusy: reject answers with the active run; enqueue runs in order
// after it; interrupt cancels it, drops the queue and runs next.
func TestIfBusy(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	slow := `{"task": "go", "max_round": 1, "agents": [{"name": "a", "type": "assistant",
		"model": {"provider": "replay", "responses": [{"content": "r1", "delay_ms": 300}, {"content": "r2", "delay_ms": 300},
		{"content": "r3", "delay_ms": 300}, {"content": "r4", "delay_ms": 1500}]}}]}`
	c := create(t, rt, slow)
	_, _, err := rt.SubmitRun(context.Background(), "", c.ID, "", spec.DecodeRunRequest([]byte(`{"task": "x"}`)))
	var busy *chat.BusyError
	if !errors.As(err, &busy) || busy.Run != 1 {
		t.Fatalf("reject while run 1 runs: %v", err)
	}
	if n := submitRun(t, rt, c.ID, `{"task": "second", "if_busy": "enqueue"}`); n != 2 {
		t.Fatalf("enqueued run %d", n)
	}
	if n := submitRun(t, rt, c.ID, `{"task": "third", "if_busy": "enqueue"}`); n != 3 {
		t.Fatalf("enqueued run %d", n)
	}
	waitRun(t, rt, c.ID, 3)
	submitRun(t, rt, c.ID, `{"task": "fourth"}`)
	waitFor(t, rt, c.ID, 5*time.Second, chat.StatusRunning)
	// Runs queued behind the active one are dropped by the interrupt,
	// which is the only run queued after it and the next to start.
	submitRun(t, rt, c.ID, `{"task": "fifth", "if_busy": "enqueue"}`)
	submitRun(t, rt, c.ID, `{"task": "sixth", "if_busy": "enqueue"}`)
	queued, n, err := rt.SubmitRun(context.Background(), "", c.ID, "", spec.DecodeRunRequest([]byte(`{"task": "seventh", "if_busy": "interrupt"}`)))
	if err != nil || n != 7 {
		t.Fatalf("interrupting run %d, want 7: %v", n, err)
	}
	if queued.QueuedRuns != 1 || !queued.CancelRequested {
		t.Fatalf("after the interrupt: %d queued runs, cancel requested %v; want 1, true", queued.QueuedRuns, queued.CancelRequested)
	}
	got := waitRun(t, rt, c.ID, 7)
	want := []string{"run 1", "user:go", "a:r1", "end 1: Maximum number of turns 1 reached.",
		"run 2", "user:second", "a:r2", "end 2: Maximum number of turns 1 reached.",
		"run 3", "user:third", "a:r3", "end 3: Maximum number of turns 1 reached.",
		"run 4", "user:fourth", "cancelled 4: External termination requested",
		// The cut call was never recorded: the replay answers it again.
		"run 7", "user:seventh", "a:r4", "end 7: Maximum number of turns 1 reached."}
	ev := runEvents(t, db, c.ID)
	if !slices.Equal(ev, want) {
		t.Fatalf("log =\n%s\nwant\n%s", strings.Join(ev, "\n"), strings.Join(want, "\n"))
	}
	if got.Status != chat.StatusCompleted || got.CancelRequested || got.QueuedRuns != 0 {
		t.Fatalf("chat after the interrupting run: %s, cancel requested %v, %d queued runs", got.Status, got.CancelRequested, got.QueuedRuns)
	}
}

// TestStopEndsTheRunAfterItsTurn: POST /stop lets the turn in progress
// finish, then the run ends with AgentChat's ExternalTermination text,
// joined after a condition that fires on the same turn.
func TestStopEndsTheRunAfterItsTurn(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	c := create(t, rt, `{"task": "go", "max_round": 5, "termination": {"text_mention": {"text": "DONE"}},
		"agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": [
			{"content": "working", "delay_ms": 1500}, {"content": "more"}, {"content": "DONE", "delay_ms": 1500}]}}]}`)
	waitForEvent(t, rt, db, c.ID, chat.EventSpeakerSelected)
	if _, changed, err := rt.StopRun(context.Background(), "", c.ID, ""); err != nil || !changed {
		t.Fatalf("StopRun: %v, %v", changed, err)
	}
	got := waitRun(t, rt, c.ID, 1)
	if got.StopReason != chat.StopExternal || got.StopDetail != "External termination requested" || got.StopRequested {
		t.Fatalf("chat = %s %q (stop requested %v)", got.StopReason, got.StopDetail, got.StopRequested)
	}
	if want := []string{"run 1", "user:go", "a:working", "end 1: External termination requested"}; !slices.Equal(runEvents(t, db, c.ID), want) {
		t.Fatalf("log = %v", runEvents(t, db, c.ID))
	}
	// A stop on a turn where a condition fires too: both texts, the
	// condition's first, as AgentChat's `condition | ExternalTermination()`.
	submitRun(t, rt, c.ID, `{}`)
	waitForLog(t, rt, db, c.ID, func(evs []chat.Event) bool {
		last := evs[len(evs)-1]
		return last.Type == chat.EventSpeakerSelected && slices.ContainsFunc(evs, func(e chat.Event) bool { return e.Content == "more" })
	})
	if _, changed, err := rt.StopRun(context.Background(), "", c.ID, ""); err != nil || !changed {
		t.Fatalf("StopRun: %v, %v", changed, err)
	}
	got = waitRun(t, rt, c.ID, 2)
	if got.StopReason != chat.StopTextMention || got.StopDetail != "Text 'DONE' mentioned, External termination requested" {
		t.Fatalf("run 2 ended %s %q", got.StopReason, got.StopDetail)
	}
	// No run is active: nothing to stop.
	if _, changed, err := rt.StopRun(context.Background(), "", c.ID, ""); err != nil || changed {
		t.Fatalf("StopRun of an ended chat: %v, %v", changed, err)
	}
}

// waitForEvent waits until the chat's log holds an event of that type.
func waitForEvent(t testing.TB, rt *runtime.Runtime, db chat.Store, id string, typ chat.EventType) {
	t.Helper()
	waitForLog(t, rt, db, id, func(evs []chat.Event) bool {
		return slices.ContainsFunc(evs, func(e chat.Event) bool { return e.Type == typ })
	})
}

// waitForLog waits until the chat's log satisfies ok.
func waitForLog(t testing.TB, rt *runtime.Runtime, db chat.Store, id string, ok func([]chat.Event) bool) []chat.Event {
	t.Helper()
	sig, done := rt.Subscribe(id)
	defer done()
	deadline := time.After(10 * time.Second)
	for {
		evs, err := db.ListEvents(context.Background(), &chat.ListEventsParams{ChatID: id, Limit: 10000})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) > 0 && ok(evs) {
			return evs
		}
		select {
		case <-sig:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("chat %s: the log never got there: %v", id, runEvents(t, db, id))
		}
	}
}

var _ = spec.DefaultLimits

// TestSwarmHandsOffToUserAndBack is AgentChat's human-in-the-loop Swarm:
// an agent hands off to user, the run stops on a handoff condition naming
// user, and the next run's task is a HandoffMessage back to an agent. A
// plain task then is refused as AgentChat refuses it.
func TestSwarmHandsOffToUserAndBack(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	c := create(t, rt, `{"task": "refund please", "max_round": 5, "speaker_selection": {"method": "swarm"},
		"termination": {"any": [{"handoff": {"target": "user"}}, {"text_mention": {"text": "TERMINATE"}}]},
		"agents": [{"name": "triage", "type": "assistant", "handoffs": ["user", "billing"], "model": {"provider": "replay", "responses": [
			{"tool_calls": [{"name": "transfer_to_user", "arguments": {}}]},
			{"tool_calls": [{"name": "transfer_to_billing", "arguments": {}}]}]}},
		           {"name": "billing", "type": "assistant", "model": {"provider": "replay", "responses": ["Refunded. TERMINATE"]}}]}`)
	got := waitRun(t, rt, c.ID, 1)
	if got.StopReason != chat.StopHandoff || got.StopDetail != "Handoff to user from triage detected." {
		t.Fatalf("run 1 ended %s %q", got.StopReason, got.StopDetail)
	}
	submitRun(t, rt, c.ID, `{"task": {"type": "HandoffMessage", "source": "user", "target": "triage", "content": "order 7"}}`)
	got = waitRun(t, rt, c.ID, 2)
	if got.StopReason != chat.StopTextMention {
		t.Fatalf("run 2 ended %s %q", got.StopReason, got.StopDetail)
	}
	ms := messages(t, db, c.ID)
	var back *chat.Message
	for i := range ms {
		if ms[i].Content == "order 7" {
			back = &ms[i]
		}
	}
	if back == nil || back.Type != chat.TypeHandoffMessage || back.Handoff != "triage" || back.Name != "user" {
		t.Fatalf("the task of run 2 = %+v", back)
	}
	// Without a condition that ends the run on the hand-off to user, the
	// run ends there, saying what is missing.
	c = create(t, rt, `{"task": "x", "max_round": 5, "speaker_selection": {"method": "swarm"},
		"agents": [{"name": "triage", "type": "assistant", "handoffs": ["user"], "model": {"provider": "replay", "responses": [
			{"tool_calls": [{"name": "transfer_to_user", "arguments": {}}]}]}}]}`)
	got = waitRun(t, rt, c.ID, 1)
	if got.StopReason != chat.StopNoEligibleSpeaker || !strings.Contains(got.StopDetail, "'triage' handed the swarm to 'user', who is not one of its agents") {
		t.Fatalf("a hand-off to user without a condition: %s %q", got.StopReason, got.StopDetail)
	}
	// A Swarm whose last handoff went to user cannot go on without one back.
	c = create(t, rt, `{"task": "x", "max_round": 5, "speaker_selection": {"method": "swarm"},
		"termination": {"handoff": {"target": "user"}},
		"agents": [{"name": "triage", "type": "assistant", "handoffs": ["user"], "model": {"provider": "replay", "responses": [
			{"tool_calls": [{"name": "transfer_to_user", "arguments": {}}]}]}}]}`)
	waitRun(t, rt, c.ID, 1)
	submitRun(t, rt, c.ID, `{"task": "hello?"}`)
	got = waitRun(t, rt, c.ID, 2)
	if got.Status != chat.StatusFailed || !strings.HasPrefix(got.Error, "The existing handoff target user is not one of the participants ['triage']. ") {
		t.Fatalf("run 2 = %s %q", got.Status, got.Error)
	}
	if slices.Contains(runEvents(t, db, c.ID), "user:hello?") {
		t.Fatalf("the refused run's task joined the thread: %v", runEvents(t, db, c.ID))
	}
	// The task is checked against the chat's agents when it is posted.
	_, _, err := rt.SubmitRun(context.Background(), "", c.ID, "", spec.DecodeRunRequest([]byte(`{"task": {"type": "HandoffMessage", "target": "nobody", "content": "x"}, "if_busy": "sometimes", "bogus": 1}`)))
	var ve *spec.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("a bad run: %v", err)
	}
	var paths []string
	for _, p := range ve.Problems {
		paths = append(paths, p.Path)
	}
	if want := []string{"/bogus", "/if_busy", "/task/target"}; !slices.Equal(paths, want) {
		t.Fatalf("problems at %v, want %v", paths, want)
	}
}

// TestForkCopiesTheLog: a fork at a run's end has the source's log to
// there, takes a run at once, and leaves the source as it was; a fork
// inside a turn is refused.
func TestForkCopiesTheLog(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	src := create(t, rt, threeAgents(2, ""))
	waitRun(t, rt, src.ID, 1)
	submitRun(t, rt, src.ID, `{"task": "again"}`)
	src = waitRun(t, rt, src.ID, 2)
	before := runEvents(t, db, src.ID)

	evs, err := db.ListEvents(context.Background(), &chat.ListEventsParams{ChatID: src.ID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var end1 int64
	for _, e := range evs {
		if e.Type.Terminal() {
			end1 = e.Seq
			break
		}
	}
	f, err := rt.Fork(context.Background(), "", src.ID, "", spec.DecodeForkRequest(fmt.Appendf(nil, `{"at_seq": %d, "run": {"task": "instead"}}`, end1)))
	if err != nil {
		t.Fatal(err)
	}
	if f.ForkedFrom == nil || f.ForkedFrom.ChatID != src.ID || f.ForkedFrom.Seq != end1 || f.ID == src.ID {
		t.Fatalf("fork = %+v", f.ForkedFrom)
	}
	checkForkRun(t, f)
	waitRun(t, rt, f.ID, 2)
	fevs, _ := db.ListEvents(context.Background(), &chat.ListEventsParams{ChatID: f.ID, Limit: 100})
	for i := range end1 {
		a, b := evs[i], fevs[i]
		if a.Seq != b.Seq || a.Type != b.Type || a.Content != b.Content || a.Name != b.Name || string(a.Data) != string(b.Data) || !a.CreatedAt.Equal(b.CreatedAt) {
			t.Fatalf("fork's event %d = %+v, want the source's %+v", i+1, b, a)
		}
	}
	want := []string{"run 1", "user:count", "a:a1", "b:b1", "end 1: Maximum number of turns 2 reached.",
		"run 2", "user:instead", "c:c1", "a:a2", "end 2: Maximum number of turns 2 reached."}
	if got := runEvents(t, db, f.ID); !slices.Equal(got, want) {
		t.Fatalf("fork's log = %v", got)
	}
	if got := runEvents(t, db, src.ID); !slices.Equal(got, before) {
		t.Fatalf("the source changed: %v", got)
	}
	// At a turn's end inside a run, with a run: the copied run ends
	// cancelled in the copy itself, before any worker could take a turn
	// of it, and the new run starts after it.
	var turn1 int64
	for _, e := range evs {
		if e.Type == chat.EventMessage && e.Name == "a" {
			turn1 = e.Seq
			break
		}
	}
	for range 5 {
		mid, err := rt.Fork(context.Background(), "", src.ID, "", spec.DecodeForkRequest(fmt.Appendf(nil, `{"at_seq": %d, "run": {"task": "instead"}}`, turn1)))
		if err != nil {
			t.Fatal(err)
		}
		// Written with the fork, not by a worker afterwards: the cut of
		// the copied run and the start of the fork's own.
		checkForkRun(t, mid)
		made, err := db.ListEvents(context.Background(), &chat.ListEventsParams{ChatID: mid.ID, After: turn1, Limit: 2})
		if err != nil || len(made) != 2 || made[0].Type != chat.EventChatCancelled || made[1].Type != chat.EventRunStarted {
			t.Fatalf("the events after the fork point, as the fork returns: %+v, %v", made, err)
		}
		waitRun(t, rt, mid.ID, 2)
		want := []string{"run 1", "user:count", "a:a1", "cancelled 1: " + engine.ForkCutDetail,
			"run 2", "user:instead", "b:b1", "c:c1", "end 2: Maximum number of turns 2 reached."}
		if got := runEvents(t, db, mid.ID); !slices.Equal(got, want) {
			t.Fatalf("fork in a run's middle: log =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	// At a turn's end inside a run, without a run: nothing ends the
	// copied run; it carries on where the source was, the next agent
	// speaks and the run ends as the source's did.
	plain, err := rt.Fork(context.Background(), "", src.ID, "", spec.DecodeForkRequest(fmt.Appendf(nil, `{"at_seq": %d}`, turn1)))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Status.Terminal() {
		t.Fatalf("fork in a run's middle without a run: %s (%s), want the copied run going on", plain.Status, plain.StopDetail)
	}
	waitRun(t, rt, plain.ID, 1)
	want = []string{"run 1", "user:count", "a:a1", "b:b1", "end 1: Maximum number of turns 2 reached."}
	if got := runEvents(t, db, plain.ID); !slices.Equal(got, want) {
		t.Fatalf("fork in a run's middle without a run: log =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Inside a turn (at speaker.selected) is no place to fork.
	var sel int64
	for _, e := range evs {
		if e.Type == chat.EventSpeakerSelected {
			sel = e.Seq
			break
		}
	}
	_, err = rt.Fork(context.Background(), "", src.ID, "", spec.DecodeForkRequest(fmt.Appendf(nil, `{"at_seq": %d}`, sel)))
	var ve *spec.ValidationError
	if !errors.As(err, &ve) || ve.Problems[0].Path != "/at_seq" {
		t.Fatalf("fork inside a turn: %v", err)
	}
	if _, err := rt.Fork(context.Background(), "other", src.ID, "", spec.DecodeForkRequest(nil)); !errors.Is(err, chat.ErrNotFound) {
		t.Fatalf("fork of another tenant's chat: %v", err)
	}
}

// checkForkRun checks the answer to a fork with a run: the fork's own run,
// run 2, is under way (a client that waits for the end waits for it), and
// none is left queued.
func checkForkRun(t *testing.T, f *chat.Chat) {
	t.Helper()
	if f.Status.Terminal() || f.Run != 2 || f.QueuedRuns != 0 {
		t.Fatalf("fork with a run answers %s (%s), run %d, %d queued; want its run 2 under way", f.Status, f.StopDetail, f.Run, f.QueuedRuns)
	}
}

// TestToolApproval: calls held for approval wait for a client; an
// approved call runs, an edited one runs with its edit (checked against
// the schema), a rejected one is answered with the reason; the log keeps
// the model's arguments and the decisions.
func TestToolApproval(t *testing.T) {
	ts := newToolServer(t)
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db, withTools(t))
	c := create(t, rt, toolSpec(ts.URL, `, "tool_approval": ["use_id", "lookup_id"], "reflect_on_tool_use": true`,
		`{"tool_calls": [{"name": "lookup_id", "arguments": {"name": "x"}}, {"name": "use_id", "arguments": {"id": "1"}}, {"name": "fail", "arguments": {}}]}, "ok"`, ""))
	c = waitFor(t, rt, c.ID, 5*time.Second, chat.StatusAwaitingInput)
	p := pending(t, c)
	if p.Kind != chat.InputApproval || p.Agent != "agent" || len(p.ToolCalls) != 2 {
		t.Fatalf("pending = %+v", p)
	}
	if len(ts.recorded()) != 0 {
		t.Fatalf("a held call ran: %v", ts.recorded())
	}
	lookup, use := p.ToolCalls[0].ID, p.ToolCalls[1].ID
	// Every problem at once: an edit that fails the schema, a call left out.
	err := answerInput(rt, context.Background(), c.ID, &chat.Input{RequestID: p.RequestID, Approvals: []chat.Approval{
		{ToolCallID: use, Approve: true, Arguments: json.RawMessage(`{"id": 5}`)}}})
	var ve *spec.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 2 {
		t.Fatalf("a bad approval: %v", err)
	}
	if err := answerInput(rt, context.Background(), c.ID, &chat.Input{RequestID: p.RequestID, Approvals: []chat.Approval{
		{ToolCallID: lookup, Approve: false, Reason: "not now"},
		{ToolCallID: use, Approve: true, Arguments: json.RawMessage(`{"id": "42"}`)}}}); err != nil {
		t.Fatal(err)
	}
	c = waitTerminal(t, rt, c.ID, 5*time.Second)
	calls := ts.recorded()
	if len(calls) != 2 || calls[0].Name == "lookup_id" || calls[1].Name == "lookup_id" {
		t.Fatalf("tool calls = %+v", calls)
	}
	for _, call := range calls {
		if call.Name == "use_id" && call.Arguments["id"] != "42" {
			t.Fatalf("use_id ran with %v, want the edit", call.Arguments)
		}
	}
	var results []chat.ToolResponse
	for _, m := range messages(t, db, c.ID) {
		results = append(results, m.ToolResponses...)
	}
	if len(results) != 3 || results[0].Content != "Error: Tool call was not approved. Reason: not now" || !results[0].IsError ||
		results[1].Content != "used 42" || results[2].Content == "" {
		t.Fatalf("results = %+v", results)
	}
	evs, _ := db.ListEvents(context.Background(), &chat.ListEventsParams{ChatID: c.ID, Limit: 100})
	var decided bool
	for _, e := range evs {
		if e.Type == chat.EventChatRunning && strings.Contains(string(e.Data), `"approvals"`) && strings.Contains(string(e.Data), `"not now"`) {
			decided = true
		}
		if len(e.ToolCalls) > 0 && e.ToolCalls[1].Function.Arguments != `{"id":"1"}` {
			t.Fatalf("the model's arguments were rewritten in the log: %s", e.ToolCalls[1].Function.Arguments)
		}
	}
	if !decided {
		t.Fatal("the decisions are not in the log")
	}
}

// TestRunOfKey: the run a keyed post made is found by its key whatever
// request names it now, as that post left the chat; a key that posted
// nothing finds none, and the same key with another request is still a
// conflict for SubmitRun.
func TestRunOfKey(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	ctx := context.Background()
	c := create(t, rt, threeAgents(2, ""))
	waitRun(t, rt, c.ID, 1)
	posted, n, err := rt.SubmitRun(ctx, "", c.ID, "k2", spec.DecodeRunRequest([]byte(`{"task": "two"}`)))
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, rt, c.ID, n)
	got, m, err := rt.RunOfKey(ctx, "", c.ID, "k2")
	if err != nil || got == nil || m != n || got.LastSeq != posted.LastSeq {
		t.Fatalf("RunOfKey = %v run %d (err %v), want the post's run %d at seq %d", got, m, err, n, posted.LastSeq)
	}
	if got, _, err := rt.RunOfKey(ctx, "", c.ID, "k3"); got != nil || err != nil {
		t.Errorf("a key that posted nothing: %v, %v", got, err)
	}
	if _, _, err := rt.SubmitRun(ctx, "", c.ID, "k2", spec.DecodeRunRequest([]byte(`{"task": "other"}`))); !errors.Is(err, chat.ErrConflict) {
		t.Errorf("the key with another request: %v, want a conflict", err)
	}
}
