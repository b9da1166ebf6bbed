package tool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/tool"
)

// recordedHTTPTool is one tool of testdata/httptool.json: what AgentChat
// 0.7.5's HttpTool showed the model and did with each call
// (e2e/autogen/components/httptool.py made the record).
type recordedHTTPTool struct {
	Component struct {
		Config struct {
			Name        string            `json:"name"`
			Description *string           `json:"description"`
			Path        string            `json:"path"`
			Method      string            `json:"method"`
			Headers     map[string]string `json:"headers"`
			JSONSchema  json.RawMessage   `json:"json_schema"`
			ReturnType  string            `json:"return_type"`
			Timeout     float64           `json:"timeout"`
		} `json:"config"`
	} `json:"component"`
	Schema struct {
		Parameters json.RawMessage `json:"parameters"`
	} `json:"schema"`
	Calls []struct {
		Arguments json.RawMessage `json:"arguments"`
		Response  struct {
			Status      int    `json:"status"`
			ContentType string `json:"content_type"`
			Body        string `json:"body"`
		} `json:"response"`
		Request *struct {
			Method      string  `json:"method"`
			Target      string  `json:"target"`
			ContentType *string `json:"content_type"`
			Body        string  `json:"body"`
			XTeam       *string `json:"x_team"`
		} `json:"request"`
		Result  string `json:"result"`
		IsError bool   `json:"is_error"`
	} `json:"calls"`
}

// httpAPITool is an http_api tool of a recorded HttpTool config, calling
// base instead of the recording's server.
func httpAPITool(t *testing.T, rt recordedHTTPTool, base string) *spec.Tool {
	t.Helper()
	c := rt.Component.Config
	impl := map[string]any{"type": "http_api", "url": base + c.Path, "method": c.Method, "return_type": c.ReturnType, "timeout_s": c.Timeout}
	if c.Headers != nil {
		impl["headers"] = c.Headers
	}
	b, err := json.Marshal(impl)
	if err != nil {
		t.Fatal(err)
	}
	desc := ""
	if c.Description != nil {
		desc = *c.Description
	}
	return &spec.Tool{Name: c.Name, Description: desc, Parameters: c.JSONSchema, Implementation: b}
}

// TestHTTPAPIAsAgentChat: an http_api tool shows the model the schema
// AgentChat's HttpTool shows, byte for byte, and each recorded call makes
// the request HttpTool made — method, path with its parameters, query,
// JSON body, headers — of a real local server, and gives the result text
// AgentChat gave for the same response.
func TestHTTPAPIAsAgentChat(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("testdata", "httptool.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tools []recordedHTTPTool
	if err := json.Unmarshal(raw, &tools); err != nil {
		t.Fatal(err)
	}
	type seen struct{ method, target, contentType, body, xTeam string }
	var next atomic.Pointer[func(http.ResponseWriter)]
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.RequestURI, r.Header.Get("Content-Type"), string(b), r.Header.Get("X-Team")}
		(*next.Load())(w)
	}))
	t.Cleanup(srv.Close)
	r := newRunner(t, tool.Config{AllowPrivate: true})
	ctx := context.Background()
	for _, rt := range tools {
		st := httpAPITool(t, rt, srv.URL)
		if probs := r.CheckTool(st); len(probs) != 0 {
			t.Fatalf("%s: CheckTool: %+v", st.Name, probs)
		}
		defs, err := r.Describe(ctx, "chat-1", st)
		if err != nil || len(defs) != 1 {
			t.Fatalf("%s: Describe: %v %v", st.Name, defs, err)
		}
		var want bytes.Buffer
		if err := json.Compact(&want, rt.Schema.Parameters); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(defs[0].Parameters, want.Bytes()) {
			t.Errorf("%s: the model sees\n%s\nAgentChat shows\n%s", st.Name, defs[0].Parameters, want.Bytes())
		}
		for i, call := range rt.Calls {
			resp := call.Response
			write := func(w http.ResponseWriter) {
				body := []byte(resp.Body)
				if strings.Contains(resp.ContentType, "8859-1") {
					body = latin1(resp.Body)
				}
				w.Header().Set("Content-Type", resp.ContentType)
				w.WriteHeader(resp.Status)
				w.Write(body)
			}
			next.Store(&write)
			res := r.Call(ctx, &chat.ToolRequest{ChatID: "chat-1", Tool: st, Function: defs[0], CallID: fmt.Sprintf("call_%d", i), Arguments: string(call.Arguments)})
			name := fmt.Sprintf("%s call %d", st.Name, i)
			if res.IsError != call.IsError || res.Content != call.Result {
				t.Errorf("%s: result %q (error %v), AgentChat's %q (error %v)", name, res.Content, res.IsError, call.Result, call.IsError)
			}
			var s seen
			select {
			case s = <-got:
			default:
				t.Errorf("%s: no request reached the server", name)
				continue
			}
			w := call.Request
			wantCT, wantTeam := "", ""
			if w.ContentType != nil {
				wantCT = *w.ContentType
			}
			if w.XTeam != nil {
				wantTeam = *w.XTeam
			}
			if s != (seen{w.Method, w.Target, wantCT, w.Body, wantTeam}) {
				t.Errorf("%s: request\n%+v\nAgentChat's\n%+v", name, s, seen{w.Method, w.Target, wantCT, w.Body, wantTeam})
			}
		}
	}
}

func latin1(s string) []byte {
	var b []byte
	for _, r := range s {
		b = append(b, byte(r))
	}
	return b
}

// TestHTTPAPIGuards: an http_api tool obeys the tool host allow-list and
// the address rules at create and at call time, follows no redirect (as
// httpx), sends a secret header only to its host, keeps the secret's value
// out of its spec, results and problems, and refuses at create what it
// could not do as HttpTool does.
func TestHTTPAPIGuards(t *testing.T) {
	t.Parallel()
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		io.WriteString(w, "other: "+r.Header.Get("Authorization"))
	}))
	t.Cleanup(other.Close)
	var auth atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, other.URL+"/x", http.StatusFound)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	schema := json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)
	mk := func(impl string) *spec.Tool {
		return &spec.Tool{Name: "api", Description: "d", Parameters: schema, Implementation: json.RawMessage(impl)}
	}
	r := newRunner(t, tool.Config{AllowPrivate: true, Secrets: map[string]string{"api": "Bearer tok-98765"}})
	ctx := context.Background()
	call := func(st *spec.Tool, args string) chat.ToolResult {
		defs, err := r.Describe(ctx, "chat-1", st)
		if err != nil {
			t.Fatalf("Describe: %v", err)
		}
		return r.Call(ctx, &chat.ToolRequest{ChatID: "chat-1", Tool: st, Function: defs[0], CallID: "call_1", Arguments: args})
	}

	withSecret := mk(`{"type":"http_api","method":"GET","url":"` + srv.URL + `/items/{id}","headers":{"Authorization":{"secret":"api"}}}`)
	if probs := r.CheckTool(withSecret); len(probs) != 0 {
		t.Fatalf("CheckTool: %+v", probs)
	}
	if res := call(withSecret, `{"id": "1"}`); res.IsError || res.Content != "ok" || auth.Load() != "Bearer tok-98765" {
		t.Errorf("call with a secret header: %+v, the server saw %v", res, auth.Load())
	}
	moved := mk(`{"type":"http_api","method":"GET","url":"` + srv.URL + `/moved","headers":{"Authorization":{"secret":"api"}}}`)
	if res := call(moved, `{"id": "1"}`); res.IsError || elsewhere.Load() != 0 || strings.Contains(res.Content, "tok-98765") {
		t.Errorf("a redirect was followed, or its body leaked the secret: %+v, %d requests elsewhere", res, elsewhere.Load())
	}
	if res := call(withSecret, `{"id": 5}`); !res.IsError || !strings.Contains(res.Content, "id") {
		t.Errorf("an argument of the wrong type: %+v", res)
	}
	if res := call(withSecret, `{"id": "a?b"}`); !res.IsError {
		t.Errorf("a path parameter with '?': %+v", res)
	}

	strict := newRunner(t, tool.Config{HTTPAllowHosts: []string{"api.example.com"}})
	for _, tc := range []struct {
		name, impl, params string
		paths              []string
	}{
		{"host not allowed", `{"type":"http_api","url":"https://other.example.com/x"}`, "", []string{"/implementation/url"}},
		{"loopback", `{"type":"http_api","url":"http://127.0.0.1:9/x"}`, "", []string{"/implementation/url"}},
		{"bad fields", `{"type":"http_api","url":"https://api.example.com/x/{id}/{missing}?q=1","method":"HEAD","return_type":"xml","headers":{"X":{"secret":"nope"}}}`, "",
			[]string{"/implementation/url", "/implementation/method", "/implementation/return_type", "/implementation/headers/X/secret"}},
		{"path parameter not in the schema", `{"type":"http_api","url":"https://api.example.com/x/{id}/{missing}"}`, "", []string{"/implementation/url"}},
		{"no parameters", `{"type":"http_api","url":"https://api.example.com/x"}`, "null", []string{"/parameters"}},
		{"schema agentd cannot translate", `{"type":"http_api","url":"https://api.example.com/x"}`,
			`{"type":"object","properties":{"id":{"type":"string","minLength":2}}}`, []string{"/parameters/properties/id/minLength"}},
		{"array without items", `{"type":"http_api","url":"https://api.example.com/x"}`,
			`{"type":"object","properties":{"ids":{"type":"array"}}}`, []string{"/parameters/properties/ids"}},
	} {
		st := mk(tc.impl)
		if tc.params != "" {
			st.Parameters = json.RawMessage(tc.params)
		}
		probs := strict.CheckTool(st)
		var paths []string
		for _, p := range probs {
			paths = append(paths, p.Path)
			if strings.Contains(p.Message, "tok-98765") {
				t.Errorf("%s: a problem holds the secret: %s", tc.name, p.Message)
			}
		}
		if strings.Join(paths, " ") != strings.Join(tc.paths, " ") {
			t.Errorf("%s: problems %+v, want paths %q", tc.name, probs, tc.paths)
		}
	}
}
