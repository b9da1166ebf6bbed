package anthropictest

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func post(t *testing.T, s *Server, version, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL()+"/v1/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if version != "" {
		req.Header.Set("Anthropic-Version", version)
	}
	req.Header.Set("X-Api-Key", "k")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRejectsWhatTheAPIRejects: each request here is one the Messages API
// answers with an error; the fake must too, or a client that passes against
// it proves nothing.
func TestRejectsWhatTheAPIRejects(t *testing.T) {
	t.Parallel()
	s := New(WithAPIKey("k"))
	defer s.Close()
	s.Respond(func(Request) Reply { return Reply{Text: "ok"} })
	const v = "2026-10-21"
	msgs := func(m string) string { return `{"model":"claude-x","max_tokens":10,"messages":` + m + `}` }
	for _, tc := range []struct {
		name, version, body, want string
		header                    []string
	}{
		{"no version", "", msgs(`[{"role":"user","content":"hi"}]`), "anthropic-version", nil},
		{"wrong key", v, msgs(`[{"role":"user","content":"hi"}]`), "invalid x-api-key", []string{"X-Api-Key", "nope"}},
		{"no max_tokens", v, `{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}`, "max_tokens: Field required", nil},
		{"temperature on 2026-10-21", v, `{"model":"claude-x","max_tokens":10,"temperature":1,"messages":[{"role":"user","content":"hi"}]}`, "temperature: Extra inputs", nil},
		{"unknown field", v, `{"model":"claude-x","max_tokens":10,"n":2,"messages":[{"role":"user","content":"hi"}]}`, "n: Extra inputs", nil},
		{"system in messages", v, msgs(`[{"role":"system","content":"x"},{"role":"user","content":"hi"}]`), "messages.0.role", nil},
		{"roles not alternating", v, msgs(`[{"role":"user","content":"a"},{"role":"user","content":"b"}]`), "roles must alternate", nil},
		{"empty text", v, msgs(`[{"role":"user","content":[{"type":"text","text":" "}]}]`), "non-whitespace text", nil},
		{"orphan tool_result", v, `{"model":"claude-x","max_tokens":10,"tools":[{"name":"t","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"x"}]}]}`,
			"unexpected `tool_use_id`", nil},
		{"unanswered tool_use", v, `{"model":"claude-x","max_tokens":10,"tools":[{"name":"t","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"t","input":{}}]},{"role":"user","content":"b"}]}`,
			"without `tool_result` blocks", nil},
		{"tool blocks without tools", v, msgs(`[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"t","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"x"}]}]`),
			"must define tools", nil},
		{"bad tool_use id", v, `{"model":"claude-x","max_tokens":10,"tools":[{"name":"t","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"call:1","name":"t","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"call:1","content":"x"}]}]}`,
			"String should match pattern", nil},
		{"trailing whitespace prefill", v, msgs(`[{"role":"user","content":"a"},{"role":"assistant","content":"b "}]`), "trailing whitespace", nil},
		{"tool_choice without tools", v, `{"model":"claude-x","max_tokens":10,"tool_choice":{"type":"auto"},"messages":[{"role":"user","content":"a"}]}`, "tool_choice may only be specified", nil},
		{"small thinking budget", v, `{"model":"claude-x","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":100},"messages":[{"role":"user","content":"a"}]}`, "greater than or equal to 1024", nil},
	} {
		code, body := post(t, s, tc.version, tc.body, tc.header...)
		if code < 400 || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want an error saying %q", tc.name, code, body, tc.want)
		}
	}
	// And a valid conversation with a tool turn passes.
	code, body := post(t, s, v, `{"model":"claude-x","max_tokens":10,"system":[{"type":"text","text":"s"}],"tools":[{"name":"t","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"},"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"let me"},{"type":"tool_use","id":"toolu_1","name":"t","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"x"},{"type":"text","text":"more"}]}]}`)
	if code != 200 || !strings.Contains(body, `"type":"message"`) {
		t.Errorf("valid request: %d %s", code, body)
	}
}
