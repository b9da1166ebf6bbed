package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/store"
)

// A chat this replica runs is followed without reading the store: the
// subscription starts from where the worker has it, every append brings its
// progress, and the append that ends the chat brings the chat as the store
// now holds it. On both stores, since what the store keeps of a time or a
// JSON value is what the follower must be told.
func TestFollowingALocalChatNeedsNoRead(t *testing.T) {
	for name, open := range map[string]func(*testing.T) store.DB{
		"sqlite":   func(t *testing.T) store.DB { return openStore(t) },
		"postgres": openPostgres,
	} {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			// Leases of a minute: with the tests' 600 ms, a loaded machine
			// may let a renewal slip and the chat's worker end before the
			// chat did, and then the chat is not one this replica runs.
			rt := newRuntime(t, db, func(c *runtime.Config) { c.LeaseDuration = time.Minute })
			sp := bytes.Replace(twoAgentSpec(6, 20, ""), []byte(`"max_round"`),
				[]byte(`"metadata": {"ticket": "ABC-1",  "owner": {"team": "x"}}, "name": "review", "max_round"`), 1)
			c := create(t, rt, string(sp))
			wk, sig, done := rt.Follow(c.ID)
			defer done()
			if !wk.Known {
				t.Fatal("following a chat this replica runs did not start from where its worker has it")
			}
			var ended *chat.Chat
			deadline := time.After(20 * time.Second)
			for ended == nil {
				if e, ok := wk.Ended(c); ok {
					ended = e
					break
				}
				if wk.Progress.Status.Terminal() {
					t.Fatalf("terminal wake-up without the chat: %+v", wk)
				}
				select {
				case next := <-sig:
					if !next.Known {
						t.Fatalf("wake-up without the progress for a chat this replica runs: %+v", next)
					}
					if next.Progress.LastSeq <= wk.Progress.LastSeq {
						t.Fatalf("wake-up at seq %d after %d", next.Progress.LastSeq, wk.Progress.LastSeq)
					}
					wk = next
				case <-deadline:
					t.Fatalf("chat not ended; last wake-up %+v", wk)
				}
			}
			stored, err := rt.Get(context.Background(), "", c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := comparable(t, ended), comparable(t, stored); !reflect.DeepEqual(got, want) {
				t.Fatalf("the chat as its last append left it:\n%+v\nthe chat as stored:\n%+v", got, want)
			}
			if stored.Status != chat.StatusCompleted || stored.LastSeq != wk.Progress.LastSeq {
				t.Fatalf("stored chat %s at seq %d, wake-up at seq %d", stored.Status, stored.LastSeq, wk.Progress.LastSeq)
			}
		})
	}
}

// comparable is c with its JSON values decoded (a store may keep them in a
// normal form of its own) and its times in UTC.
func comparable(t *testing.T, c *chat.Chat) map[string]any {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"CreatedAt", "UpdatedAt", "CompletedAt", "InputExpiresAt", "LeaseExpiresAt"} {
		if s, ok := m[k].(string); ok {
			tm, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				t.Fatal(err)
			}
			m[k] = tm.UTC().Format(time.RFC3339Nano)
		}
	}
	return m
}
