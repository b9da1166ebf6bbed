package llm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	openai "github.com/sashabaranov/go-openai"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/llm/openaitest"
	"github.com/agentd/agentd/internal/spec"
)

const testKey = "sk-test-key"

type fixture struct {
	srv  *openaitest.Server
	c    *Client
	reg  *prometheus.Registry
	logs *logSink
}

// newFixture starts a fake API and a Client pointed at it, with fast backoff.
func newFixture(t *testing.T, mod func(*OpenAIConfig)) *fixture {
	t.Helper()
	f := &fixture{srv: openaitest.New(openaitest.WithAPIKey(testKey)), reg: prometheus.NewRegistry(), logs: newLogSink()}
	t.Cleanup(f.srv.Close)
	oc := OpenAIConfig{APIKey: testKey, BaseURL: f.srv.URL(), BackoffBase: time.Millisecond, BackoffMax: 50 * time.Millisecond}
	if mod != nil {
		mod(&oc)
	}
	c, err := New(Config{OpenAI: oc, Logger: f.logs.logger(), Registerer: f.reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	f.c = c
	return f
}

func openaiRequest(msgs ...chat.ModelMessage) *chat.ModelRequest {
	if len(msgs) == 0 {
		msgs = []chat.ModelMessage{{Role: "system", Content: "Be brief."}, {Role: "user", Name: "user", Content: "Say hi."}}
	}
	return &chat.ModelRequest{
		ChatID: "chat-1", Caller: "coder",
		Config:   spec.Model{Provider: "openai", Model: "gpt-4o-mini"},
		Messages: msgs,
	}
}

func ptr[T any](v T) *T { return &v }

func TestOpenAIPlainTextAndUsage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.srv.Reply(openaitest.Reply{Content: "Hi!", Usage: &openaitest.Usage{PromptTokens: 12, CompletionTokens: 3}})
	req := openaiRequest()
	req.Config.Temperature = ptr(0.0)
	req.Config.TopP = ptr(0.5)
	req.Config.MaxTokens = ptr(256)
	req.Config.Seed = ptr(7)
	req.Config.ParallelToolCalls = ptr(false) // no tools: must not be sent
	req.Config.ResponseFormat = json.RawMessage(`{"type":"text"}`)

	resp, err := f.c.Complete(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "Hi!" || len(resp.ToolCalls) != 0 || resp.Usage != (chat.Usage{PromptTokens: 12, CompletionTokens: 3}) {
		t.Errorf("response = %+v", resp)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("server saw %d requests, want 1", len(reqs))
	}
	got := reqs[0].Chat
	if got.Model != "gpt-4o-mini" || len(got.Messages) != 2 || got.Messages[0].Role != "system" ||
		got.Messages[1].Name != "user" || got.Messages[1].Text() != "Say hi." {
		t.Errorf("request = %+v", got)
	}
	// Zero must reach the API as (practically) zero, not be dropped.
	if got.Temperature == nil || *got.Temperature > 1e-6 {
		t.Errorf("temperature = %v, want ~0", got.Temperature)
	}
	if got.TopP == nil || *got.TopP != 0.5 || got.MaxTokens != nil || got.MaxCompletionTokens == nil || *got.MaxCompletionTokens != 256 ||
		got.Seed == nil || *got.Seed != 7 || got.ParallelToolCalls != nil || string(got.ResponseFormat) != `{"type":"text"}` {
		t.Errorf("options = top_p %v max_tokens %v max_completion_tokens %v seed %v parallel %v format %s",
			got.TopP, got.MaxTokens, got.MaxCompletionTokens, got.Seed, got.ParallelToolCalls, got.ResponseFormat)
	}
}

func TestOpenAIToolCallRoundTrip(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.srv.Reply(openaitest.Reply{ToolCalls: []openaitest.ToolCall{
		openaitest.Call("search_docs", `{"q":"reverse"}`),
		{ID: "call_fixed", Type: "function", Function: openaitest.FunctionCall{Name: "noargs"}},
	}})
	req := openaiRequest(
		chat.ModelMessage{Role: "system", Content: "Use tools."},
		chat.ModelMessage{Role: "user", Name: "user", Content: "Find it."},
		chat.ModelMessage{Role: "assistant", Name: "coder", ToolCalls: []chat.ToolCall{
			{ID: "call_a", Type: "function", Function: chat.FunctionCall{Name: "search_docs", Arguments: `{"q":"x"}`}},
			{ID: "call_b", Type: "function", Function: chat.FunctionCall{Name: "search_docs"}},
		}},
		chat.ModelMessage{Role: "tool", ToolCallID: "call_a", Content: "result a"},
		chat.ModelMessage{Role: "tool", ToolCallID: "call_b", Content: ""},
	)
	req.Config.ParallelToolCalls = ptr(true)
	req.Config.ResponseFormat = json.RawMessage(`{"type":"json_schema","json_schema":{"name":"out","schema":{"type":"object","anyOf":[{"required":["a"]}]},"strict":true}}`)
	req.Tools = []chat.ToolDef{
		{Name: "search_docs", Description: "Search.", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)},
		{Name: "noargs"},
	}
	resp, err := f.c.Complete(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 2 {
		t.Fatalf("tool calls = %+v", resp.ToolCalls)
	}
	tc := resp.ToolCalls[0]
	if tc.ID == "" || tc.Type != "function" || tc.Function.Name != "search_docs" || tc.Function.Arguments != `{"q":"reverse"}` {
		t.Errorf("tool call 0 = %+v", tc)
	}
	if tc := resp.ToolCalls[1]; tc.ID != "call_fixed" || tc.Function.Arguments != "{}" {
		t.Errorf("tool call 1 = %+v", tc)
	}
	if resp.Usage.PromptTokens == 0 || resp.Usage.CompletionTokens == 0 {
		t.Errorf("usage = %+v, want the server's estimate", resp.Usage)
	}

	got := f.srv.Requests()[0].Chat
	if len(got.Tools) != 2 || got.Tools[0].Function.Name != "search_docs" ||
		!strings.Contains(string(got.Tools[0].Function.Parameters), `"required":["q"]`) ||
		string(got.Tools[1].Function.Parameters) != `{"type":"object","properties":{}}` {
		t.Errorf("tools = %+v", got.Tools)
	}
	if got.ParallelToolCalls == nil || !*got.ParallelToolCalls {
		t.Errorf("parallel_tool_calls = %v, want true", got.ParallelToolCalls)
	}
	if !strings.Contains(string(got.ResponseFormat), `"anyOf"`) {
		t.Errorf("response_format = %s, want the schema verbatim", got.ResponseFormat)
	}
	a := got.Messages[2]
	if a.Role != "assistant" || a.Name != "coder" || len(a.ToolCalls) != 2 || a.ToolCalls[0].ID != "call_a" ||
		*a.ToolCalls[0].Function.Arguments != `{"q":"x"}` || *a.ToolCalls[1].Function.Arguments != "{}" {
		t.Errorf("assistant message = %+v", a)
	}
	if m := got.Messages[3]; m.Role != "tool" || m.ToolCallID != "call_a" || m.Text() != "result a" {
		t.Errorf("tool message = %+v", m)
	}
}

func TestOpenAIRetriesRateLimitAndServerError(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *OpenAIConfig) { c.BackoffMax = 80 * time.Millisecond })
	f.srv.FailNext(http.StatusTooManyRequests, "1")
	f.srv.FailNext(http.StatusInternalServerError, "")
	f.srv.Reply(openaitest.Text("finally"))

	resp, err := f.c.Complete(t.Context(), openaiRequest())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "finally" {
		t.Errorf("content = %q", resp.Content)
	}
	var statuses []int
	for _, r := range f.srv.Requests() {
		statuses = append(statuses, r.Status)
	}
	if len(statuses) != 3 || statuses[0] != 429 || statuses[1] != 500 || statuses[2] != 200 {
		t.Errorf("server saw statuses %v, want [429 500 200]", statuses)
	}

	warns := f.logs.records(t, "model call failed, retrying")
	if len(warns) != 2 {
		t.Fatalf("%d retry warnings, want 2", len(warns))
	}
	// Retry-After: 1 is honoured, capped at BackoffMax.
	if w := time.Duration(warns[0]["wait"].(float64)); w != 80*time.Millisecond || warns[0]["attempt"] != 1.0 ||
		warns[0]["reason"] != "rate_limit" || warns[0]["status"] != 429.0 {
		t.Errorf("first warning = %v, want attempt 1, rate_limit, wait 80ms", warns[0])
	}
	// No Retry-After: backoff from BackoffBase, second retry: 2ms with equal jitter.
	if w := time.Duration(warns[1]["wait"].(float64)); w < time.Millisecond || w > 2*time.Millisecond || warns[1]["reason"] != "server_error" {
		t.Errorf("second warning = %v, want server_error and a wait in [1ms, 2ms]", warns[1])
	}
	if rl, se := counter(t, f.reg, "openai", "rate_limit"), counter(t, f.reg, "openai", "server_error"); rl != 1 || se != 1 {
		t.Errorf("retries_total rate_limit=%v server_error=%v, want 1 and 1", rl, se)
	}
}

func TestOpenAIGivesUpAfterMaxRetries(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *OpenAIConfig) { c.MaxRetries = 2 })
	for range 3 {
		f.srv.Fail(openaitest.Failure{Status: http.StatusBadGateway, Body: "<html>bad gateway</html>"})
	}
	_, err := f.c.Complete(t.Context(), openaiRequest())
	e, ok := errors.AsType[*Error](err)
	if !ok || e.StatusCode != 502 || e.Attempts != 3 || !strings.Contains(err.Error(), "bad gateway") ||
		!strings.Contains(err.Error(), "after 3 attempts") {
		t.Errorf("err = %v, want a 502 after 3 attempts with the body", err)
	}
	if n := len(f.srv.Requests()); n != 3 {
		t.Errorf("server saw %d requests, want 3", n)
	}
}

func TestOpenAIClientErrorsAreNotRetried(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		setup  func(*fixture)
		req    func() *chat.ModelRequest
		status int
		want   string
	}{
		{
			name: "injected 400",
			setup: func(f *fixture) {
				f.srv.Fail(openaitest.Failure{Status: 400, Message: "This model's maximum context length is 8 tokens."})
			},
			req:    func() *chat.ModelRequest { return openaiRequest() },
			status: 400,
			want:   "maximum context length",
		},
		{
			name: "404",
			setup: func(f *fixture) {
				f.srv.Fail(openaitest.Failure{Status: 404, Message: "The model `nope` does not exist", Code: "model_not_found"})
			},
			req:    func() *chat.ModelRequest { return openaiRequest() },
			status: 404,
			want:   "code model_not_found",
		},
		{
			name:  "invalid tool sequence caught by the fake",
			setup: func(*fixture) {},
			req: func() *chat.ModelRequest {
				return openaiRequest(chat.ModelMessage{Role: "user", Content: "hi"}, chat.ModelMessage{Role: "tool", ToolCallID: "call_x", Content: "orphan"})
			},
			status: 400,
			want:   "must be a response to a preceeding message with 'tool_calls'",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			tc.setup(f)
			f.srv.Reply(openaitest.Text("must not be reached"))
			_, err := f.c.Complete(t.Context(), tc.req())
			e, ok := errors.AsType[*Error](err)
			if !ok || e.StatusCode != tc.status || e.Attempts != 1 || e.RequestID == "" || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want status %d after 1 attempt mentioning %q", err, tc.status, tc.want)
			}
			if n := len(f.srv.Requests()); n != 1 {
				t.Errorf("server saw %d requests, want 1", n)
			}
		})
	}
}

func TestOpenAIWrongKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *OpenAIConfig) { c.APIKey = "sk-wrong" })
	_, err := f.c.Complete(t.Context(), openaiRequest())
	if e, ok := errors.AsType[*Error](err); !ok || e.StatusCode != 401 || e.Attempts != 1 || !strings.Contains(err.Error(), "Incorrect API key") {
		t.Errorf("err = %v, want a 401 after one attempt", err)
	}
}

func TestOpenAIPerCallTimeout(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *OpenAIConfig) { c.Timeout = 100 * time.Millisecond; c.MaxRetries = -1 })
	f.srv.Reply(openaitest.Reply{Content: "too late", Delay: time.Hour})
	var err error
	within(t, 10*time.Second, func() { _, err = f.c.Complete(t.Context(), openaiRequest()) })
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "per-call timeout of 100ms") {
		t.Errorf("err = %v, want a deadline error naming the timeout", err)
	}
}

func TestOpenAITimeoutIsRetried(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *OpenAIConfig) { c.Timeout = 100 * time.Millisecond })
	f.srv.Reply(openaitest.Reply{Content: "too late", Delay: time.Hour}, openaitest.Text("in time"))
	resp, err := f.c.Complete(t.Context(), openaiRequest())
	if err != nil || resp.Content != "in time" {
		t.Fatalf("Complete = %+v, %v", resp, err)
	}
	if n := counter(t, f.reg, "openai", "timeout"); n != 1 {
		t.Errorf("retries_total{reason=timeout} = %v, want 1", n)
	}
}

func TestOpenAIConnectionDropIsRetried(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.srv.Fail(openaitest.Failure{Disconnect: true})
	f.srv.Reply(openaitest.Text("reconnected"))
	resp, err := f.c.Complete(t.Context(), openaiRequest())
	if err != nil || resp.Content != "reconnected" {
		t.Fatalf("Complete = %+v, %v", resp, err)
	}
	if n := counter(t, f.reg, "openai", "connection"); n != 1 {
		t.Errorf("retries_total{reason=connection} = %v, want 1", n)
	}
}

func TestOpenAICancelStopsRetries(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *OpenAIConfig) { c.BackoffMax = time.Hour })
	f.srv.FailNext(http.StatusServiceUnavailable, "3600")
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := f.c.Complete(ctx, openaiRequest())
		errc <- err
	}()
	select {
	case <-f.logs.warns: // the first attempt failed and the client is waiting an hour
	case <-time.After(10 * time.Second):
		t.Fatal("no retry warning")
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "status 503") {
			t.Errorf("err = %v, want context.Canceled with the last status", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Complete did not return after cancel")
	}
	if n := len(f.srv.Requests()); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

func TestOpenAIDoesNotWaitPastTheDeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *OpenAIConfig) { c.BackoffMax = time.Hour })
	f.srv.FailNext(http.StatusTooManyRequests, "3600")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var err error
	within(t, 10*time.Second, func() { _, err = f.c.Complete(ctx, openaiRequest()) })
	if e, ok := errors.AsType[*Error](err); !ok || e.StatusCode != 429 {
		t.Errorf("err = %v, want the 429", err)
	}
}

func TestOpenAISanitizesNamesAndFillsEmptyContent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.srv.Reply(openaitest.Text("ok"))
	long := strings.Repeat("x", 80)
	_, err := f.c.Complete(t.Context(), openaiRequest(
		chat.ModelMessage{Role: "system", Content: ""},
		chat.ModelMessage{Role: "user", Name: "Dr. Jürgen Müller", Content: "hi"},
		chat.ModelMessage{Role: "assistant", Name: long, Content: ""},
		chat.ModelMessage{Role: "user", Name: "user", Content: ""},
	))
	if err != nil {
		t.Fatal(err) // the fake rejects bad names and missing content
	}
	got := f.srv.Requests()[0].Chat.Messages
	if got[1].Name != "Dr__J_rgen_M_ller" || got[2].Name != strings.Repeat("x", 64) {
		t.Errorf("names = %q, %q", got[1].Name, got[2].Name)
	}
}

func TestOpenAIRejectsBadRequestsBeforeSending(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for _, tc := range []struct {
		name string
		mod  func(*chat.ModelRequest)
		want string
	}{
		{"no model", func(r *chat.ModelRequest) { r.Config.Model = "" }, "no model"},
		{"no messages", func(r *chat.ModelRequest) { r.Messages = nil }, "no messages"},
		{"unknown role", func(r *chat.ModelRequest) { r.Messages[0].Role = "wizard" }, `unknown role "wizard"`},
		{"tool without id", func(r *chat.ModelRequest) { r.Messages[0] = chat.ModelMessage{Role: "tool", Content: "x"} }, "tool_call_id"},
		{"bad response format", func(r *chat.ModelRequest) { r.Config.ResponseFormat = json.RawMessage(`{"type":"yaml"}`) }, `unknown type "yaml"`},
		{"schema without name", func(r *chat.ModelRequest) {
			r.Config.ResponseFormat = json.RawMessage(`{"type":"json_schema","json_schema":{"schema":{}}}`)
		}, "json_schema.name"},
	} {
		req := openaiRequest()
		tc.mod(req)
		if _, err := f.c.Complete(t.Context(), req); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
	if n := len(f.srv.Requests()); n != 0 {
		t.Errorf("server saw %d requests, want none", n)
	}
}

// TestOpenAIMaxTokensGoOutAsMaxCompletionTokens: OpenAI deprecated
// max_tokens and reasoning models reject it, so every model gets
// max_completion_tokens.
func TestOpenAIMaxTokensGoOutAsMaxCompletionTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.srv.Reply(openaitest.Text("a"), openaitest.Text("b"))
	for _, model := range []string{"o3-mini", "gpt-4o-mini"} {
		req := openaiRequest()
		req.Config.Model = model
		req.Config.MaxTokens = ptr(50)
		if _, err := f.c.Complete(t.Context(), req); err != nil {
			t.Fatalf("%s: %v", model, err)
		}
	}
	reqs := f.srv.Requests()
	if r := reqs[0].Chat; r.MaxTokens != nil || r.MaxCompletionTokens == nil || *r.MaxCompletionTokens != 50 {
		t.Errorf("o3-mini: max_tokens %v max_completion_tokens %v, want only max_completion_tokens", r.MaxTokens, r.MaxCompletionTokens)
	}
	if r := reqs[1].Chat; r.MaxTokens != nil || r.MaxCompletionTokens == nil || *r.MaxCompletionTokens != 50 {
		t.Errorf("gpt-4o-mini: max_tokens %v max_completion_tokens %v, want only max_completion_tokens", r.MaxTokens, r.MaxCompletionTokens)
	}
}

// TestOpenAISendsStopPenaltiesAndReasoningEffort: the model's stop,
// frequency and presence penalties and reasoning_effort reach the API as
// its own fields; a zero penalty (the API's default) may be left out.
func TestOpenAISendsStopPenaltiesAndReasoningEffort(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.srv.Reply(openaitest.Text("a"))
	req := openaiRequest()
	fp, pp := 0.5, -0.25
	req.Config.Stop, req.Config.FrequencyPenalty, req.Config.PresencePenalty, req.Config.ReasoningEffort = []string{"END", "STOP"}, &fp, &pp, "low"
	if _, err := f.c.Complete(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(f.srv.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal([]any{body["stop"], body["frequency_penalty"], body["presence_penalty"], body["reasoning_effort"]}); string(got) != `[["END","STOP"],0.5,-0.25,"low"]` {
		t.Errorf("stop, penalties, effort = %s", got)
	}
}

func TestOpenAIRefusalBecomesContent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.srv.Reply(openaitest.Reply{Refusal: "I can't help with that."})
	resp, err := f.c.Complete(t.Context(), openaiRequest())
	if err != nil || resp.Content != "I can't help with that." {
		t.Errorf("Complete = %+v, %v", resp, err)
	}
}

// TestFakeStreamsForARealClient checks openaitest's streaming against
// go-openai's stream reader: what other packages' tests will rely on.
func TestFakeStreamsForARealClient(t *testing.T) {
	t.Parallel()
	srv := openaitest.New()
	t.Cleanup(srv.Close)
	srv.Reply(openaitest.Reply{Content: "Hello, streaming world!", ToolCalls: []openaitest.ToolCall{openaitest.Call("f", `{"a":"bcdefghijkl"}`)},
		Usage: &openaitest.Usage{PromptTokens: 5, CompletionTokens: 9}})
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = srv.URL()
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(hc.CloseIdleConnections)
	cfg.HTTPClient = hc
	stream, err := openai.NewClientWithConfig(cfg).CreateChatCompletionStream(t.Context(), openai.ChatCompletionRequest{
		Model: "gpt-4o-mini", Stream: true, StreamOptions: &openai.StreamOptions{IncludeUsage: true},
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var content, args, name, id, finish string
	var usage *openai.Usage
	for {
		c, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if c.Usage != nil {
			usage = c.Usage
		}
		for _, ch := range c.Choices {
			content += ch.Delta.Content
			for _, tc := range ch.Delta.ToolCalls {
				id += tc.ID
				name += tc.Function.Name
				args += tc.Function.Arguments
			}
			if ch.FinishReason != "" {
				finish = string(ch.FinishReason)
			}
		}
	}
	if content != "Hello, streaming world!" || name != "f" || args != `{"a":"bcdefghijkl"}` || id == "" || finish != "tool_calls" {
		t.Errorf("streamed content %q, tool call %q %q %q, finish %q", content, id, name, args, finish)
	}
	if usage == nil || usage.TotalTokens != 14 {
		t.Errorf("usage = %+v, want total 14", usage)
	}
}

// TestAStreamedCallTakesLongHeadersAndLines: an endpoint's connections over
// HTTP/1.1 read and write through 1 KB buffers, and a stream through 512
// bytes; a request body, response headers and a chunk line several times
// as long go through whole.
func TestAStreamedCallTakesLongHeadersAndLines(t *testing.T) {
	t.Parallel()
	question, answer := strings.Repeat("q", 20_000), strings.Repeat("a", 5_000)
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Messages) == 0 {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		got <- body.Messages[len(body.Messages)-1].Content
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 8 {
			w.Header().Set("X-Ratelimit-Detail-"+string(rune('a'+i)), strings.Repeat("h", 700))
		}
		_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"`+answer+`"},"finish_reason":null}]}`+"\n\n")
		_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	c, err := New(Config{Endpoints: []Endpoint{{Name: "local", Kind: KindOpenAI, BaseURL: srv.URL + "/v1"}}, OpenAI: OpenAIConfig{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	var deltas strings.Builder
	resp, err := c.Complete(t.Context(), &chat.ModelRequest{ChatID: "c1", Caller: "a", Config: spec.Model{Provider: KindOpenAI, Model: "m"},
		Messages: []chat.ModelMessage{{Role: chat.RoleUser, Content: question}}, OnDelta: func(d string) { deltas.WriteString(d) }})
	if err != nil {
		t.Fatal(err)
	}
	if q := <-got; q != question {
		t.Errorf("the model got a question of %d bytes, want %d", len(q), len(question))
	}
	if resp.Content != answer || deltas.String() != answer {
		t.Errorf("content %d bytes, deltas %d bytes; want %d", len(resp.Content), deltas.Len(), len(answer))
	}
}
