package runtime_test

import (
	"testing"
	"time"

	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/runtime/runtimetest"

	"github.com/agentd/agentd/internal/llm"
)

// TestStateProperty runs random chats through a worker's own code paths on
// a real SQLite store, and checks after every append that what the worker
// believes is, field for field, what the stored log folds to (see
// chat.RunStateProperty): what a worker rebuilt on another replica would
// believe. Held selections are flushed or thrown away, appends are refused
// by the store now and then, runs are posted and started, stops requested,
// calls and code approved, edited and rejected.
//
// Graph chats get seeds of their own: their parallel steps, whose branches
// end in any order, are where live state and log could drift most. So do
// magentic_one chats: their orchestrator's ledgers, rounds and stalls are
// folded from its messages.
func TestStateProperty(t *testing.T) {
	models, err := llm.New(llm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(300) {
		method := ""
		switch {
		case seed >= 250:
			method = "magentic_one"
		case seed >= 150:
			method = "graph"
		}
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			db := &runtime.FaultyStore{Store: runtimetest.OpenSQLite(t)}
			rt, err := runtime.New(runtime.Config{Store: db, Models: models, HoldSelection: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			runtime.RunStateProperty(t, rt, db, seed, method)
		})
	}
}
