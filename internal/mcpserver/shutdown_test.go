package mcpserver

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/runtime"
)

// runningChat is the chat service of one team, "slow", whose chats run
// for ever: a task, then one message. Cancel counts its calls; methods a
// test does not expect panic (nil embedded interface).
type runningChat struct {
	Chats
	cancels atomic.Int32
}

func (*runningChat) ListTeams(context.Context, *chat.ListTeamsParams) ([]*chat.Team, string, error) {
	return []*chat.Team{{Name: "slow", Version: 1, Spec: json.RawMessage(`{"agents": [{"name": "a"}]}`)}}, "", nil
}

func (*runningChat) Create(context.Context, *chat.CreateParams) (*chat.Chat, bool, error) {
	return &chat.Chat{ID: "c1", Status: chat.StatusQueued, Run: 1}, true, nil
}

func (*runningChat) Events(_ context.Context, _, _ string, after int64, _ int) ([]chat.Event, error) {
	all := []chat.Event{
		{Seq: 1, Type: chat.EventMessage, Role: chat.RoleUser, Name: "user", Content: "count"},
		{Seq: 2, Type: chat.EventChatRunning, Data: json.RawMessage(`{"status":"running"}`)},
		{Seq: 3, Type: chat.EventMessage, Role: chat.RoleAssistant, Name: "a", Content: "one"},
	}
	var out []chat.Event
	for _, e := range all {
		if e.Seq > after {
			out = append(out, e)
		}
	}
	return out, nil
}

func (*runningChat) Subscribe(string) (<-chan runtime.Wake, func()) { return nil, func() {} }

func (c *runningChat) Cancel(context.Context, string, string) (*chat.Chat, bool, error) {
	c.cancels.Add(1)
	return &chat.Chat{ID: "c1"}, true, nil
}

// TestToolCallCutByShutdown: a tool call under way when the server shuts
// down (the requests' base context cancelled with runtime.ErrStopped)
// answers at once with an error result naming the chat, whose run goes
// on (not cancelled), instead of leaving the client waiting for an
// answer its closed stream will never bring.
func TestToolCallCutByShutdown(t *testing.T) {
	t.Parallel()
	chats := &runningChat{}
	reg := prometheus.NewRegistry()
	h, err := New(Config{}, chats, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	base, end := context.WithCancelCause(context.Background())
	defer end(nil)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r, "acme") }))
	srv.Config.BaseContext = func(net.Listener) context.Context { return base }
	srv.Start()
	defer srv.Close()

	progressed := make(chan struct{}, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			select {
			case progressed <- struct{}{}:
			default:
			}
		},
	})
	ctx, session := listedSession(t, client, srv.URL)
	defer session.Close()
	go func() {
		select {
		case <-progressed:
			end(runtime.ErrStopped)
		case <-ctx.Done():
		}
	}()
	params := &mcp.CallToolParams{Name: "run_slow", Arguments: map[string]any{"task": "count"}}
	params.SetProgressToken("p1")
	begun := time.Now()
	callCtx, stopCall := context.WithTimeout(ctx, 10*time.Second)
	defer stopCall()
	res, err := session.CallTool(callCtx, params)
	if err != nil {
		t.Fatalf("the call cut by the shutdown failed after %s: %v; want an error result", time.Since(begun).Round(time.Millisecond), err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	b, _ := json.Marshal(res.StructuredContent)
	if !res.IsError || !strings.Contains(text, "shutting down") || !strings.Contains(text, "agentd://chats/c1") ||
		!strings.Contains(string(b), `"chat_id":"c1"`) || !strings.Contains(string(b), `"status":"running"`) {
		t.Errorf("the call cut by the shutdown answered %q %s (error %v), want an error result naming the chat that goes on", text, b, res.IsError)
	}
	if n := chats.cancels.Load(); n != 0 {
		t.Errorf("the shutdown cancelled the run (%d cancels)", n)
	}
	if n := testutil.ToFloat64(h.metrics.calls.WithLabelValues(outcomeShutdown)); n != 1 {
		t.Errorf("agentd_mcp_tool_calls_total{outcome=server_shutting_down} = %v, want 1", n)
	}
}

// listedSession connects client to the MCP server at url and lists the
// tools once, which makes the tenant's tools from its teams. ctx (30 s)
// ends when the test does; the caller closes the session, before the
// server (whose Close waits for the session's open stream).
func listedSession(t *testing.T, client *mcp.Client, url string) (context.Context, *mcp.ClientSession) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := session.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	return ctx, session
}
