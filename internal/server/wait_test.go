package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/store"
)

// progressCounter is the real store, counting the progress reads.
type progressCounter struct {
	chat.Store
	progress atomic.Int64
}

func (p *progressCounter) GetProgress(ctx context.Context, tenant, id string) (chat.Progress, error) {
	p.progress.Add(1)
	return p.Store.GetProgress(ctx, tenant, id)
}

// A client waiting for a chat run on this replica is woken with what each
// append committed: it reads the chat's progress once, not per append.
func TestWaitingOnALocalChatReadsItsProgressOnce(t *testing.T) {
	db, err := store.Open(t.Context(), store.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	counted := &progressCounter{Store: db}
	models, err := llm.New(llm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := chat.NewRuntime(chat.RuntimeConfig{Store: counted, Models: models})
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
	var responses []string
	for i := range 12 {
		responses = append(responses, fmt.Sprintf(`{"content": "turn %d", "delay_ms": 20}`, i))
	}
	spec := fmt.Sprintf(`{"task": "go", "max_round": 12, "agents": [{"name": "a", "type": "assistant",
		"model": {"provider": "replay", "responses": [%s]}}]}`, strings.Join(responses, ","))
	ts := newTestServer(t, Config{}, rt)
	rec := ts.do(t, http.MethodPost, "/v1/chats?wait_s=30", spec)
	body := decodeJSON(t, rec, http.StatusCreated)
	if body["status"] != "completed" || body["message_count"] != float64(13) {
		t.Fatalf("chat = %v", body)
	}
	// One read after subscribing; every wake-up after it came from an
	// append of this replica's worker and brought the progress along.
	if n := counted.progress.Load(); n != 1 {
		t.Fatalf("%d progress reads for a chat of 12 turns, want 1", n)
	}
	rec = ts.do(t, http.MethodGet, fmt.Sprintf("/v1/chats/%s/messages?after=13&wait_s=5", body["id"]), "")
	if got := decodeJSON(t, rec, http.StatusOK); got["status"] != "completed" {
		t.Fatalf("messages = %v", got)
	}
}
