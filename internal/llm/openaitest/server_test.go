package openaitest_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/llm/openaitest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// post sends body to the server's completions endpoint and returns the status
// and the decoded JSON (nil for non-JSON bodies).
func post(t *testing.T, srv *openaitest.Server, key, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, resp.Header, out
}

// client is an HTTP client whose idle connections are closed with the test,
// so goleak sees no keep-alive goroutines.
func client(t *testing.T) *http.Client {
	t.Helper()
	c := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func newServer(t *testing.T, opts ...openaitest.Option) *openaitest.Server {
	t.Helper()
	srv := openaitest.New(opts...)
	t.Cleanup(srv.Close)
	return srv
}

func errorOf(t *testing.T, body map[string]any) map[string]any {
	t.Helper()
	e, ok := body["error"].(map[string]any)
	if !ok {
		t.Fatalf("body %v has no error object", body)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := e[k]; !ok {
			t.Errorf("error %v lacks %q", e, k)
		}
	}
	return e
}

const hi = `"messages":[{"role":"user","content":"hi"}]`

func TestValidation(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	srv.Respond(func(openaitest.Request) openaitest.Reply { return openaitest.Text("ok") })
	asst := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"call_2","type":"function","function":{"name":"g","arguments":"{}"}}]}`
	tool := func(id string) string { return `{"role":"tool","tool_call_id":"` + id + `","content":"r"}` }
	user := `{"role":"user","content":"next"}`
	msgs := func(ms ...string) string { return `"messages":[` + strings.Join(ms, ",") + `]` }
	for _, tc := range []struct {
		name  string
		body  string
		param string // "" to skip the check
		want  string // substring of the message; "" means the request is valid
	}{
		{"valid", `{"model":"m",` + hi + `}`, "", ""},
		{"valid tool round trip", `{"model":"m",` + msgs(user, asst, tool("call_2"), tool("call_1"), user) + `}`, "", ""},
		{"valid ends in tool messages", `{"model":"m",` + msgs(user, asst, tool("call_1"), tool("call_2")) + `}`, "", ""},
		{"valid content parts", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`, "", ""},
		{"valid empty user content", `{"model":"m","messages":[{"role":"user","content":""}]}`, "", ""},
		{"not JSON", `{"model":`, "", "could not parse the JSON body"},
		{"not an object", `[1]`, "", "could not parse the JSON body"},
		{"missing model", `{` + hi + `}`, "", "you must provide a model parameter"},
		{"missing messages", `{"model":"m"}`, "messages", "Missing required parameter: 'messages'"},
		{"empty messages", `{"model":"m","messages":[]}`, "messages", "empty array"},
		{"unknown parameter", `{"model":"m",` + hi + `,"temprature":0}`, "temprature", "Unrecognized request argument supplied: temprature"},
		{"wrong type", `{"model":"m",` + hi + `,"temperature":"hot"}`, "temperature", "Invalid type for 'temperature'"},
		{"bad role", `{"model":"m","messages":[{"role":"robot","content":"x"}]}`, "messages[0].role", "Invalid value: 'robot'"},
		{"name with space", `{"model":"m","messages":[{"role":"user","name":"Dr Who","content":"x"}]}`, "messages[0].name", "does not match pattern"},
		{"name too long", `{"model":"m","messages":[{"role":"user","name":"` + strings.Repeat("a", 65) + `","content":"x"}]}`, "messages[0].name", "does not match pattern"},
		{"user without content", `{"model":"m","messages":[{"role":"user"}]}`, "messages[0].content", "Missing required parameter: 'messages[0].content'"},
		{"tool with null content", `{"model":"m",` + msgs(user, asst, `{"role":"tool","tool_call_id":"call_1","content":null}`, tool("call_2")) + `}`, "messages[2].content", "got null"},
		{"assistant with nothing", `{"model":"m",` + msgs(user, `{"role":"assistant"}`) + `}`, "messages[1].content", "Missing required parameter"},
		{"orphan tool message", `{"model":"m",` + msgs(user, tool("call_1")) + `}`, "messages.[1].role", "must be a response to a preceeding message with 'tool_calls'"},
		{"tool message after a user message", `{"model":"m",` + msgs(user, asst, tool("call_1"), tool("call_2"), user, tool("call_1")) + `}`, "messages.[5].role", "must be a response to a preceeding message"},
		{"tool answers an unknown id", `{"model":"m",` + msgs(user, asst, tool("call_1"), tool("call_9")) + `}`, "messages.[3].tool_call_id", "'call_9' not found"},
		{"tool answers twice", `{"model":"m",` + msgs(user, asst, tool("call_1"), tool("call_1"), tool("call_2")) + `}`, "messages.[3].tool_call_id", "already answered"},
		{"missing tool response", `{"model":"m",` + msgs(user, asst, tool("call_1"), user) + `}`, "messages.[1].role", "did not have response messages: call_2"},
		{"no tool responses at the end", `{"model":"m",` + msgs(user, asst) + `}`, "messages.[1].role", "did not have response messages: call_1, call_2"},
		{"tool call without id", `{"model":"m",` + msgs(user, `{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}`) + `}`, "messages[1].tool_calls[0].id", "Missing required parameter"},
		{"tool call without arguments", `{"model":"m",` + msgs(user, `{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f"}}]}`, tool("c")) + `}`, "messages[1].tool_calls[0].function.arguments", "Missing required parameter"},
		{"bad tool name", `{"model":"m",` + hi + `,"tools":[{"type":"function","function":{"name":"do it","parameters":{}}}]}`, "tools[0].function.name", "does not match pattern"},
		{"tool parameters not an object", `{"model":"m",` + hi + `,"tools":[{"type":"function","function":{"name":"f","parameters":[]}}]}`, "tools[0].function.parameters", "expected an object"},
		{"parallel_tool_calls without tools", `{"model":"m",` + hi + `,"parallel_tool_calls":false}`, "parallel_tool_calls", "only allowed when 'tools' are specified"},
		{"stream_options without stream", `{"model":"m",` + hi + `,"stream":false,"stream_options":{"include_usage":true}}`, "stream_options", "only allowed when 'stream' is enabled"},
		{"temperature out of range", `{"model":"m",` + hi + `,"temperature":2.5}`, "temperature", "between 0 and 2"},
		{"json_object without json", `{"model":"m",` + hi + `,"response_format":{"type":"json_object"}}`, "messages", "must contain the word 'json'"},
		{"json_object with json", `{"model":"m","messages":[{"role":"user","content":"Answer in JSON."}],"response_format":{"type":"json_object"}}`, "", ""},
		{"json_schema without name", `{"model":"m",` + hi + `,"response_format":{"type":"json_schema","json_schema":{"schema":{}}}}`, "response_format.json_schema.name", "Missing required parameter"},
		{"unknown response format", `{"model":"m",` + hi + `,"response_format":{"type":"yaml"}}`, "response_format.type", "Invalid value: 'yaml'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status, _, body := post(t, srv, "", tc.body)
			if tc.want == "" {
				if status != http.StatusOK {
					t.Fatalf("status %d, body %v; want 200", status, body)
				}
				return
			}
			if status != http.StatusBadRequest {
				t.Fatalf("status %d, body %v; want 400", status, body)
			}
			e := errorOf(t, body)
			if msg, _ := e["message"].(string); !strings.Contains(msg, tc.want) {
				t.Errorf("message %q, want it to contain %q", msg, tc.want)
			}
			if e["type"] != "invalid_request_error" {
				t.Errorf("type %v, want invalid_request_error", e["type"])
			}
			if tc.param != "" && e["param"] != tc.param {
				t.Errorf("param %v, want %q", e["param"], tc.param)
			}
		})
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	srv := newServer(t, openaitest.WithAPIKey("sk-right"))
	srv.Reply(openaitest.Text("ok"))
	body := `{"model":"m",` + hi + `}`

	status, _, resp := post(t, srv, "", body)
	if status != http.StatusUnauthorized || !strings.Contains(errorOf(t, resp)["message"].(string), "didn't provide an API key") {
		t.Errorf("no key: %d %v", status, resp)
	}
	status, _, resp = post(t, srv, "sk-wrong", body)
	if e := errorOf(t, resp); status != http.StatusUnauthorized || e["code"] != "invalid_api_key" || strings.Contains(e["message"].(string), "sk-wrong") {
		t.Errorf("wrong key: %d %v (the key must not be echoed whole)", status, resp)
	}
	if status, _, resp = post(t, srv, "sk-right", body); status != http.StatusOK {
		t.Errorf("right key: %d %v", status, resp)
	}
}

func TestResponseWireFormat(t *testing.T) {
	t.Parallel()
	fixed := time.Unix(1700000000, 0)
	srv := newServer(t, openaitest.WithClock(func() time.Time { return fixed }))
	srv.Reply(
		openaitest.Reply{Content: "Hello there", Usage: &openaitest.Usage{PromptTokens: 9, CompletionTokens: 2}},
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{openaitest.Call("f", `{"a":1}`), openaitest.Call("g", "")}},
	)
	body := `{"model":"gpt-4o-mini",` + hi + `}`

	status, h, resp := post(t, srv, "", body)
	if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
		t.Fatalf("status %d, content type %q", status, h.Get("Content-Type"))
	}
	if resp["object"] != "chat.completion" || resp["model"] != "gpt-4o-mini" || resp["created"] != 1700000000.0 ||
		!strings.HasPrefix(resp["id"].(string), "chatcmpl-") {
		t.Errorf("envelope = %v", resp)
	}
	choice := resp["choices"].([]any)[0].(map[string]any)
	msg := choice["message"].(map[string]any)
	if choice["index"] != 0.0 || choice["finish_reason"] != "stop" || msg["role"] != "assistant" || msg["content"] != "Hello there" {
		t.Errorf("choice = %v", choice)
	}
	if _, ok := msg["tool_calls"]; ok {
		t.Errorf("message %v has tool_calls, want none", msg)
	}
	if u := resp["usage"].(map[string]any); u["prompt_tokens"] != 9.0 || u["completion_tokens"] != 2.0 || u["total_tokens"] != 11.0 {
		t.Errorf("usage = %v", u)
	}

	_, _, resp = post(t, srv, "", body)
	choice = resp["choices"].([]any)[0].(map[string]any)
	msg = choice["message"].(map[string]any)
	if choice["finish_reason"] != "tool_calls" || msg["content"] != nil {
		t.Errorf("tool call choice = %v, want finish tool_calls and null content", choice)
	}
	if _, ok := msg["content"]; !ok {
		t.Errorf("message %v lacks content, want it present and null", msg)
	}
	calls := msg["tool_calls"].([]any)
	c0, c1 := calls[0].(map[string]any), calls[1].(map[string]any)
	fn0, fn1 := c0["function"].(map[string]any), c1["function"].(map[string]any)
	if !strings.HasPrefix(c0["id"].(string), "call_") || c0["id"] == c1["id"] || c0["type"] != "function" ||
		fn0["name"] != "f" || fn0["arguments"] != `{"a":1}` || fn1["arguments"] != "{}" {
		t.Errorf("tool calls = %v", calls)
	}
	if u := resp["usage"].(map[string]any); u["prompt_tokens"] != 1.0 || u["completion_tokens"] != 3.0 { // "hi"; "f{"a":1}g{}"
		t.Errorf("estimated usage = %v", u)
	}
}

func TestFailuresAndRecording(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	srv.FailNext(http.StatusTooManyRequests, "1")
	srv.Fail(openaitest.Failure{Status: http.StatusBadGateway, Body: "<html>502</html>"})
	srv.Reply(openaitest.Text("ok"))
	body := `{"model":"m",` + hi + `}`

	status, h, resp := post(t, srv, "", body)
	if e := errorOf(t, resp); status != 429 || h.Get("Retry-After") != "1" || e["code"] != "rate_limit_exceeded" {
		t.Errorf("first: %d %v %v", status, h, resp)
	}
	if status, h, _ = post(t, srv, "", body); status != 502 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Errorf("second: %d %v", status, h)
	}
	// An invalid request does not consume the reply.
	if status, _, _ = post(t, srv, "", `{"model":"m","messages":[]}`); status != 400 {
		t.Errorf("invalid: %d", status)
	}
	if status, _, _ = post(t, srv, "", body); status != 200 {
		t.Errorf("fourth: %d", status)
	}
	status, _, resp = post(t, srv, "", body)
	if e := errorOf(t, resp); status != 400 || e["code"] != "openaitest_script_exhausted" {
		t.Errorf("exhausted: %d %v", status, resp)
	}

	reqs := srv.Requests()
	var statuses []int
	for _, r := range reqs {
		statuses = append(statuses, r.Status)
	}
	if want := []int{429, 502, 400, 200, 400}; !slices.Equal(statuses, want) {
		t.Errorf("recorded statuses %v, want %v", statuses, want)
	}
	if r := reqs[3]; r.Method != http.MethodPost || r.Path != "/v1/chat/completions" || r.Chat == nil || r.Chat.Model != "m" ||
		r.Chat.Messages[0].Text() != "hi" || !bytes.Equal(r.Body, []byte(body)) || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("recorded request = %+v", r)
	}
}

func TestDisconnect(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	srv.Fail(openaitest.Failure{Disconnect: true})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader(`{"model":"m",`+hi+`}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := client(t).Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("got status %d, want a dropped connection", resp.StatusCode)
	}
}

func TestUnknownPathAndMethod(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	resp, err := client(t).Get(srv.URL() + "/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", resp.StatusCode)
	}
	resp, err = client(t).Post(srv.URL()+"/embeddings", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST /embeddings: %d", resp.StatusCode)
	}
}

func TestCloseEndsHangingResponses(t *testing.T) {
	t.Parallel()
	srv := openaitest.New()
	arrived := make(chan struct{})
	srv.Respond(func(openaitest.Request) openaitest.Reply {
		close(arrived)
		return openaitest.Reply{Content: "never", Delay: time.Hour}
	})
	errc := make(chan error, 1)
	go func() {
		resp, err := client(t).Post(srv.URL()+"/chat/completions", "application/json", strings.NewReader(`{"model":"m",`+hi+`}`))
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-arrived
	closed := make(chan struct{})
	go func() { srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close blocked on a hanging response")
	}
	<-errc
}

func TestStream(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	srv.Reply(openaitest.Reply{Content: "Hello, streaming world!", Usage: &openaitest.Usage{PromptTokens: 1, CompletionTokens: 2}})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/chat/completions",
		strings.NewReader(`{"model":"m",`+hi+`,"stream":true,"stream_options":{"include_usage":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type %q", ct)
	}
	var (
		content string
		finish  any
		usage   map[string]any
		done    bool
	)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q is not a data line", line)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		if done {
			t.Fatal("data after [DONE]")
		}
		var c map[string]any
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatal(err)
		}
		if c["object"] != "chat.completion.chunk" {
			t.Errorf("chunk object %v", c["object"])
		}
		if u, ok := c["usage"].(map[string]any); ok {
			usage = u
		}
		for _, ch := range c["choices"].([]any) {
			ch := ch.(map[string]any)
			if s, ok := ch["delta"].(map[string]any)["content"].(string); ok {
				content += s
			}
			if ch["finish_reason"] != nil {
				finish = ch["finish_reason"]
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !done || content != "Hello, streaming world!" || finish != "stop" || usage["total_tokens"] != 3.0 {
		t.Errorf("stream: done %v content %q finish %v usage %v", done, content, finish, usage)
	}
}

func TestHandlerMountsElsewhere(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	srv.Reply(openaitest.Text("via handler"))
	mux := http.NewServeMux()
	mux.Handle("/openai/", srv.Handler())
	rec := httptest.NewRecorder()
	r, err := http.NewRequest(http.MethodPost, "/openai/v1/chat/completions", strings.NewReader(`{"model":"m",`+hi+`}`))
	if err != nil {
		t.Fatal(err)
	}
	mux.ServeHTTP(rec, r)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "via handler") {
		t.Errorf("status %d body %s", rec.Code, rec.Body.String())
	}
}

// A reply with Pieces streams exactly those pieces, PieceDelay apart, and
// tells Sent as each one has left.
func TestStreamPacedPieces(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	var mu sync.Mutex
	var sent []time.Time
	srv.Reply(openaitest.Reply{Pieces: []string{"one ", "two ", "three"}, PieceDelay: 50 * time.Millisecond, Sent: func(i int) {
		mu.Lock()
		defer mu.Unlock()
		if i != len(sent) {
			t.Errorf("piece %d sent after %d", i, len(sent))
		}
		sent = append(sent, time.Now())
	}})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/chat/completions",
		strings.NewReader(`{"model":"m",`+hi+`,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
			got = append(got, c.Choices[0].Delta.Content)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, "|") != "one |two |three" || len(sent) != 3 {
		t.Fatalf("pieces %q, %d sent", got, len(sent))
	}
	for i := 1; i < 3; i++ {
		if d := sent[i].Sub(sent[i-1]); d < 50*time.Millisecond {
			t.Errorf("piece %d left %v after the one before, want at least 50ms", i, d)
		}
	}
	if r := srv.Requests()[0]; r.Status != http.StatusOK {
		t.Errorf("status %d", r.Status)
	}
}
