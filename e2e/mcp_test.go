package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/internal/store/pgtest"
)

// The MCP server at /mcp, driven by the official TypeScript client
// (e2e/js/mcp.mjs) and the Go SDK's client against the real binary.

// mcpRun is what mcp.mjs prints.
type mcpRun struct {
	Tools []string `json:"tools"`
	Call  struct {
		Text       string `json:"text"`
		IsError    bool   `json:"isError"`
		Structured struct {
			ChatID       string `json:"chat_id"`
			Status       string `json:"status"`
			FinalMessage string `json:"final_message"`
		} `json:"structured"`
	} `json:"call"`
	Progress            []string `json:"progress"`
	Transcript          string   `json:"transcript"`
	Resources           []string `json:"resources"`
	Put                 int      `json:"put"`
	ToolsAfter          []string `json:"toolsAfter"`
	Cancel              string   `json:"cancel"`
	ProgressBeforeAbort int      `json:"progressBeforeAbort"`
}

func runMCPJS(t *testing.T, base, scenario string, args ...string) mcpRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"js/mcp.mjs", base, a2aKey, scenario}, args...)...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mcp.mjs %s: %v\n%s", scenario, err, stderr.String())
	}
	var r mcpRun
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("mcp.mjs %s: %v: %s", scenario, err, out)
	}
	return r
}

// waitChatStatus waits for a chat to reach a status.
func waitChatStatus(t *testing.T, p *proc, id, status string) {
	t.Helper()
	waitFor(t, 30*time.Second, "chat "+id+" to be "+status, func() bool {
		var c chatView
		_, _, body := p.do("GET", "/v1/chats/"+id, nil)
		_ = json.Unmarshal(body, &c)
		return c.Status == status
	})
}

// TestMCPTypeScriptClient: tools per saved team, a call answered with the
// final message and progress, the chat as a resource, the tool list
// following a newly saved team, and a cancelled call cancelling the run.
func TestMCPTypeScriptClient(t *testing.T) {
	needA2AJS(t)
	t.Parallel()
	p := startA2A(t, "AGENTD_DATA_DIR="+t.TempDir())

	r := runMCPJS(t, p.base, "call")
	if !slices.Equal(r.Tools, []string{"run_echo", "run_review", "run_slow"}) {
		t.Errorf("tools %v", r.Tools)
	}
	if r.Call.IsError || r.Call.Text != "first answer TERMINATE" || r.Call.Structured.Status != "completed" ||
		r.Call.Structured.FinalMessage != "first answer TERMINATE" || r.Call.Structured.ChatID == "" {
		t.Errorf("call %+v", r.Call)
	}
	if !slices.Equal(r.Progress, []string{"writer: first answer TERMINATE"}) {
		t.Errorf("progress %q", r.Progress)
	}
	if !strings.Contains(r.Transcript, "user (user): say it") || !strings.Contains(r.Transcript, "writer (assistant): first answer TERMINATE") {
		t.Errorf("transcript %q", r.Transcript)
	}
	if !slices.Contains(r.Resources, "agentd://chats/"+r.Call.Structured.ChatID) {
		t.Errorf("resources %v lack the call's chat", r.Resources)
	}
	if r.Put != http.StatusCreated || !slices.Equal(r.ToolsAfter, []string{"run_echo", "run_fresh", "run_review", "run_slow"}) {
		t.Errorf("after saving a team: PUT %d, tools %v", r.Put, r.ToolsAfter)
	}

	c := runMCPJS(t, p.base, "cancel")
	if c.Cancel != "aborted" || c.ProgressBeforeAbort < 1 || len(c.Resources) == 0 {
		t.Fatalf("cancel %+v", c)
	}
	waitChatStatus(t, p, strings.TrimPrefix(c.Resources[0], "agentd://chats/"), "cancelled")
}

// TestMCPToolsFollowATeamSavedOnAnotherReplica: two replicas share a
// Postgres; a session on one is told (tools/list_changed) of a team saved
// through the other, lists it and calls it.
func TestMCPToolsFollowATeamSavedOnAnotherReplica(t *testing.T) {
	needA2AJS(t)
	t.Parallel()
	db := "AGENTD_DATABASE_URL=" + pgtest.URL(t)
	p1, p2 := startA2A(t, db), startA2A(t, db)

	r := runMCPJS(t, p2.base, "elsewhere", p1.base)
	if !slices.Equal(r.Tools, []string{"run_echo", "run_review", "run_slow"}) {
		t.Errorf("tools %v", r.Tools)
	}
	if r.Put != http.StatusCreated || !slices.Equal(r.ToolsAfter, []string{"run_echo", "run_fresh", "run_review", "run_slow"}) {
		t.Errorf("after saving a team on the other replica: PUT %d, tools %v", r.Put, r.ToolsAfter)
	}
	if r.Call.IsError || r.Call.Text != "fresh TERMINATE" || r.Call.Structured.Status != "completed" {
		t.Errorf("call of the new team's tool %+v", r.Call)
	}
}

// bearer adds an API key to every request.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPGoClient drives the same server with the MCP Go SDK's client.
func TestMCPGoClient(t *testing.T) {
	t.Parallel()
	p := startA2A(t, "AGENTD_DATA_DIR="+t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var mu sync.Mutex
	var progress []string
	firstProgress := make(chan struct{}, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "agentd-e2e-go", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Message)
			mu.Unlock()
			select {
			case firstProgress <- struct{}{}:
			default:
			}
		},
	})
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{a2aKey}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()

	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"run_echo", "run_review", "run_slow"}) {
		t.Errorf("tools %v", names)
	}

	params := &mcp.CallToolParams{Name: "run_echo", Arguments: map[string]any{"task": "say it"}}
	params.SetProgressToken("echo-1")
	res, err := session.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	var sc struct {
		ChatID string `json:"chat_id"`
		Status string `json:"status"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &sc)
	if res.IsError || text != "first answer TERMINATE" || sc.Status != "completed" || sc.ChatID == "" {
		t.Errorf("call: %q %s error=%v", text, b, res.IsError)
	}
	// The client hands notifications to its handler on a goroutine of
	// their own: the progress may be handled after the result.
	select {
	case <-firstProgress:
	case <-time.After(10 * time.Second):
	}
	mu.Lock()
	if !slices.Equal(progress, []string{"writer: first answer TERMINATE"}) {
		t.Errorf("progress %q", progress)
	}
	progress = nil
	mu.Unlock()

	read, err := session.ReadResource(ctx, &mcp.ReadResourceParams{URI: "agentd://chats/" + sc.ChatID})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(read.Contents[0].Text, "writer (assistant): first answer TERMINATE") {
		t.Errorf("transcript %q", read.Contents[0].Text)
	}
	if _, err := session.ReadResource(ctx, &mcp.ReadResourceParams{URI: "agentd://chats/nope"}); err == nil {
		t.Error("reading an unknown chat succeeded")
	}

	// An invalid call is a tool error, not a chat.
	bad, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "run_echo", Arguments: map[string]any{"prompt": "x"}})
	if err != nil || !bad.IsError {
		t.Errorf("call without task: %+v, %v", bad, err)
	}

	// Cancelling the call (its context) cancels the chat's run.
	cctx, ccancel := context.WithCancel(ctx)
	slow := &mcp.CallToolParams{Name: "run_slow", Arguments: map[string]any{"task": "take your time"}}
	slow.SetProgressToken("slow-1")
	done := make(chan error, 1)
	go func() {
		_, err := session.CallTool(cctx, slow)
		done <- err
	}()
	select {
	case <-firstProgress:
	case <-time.After(30 * time.Second):
		t.Fatal("no progress from the slow team")
	}
	ccancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
	list, err := session.ListResources(ctx, nil)
	if err != nil || len(list.Resources) == 0 {
		t.Fatalf("resources: %v %v", list, err)
	}
	waitChatStatus(t, p, strings.TrimPrefix(list.Resources[0].URI, "agentd://chats/"), "cancelled")
}
