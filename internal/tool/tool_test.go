package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newRunner returns a Runner closed at the end of the test.
func newRunner(t *testing.T, cfg tool.Config) *tool.Runner {
	t.Helper()
	r, err := tool.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

// objectSchema is the parameters schema of the test tools.
const objectSchema = `{"type":"object","properties":{"q":{"type":"string"},"n":{"type":"integer","minimum":1}},"required":["q"],"additionalProperties":false}`

// httpTool is an http tool spec for url; impl adds fields to the
// implementation object (`"timeout_s": 1`).
func httpTool(url, impl string) *spec.Tool {
	if impl != "" {
		impl = "," + impl
	}
	return &spec.Tool{
		Name:           "search",
		Description:    "Search.",
		Parameters:     json.RawMessage(objectSchema),
		Implementation: json.RawMessage(fmt.Sprintf(`{"type":"http","url":%q%s}`, url, impl)),
	}
}

// request is a call of the one function of an http or sandbox tool.
func request(t *spec.Tool, args string) *chat.ToolRequest {
	return &chat.ToolRequest{
		ChatID:    "chat-1",
		Tool:      t,
		Function:  chat.ToolDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters},
		CallID:    "call_1",
		Arguments: args,
	}
}

// wantError checks that res is an error result containing every want.
func wantError(t *testing.T, res chat.ToolResult, want ...string) {
	t.Helper()
	if !res.IsError || !strings.HasPrefix(res.Content, "Error: ") {
		t.Fatalf("result = %+v, want an error result starting \"Error: \"", res)
	}
	for _, w := range want {
		if !strings.Contains(res.Content, w) {
			t.Errorf("content %q does not contain %q", res.Content, w)
		}
	}
}

// countingServer is an httptest server that counts its requests and
// answers with h.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	err := tool.Config{
		DefaultTimeout:   -1,
		MaxTimeout:       -2,
		MaxResponseBytes: -3,
		HTTPAllowHosts:   []string{"ok.example.com", "*.example.com:80", "bad host", "10.0.0.0/99", "*.:80", "h:0"},
	}.Validate()
	if err == nil {
		t.Fatal("Validate accepted a bad config")
	}
	for _, want := range []string{"default timeout", "max timeout", "max response bytes", `"bad host"`, `"10.0.0.0/99"`, `"*.:80"`, `"h:0"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "ok.example.com") || strings.Contains(err.Error(), "*.example.com:80") {
		t.Errorf("error %q blames a good entry", err)
	}
	if err := (tool.Config{DefaultTimeout: 200e9}).Validate(); err == nil || !strings.Contains(err.Error(), "above the max timeout") {
		t.Errorf("default timeout above the default max: err = %v", err)
	}
	if err := (tool.Config{MaxTimeout: 10e9}).Validate(); err != nil {
		t.Errorf("a lower max timeout alone: %v", err)
	}
	if _, err := tool.New(tool.Config{MaxTimeout: -1}); err == nil {
		t.Error("New accepted a bad config")
	}
}

// fakeSandboxes is a chat.Sandboxes whose Exec is the test's function; the
// real sandbox is tested in internal/sandbox.
type fakeSandboxes struct {
	chat.Sandboxes
	exec func(ctx context.Context, req *chat.ExecRequest) (*chat.ExecResult, error)
}

func (f *fakeSandboxes) Exec(ctx context.Context, req *chat.ExecRequest) (*chat.ExecResult, error) {
	return f.exec(ctx, req)
}

func TestCheckTool(t *testing.T) {
	t.Parallel()
	sb := &fakeSandboxes{}
	r := newRunner(t, tool.Config{Sandboxes: sb, HTTPAllowHosts: []string{"tools.example.com", "*.corp.example", "10.0.0.0/8", "127.0.0.1:8080"}})
	tests := []struct {
		name string
		spec string
		want []string // problem paths; none means valid
	}{
		{"http", `{"name":"search","parameters":` + objectSchema + `,"implementation":{"type":"http","url":"https://tools.example.com/s","timeout_s":2.5,"headers":{"X-Api-Key":"k"}}}`, nil},
		{"http wildcard host", `{"name":"s","parameters":{"type":"object"},"implementation":{"type":"http","url":"http://a.b.corp.example:9000/s"}}`, nil},
		{"http CIDR host", `{"name":"s","parameters":{"type":"object"},"implementation":{"type":"http","url":"http://10.1.2.3/s"}}`, nil},
		{"http host:port", `{"name":"s","parameters":{"type":"object"},"implementation":{"type":"http","url":"http://127.0.0.1:8080/s"}}`, nil},
		{"sandbox", `{"name":"write_file","parameters":{"type":"object"},"implementation":{"type":"sandbox","language":"python","code":"print(1)","timeout_s":5}}`, nil},
		{"mcp", `{"name":"fs","implementation":{"type":"mcp","url":"https://tools.example.com/mcp","tools":["read","write"]}}`, nil},
		{"everything wrong with http", `{"name":"bad name!","parameters":{"type":"array","minItems":"x"},"implementation":{"type":"http","url":"ftp://tools.example.com","timeout_s":0,"headers":{"Idempotency-Key":"x","bad header":"v","X-Ok":"a\nb","X-N":1},"method":"GET"}}`,
			[]string{"/name", "/parameters/type", "/parameters/minItems", "/implementation/url", "/implementation/timeout_s", "/implementation/headers/Idempotency-Key", "/implementation/headers/bad header", "/implementation/headers/X-Ok", "/implementation/headers/X-N", "/implementation/method"}},
		{"host not allowed", `{"name":"s","parameters":{"type":"object"},"implementation":{"type":"http","url":"https://evil.example.net/s"}}`, []string{"/implementation/url"}},
		{"port not allowed", `{"name":"s","parameters":{"type":"object"},"implementation":{"type":"http","url":"http://127.0.0.1:8081/s"}}`, []string{"/implementation/url"}},
		{"wildcard is not the domain itself", `{"name":"s","parameters":{"type":"object"},"implementation":{"type":"http","url":"http://corp.example/s"}}`, []string{"/implementation/url"}},
		{"url with credentials", `{"name":"s","parameters":{"type":"object"},"implementation":{"type":"http","url":"https://u:p@tools.example.com/s"}}`, []string{"/implementation/url"}},
		{"relative url", `{"name":"s","parameters":{"type":"object"},"implementation":{"type":"http","url":"/s"}}`, []string{"/implementation/url"}},
		{"missing parameters and url", `{"name":"s","implementation":{"type":"http"}}`, []string{"/parameters", "/implementation/url"}},
		{"parameters not an object", `{"name":"s","parameters":[1],"implementation":{"type":"http","url":"https://tools.example.com"}}`, []string{"/parameters"}},
		{"external $ref", `{"name":"s","parameters":{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}},"implementation":{"type":"http","url":"https://tools.example.com"}}`, []string{"/parameters"}},
		{"sandbox problems", `{"name":"s","parameters":{"type":"object"},"implementation":{"type":"sandbox","language":"ruby","code":"  ","url":"x"}}`,
			[]string{"/implementation/language", "/implementation/code", "/implementation/url"}},
		{"sandbox needs code", `{"name":"s","parameters":{"type":"object"},"implementation":{"type":"sandbox","language":"sh"}}`, []string{"/implementation/code"}},
		{"mcp problems", `{"name":"fs","parameters":{"type":"object"},"implementation":{"type":"mcp","url":"https://tools.example.com/mcp","tools":[],"headers":{"X-Key":{"secret":"nope"},"Mcp-Session-Id":"s","X-Obj":{"secret":"a","other":1}},"transport":"ws"}}`,
			[]string{"/parameters", "/implementation/tools", "/implementation/headers/X-Key/secret", "/implementation/headers/Mcp-Session-Id",
				"/implementation/headers/X-Obj", "/implementation/transport"}},
		{"mcp bad tool names", `{"name":"fs","implementation":{"type":"mcp","url":"https://tools.example.com/mcp","tools":["ok","no/slash"]}}`, []string{"/implementation/tools/1"}},
		{"unknown type", `{"name":"s","parameters":{"type":"object"},"implementation":{"type":"grpc"}}`, []string{"/implementation/type"}},
		{"type not a string", `{"name":"s","implementation":{"type":1}}`, []string{"/implementation/type"}},
		{"no implementation", `{"name":"s","parameters":{"type":"object"}}`, []string{"/implementation"}},
		{"implementation not an object", `{"name":"s","parameters":{"type":"object"},"implementation":"http"}`, []string{"/implementation"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var spec spec.Tool
			if err := json.Unmarshal([]byte(tt.spec), &spec); err != nil {
				t.Fatal(err)
			}
			probs := r.CheckTool(&spec)
			var got []string
			for _, p := range probs {
				got = append(got, p.Path)
				if p.Message == "" {
					t.Errorf("problem at %s has no message", p.Path)
				}
			}
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("problem paths = %q, want %q\nproblems: %+v", got, want, probs)
			}
		})
	}
}

// TestCheckToolRefusesAddressesEveryCallWouldRefuse: a literal loopback,
// private or link-local address, or localhost, is a problem at create time
// (a 422 naming the path) unless the operator allows private addresses or
// lists the address; it would otherwise fail every call of the chat.
func TestCheckToolRefusesAddressesEveryCallWouldRefuse(t *testing.T) {
	t.Parallel()
	urls := []string{"http://127.0.0.1:9000/mcp", "http://localhost:9000/mcp", "http://LocalHost./mcp", "http://192.168.1.5/mcp",
		"http://10.1.2.3/mcp", "http://[::1]:9000/mcp", "http://[::ffff:127.0.0.1]/mcp", "http://169.254.169.254/latest"}
	strict := newRunner(t, tool.Config{})
	open := newRunner(t, tool.Config{AllowPrivate: true})
	listed := newRunner(t, tool.Config{HTTPAllowHosts: []string{"127.0.0.1:9000", "::1", "localhost", "10.0.0.0/8"}})
	for _, u := range urls {
		spec := &spec.Tool{Name: "fs", Implementation: json.RawMessage(`{"type":"mcp","url":"` + u + `"}`)}
		if probs := strict.CheckTool(spec); len(probs) != 1 || probs[0].Path != "/implementation/url" {
			t.Errorf("%s without AllowPrivate: problems %+v, want one at /implementation/url", u, probs)
		}
		if probs := open.CheckTool(spec); len(probs) != 0 {
			t.Errorf("%s with AllowPrivate: %+v", u, probs)
		}
	}
	for _, u := range []string{"http://127.0.0.1:9000/mcp", "http://localhost:9000/mcp", "http://10.1.2.3/mcp"} {
		spec := &spec.Tool{Name: "fs", Implementation: json.RawMessage(`{"type":"mcp","url":"` + u + `"}`)}
		if probs := listed.CheckTool(spec); len(probs) != 0 {
			t.Errorf("%s allow-listed: %+v", u, probs)
		}
	}
	public := &spec.Tool{Name: "fs", Implementation: json.RawMessage(`{"type":"mcp","url":"https://mcp.example.com/mcp"}`)}
	if probs := strict.CheckTool(public); len(probs) != 0 {
		t.Errorf("a public name: %+v", probs)
	}
}

func TestCheckToolSandboxWithoutBackend(t *testing.T) {
	t.Parallel()
	r := newRunner(t, tool.Config{})
	spec := &spec.Tool{Name: "w", Parameters: json.RawMessage(`{"type":"object"}`),
		Implementation: json.RawMessage(`{"type":"sandbox","language":"python","code":"print(1)"}`)}
	probs := r.CheckTool(spec)
	if len(probs) != 1 || probs[0].Path != "/implementation/type" || !strings.Contains(probs[0].Message, "AGENTD_SANDBOX") {
		t.Fatalf("problems = %+v, want one at /implementation/type saying how to enable a sandbox", probs)
	}
	if _, err := r.Describe(context.Background(), "c", spec); err == nil {
		t.Error("Describe offered a sandbox tool without a sandbox")
	}
	wantError(t, r.Call(context.Background(), request(spec, `{}`)), "sandbox")
}

func TestDescribeHTTPTool(t *testing.T) {
	t.Parallel()
	r := newRunner(t, tool.Config{})
	spec := httpTool("https://tools.example.com/s", "")
	defs, err := r.Describe(context.Background(), "c", spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) != 1 || defs[0].Name != "search" || defs[0].Description != "Search." || string(defs[0].Parameters) != objectSchema {
		t.Errorf("Describe = %+v", defs)
	}
	if _, err := r.Describe(context.Background(), "c", httpTool("ftp://x", "")); err == nil {
		t.Error("Describe accepted an invalid tool")
	}
}

// TestCallArgumentErrors: arguments that are not a JSON object or do not
// satisfy the schema never reach the tool.
func TestCallArgumentErrors(t *testing.T) {
	t.Parallel()
	srv, hits := countingServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	r := newRunner(t, tool.Config{AllowPrivate: true})
	spec := httpTool(srv.URL, "")
	tests := []struct {
		args string
		want []string
	}{
		{`{"q":`, []string{"Error: arguments are not valid JSON: "}},
		{`not json`, []string{"Error: arguments are not valid JSON: "}},
		{`{"q":"a"} {"q":"b"}`, []string{"Error: arguments are not valid JSON: unexpected data after the object"}},
		{`["q"]`, []string{"Error: arguments must be a JSON object, not an array"}},
		{`"q"`, []string{"Error: arguments must be a JSON object, not a string"}},
		{`null`, []string{"Error: arguments must be a JSON object, not null"}},
		{`{"q":1}`, []string{"Error: arguments do not match the schema: ", "at /q: ", "want string"}},
		{`{}`, []string{"at /: missing property 'q'"}},
		{`{"q":"a","n":0,"extra":true}`, []string{"at /n: ", "minimum", "extra"}},
		{``, []string{"missing property 'q'"}}, // empty arguments are {}
	}
	for _, tt := range tests {
		wantError(t, r.Call(context.Background(), request(spec, tt.args)), tt.want...)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the tool server got %d requests for invalid arguments", n)
	}
	if res := r.Call(context.Background(), request(spec, `{"q":"a","n":12345678901234567890}`)); res.IsError || res.Content != "ok" {
		t.Errorf("valid arguments with a big integer: %+v", res)
	}
}

// TestCallNeverFails: requests the chat should never send still get an
// error result, not a panic.
func TestCallNeverFails(t *testing.T) {
	t.Parallel()
	r := newRunner(t, tool.Config{})
	wantError(t, r.Call(context.Background(), nil), "no tool")
	wantError(t, r.Call(context.Background(), &chat.ToolRequest{ChatID: "c"}), "no tool")
	bad := httpTool("https://x.example.com", "")
	bad.Implementation = json.RawMessage(`{"type":"http","url":"gopher://x"}`)
	wantError(t, r.Call(context.Background(), request(bad, `{}`)), "misconfigured", "/implementation/url")
	broken := httpTool("https://x.example.com", "")
	broken.Parameters = json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"#/nope"}}}`)
	wantError(t, r.Call(context.Background(), request(broken, `{"a":1}`)), "parameters schema is invalid")
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			http.Error(w, "no", http.StatusTeapot)
			return
		}
		io.WriteString(w, "ok")
	})
	reg := prometheus.NewRegistry()
	r := newRunner(t, tool.Config{AllowPrivate: true, Registerer: reg})
	// A second runner on the same registry shares the collectors.
	newRunner(t, tool.Config{Registerer: reg})
	r.Call(context.Background(), request(httpTool(srv.URL, ""), `{"q":"a"}`))
	r.Call(context.Background(), request(httpTool(srv.URL+"/fail", ""), `{"q":"a"}`))
	r.Call(context.Background(), request(httpTool(srv.URL, ""), `nope`))
	want := `
# HELP agentd_tool_calls_total Tool calls, by implementation type and outcome (ok, tool_error, invalid_arguments, timeout, refused, failed, cancelled).
# TYPE agentd_tool_calls_total counter
agentd_tool_calls_total{outcome="invalid_arguments",type="http"} 1
agentd_tool_calls_total{outcome="ok",type="http"} 1
agentd_tool_calls_total{outcome="tool_error",type="http"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "agentd_tool_calls_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "agentd_tool_call_duration_seconds"); n != 1 {
		t.Errorf("duration series = %d, want 1", n)
	}
}
