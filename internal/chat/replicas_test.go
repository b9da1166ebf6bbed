package chat_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/pgtest"
)

func openPostgres(t *testing.T) store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), store.Config{DatabaseURL: pgtest.URL(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// runningOn waits until some runtime's worker has started the chat.
func runningOn(t *testing.T, rt *chat.Runtime, id string) {
	t.Helper()
	waitFor(t, rt, id, 10*time.Second, chat.StatusRunning)
}

// TestReplicasShareEventsAndCancelsThroughTheStore: two runtimes on one
// Postgres, the chat running on the first. The second's subscribers are woken
// by the first's appends (LISTEN/NOTIFY), with no polling, and a cancel
// posted to the second cuts the first's model call at once rather than at
// its next lease renewal.
func TestReplicasShareEventsAndCancelsThroughTheStore(t *testing.T) {
	db := openPostgres(t)
	long := func(c *chat.RuntimeConfig) { c.LeaseDuration = 30 * time.Second } // renewals every 10 s
	rt1 := newRuntime(t, db, long)
	c := create(t, rt1, string(twoAgentSpec(6, 300, "")))
	runningOn(t, rt1, c.ID)
	rt2 := newRuntime(t, db, long)

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
	run := func(t *testing.T, replicas ...*chat.Runtime) {
		ctx := context.Background()
		c := create(t, replicas[0], sp)
		c = waitFor(t, replicas[0], c.ID, 10*time.Second, chat.StatusAwaitingInput)
		for turn := range turns {
			p := pending(t, c)
			answeredOn := replicas[turn%len(replicas)]
			speaker := p.Candidates[turn%len(p.Candidates)]
			if err := answeredOn.Input(ctx, "", c.ID, &chat.Input{RequestID: p.RequestID, Speaker: &speaker}); err != nil {
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
		run(t, newRuntime(t, openStore(t)))
	})
	t.Run("postgres", func(t *testing.T) {
		db := openPostgres(t)
		run(t, newRuntime(t, db), newRuntime(t, db))
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
