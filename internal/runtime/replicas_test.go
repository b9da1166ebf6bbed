package runtime_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/runtime/runtimetest"

	"github.com/agentd/agentd/internal/chat"
)

// runningOn waits until some runtime's worker has started the chat.
func runningOn(t *testing.T, rt *runtime.Runtime, id string) {
	t.Helper()
	waitFor(t, rt, id, 10*time.Second, chat.StatusRunning)
}

// TestReplicasShareEventsAndCancelsThroughTheStore: two runtimes on one
// Postgres, the chat running on the first. The second's subscribers are woken
// by the first's appends (LISTEN/NOTIFY), with no polling, and a cancel
// posted to the second cuts the first's model call at once rather than at
// its next lease renewal.
func TestReplicasShareEventsAndCancelsThroughTheStore(t *testing.T) {
	db := runtimetest.OpenPostgres(t)
	long := func(c *runtime.Config) { c.LeaseDuration = 30 * time.Second } // renewals every 10 s
	rt1 := runtimetest.New(t, db, long)
	c := create(t, rt1, string(twoAgentSpec(6, 300, "")))
	runningOn(t, rt1, c.ID)
	rt2 := runtimetest.New(t, db, long)

	sig, done := rt2.Subscribe(c.ID)
	defer done()
	for i := range 3 {
		select {
		case <-sig:
		case <-time.After(5 * time.Second):
			t.Fatalf("replica 2 got %d of 3 wake-ups for a chat replica 1 runs", i)
		}
	}

	slow := create(t, rt1, string(twoAgentSpec(2, 20000, "")))
	runningOn(t, rt1, slow.ID)
	waitFor(t, rt1, slow.ID, 5*time.Second, chat.StatusRunning)
	start := time.Now()
	if _, changed, err := rt2.Cancel(context.Background(), "", slow.ID); err != nil || !changed {
		t.Fatal(changed, err)
	}
	got := waitTerminal(t, rt2, slow.ID, 5*time.Second)
	if got.Status != chat.StatusCancelled || time.Since(start) > 2*time.Second {
		t.Fatalf("chat = %s after %v", got.Status, time.Since(start))
	}
}

// TestAnsweredInputIsNeverShownAgain: once an answer is accepted, every read
// of the chat, on every replica, shows either no request (the chat running)
// or the next one, never the answered request: a client that answers and
// then polls for the next request must not answer the old one again. On
// Postgres the answer goes to one replica and the reads go to both; the
// embedded store serves one process.
func TestAnsweredInputIsNeverShownAgain(t *testing.T) {
	const turns = 6
	sp := fmt.Sprintf(`{"task": "go", "max_round": %d, "speaker_selection": {"method": "manual"},
		"agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": %s}},
		           {"name": "b", "type": "assistant", "model": {"provider": "replay", "responses": %s}}]}`,
		turns, replies("a", turns), replies("b", turns))
	run := func(t *testing.T, replicas ...*runtime.Runtime) {
		ctx := context.Background()
		c := create(t, replicas[0], sp)
		c = waitFor(t, replicas[0], c.ID, 10*time.Second, chat.StatusAwaitingInput)
		for turn := range turns {
			p := pending(t, c)
			answeredOn := replicas[turn%len(replicas)]
			speaker := p.Candidates[turn%len(p.Candidates)]
			if err := answerInput(answeredOn, ctx, c.ID, &chat.Input{RequestID: p.RequestID, Speaker: &speaker}); err != nil {
				t.Fatal(err)
			}
			for i, rt := range replicas {
				got, err := rt.Get(ctx, "", c.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.Status == chat.StatusAwaitingInput && pending(t, got).RequestID == p.RequestID {
					t.Fatalf("turn %d: replica %d shows the answered request %s", turn, i, p.RequestID)
				}
				if got.Status != chat.StatusAwaitingInput && got.PendingInput != nil {
					t.Fatalf("turn %d: replica %d: status %s with pending input %s", turn, i, got.Status, got.PendingInput)
				}
				pr, err := rt.Progress(ctx, "", c.ID)
				if err != nil {
					t.Fatal(err)
				}
				if pr.Status == chat.StatusAwaitingInput && pr.LastSeq == c.LastSeq {
					t.Fatalf("turn %d: replica %d: progress %+v still awaits the answered request", turn, i, pr)
				}
				waiting, _, err := rt.List(ctx, &chat.ListChatsParams{Status: chat.StatusAwaitingInput, Limit: 100})
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range waiting {
					if w.ID == c.ID && pending(t, w).RequestID == p.RequestID {
						t.Fatalf("turn %d: replica %d lists the chat as awaiting the answered request", turn, i)
					}
				}
			}
			c = nextPause(t, replicas[(turn+1)%len(replicas)], c)
		}
		if c = waitTerminal(t, replicas[0], c.ID, 10*time.Second); c.StopReason != chat.StopMaxRound {
			t.Fatalf("chat = %+v", c)
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		run(t, runtimetest.New(t, runtimetest.OpenSQLite(t)))
	})
	t.Run("postgres", func(t *testing.T) {
		db := runtimetest.OpenPostgres(t)
		run(t, runtimetest.New(t, db), runtimetest.New(t, db))
	})
}

// replies returns n replay responses of agent name as a JSON array.
func replies(name string, n int) string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%q", fmt.Sprintf("%s %d", name, i+1))
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// TestRunsPostedToAnotherReplica: a chat runs on replica 1; the runs, the
// interrupt and the stop posted to replica 2 reach it through the store:
// enqueued runs start in order, an interrupt cuts the model call in
// progress at once (not at the next lease renewal, 10 s away) and the run
// ends cancelled, and a stop ends the run after the turn in progress.
func TestRunsPostedToAnotherReplica(t *testing.T) {
	db := runtimetest.OpenPostgres(t)
	long := func(c *runtime.Config) { c.LeaseDuration = 30 * time.Second } // renewals every 10 s
	rt1 := runtimetest.New(t, db, long)
	c := create(t, rt1, `{"task": "go", "max_round": 1, "agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": [
		{"content": "r1", "delay_ms": 800}, {"content": "r2", "delay_ms": 100}, {"content": "r3", "delay_ms": 100},
		{"content": "r4", "delay_ms": 4000}]}}]}`)
	runningOn(t, rt1, c.ID)
	rt2 := runtimetest.New(t, db, long)
	if n := submitRun(t, rt2, c.ID, `{"task": "second", "if_busy": "enqueue"}`); n != 2 {
		t.Fatalf("enqueued run %d", n)
	}
	if n := submitRun(t, rt2, c.ID, `{"task": "third", "if_busy": "enqueue"}`); n != 3 {
		t.Fatalf("enqueued run %d", n)
	}
	waitRun(t, rt2, c.ID, 3)
	submitRun(t, rt2, c.ID, `{"task": "fourth"}`)
	waitFor(t, rt2, c.ID, 5*time.Second, chat.StatusRunning)
	start := time.Now()
	submitRun(t, rt2, c.ID, `{"task": "fifth", "if_busy": "interrupt"}`)
	waitRun(t, rt2, c.ID, 5)
	want := []string{"run 1", "user:go", "a:r1", "end 1: Maximum number of turns 1 reached.",
		"run 2", "user:second", "a:r2", "end 2: Maximum number of turns 1 reached.",
		"run 3", "user:third", "a:r3", "end 3: Maximum number of turns 1 reached.",
		"run 4", "user:fourth", "cancelled 4: External termination requested",
		// The cut call was never recorded: the replay answers it again.
		"run 5", "user:fifth", "a:r4", "end 5: Maximum number of turns 1 reached."}
	if ev := runEvents(t, db, c.ID); !slices.Equal(ev, want) {
		t.Fatalf("log =\n%s\nwant\n%s", strings.Join(ev, "\n"), strings.Join(want, "\n"))
	}
	// Run 5 waited 4 s for its reply: the interrupt took less than that.
	if d := time.Since(start); d > 4*time.Second+3*time.Second {
		t.Errorf("the interrupt and run 5 took %v: run 4's call was not cut at once", d)
	}

	slow := create(t, rt1, `{"task": "go", "max_round": 5, "agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": [
		{"content": "x1", "delay_ms": 1500}, {"content": "x2", "delay_ms": 1500}]}}]}`)
	runningOn(t, rt1, slow.ID)
	if _, stopped, err := rt2.StopRun(context.Background(), "", slow.ID, ""); err != nil || !stopped {
		t.Fatalf("stop through replica 2: %v, %v", stopped, err)
	}
	waitTerminal(t, rt2, slow.ID, 10*time.Second)
	if ev, want := runEvents(t, db, slow.ID), []string{"run 1", "user:go", "a:x1", "end 1: External termination requested"}; !slices.Equal(ev, want) {
		t.Fatalf("log = %v, want %v", ev, want)
	}
}
