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

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/runtime/runtimetest"
	"github.com/agentd/agentd/internal/spec"
)

// ledger is a progress ledger reply of the magentic_one orchestrator.
func ledger(satisfied, loop, progress bool, next, instruction string) string {
	b, _ := json.Marshal(map[string]any{
		"is_request_satisfied":    map[string]any{"reason": "reason " + instruction, "answer": satisfied},
		"is_in_loop":              map[string]any{"reason": "r", "answer": loop},
		"is_progress_being_made":  map[string]any{"reason": "r", "answer": progress},
		"next_speaker":            map[string]any{"reason": "r", "answer": next},
		"instruction_or_question": map[string]any{"reason": "r", "answer": instruction},
	})
	return string(b)
}

func replayModel(replies ...string) string {
	b, _ := json.Marshal(replies)
	return fmt.Sprintf(`{"provider": "replay", "responses": %s}`, b)
}

// TestMagenticOneRunsTheOrchestratorsLoop runs a magentic_one chat on
// replay models through two runs: the task ledger, instructions, a stall
// that re-plans (max_stalls 1), the final answer that ends run 1 with the
// ledger's reason, then run 2 planning for its own task and ending when
// its rounds, counted over both runs as AgentChat counts them, run out.
func TestMagenticOneRunsTheOrchestratorsLoop(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	orchestrator := replayModel(
		"facts 1", "plan 1",
		ledger(false, false, true, "a", "do a"),
		ledger(false, true, true, "b", "loop"), // a stall: max_stalls 1 re-plans
		"facts 2", "plan 2",
		ledger(false, false, true, "b", "do b"),
		ledger(true, false, true, "a", "done"),
		"final 1",
		"facts 3", "plan 3",
		ledger(false, false, true, "a", "do a again"),
		"final 2")
	body := fmt.Sprintf(`{"task": "solve", "max_round": 4,
		"agents": [{"name": "a", "type": "assistant", "description": "Does a.", "model": %s},
		           {"name": "b", "type": "assistant", "description": "Does b.", "model": %s}],
		"speaker_selection": {"method": "magentic_one", "model": %s, "max_stalls": 1}}`,
		replayModel("a1", "a2"), replayModel("b1"), orchestrator)
	c := create(t, rt, body)
	got := waitRun(t, rt, c.ID, 1)
	if got.Status != chat.StatusCompleted || got.StopReason != chat.StopRequestSatisfied || got.StopDetail != "reason done" {
		t.Fatalf("run 1: %s %s %q %s", got.Status, got.StopReason, got.StopDetail, got.Error)
	}
	// AgentChat's orchestrator fails a run without a task; agentd refuses
	// it, and the chat goes on.
	for _, body := range []string{`{}`, `{"task": null}`} {
		_, _, err := rt.SubmitRun(context.Background(), "", c.ID, "", spec.DecodeRunRequest([]byte(body)))
		var invalid *spec.ValidationError
		if !errors.As(err, &invalid) || len(invalid.Problems) != 1 || invalid.Problems[0].Path != "/task" {
			t.Fatalf("run %s: %v, want a problem at /task", body, err)
		}
	}
	submitRun(t, rt, c.ID, `{"task": "more"}`)
	got = waitRun(t, rt, c.ID, 2)
	if got.Status != chat.StatusCompleted || got.StopReason != chat.StopMaxRound || got.StopDetail != "Max rounds reached." {
		t.Fatalf("run 2: %s %s %q %s", got.Status, got.StopReason, got.StopDetail, got.Error)
	}
	ledgerMsg := func(task, facts, plan string) string {
		return fmt.Sprintf("MagenticOneOrchestrator:\nWe are working to address the following user request:\n\n%s\n\n\n"+
			"To answer this request we have assembled the following team:\n\na: Does a.\nb: Does b.\n\n\n"+
			"Here is an initial fact sheet to consider:\n\n%s\n\n\nHere is the plan to follow as best as possible:\n\n%s\n", task, facts, plan)
	}
	want := []string{"run 1", "user:solve", ledgerMsg("solve", "facts 1", "plan 1"),
		"MagenticOneOrchestrator:do a", "a:a1",
		ledgerMsg("solve", "facts 2", "plan 2"),
		"MagenticOneOrchestrator:do b", "b:b1",
		"MagenticOneOrchestrator:final 1", "end 1: reason done",
		"run 2", "user:more", ledgerMsg("more", "facts 3", "plan 3"),
		// Round 5 of the chat, counted over its runs: more than max_round 4.
		"MagenticOneOrchestrator:do a again", "a:a2",
		"MagenticOneOrchestrator:final 2", "end 2: Max rounds reached."}
	if ev := runEvents(t, db, c.ID); !slices.Equal(ev, want) {
		t.Fatalf("log =\n%q\nwant\n%q", ev, want)
	}
}

// TestMagenticOneGoesOnAfterItsRuntimeStops: a runtime stopped while the
// orchestrator's model calls are under way (each takes a while) hands the
// chat back, and another runtime continues it from the log: the chat ends
// with the log of an uninterrupted run, each committed step once, the
// orchestrator's replay position and its stall count taken from the log.
func TestMagenticOneGoesOnAfterItsRuntimeStops(t *testing.T) {
	slow := func(replies ...string) string {
		rs := make([]map[string]any, len(replies))
		for i, r := range replies {
			rs[i] = map[string]any{"content": r, "delay_ms": 60}
		}
		b, _ := json.Marshal(rs)
		return fmt.Sprintf(`{"provider": "replay", "responses": %s}`, b)
	}
	body := fmt.Sprintf(`{"task": "solve", "max_round": 10,
		"agents": [{"name": "a", "type": "assistant", "description": "Does a.", "model": %s},
		           {"name": "b", "type": "assistant", "description": "Does b.", "model": %s}],
		"speaker_selection": {"method": "magentic_one", "model": %s, "max_stalls": 2}}`,
		replayModel("a1", "a2"), replayModel("b1", "b2"), slow(
			"facts 1", "plan 1",
			ledger(false, false, true, "a", "do a"),
			ledger(false, true, true, "b", "loop"),    // stalls 1
			ledger(false, false, false, "a", "stuck"), // stalls 2: re-plan
			"facts 2", "plan 2",
			ledger(false, false, true, "b", "do b"), // stalls 1
			ledger(false, false, true, "a", "do a again"),
			ledger(true, false, true, "a", "done"),
			"the answer"))
	want := []string{"run 1", "user:solve", "ledger", "MagenticOneOrchestrator:do a", "a:a1", "MagenticOneOrchestrator:loop", "b:b1",
		"ledger", "MagenticOneOrchestrator:do b", "b:b2", "MagenticOneOrchestrator:do a again", "a:a2",
		"MagenticOneOrchestrator:the answer", "end 1: reason done"}
	short := func(evs []string) []string {
		out := slices.Clone(evs)
		for i, e := range out {
			if strings.HasPrefix(e, "MagenticOneOrchestrator:\nWe are working") {
				out[i] = "ledger"
			}
		}
		return out
	}
	for _, stopAfter := range []time.Duration{30, 150, 250, 400, 520, 700} {
		t.Run(fmt.Sprintf("%dms", stopAfter), func(t *testing.T) {
			db := runtimetest.OpenSQLite(t)
			rt1 := stoppableRuntime(t, db)
			c := create(t, rt1, body)
			time.Sleep(stopAfter * time.Millisecond)
			stopRuntime(t, rt1)
			if at, err := db.GetChat(context.Background(), "", c.ID); err == nil {
				t.Logf("stopped at seq %d, %s", at.LastSeq, at.Status)
			}
			rt2 := runtimetest.New(t, db)
			got := waitRun(t, rt2, c.ID, 1)
			if got.Status != chat.StatusCompleted || got.StopReason != chat.StopRequestSatisfied {
				t.Fatalf("chat %s %s %q %s", got.Status, got.StopReason, got.StopDetail, got.Error)
			}
			if ev := short(runEvents(t, db, c.ID)); !slices.Equal(ev, want) {
				t.Fatalf("log =\n%q\nwant\n%q", ev, want)
			}
		})
	}
}
