package anthropictest

import (
	"encoding/json"
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

// TestThinkingAsTheAPIServesIt: a reply thinks only when the request
// enables thinking, with a signature the server issued; in a tool loop the
// assistant turn must start with its thinking blocks exactly as received,
// and what thinking is incompatible with is refused with the API's errors.
func TestThinkingAsTheAPIServesIt(t *testing.T) {
	t.Parallel()
	s := New(WithAPIKey("k"))
	defer s.Close()
	const v = "2023-06-01"
	tools := `"tools":[{"name":"t","input_schema":{"type":"object"}}]`
	enabled := `"thinking":{"type":"enabled","budget_tokens":1024}`

	// Not enabled: the scripted thinking is not sent.
	s.Reply(Reply{Thinking: "hidden", Text: "plain"})
	code, body := post(t, s, v, `{"model":"claude-x","max_tokens":2000,"messages":[{"role":"user","content":"a"}]}`)
	if code != 200 || strings.Contains(body, "thinking") {
		t.Fatalf("without thinking enabled: %d %s", code, body)
	}

	// Enabled: a signed thinking block (and a redacted one) before the tool use.
	s.Reply(Reply{Thinking: "Use the tool.", Redacted: true, ToolUses: []ToolUse{{ID: "toolu_a", Name: "t"}}})
	code, body = post(t, s, v, `{"model":"claude-x","max_tokens":2000,`+enabled+`,`+tools+`,"messages":[{"role":"user","content":"a"}]}`)
	var msg struct {
		Content []struct{ Type, Thinking, Signature, Data string }
	}
	if code != 200 || json.Unmarshal([]byte(body), &msg) != nil || len(msg.Content) != 3 ||
		msg.Content[0].Type != "thinking" || msg.Content[0].Thinking != "Use the tool." || msg.Content[0].Signature == "" ||
		msg.Content[1].Type != "redacted_thinking" || msg.Content[1].Data == "" {
		t.Fatalf("with thinking enabled: %d %s", code, body)
	}
	sig, data := msg.Content[0].Signature, msg.Content[1].Data
	loop := func(assistant string, extra ...string) string {
		head := `{"model":"claude-x","max_tokens":2000,` + enabled + `,` + tools
		for _, e := range extra {
			head += "," + e
		}
		return head + `,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[` + assistant +
			`{"type":"tool_use","id":"toolu_a","name":"t","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a","content":"x"}]}]}`
	}
	signed := `{"type":"thinking","thinking":"Use the tool.","signature":"` + sig + `"},{"type":"redacted_thinking","data":"` + data + `"},`
	for _, tc := range []struct{ name, body, want string }{
		{"blocks dropped", loop(``), "Expected `thinking` or `redacted_thinking`, but found `tool_use`"},
		{"text before the blocks", loop(`{"type":"text","text":"so"},` + signed), "Expected `thinking` or `redacted_thinking`, but found `text`"},
		{"thinking changed", loop(`{"type":"thinking","thinking":"Use it.","signature":"` + sig + `"},`), "Invalid `signature` in `thinking` block"},
		{"signature forged", loop(`{"type":"thinking","thinking":"Use the tool.","signature":"sig_forged"},`), "Invalid `signature` in `thinking` block"},
		{"signature missing", loop(`{"type":"thinking","thinking":"Use the tool."},`), "Invalid `signature` in `thinking` block"},
		{"redacted data forged", loop(`{"type":"thinking","thinking":"Use the tool.","signature":"` + sig + `"},{"type":"redacted_thinking","data":"x"},`), "Invalid `data` in `redacted_thinking` block"},
		{"temperature", loop(signed, `"temperature":0.5`), "`temperature` may only be set to 1 when thinking is enabled"},
		{"top_k", loop(signed, `"top_k":5`), "`top_k` must be unset when thinking is enabled"},
		{"top_p", loop(signed, `"top_p":0.5`), "`top_p` must be greater than or equal to 0.95"},
		{"forced tool use", loop(signed, `"tool_choice":{"type":"any"}`), "tool_choice forces tool use"},
		{"budget not below max_tokens", `{"model":"claude-x","max_tokens":1024,` + enabled + `,"messages":[{"role":"user","content":"a"}]}`, "`max_tokens` must be greater than `thinking.budget_tokens`"},
		{"budget below 1024", `{"model":"claude-x","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":1023},"messages":[{"role":"user","content":"a"}]}`, "greater than or equal to 1024"},
	} {
		code, body := post(t, s, v, tc.body)
		if code != 400 || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want a 400 saying %q", tc.name, code, body, tc.want)
		}
	}

	// The blocks as received: the loop goes on, and the reply continuing
	// the turn does not think again unless scripted to.
	s.Reply(Reply{Text: "done"})
	code, body = post(t, s, v, loop(signed, `"temperature":1`))
	if code != 200 || strings.Contains(body, `"thinking"`) {
		t.Fatalf("the blocks sent back: %d %s", code, body)
	}
	// A new turn thinks even when the script says nothing.
	s.Reply(Reply{Text: "hi"})
	code, body = post(t, s, v, `{"model":"claude-x","max_tokens":2000,`+enabled+`,"messages":[{"role":"user","content":"b"}]}`)
	if code != 200 || !strings.Contains(body, DefaultThinking) {
		t.Fatalf("a new turn: %d %s", code, body)
	}
}
