package runtime_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/runtime/runtimetest"

	"github.com/agentd/agentd/internal/chat"
)

// heldRenewStore is the real store whose first lease renewal waits, after
// the scheduler took its snapshot of leases, until the test lets it go on.
type heldRenewStore struct {
	chat.Store
	once    sync.Once
	held    chan []chat.Lease // the held renewal's leases
	release chan struct{}
}

func (s *heldRenewStore) RenewLeases(ctx context.Context, p *chat.RenewLeasesParams) ([]chat.LeaseState, error) {
	if len(p.Leases) > 0 {
		s.once.Do(func() {
			s.held <- p.Leases
			<-s.release
		})
	}
	return s.Store.RenewLeases(ctx, p)
}

// TestRenewalOfAnEndedLeaseSparesTheChatsNextWorker: a renewal is under way
// for a chat's worker (epoch 1) when that worker ends (the chat waits for
// input) and, the human having answered, this replica claims the chat again
// and starts a new worker (epoch 2). The store's answer that epoch 1 is no
// longer held is about the ended worker; the new one runs on under its
// lease, and the chat's epoch stays 2 until it next hands the chat back.
func TestRenewalOfAnEndedLeaseSparesTheChatsNextWorker(t *testing.T) {
	db := &heldRenewStore{Store: runtimetest.OpenSQLite(t), held: make(chan []chat.Lease, 1), release: make(chan struct{})}
	released := false
	let := func() {
		if !released {
			released = true
			close(db.release)
		}
	}
	defer let()
	// Renewals every two seconds: the first comes while the first model
	// reply (four seconds) is being made, and the leases outlast the held
	// renewal.
	rt := runtimetest.New(t, db, func(c *runtime.Config) { c.LeaseDuration = 6 * time.Second })
	c := create(t, rt, `{"task": "write", "max_round": 10,
		"agents": [{"name": "writer", "type": "assistant", "model": {"provider": "replay", "responses": [
				{"content": "draft 1", "delay_ms": 4000}, {"content": "draft 2", "delay_ms": 2000}, "draft 3"]}},
			{"name": "human", "type": "user_proxy", "human_input_mode": "ALWAYS"}]}`)

	var leases []chat.Lease
	select {
	case leases = <-db.held:
	case <-time.After(10 * time.Second):
		t.Fatal("no lease renewal")
	}
	if len(leases) != 1 || leases[0] != (chat.Lease{ChatID: c.ID, Epoch: 1}) {
		t.Fatalf("renewal of %+v, want the chat's first lease", leases)
	}
	c = waitFor(t, rt, c.ID, 20*time.Second, chat.StatusAwaitingInput)
	// With no renewal the first worker's lease runs out six seconds after
	// its claim: a machine that held it up longer had the chat claimed
	// again, and the worker after the answer is the one after that.
	next := c.Epoch + 1
	say(t, rt, c, "shorter")

	// The next worker has started: it holds the next epoch and has
	// appended.
	sig, done := rt.Subscribe(c.ID)
	defer done()
	deadline := time.After(10 * time.Second)
	for {
		got, err := db.GetChat(context.Background(), "", c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Epoch == next && got.Owner == rt.Owner() && got.Status == chat.StatusRunning && got.LastSeq > c.LastSeq {
			break
		}
		select {
		case <-sig:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("no second worker: %+v", got)
		}
	}
	let() // the store answers: epoch 1 is not held

	c = nextPause(t, rt, c)
	if c.Status != chat.StatusAwaitingInput || c.Epoch != next {
		t.Fatalf("after the second worker's turn: status %s, epoch %d; want awaiting_input under epoch %d (the worker was not cut)", c.Status, c.Epoch, next)
	}
	say(t, rt, c, "exit")
	if c = waitTerminal(t, rt, c.ID, 10*time.Second); c.Status != chat.StatusCompleted {
		t.Fatalf("chat = %+v", c)
	}
}

// TestATurnLongerThanItsLeaseKeepsIt: a model reply that takes several
// lease durations does not lose the chat to another claim: the scheduler
// renews the lease three times a duration, and the chat ends under the
// epoch it started with, its turn made once. (Other tests run on leases
// long enough that a slow renewal on a loaded machine never hands their
// chats on; this one holds that renewal works.)
func TestATurnLongerThanItsLeaseKeepsIt(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db, func(c *runtime.Config) { c.LeaseDuration = 2 * time.Second })
	start := time.Now()
	c := create(t, rt, `{"task": "write", "max_round": 1,
		"agents": [{"name": "writer", "type": "assistant", "model": {"provider": "replay", "responses": [{"content": "done", "delay_ms": 5000}]}}]}`)
	c = waitTerminal(t, rt, c.ID, 20*time.Second)
	took := time.Since(start)
	if c.Status != chat.StatusCompleted || c.Epoch != 1 || took > 9*time.Second {
		t.Fatalf("chat %s, epoch %d after %v; want completed under epoch 1 in one 5 s turn", c.Status, c.Epoch, took)
	}
}
