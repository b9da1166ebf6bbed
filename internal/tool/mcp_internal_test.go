package tool

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/spec"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// lateTimer is an idle timer that has always "already fired" when stopped,
// the race expire must handle; the test runs its function when it chooses.
type lateTimer struct{ f func() }

func (lateTimer) Stop() bool { return false }

// TestMCPIdleSessions: an idle timer closes the session, unless the session
// was used again after the timer was armed.
func TestMCPIdleSessions(t *testing.T) {
	t.Parallel()
	var sessions atomic.Int64
	server := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ServerOptions{
		InitializedHandler: func(context.Context, *mcp.InitializedRequest) { sessions.Add(1) },
	})
	server.AddTool(&mcp.Tool{Name: "noop", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer srv.Close()

	r, err := New(Config{AllowPrivate: true, MCPIdleTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var mu sync.Mutex
	var timers []lateTimer
	r.mcp.afterFunc = func(d time.Duration, f func()) stopper {
		if d != time.Hour {
			t.Errorf("idle timer of %v, want the configured hour", d)
		}
		mu.Lock()
		defer mu.Unlock()
		timers = append(timers, lateTimer{f: f})
		return timers[len(timers)-1]
	}
	fire := func(i int) {
		mu.Lock()
		f := timers[i].f
		mu.Unlock()
		f()
	}
	conns := func() int {
		r.mcp.mu.Lock()
		defer r.mcp.mu.Unlock()
		return len(r.mcp.conns)
	}

	spec := &spec.Tool{Name: "t", Implementation: json.RawMessage(`{"type":"mcp","url":"` + srv.URL + `"}`)}
	ctx := context.Background()
	if _, err := r.Describe(ctx, "c", spec); err != nil { // arms timer 0
		t.Fatal(err)
	}
	c, err := r.mcp.acquire(ctx, mcpTarget{key: mcpKey{chatID: "c", url: srv.URL, transport: MCPStreamableHTTP}}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fire(0) // stale: the session was used after timer 0 was armed
	if conns() != 1 {
		t.Fatal("a stale idle timer closed a session in use")
	}
	r.mcp.release(c) // arms timer 1
	fire(1)
	if conns() != 0 {
		t.Fatal("the idle timer did not close the session")
	}
	if _, err := r.Describe(ctx, "c", spec); err != nil {
		t.Fatal(err)
	}
	if n := sessions.Load(); n != 2 {
		t.Errorf("%d sessions, want 2: the expired one and a new one", n)
	}
	fire(2) // leave no armed timer behind: Close waits for them
}
