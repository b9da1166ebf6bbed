package a2a

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/spec"
)

// fakeChats is the chat service of one tenant's chat "c1", of team echo,
// whose one run has completed (the log of task_test.go's twoRuns up to
// its first run's end). Methods a case does not expect panic (nil
// embedded interface).
type fakeChats struct {
	Chats
}

func (fakeChats) Get(_ context.Context, tenant, id string) (*chat.Chat, error) {
	if tenant != "acme" || id != "c1" {
		return nil, chat.ErrNotFound
	}
	return &chat.Chat{ID: "c1", Tenant: "acme", Status: chat.StatusCompleted, Run: 1, Team: &chat.TeamRef{Name: "echo", Version: 1},
		Spec: json.RawMessage(`{"agents": []}`)}, nil
}

func (fakeChats) Events(_ context.Context, _, _ string, after int64, limit int) ([]chat.Event, error) {
	var out []chat.Event
	for _, e := range twoRuns[:12] {
		if e.Seq > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func (fakeChats) Subscribe(string) (<-chan runtime.Wake, func()) { return nil, func() {} }

func (fakeChats) Create(context.Context, *chat.CreateParams) (*chat.Chat, bool, error) {
	return nil, false, &spec.ValidationError{Problems: []spec.Problem{{Path: "/task", Message: "must not be empty"}}}
}

// post posts one JSON-RPC body as tenant acme to team echo.
func post(t *testing.T, h *Handler, body string) rpcResponse {
	t.Helper()
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/a2a/echo", strings.NewReader(body))
	h.ServeRPC(w, r, "acme", "echo")
	var resp struct {
		rpcResponse
		Error *rpcError `json:"error"`
	}
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &resp) != nil {
		t.Fatalf("%s: HTTP %d %s", body, w.Code, w.Body.String())
	}
	resp.rpcResponse.Error = resp.Error
	return resp.rpcResponse
}

func TestRPCErrorsAreA2ACodes(t *testing.T) {
	h, err := New(Config{MaxBodyBytes: 4096}, fakeChats{}, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	msg := func(extra string) string {
		return `{"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": {"messageId": "m", "role": "ROLE_USER"` + extra + `}}}`
	}
	tests := []struct {
		name, body string
		code       int
	}{
		{"not JSON", `{"jsonrpc": `, codeParseError},
		{"two values", `{} {}`, codeParseError},
		{"not JSON-RPC 2.0", `{"id": 1, "method": "GetTask"}`, codeInvalidRequest},
		{"a batch", `[{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}]`, codeInvalidRequest},
		{"a method that is not a string", `{"jsonrpc": "2.0", "id": 1, "method": 3}`, codeInvalidRequest},
		{"too large", `{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "` + strings.Repeat("x", 5000) + `"}}`, codeInvalidRequest},
		{"unknown method", `{"jsonrpc": "2.0", "id": 1, "method": "tasks/get"}`, codeMethodNotFound},
		{"no params", `{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}`, codeInvalidParams},
		{"a task id of no shape", `{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "c1"}}`, codeTaskNotFound},
		{"an unknown chat", `{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "c2-run-1"}}`, codeTaskNotFound},
		{"a run not posted", `{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "c1-run-2"}}`, codeTaskNotFound},
		{"negative history", `{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "c1-run-1", "historyLength": -1}}`, codeInvalidParams},
		{"cancel an ended task", `{"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": "c1-run-1"}}`, codeTaskNotCancelable},
		{"subscribe to an ended task", `{"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": "c1-run-1"}}`, codeUnsupportedOperation},
		{"no parts", msg(`, "parts": []`), codeInvalidParams},
		{"a file", msg(`, "parts": [{"url": "https://example.com/a.png"}]`), codeContentTypeNotSupported},
		{"text and data", msg(`, "parts": [{"text": "a"}, {"data": {"speaker": "x"}}]`), codeInvalidParams},
		{"an agent's message", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "a"}]}}}`, codeInvalidParams},
		{"a task the spec refuses", msg(`, "parts": [{"text": ""}]`), codeInvalidParams},
		{"an answer to a task that waits for nothing", msg(`, "taskId": "c1-run-1", "parts": [{"text": "a"}]`), codeUnsupportedOperation},
		{"a context of another tenant", msg(`, "contextId": "c9", "parts": [{"text": "a"}]`), codeInvalidParams},
		{"delete the webhook", `{"jsonrpc": "2.0", "id": 1, "method": "DeleteTaskPushNotificationConfig", "params": {"taskId": "c1-run-1", "id": "webhook"}}`, codeUnsupportedOperation},
		{"get a webhook the chat has not", `{"jsonrpc": "2.0", "id": 1, "method": "GetTaskPushNotificationConfig", "params": {"taskId": "c1-run-1", "id": "webhook"}}`, codeInvalidParams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, h, tt.body)
			if resp.Error == nil || resp.Error.Code != tt.code {
				t.Errorf("answer %+v, want error %d", resp, tt.code)
			}
		})
	}
	// A client of another protocol version is told so.
	w0 := httptest.NewRecorder()
	r0 := httptest.NewRequest(http.MethodPost, "/a2a/echo", strings.NewReader(`{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "c1-run-1"}}`))
	r0.Header.Set("A2A-Version", "0.3")
	h.ServeRPC(w0, r0, "acme", "echo")
	if !strings.Contains(w0.Body.String(), `"code":-32009`) {
		t.Errorf("version 0.3: %s", w0.Body.String())
	}
	// The spec's problems are listed.
	resp := post(t, h, msg(`, "parts": [{"text": ""}]`))
	b, _ := json.Marshal(resp.Error.Data)
	if !strings.Contains(string(b), `"path":"/task"`) {
		t.Errorf("invalid params data %s", b)
	}
	// A task of another team is not found either.
	w := httptest.NewRecorder()
	h.ServeRPC(w, httptest.NewRequest(http.MethodPost, "/a2a/other", strings.NewReader(`{"jsonrpc": "2.0", "id": "x", "method": "GetTask", "params": {"id": "c1-run-1"}}`)), "acme", "other")
	if !strings.Contains(w.Body.String(), `"code":-32001`) || !strings.Contains(w.Body.String(), `"id":"x"`) {
		t.Errorf("another team's task: %s", w.Body.String())
	}
	// And the task itself, with its history and result.
	got := post(t, h, `{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "c1-run-1", "historyLength": 2}}`)
	b, _ = json.Marshal(got.Result)
	if got.Error != nil || !strings.Contains(string(b), `"state":"TASK_STATE_COMPLETED"`) || !strings.Contains(string(b), `"artifactId":"result"`) {
		t.Errorf("GetTask: %s %+v", b, got.Error)
	}
}

// Every other method of the service refuses: a fuzzed request may reach
// any of them.
func (fakeChats) Cancel(context.Context, string, string) (*chat.Chat, bool, error) {
	return nil, false, chat.ErrNotFound
}

func (fakeChats) Input(context.Context, string, string, string, *chat.Input) (*chat.Chat, error) {
	return nil, chat.ErrNoPendingInput
}

func (fakeChats) SubmitRun(context.Context, string, string, string, *spec.RunRequest) (*chat.Chat, int, error) {
	return nil, 0, &chat.BusyError{}
}

func (fakeChats) GetTeam(context.Context, string, string, int) (*chat.Team, error) {
	return nil, chat.ErrTeamNotFound
}

// FuzzServeRPC: whatever the body, the answer is one JSON-RPC response
// (or an event stream), never a panic.
func FuzzServeRPC(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "c1-run-1", "historyLength": 1}}`,
		`{"jsonrpc": "2.0", "id": "a", "method": "SendMessage", "params": {"message": {"messageId": "m", "contextId": "c1", "parts": [{"text": "x"}]}}}`,
		`{"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": {"taskId": "c1-run-1", "parts": [{"data": {"approvals": []}}]}}}`,
		`{"jsonrpc": "2.0", "id": 3, "method": "CreateTaskPushNotificationConfig", "params": {"taskId": "c1-run-1", "url": "http://x"}}`,
		`{"jsonrpc": "2.0", "id": 4, "method": "SubscribeToTask", "params": {"id": "c1-run-1"}}`,
		`[]`, `null`, `{"jsonrpc": "2.0"}`,
	} {
		f.Add(s)
	}
	h, err := New(Config{MaxBodyBytes: 1 << 16}, fakeChats{}, nil, prometheus.NewRegistry())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		w := httptest.NewRecorder()
		h.ServeRPC(w, httptest.NewRequest(http.MethodPost, "/a2a/echo", strings.NewReader(body)), "acme", "echo")
		if w.Header().Get("Content-Type") == sseContentType {
			return
		}
		var resp map[string]json.RawMessage
		if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || string(resp["jsonrpc"]) != `"2.0"` {
			t.Fatalf("%q answered %s", body, w.Body.String())
		}
	})
}

// runningChats is fakeChats with chat c1's run 2 under way.
type runningChats struct{ fakeChats }

func (runningChats) Get(_ context.Context, tenant, id string) (*chat.Chat, error) {
	if tenant != "acme" || id != "c1" {
		return nil, chat.ErrNotFound
	}
	return &chat.Chat{ID: "c1", Tenant: "acme", Status: chat.StatusRunning, Run: 2, Team: &chat.TeamRef{Name: "echo", Version: 1}}, nil
}

func (runningChats) Events(_ context.Context, _, _ string, after int64, limit int) ([]chat.Event, error) {
	var out []chat.Event
	for _, e := range twoRuns {
		if e.Seq > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

// TestStreamCutByShutdown: a task stream whose request ends because the
// server shuts down (its base context cancelled with runtime.ErrStopped)
// ends with the JSON-RPC error the client raises, so that the unsettled
// task does not look finished; one whose client went away is told
// nothing.
func TestStreamCutByShutdown(t *testing.T) {
	for _, shutdown := range []bool{true, false} {
		t.Run(map[bool]string{true: "shutdown", false: "client gone"}[shutdown], func(t *testing.T) {
			reg := prometheus.NewRegistry()
			h, err := New(Config{}, runningChats{}, nil, reg)
			if err != nil {
				t.Fatal(err)
			}
			base, end := context.WithCancelCause(context.Background())
			defer end(nil)
			ctx, leave := context.WithCancel(base)
			defer leave()
			if shutdown {
				end(runtime.ErrStopped)
			} else {
				leave()
			}
			w := httptest.NewRecorder()
			r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/a2a/echo",
				strings.NewReader(`{"jsonrpc": "2.0", "id": 5, "method": "SubscribeToTask", "params": {"id": "c1-run-2"}}`))
			h.ServeRPC(w, r, "acme", "echo")
			var lines []string
			for line := range strings.Lines(w.Body.String()) {
				if data, ok := strings.CutPrefix(line, "data: "); ok {
					lines = append(lines, data)
				}
			}
			if len(lines) == 0 || !strings.Contains(lines[0], `"TASK_STATE_WORKING"`) {
				t.Fatalf("the stream %q does not start with the working task", w.Body.String())
			}
			last := lines[len(lines)-1]
			cut := testutil.ToFloat64(h.metrics.cut.WithLabelValues(cutShutdown))
			if !shutdown {
				if len(lines) != 1 || cut != 0 {
					t.Errorf("a stream whose client went away got %q after its snapshot, counted %v cut", lines[1:], cut)
				}
				return
			}
			var resp struct {
				ID    int       `json:"id"`
				Error *rpcError `json:"error"`
			}
			if err := json.Unmarshal([]byte(last), &resp); err != nil || resp.Error == nil || resp.ID != 5 ||
				resp.Error.Code != codeInternal || !strings.Contains(resp.Error.Message, "shutting down") ||
				!strings.Contains(last, `"reason":"SERVER_SHUTTING_DOWN"`) {
				t.Errorf("the stream ended %s, want the JSON-RPC error saying the server is shutting down", last)
			}
			if cut != 1 {
				t.Errorf("agentd_a2a_streams_cut_total{reason=shutdown} = %v, want 1", cut)
			}
		})
	}
}

// TestShutdownIsAnA2AError: a call cut by the server's shutdown (a
// blocking SendMessage waiting for its task) answers A2A's internal
// error saying the task goes on, not the bare "internal error" of a
// failure of ours.
func TestShutdownIsAnA2AError(t *testing.T) {
	e, internal := rpcErrorOf(fmt.Errorf("wait for the task: %w", runtime.ErrStopped), "c1-run-2")
	if internal || e.Code != codeInternal || e.outcome != shutdownOutcome || !strings.Contains(e.Message, `task "c1-run-2" goes on`) {
		t.Errorf("rpcErrorOf(ErrStopped) = %+v (ours: %v)", e, internal)
	}
}
