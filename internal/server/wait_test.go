package server

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/internal/runtime"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/store"
)

// readCounter is the real store, counting the reads of a chat.
type readCounter struct {
	chat.Store
	progress, chats atomic.Int64
}

func (p *readCounter) GetProgress(ctx context.Context, tenant, id string) (chat.Progress, error) {
	p.progress.Add(1)
	return p.Store.GetProgress(ctx, tenant, id)
}

func (p *readCounter) GetChat(ctx context.Context, tenant, id string) (*chat.Chat, error) {
	p.chats.Add(1)
	return p.Store.GetChat(ctx, tenant, id)
}

// openStore opens an embedded store of the test's own, migrated.
func openStore(t *testing.T) store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), store.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return db
}

// startRuntime starts a real runtime on st (metrics on reg, if set) with
// the replay models, stopped when the test ends.
func startRuntime(t *testing.T, st chat.Store, reg prometheus.Registerer) *runtime.Runtime {
	t.Helper()
	models, err := llm.New(llm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(runtime.Config{Store: st, Models: models, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Stop(ctx)
	})
	return rt
}

// A client waiting for a chat run on this replica is woken with what each
// append committed, starting from where the worker has the chat, and the
// append that ends it brings the chat: it reads nothing from the store,
// and is answered what a read of the store answers.
func TestWaitingOnALocalChatReadsNothing(t *testing.T) {
	counted := &readCounter{Store: openStore(t)}
	rt := startRuntime(t, counted, nil)
	var responses []string
	for i := range 12 {
		responses = append(responses, fmt.Sprintf(`{"content": "turn %d", "delay_ms": 20}`, i))
	}
	spec := fmt.Sprintf(`{"task": "go", "max_round": 12, "metadata": {"b": 1,  "a": [2]}, "agents": [{"name": "a", "type": "assistant",
		"model": {"provider": "replay", "responses": [%s]}}]}`, strings.Join(responses, ","))
	ts := newTestServer(t, Config{}, rt)
	rec := ts.do(t, http.MethodPost, "/v1/chats?wait_s=30", spec)
	body := decodeJSON(t, rec, http.StatusCreated)
	if body["status"] != "completed" || body["message_count"] != float64(13) {
		t.Fatalf("chat = %v", body)
	}
	if n, m := counted.progress.Load(), counted.chats.Load(); n != 0 || m != 0 {
		t.Fatalf("%d progress reads and %d chat reads for a chat of 12 turns, want none", n, m)
	}
	for _, include := range []string{"", "include=spec"} {
		rec = ts.do(t, http.MethodPost, "/v1/chats?wait_s=30&"+include, spec)
		waited := decodeJSON(t, rec, http.StatusCreated)
		got := decodeJSON(t, ts.do(t, http.MethodGet, fmt.Sprintf("/v1/chats/%s?%s", waited["id"], include), ""), http.StatusOK)
		if !reflect.DeepEqual(waited, got) {
			t.Fatalf("POST with wait_s answered\n%v\nGET answers\n%v", waited, got)
		}
	}
	rec = ts.do(t, http.MethodGet, fmt.Sprintf("/v1/chats/%s/messages?after=13&wait_s=5", body["id"]), "")
	if got := decodeJSON(t, rec, http.StatusOK); got["status"] != "completed" {
		t.Fatalf("messages = %v", got)
	}
}
