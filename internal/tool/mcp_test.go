package tool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/tool"
)

const addSchema = `{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"],"additionalProperties":false}`

// mcpServer is a real MCP server on the streamable HTTP transport, built
// with the same SDK as the client.
type mcpServer struct {
	*httptest.Server
	mcp      *mcp.Server
	sessions atomic.Int64 // sessions initialized
	calls    atomic.Int64 // tool calls received
}

func newMCPServer(t *testing.T) *mcpServer {
	t.Helper()
	s := &mcpServer{}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ServerOptions{
		InitializedHandler: func(context.Context, *mcp.InitializedRequest) { s.sessions.Add(1) },
	})
	text := func(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }
	s.mcp.AddTool(&mcp.Tool{Name: "add", Description: "Adds two numbers.", InputSchema: json.RawMessage(addSchema)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.calls.Add(1)
			var in struct{ A, B float64 }
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: text(fmt.Sprint(in.A + in.B))}, nil
		})
	s.mcp.AddTool(&mcp.Tool{Name: "fail", Description: "Always fails.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.calls.Add(1)
			return &mcp.CallToolResult{IsError: true, Content: text("disk full")}, nil
		})
	s.mcp.AddTool(&mcp.Tool{Name: "hang", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			<-ctx.Done() // the client's cancellation reaches the server
			return nil, ctx.Err()
		})
	s.mcp.AddTool(&mcp.Tool{Name: "mixed", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "a chart:"},
				&mcp.ImageContent{MIMEType: "image/png", Data: []byte("png!")},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///r.txt", Text: "resource text"}},
			}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, nil)
	s.Server = httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

func mcpTool(url, extra string) *spec.Tool {
	return &spec.Tool{Name: "calc", Implementation: json.RawMessage(fmt.Sprintf(`{"type":"mcp","url":%q%s}`, url, extra))}
}

// mcpRequest is a call of one of an mcp tool's functions, as Describe
// listed it.
func mcpRequest(t *testing.T, spec *spec.Tool, defs []chat.ToolDef, name, args string) *chat.ToolRequest {
	t.Helper()
	i := slices.IndexFunc(defs, func(d chat.ToolDef) bool { return d.Name == name })
	if i < 0 {
		t.Fatalf("Describe did not list %s", name)
	}
	return &chat.ToolRequest{ChatID: "chat-1", Tool: spec, Function: defs[i], CallID: "call_" + name, Arguments: args}
}

func TestMCP(t *testing.T) {
	t.Parallel()
	srv := newMCPServer(t)
	r := newRunner(t, tool.Config{AllowPrivate: true})
	spec := mcpTool(srv.URL, "")
	if probs := r.CheckTool(spec); len(probs) != 0 {
		t.Fatalf("CheckTool: %+v", probs)
	}
	ctx := context.Background()
	defs, err := r.Describe(ctx, "chat-1", spec)
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	var names []string
	for _, d := range defs {
		names = append(names, d.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"add", "fail", "hang", "mixed"}) {
		t.Fatalf("Describe listed %q", names)
	}
	add := mcpRequest(t, spec, defs, "add", `{"a": 2, "b": 3}`)
	if add.Function.Description != "Adds two numbers." || !json.Valid(add.Function.Parameters) ||
		!strings.Contains(string(add.Function.Parameters), `"required":["a","b"]`) {
		t.Errorf("add = %+v", add.Function)
	}

	if res := r.Call(ctx, add); res.IsError || res.Content != "5" {
		t.Errorf("add: %+v", res)
	}
	wantError(t, r.Call(ctx, mcpRequest(t, spec, defs, "fail", `{}`)), "Error: disk full")
	wantError(t, r.Call(ctx, mcpRequest(t, spec, defs, "add", `{"a":"2","b":3}`)), "arguments do not match the schema", "at /a")
	wantError(t, r.Call(ctx, mcpRequest(t, spec, defs, "add", `{"a":`)), "arguments are not valid JSON")
	res := r.Call(ctx, mcpRequest(t, spec, defs, "mixed", `{}`))
	if res.IsError || res.Content != "a chart:\n[image: image/png, 4 bytes]\nresource text" {
		t.Errorf("mixed: %+v", res)
	}
	hang := mcpRequest(t, spec, defs, "hang", `{}`)
	hang.Tool = mcpTool(srv.URL, `,"timeout_s":0.3`)
	wantError(t, r.Call(ctx, hang), "Error: timed out after 0.3s")
	unknown := mcpRequest(t, spec, defs, "add", `{}`)
	unknown.Function = chat.ToolDef{Name: "nope"}
	wantError(t, r.Call(ctx, unknown), "nope")

	// Everything above ran on one session, and the listing was cached.
	if _, err := r.Describe(ctx, "chat-1", spec); err != nil {
		t.Fatal(err)
	}
	if n := srv.sessions.Load(); n != 1 {
		t.Errorf("%d sessions for one chat, want 1", n)
	}
	// Another chat gets its own session.
	if _, err := r.Describe(ctx, "chat-2", spec); err != nil {
		t.Fatal(err)
	}
	if n := srv.sessions.Load(); n != 2 {
		t.Errorf("%d sessions for two chats, want 2", n)
	}
	// ReleaseChat closes a chat's sessions; the chat reconnects if needed.
	r.ReleaseChat("chat-2")
	if _, err := r.Describe(ctx, "chat-2", spec); err != nil {
		t.Fatal(err)
	}
	if n := srv.sessions.Load(); n != 3 {
		t.Errorf("%d sessions after releasing a chat, want 3", n)
	}
}

func TestMCPToolsFilter(t *testing.T) {
	t.Parallel()
	srv := newMCPServer(t)
	r := newRunner(t, tool.Config{AllowPrivate: true})
	spec := mcpTool(srv.URL, `,"tools":["add"]`)
	defs, err := r.Describe(context.Background(), "chat-1", spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) != 1 || defs[0].Name != "add" {
		t.Fatalf("Describe = %+v, want add only", defs)
	}
	// A function outside the list is refused even if the server has it.
	fail := &chat.ToolRequest{ChatID: "chat-1", Tool: spec, Function: chat.ToolDef{Name: "fail"}, CallID: "c", Arguments: `{}`}
	wantError(t, r.Call(context.Background(), fail), "does not offer")
	if n := srv.calls.Load(); n != 0 {
		t.Errorf("the server got %d calls", n)
	}

	_, err = r.Describe(context.Background(), "chat-1", mcpTool(srv.URL, `,"tools":["add","subtract"]`))
	if err == nil || !strings.Contains(err.Error(), "does not offer subtract") {
		t.Errorf("Describe with a tool the server lacks: %v", err)
	}
}

// TestMCPSessionLost: when the server forgets the session (restart,
// expiry), the next call opens a new one and succeeds.
func TestMCPSessionLost(t *testing.T) {
	t.Parallel()
	srv := newMCPServer(t)
	r := newRunner(t, tool.Config{AllowPrivate: true})
	spec := mcpTool(srv.URL, "")
	defs, err := r.Describe(context.Background(), "chat-1", spec)
	if err != nil {
		t.Fatal(err)
	}
	for ss := range srv.mcp.Sessions() {
		ss.Close()
	}
	if res := r.Call(context.Background(), mcpRequest(t, spec, defs, "add", `{"a":1,"b":1}`)); res.IsError || res.Content != "2" {
		t.Errorf("call after the session was lost: %+v", res)
	}
	if n := srv.sessions.Load(); n != 2 {
		t.Errorf("%d sessions, want 2", n)
	}
}

func TestMCPFailures(t *testing.T) {
	t.Parallel()
	t.Run("loopback refused", func(t *testing.T) {
		t.Parallel()
		srv := newMCPServer(t)
		r := newRunner(t, tool.Config{})
		_, err := r.Describe(context.Background(), "chat-1", mcpTool(srv.URL, ""))
		if err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("Describe of a loopback server without AllowPrivate: %v", err)
		}
		req := &chat.ToolRequest{ChatID: "chat-1", Tool: mcpTool(srv.URL, ""), Function: chat.ToolDef{Name: "add"}, CallID: "c", Arguments: `{}`}
		wantError(t, r.Call(context.Background(), req), "loopback")
		if n := srv.sessions.Load(); n != 0 {
			t.Errorf("the server got %d sessions", n)
		}
	})
	t.Run("not an mcp server", func(t *testing.T) {
		t.Parallel()
		plain, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "nope", http.StatusNotFound) })
		r := newRunner(t, tool.Config{AllowPrivate: true})
		if _, err := r.Describe(context.Background(), "chat-1", mcpTool(plain.URL, "")); err == nil {
			t.Error("Describe of a server that is not an MCP server succeeded")
		}
	})
	t.Run("after Close", func(t *testing.T) {
		t.Parallel()
		srv := newMCPServer(t)
		r, err := tool.New(tool.Config{AllowPrivate: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Describe(context.Background(), "chat-1", mcpTool(srv.URL, "")); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if _, err := r.Describe(context.Background(), "chat-1", mcpTool(srv.URL, "")); err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("Describe after Close: %v", err)
		}
	})
}

// TestMCPOverSSEWithSecretHeaders: an mcp tool over the SSE transport
// (AgentChat's SseServerParams) whose Authorization header is a server-side
// secret: the server receives the secret's value on every request of the
// session, the spec holds only its name, and a spec naming an unknown
// secret is refused at create.
func TestMCPOverSSEWithSecretHeaders(t *testing.T) {
	t.Parallel()
	base := newMCPServer(t)
	var unauthorized, authorized atomic.Int64
	sse := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return base.mcp }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret-value" || r.Header.Get("X-Team") != "blue" {
			unauthorized.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		authorized.Add(1)
		sse.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	r := newRunner(t, tool.Config{AllowPrivate: true, Secrets: map[string]string{"mcp-token": "Bearer s3cret-value"}})
	spec := mcpTool(srv.URL, `,"transport":"sse","headers":{"Authorization":{"secret":"mcp-token"},"X-Team":"blue"}`)
	if probs := r.CheckTool(spec); len(probs) != 0 {
		t.Fatalf("CheckTool: %+v", probs)
	}
	if strings.Contains(string(spec.Implementation), "s3cret") {
		t.Fatal("the spec holds the secret's value")
	}
	ctx := context.Background()
	defs, err := r.Describe(ctx, "chat-1", spec)
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	if res := r.Call(ctx, mcpRequest(t, spec, defs, "add", `{"a": 2, "b": 40}`)); res.IsError || res.Content != "42" {
		t.Errorf("add over SSE: %+v", res)
	}
	if unauthorized.Load() != 0 || authorized.Load() < 2 {
		t.Errorf("requests: %d authorized, %d without the headers", authorized.Load(), unauthorized.Load())
	}

	bad := mcpTool(srv.URL, `,"transport":"sse","headers":{"Authorization":{"secret":"other"}}`)
	probs := r.CheckTool(bad)
	if len(probs) != 1 || probs[0].Path != "/implementation/headers/Authorization/secret" || !strings.Contains(probs[0].Message, "defined: mcp-token") {
		t.Errorf("unknown secret: %+v", probs)
	}
	// Without the secret, the server refuses: the header really carries it.
	plain := newRunner(t, tool.Config{AllowPrivate: true})
	if _, err := plain.Describe(ctx, "chat-2", mcpTool(srv.URL, `,"transport":"sse"`)); err == nil || unauthorized.Load() == 0 {
		t.Errorf("a session without the headers was not refused: %v", err)
	}
}

// TestMCPSecretHeadersOverBothTransports: over streamable HTTP and over SSE,
// a secret header reaches the MCP server on every request of the session,
// and the secret's value appears in no problem, result or log line, also
// when calls fail.
func TestMCPSecretHeadersOverBothTransports(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"streamable_http", "sse"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			base := newMCPServer(t)
			var handler http.Handler = base.Server.Config.Handler
			if transport == "sse" {
				handler = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return base.mcp }, nil)
			}
			var seen atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Api-Key") != "k-0123456789" {
					http.Error(w, "unauthorized", http.StatusUnauthorized)
					return
				}
				seen.Add(1)
				handler.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			var logs syncBuffer
			r := newRunner(t, tool.Config{AllowPrivate: true, Secrets: map[string]string{"calc-key": "k-0123456789"},
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			spec := mcpTool(srv.URL, `,"transport":"`+transport+`","headers":{"X-Api-Key":{"secret":"calc-key"}}`)
			if probs := r.CheckTool(spec); len(probs) != 0 {
				t.Fatalf("CheckTool: %+v", probs)
			}
			ctx := context.Background()
			defs, err := r.Describe(ctx, "chat-1", spec)
			if err != nil {
				t.Fatalf("Describe: %v", err)
			}
			var results []string
			for _, call := range []struct{ name, args string }{{"add", `{"a": 1, "b": 2}`}, {"fail", `{}`}, {"add", `{"a": "x"}`}} {
				res := r.Call(ctx, mcpRequest(t, spec, defs, call.name, call.args))
				results = append(results, res.Content)
			}
			if results[0] != "3" || !strings.Contains(results[1], "disk full") {
				t.Errorf("results: %q", results)
			}
			if seen.Load() < 3 {
				t.Errorf("%d requests carried the secret header", seen.Load())
			}
			// A tool naming the secret under another header is refused by the
			// server: the failure is logged, without the value.
			wrong := mcpTool(srv.URL, `,"transport":"`+transport+`","headers":{"Authorization":{"secret":"calc-key"}}`)
			if _, err := r.Describe(ctx, "chat-1", wrong); err == nil {
				t.Error("a session without the server's header was not refused")
			} else {
				results = append(results, err.Error())
			}
			if !strings.Contains(logs.String(), "tool call failed") {
				t.Errorf("no failure was logged: %s", logs.String())
			}
			for _, text := range append(results, logs.String(), string(spec.Implementation)) {
				if strings.Contains(text, "0123456789") {
					t.Errorf("the secret's value leaked: %s", text)
				}
			}
		})
	}
}

// TestMCPOverSSEStaysAtItsOrigin: an SSE server that names a message URL on
// another host is refused, and that host receives nothing, least of all the
// tool's secret header.
func TestMCPOverSSEStaysAtItsOrigin(t *testing.T) {
	t.Parallel()
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		http.Error(w, "nothing here", http.StatusNotFound)
	}))
	t.Cleanup(other.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: endpoint\ndata: %s/messages?session=1\n\n", other.URL)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	r := newRunner(t, tool.Config{AllowPrivate: true, Secrets: map[string]string{"tok": "Bearer zz-secret"}})
	spec := mcpTool(srv.URL, `,"transport":"sse","timeout_s":5,"headers":{"Authorization":{"secret":"tok"}}`)
	_, err := r.Describe(context.Background(), "chat-1", spec)
	if err == nil || !strings.Contains(err.Error(), "not at its origin") {
		t.Fatalf("Describe: %v", err)
	}
	if elsewhere.Load() != 0 {
		t.Errorf("the other host received %d requests", elsewhere.Load())
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
