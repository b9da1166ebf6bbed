package chat_test

import (
	"context"
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
