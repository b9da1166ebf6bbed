package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestToolCallRedoneAfterKill9WithTheSameIdempotencyKey kills agentd while
// an http tool call is in flight; the restarted server calls the tool again
// with the same Idempotency-Key, so the tool server can dedupe.
func TestToolCallRedoneAfterKill9WithTheSameIdempotencyKey(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var keys []string
	entered := make(chan struct{}, 4)
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		first := len(keys) == 1
		mu.Unlock()
		entered <- struct{}{}
		if first {
			select { // the first call hangs until agentd is gone
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		fmt.Fprint(w, `{"status": "saved"}`)
	}))
	defer ts.Close()
	defer close(release)

	spec := fmt.Appendf(nil, `{"task": "save", "max_round": 1,
		"tools": [{"name": "save", "parameters": {"type": "object"}, "implementation": {"type": "http", "url": %q, "timeout_s": 60}}],
		"agents": [{"name": "a", "type": "assistant", "tools": ["save"],
		            "model": {"provider": "replay", "responses": [{"tool_calls": [{"name": "save", "arguments": {"k": 1}}]}]}}]}`, ts.URL)
	dir := t.TempDir()
	env := []string{"AGENTD_DATA_DIR=" + dir, "AGENTD_LEASE_TTL=1s", "AGENTD_TOOL_ALLOW_PRIVATE=true"}
	p := startAgentd(t, env...)
	c := p.create(spec)
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the tool was never called")
	}
	p.kill9()

	p2 := startAgentd(t, env...)
	final := p2.waitTerminal(c.ID, 30*time.Second)
	if final.Status != "completed" || *final.StopReason != "max_round" {
		t.Fatalf("chat = %+v", final)
	}
	msgs := p2.messages(c.ID)
	if len(msgs) != 4 || msgs[3].Content != `{"status": "saved"}` {
		t.Fatalf("messages = %+v", msgs)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 2 || keys[0] != keys[1] || len(keys[0]) < len(c.ID)+6 || keys[0][:len(c.ID)] != c.ID {
		t.Fatalf("Idempotency-Keys = %q", keys)
	}
}
