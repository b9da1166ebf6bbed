package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/runtime/runtimetest"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/openaitest"
	"github.com/agentd/agentd/internal/tool"
)

// toolServer is a real HTTP tool server on loopback that answers each tool
// by name and records every request.
type toolServer struct {
	*httptest.Server
	mu    sync.Mutex
	calls []toolCall
	// block, if set, holds calls of that tool until release is closed.
	block   string
	release chan struct{}
	entered chan struct{}
}

type toolCall struct {
	Name           string
	Arguments      map[string]any
	IdempotencyKey string
}

func newToolServer(t *testing.T) *toolServer {
	ts := &toolServer{release: make(chan struct{}), entered: make(chan struct{}, 10)}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		ts.mu.Lock()
		ts.calls = append(ts.calls, toolCall{body.Name, body.Arguments, r.Header.Get("Idempotency-Key")})
		block := ts.block == body.Name
		ts.mu.Unlock()
		if block {
			ts.entered <- struct{}{}
			select {
			case <-ts.release:
			case <-r.Context().Done():
				return
			}
		}
		switch body.Name {
		case "lookup_id":
			fmt.Fprintf(w, `{"id": "42"}`)
		case "use_id":
			fmt.Fprintf(w, "used %v", body.Arguments["id"])
		case "fail":
			http.Error(w, "boom", http.StatusInternalServerError)
		default:
			fmt.Fprintf(w, "%s ok", body.Name)
		}
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (ts *toolServer) recorded() []toolCall {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.calls)
}

func withTools(t testing.TB) func(*runtime.Config) {
	runner, err := tool.New(tool.Config{AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runner.Close() })
	return func(c *runtime.Config) { c.Tools = runner }
}

func httpTool(name, url string) string {
	return fmt.Sprintf(`{"name": %q, "description": "The %s tool.", "parameters": {"type": "object", "properties": {"id": {"type": "string"}, "name": {"type": "string"}}},
		"implementation": {"type": "http", "url": %q, "timeout_s": 5}}`, name, name, url)
}

func toolSpec(url, agentExtra, responses, extra string) string {
	return fmt.Sprintf(`{"task": "find and use the id", "max_round": 1,
		"tools": [%s, %s, %s],
		"agents": [{"name": "agent", "type": "assistant", "tools": ["lookup_id", "use_id", "fail"], "model": {"provider": "replay", "responses": [%s]}%s}]%s}`,
		httpTool("lookup_id", url), httpTool("use_id", url), httpTool("fail", url), responses, agentExtra, extra)
}

const dependentCalls = `{"tool_calls": [{"name": "lookup_id", "arguments": {"name": "x"}}]},
	{"tool_calls": [{"name": "use_id", "arguments": {"id": "42"}}]},
	"All done: used 42."`

func TestTwoDependentToolCallsNeedTwoIterations(t *testing.T) {
	ts := newToolServer(t)
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db, withTools(t))

	c := create(t, rt, toolSpec(ts.URL, `, "max_tool_iterations": 2, "reflect_on_tool_use": true`, dependentCalls, ""))
	c = waitTerminal(t, rt, c.ID, 10*time.Second)
	msgs := messages(t, db, c.ID)
	if len(msgs) != 6 || msgs[5].Content != "All done: used 42." || msgs[5].Role != "assistant" {
		t.Fatalf("messages = %+v", msgs)
	}
	// Seed protocol shapes, exactly.
	call := msgs[1].ToolCalls[0]
	if msgs[1].Role != "assistant" || call.Type != "function" || call.Function.Name != "lookup_id" || call.Function.Arguments != `{"name":"x"}` || !strings.HasPrefix(call.ID, "call_") {
		t.Fatalf("tool_calls = %+v", msgs[1])
	}
	resp := msgs[2].ToolResponses[0]
	if msgs[2].Role != "tool" || resp.ToolCallID != call.ID || resp.Role != "tool" || resp.Content != `{"id": "42"}` || resp.IsError {
		t.Fatalf("tool_responses = %+v", msgs[2])
	}
	if got := ts.recorded(); len(got) != 2 || got[1].Name != "use_id" || got[0].IdempotencyKey != c.ID+"/"+call.ID {
		t.Fatalf("tool server saw %+v", got)
	}

	// The default max_tool_iterations is 1: the second call never happens,
	// and without reflection the turn ends with the summary of the first.
	c = create(t, rt, toolSpec(ts.URL, "", dependentCalls, ""))
	c = waitTerminal(t, rt, c.ID, 10*time.Second)
	msgs = messages(t, db, c.ID)
	if len(msgs) != 4 || msgs[3].Content != `{"id": "42"}` || msgs[3].Role != "assistant" {
		t.Fatalf("default iterations: messages = %+v", msgs)
	}

	// tool_call_summary_format shapes the summary.
	c = create(t, rt, toolSpec(ts.URL, `, "tool_call_summary_format": "{tool_name}({arguments}) -> {result} [error={is_error}]"`,
		`{"tool_calls": [{"name": "lookup_id", "arguments": {"name": "x"}}, {"name": "fail", "arguments": {}}]}`, ""))
	c = waitTerminal(t, rt, c.ID, 10*time.Second)
	msgs = messages(t, db, c.ID)
	lines := strings.Split(msgs[len(msgs)-1].Content, "\n")
	if len(lines) != 2 || lines[0] != `lookup_id({"name":"x"}) -> {"id": "42"} [error=False]` || !strings.HasPrefix(lines[1], "fail({}) -> Error: ") || !strings.HasSuffix(lines[1], "[error=True]") {
		t.Fatalf("summary = %q", msgs[len(msgs)-1].Content)
	}
}

func TestToolFailuresAreErrorResponsesAndTheChatGoesOn(t *testing.T) {
	ts := newToolServer(t)
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db, withTools(t))
	c := create(t, rt, toolSpec(ts.URL, "", `{"tool_calls": [
		{"name": "no_such_tool", "arguments": {}},
		{"name": "lookup_id", "arguments": "{not json"},
		{"name": "lookup_id", "arguments": {"name": 7}},
		{"name": "fail", "arguments": {}},
		{"name": "lookup_id", "arguments": {"name": "ok"}}]}`, ""))
	c = waitTerminal(t, rt, c.ID, 10*time.Second)
	if c.Status != chat.StatusCompleted {
		t.Fatalf("chat = %+v", c)
	}
	msgs := messages(t, db, c.ID)
	rs := msgs[2].ToolResponses
	if len(rs) != 5 {
		t.Fatalf("responses = %+v", rs)
	}
	for i := range 4 {
		if !rs[i].IsError || !strings.HasPrefix(rs[i].Content, "Error: ") {
			t.Errorf("response %d = %+v, want an error", i, rs[i])
		}
	}
	if rs[4].IsError || rs[4].ToolCallID != msgs[1].ToolCalls[4].ID {
		t.Errorf("the good call = %+v (responses keep the calls' order)", rs[4])
	}
}

func TestHandoffsInASwarm(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db, withTools(t))
	c := create(t, rt, `{"task": "I was charged twice.", "max_round": 5,
		"speaker_selection": {"method": "swarm"},
		"termination": {"any": [{"text_mention": {"text": "RESOLVED"}}, {"handoff": {"target": "tech"}}]},
		"agents": [
		  {"name": "triage", "type": "assistant", "handoffs": ["billing", "tech"], "model": {"provider": "replay", "responses": [
		     {"content": "Sending you to billing.", "tool_calls": [{"name": "transfer_to_billing"}, {"name": "transfer_to_tech"}]}]}},
		  {"name": "billing", "type": "assistant", "description": "Handles charges.", "model": {"provider": "replay", "responses": ["Refunded the duplicate. RESOLVED"]}},
		  {"name": "tech", "type": "assistant", "model": {"provider": "replay", "responses": ["unused"]}}]}`)
	c = waitTerminal(t, rt, c.ID, 10*time.Second)
	msgs := messages(t, db, c.ID)
	if got := speakers(msgs); !slices.Equal(got, []string{"user:I was charged twice.", "triage:Sending you to billing.", "triage:",
		"triage:Transferred to billing, adopting the role of billing immediately.", "billing:Refunded the duplicate. RESOLVED"}) {
		t.Fatalf("messages = %v", got)
	}
	// As in AgentChat, every handoff call of the reply is answered with its
	// transfer text, and the first is taken.
	if msgs[3].Handoff != "billing" || msgs[2].ToolResponses[1].Content != "Transferred to tech, adopting the role of tech immediately." ||
		msgs[3].Type != chat.TypeHandoffMessage || c.StopReason != chat.StopTextMention {
		t.Fatalf("handoff %q, second handoff %+v, chat %+v", msgs[3].Handoff, msgs[2].ToolResponses[1], c)
	}

	c = create(t, rt, `{"task": "My screen is black.", "max_round": 5, "speaker_selection": {"method": "swarm"},
		"termination": {"handoff": {"target": "tech"}},
		"agents": [{"name": "triage", "type": "assistant", "handoffs": ["tech"], "model": {"provider": "replay", "responses": [{"tool_calls": [{"name": "transfer_to_tech"}]}]}},
		           {"name": "tech", "type": "assistant", "model": {"provider": "replay", "responses": ["unused"]}}]}`)
	c = waitTerminal(t, rt, c.ID, 10*time.Second)
	if c.StopReason != chat.StopHandoff || c.StopDetail != "Handoff to tech from triage detected." {
		t.Fatalf("chat = %+v", c)
	}
}

func TestCallsOfAnExecutorsFunctionsAreRoutedToIt(t *testing.T) {
	ts := newToolServer(t)
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db, withTools(t))
	c := create(t, rt, fmt.Sprintf(`{"task": "save the note", "max_round": 6,
		"tools": [%s],
		"termination": {"function_call": {"name": "write_note"}},
		"agents": [{"name": "caller", "type": "assistant", "model": {"provider": "replay", "responses": [{"tool_calls": [{"name": "write_note", "arguments": {"name": "n1"}}]}]}},
		           {"name": "other", "type": "assistant", "model": {"provider": "replay", "responses": ["unused"]}},
		           {"name": "executor", "type": "user_proxy", "human_input_mode": "NEVER", "functions": ["write_note"]}]}`, httpTool("write_note", ts.URL)))
	c = waitTerminal(t, rt, c.ID, 10*time.Second)
	msgs := messages(t, db, c.ID)
	if len(msgs) != 3 || msgs[2].Name != "executor" || msgs[2].Role != "tool" || msgs[2].ToolResponses[0].Content != "write_note ok" {
		t.Fatalf("messages = %+v", msgs)
	}
	if c.StopReason != chat.StopFunctionCall || c.StopDetail != "Function 'write_note' was executed." {
		t.Fatalf("chat = %+v", c)
	}
}

// TestResumedToolHistoryGivesValidRequests resumes from a history that ends
// with tool calls and responses, parallel calls and a call without a
// response, and talks to an OpenAI-wire server that rejects invalid message
// sequences as the real API does.
func TestResumedToolHistoryGivesValidRequests(t *testing.T) {
	fake := openaitest.New()
	defer fake.Close()
	fake.Reply(openaitest.Text("continuing"), openaitest.Text("and again"))
	models, err := llm.New(llm.Config{OpenAI: llm.OpenAIConfig{BaseURL: fake.URL(), APIKey: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db, withTools(t), func(c *runtime.Config) { c.Models, c.Providers = models, models.Providers() })
	c := create(t, rt, `{"task": "go on", "max_round": 2, "agents": [
		{"name": "asst", "type": "assistant", "model": {"provider": "openai", "model": "m"}, "context": {"buffer_size": 4}},
		{"name": "other", "type": "assistant", "model": {"provider": "openai", "model": "m"}}],
		"messages": [
		  {"role": "user", "content": "start"},
		  {"role": "assistant", "name": "asst", "tool_calls": [
		     {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
		     {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
		  {"role": "tool", "name": "asst", "tool_responses": [{"tool_call_id": "c1", "role": "tool", "content": "r1"}]},
		  {"role": "assistant", "name": "asst", "tool_calls": [{"id": "c3", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
		  {"role": "tool", "name": "asst", "tool_responses": [{"tool_call_id": "c3", "role": "tool", "content": "r3"}, {"tool_call_id": "zz", "role": "tool", "content": "orphan"}]}]}`)
	c = waitTerminal(t, rt, c.ID, 10*time.Second)
	if c.Status != chat.StatusCompleted {
		t.Fatalf("chat = %+v (a request was rejected?)", c)
	}
	for i, r := range fake.Requests() {
		if r.Status != http.StatusOK {
			t.Errorf("request %d answered %d: %s", i, r.Status, r.Error)
		}
	}
}

// TestToolCallRedoneWithTheSameIdempotencyKeyAfterACrash stops a runtime
// while a tool call is in flight (the log then ends with the tool_calls
// message, as after a crash) and lets a second runtime continue: the call
// is made again with the same Idempotency-Key.
func TestToolCallRedoneWithTheSameIdempotencyKeyAfterACrash(t *testing.T) {
	ts := newToolServer(t)
	ts.block = "lookup_id"
	db := runtimetest.OpenSQLite(t)
	models, _ := llm.New(llm.Config{})
	runner, _ := tool.New(tool.Config{AllowPrivate: true})
	defer runner.Close()
	rt1, err := runtime.New(runtime.Config{Store: db, Models: models, Tools: runner, LeaseDuration: time.Minute, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt1.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := create(t, rt1, toolSpec(ts.URL, "", dependentCalls, ""))
	<-ts.entered
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt1.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := messages(t, db, c.ID)
	if last := msgs[len(msgs)-1]; len(last.ToolCalls) != 1 {
		t.Fatalf("the log should end with the tool_calls message: %+v", last)
	}
	close(ts.release)
	rt2 := runtimetest.New(t, db, withTools(t))
	c = waitTerminal(t, rt2, c.ID, 10*time.Second)
	calls := ts.recorded()
	if len(calls) != 2 || calls[0].IdempotencyKey != calls[1].IdempotencyKey || calls[0].IdempotencyKey != c.ID+"/"+msgs[len(msgs)-1].ToolCalls[0].ID {
		t.Fatalf("calls = %+v", calls)
	}
	if got := messages(t, db, c.ID); len(got) != 4 || got[2].ToolResponses[0].Content != `{"id": "42"}` {
		t.Fatalf("messages after the redo = %+v", got)
	}
}
