package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestSandboxNetworkThroughEgressProxy: the operator permits a host; a spec
// that asks for another is a 422 naming it; a chat that asks for the
// permitted one reaches it from its code through agentd's egress proxy, and
// is refused elsewhere, on both sandbox backends.
func TestSandboxNetworkThroughEgressProxy(t *testing.T) {
	t.Parallel()
	sandboxes(t, func(t *testing.T, env []string) {
		var forbidden atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/forbidden" {
				forbidden.Add(1)
			}
			fmt.Fprint(w, "egress-ok-5150")
		}))
		defer srv.Close()
		port := srv.Listener.Addr().(*net.TCPAddr).Port
		host := fmt.Sprintf("localhost:%d", port)
		p := startAgentd(t, append(env, "AGENTD_DATA_DIR="+t.TempDir(),
			fmt.Sprintf("AGENTD_SANDBOX_ALLOW_HOSTS=%s,127.0.0.1:%d", host, port))...)

		spec := func(allow ...string) []byte {
			b, _ := json.Marshal(allow)
			code := fmt.Sprintf(`import urllib.request
for u in ("http://%s/ok", "http://127.0.0.1:%d/forbidden", "http://evil.example/forbidden"):
    try:
        print(u, urllib.request.urlopen(u, timeout=20).read().decode())
    except Exception as e:
        print(u, "refused:", e)
`, host, port)
			return []byte(`{"task": "fetch", "max_round": 4,
				"agents": [{"name": "coder", "type": "assistant", "model": {"provider": "replay", "responses": [
				             ` + mustJSON(t, "```python\n"+code+"```") + `, "done TERMINATE"]}},
				           {"name": "executor", "type": "user_proxy", "human_input_mode": "NEVER", "code_execution": {"timeout_s": 60}}],
				"sandbox": {"memory_mb": 256, "network": {"allow": ` + string(b) + `}},
				"termination": {"text_mention": {"text": "TERMINATE"}}}`)
		}

		code, _, body := p.do("POST", "/v1/chats", spec(host, "pypi.org", "evil.example:443"))
		if code != http.StatusUnprocessableEntity {
			t.Fatalf("a spec asking for hosts the server does not permit: %d %s", code, body)
		}
		var prob struct {
			Errors []struct{ Path, Message string }
		}
		mustUnmarshal(t, body, &prob)
		if len(prob.Errors) != 2 || prob.Errors[0].Path != "/sandbox/network/allow/1" || prob.Errors[1].Path != "/sandbox/network/allow/2" ||
			!strings.Contains(prob.Errors[0].Message, `"pypi.org"`) {
			t.Fatalf("problems = %s", body)
		}

		c := p.create(spec(host))
		final := p.waitTerminal(c.ID, 90*time.Second)
		msgs := p.messages(c.ID)
		if final.Status != "completed" || len(msgs) < 3 {
			t.Fatalf("chat = %+v, messages %+v", final, msgs)
		}
		out := msgs[2].Content
		t.Logf("executor:\n%s", out)
		for _, want := range []string{"/ok egress-ok-5150", "/forbidden refused: HTTP Error 403: agentd egress:", "sandbox.network.allow"} {
			if !strings.Contains(out, want) {
				t.Errorf("executor output lacks %q", want)
			}
		}
		if n := forbidden.Load(); n != 0 {
			t.Errorf("the forbidden path was reached %d times", n)
		}
		metrics := p.scrape()
		for _, want := range []string{`agentd_sandbox_egress_connections_total{outcome="allowed"} 1`, `agentd_sandbox_egress_refused_total{reason="host_not_allowed"} 2`} {
			if !strings.Contains(metrics, want) {
				t.Errorf("metrics lack %s", want)
			}
		}
		if logs := p.logs.String(); !strings.Contains(logs, "egress refused") || !strings.Contains(logs, c.ID) {
			t.Error("no log line of the refusal with the chat id")
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAgentChatFunctionToolReachesAllowedHost: a team file's FunctionTool
// runs in the sandbox with the network policy of the request's own
// sandbox.network (agentd's extension of a team file): it fetches a page
// from the allowed host, and a fetch elsewhere is an error result.
func TestAgentChatFunctionToolReachesAllowedHost(t *testing.T) {
	t.Parallel()
	sandboxes(t, func(t *testing.T, env []string) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "<html><body>page of the local web 8086</body></html>")
		}))
		defer srv.Close()
		port := srv.Listener.Addr().(*net.TCPAddr).Port
		host := fmt.Sprintf("localhost:%d", port)
		p := startAgentd(t, append(env, "AGENTD_DATA_DIR="+t.TempDir(),
			fmt.Sprintf("AGENTD_SANDBOX_ALLOW_HOSTS=%s,127.0.0.1:%d", host, port))...)
		src := "def fetch_webpage(url: str) -> str:\n" +
			"    import urllib.request\n" +
			"    return urllib.request.urlopen(url, timeout=20).read().decode()\n"
		call := func(id, url string) string {
			args, _ := json.Marshal(map[string]string{"url": url})
			return fmt.Sprintf(`{"finish_reason": "function_calls", "content": [{"id": %q, "name": "fetch_webpage", "arguments": %s}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}, "cached": false}`,
				id, mustJSON(t, string(args)))
		}
		team := []byte(`{"provider": "autogen_agentchat.teams.RoundRobinGroupChat", "component_type": "team", "config": {
  "participants": [{"provider": "autogen_agentchat.agents.AssistantAgent", "component_type": "agent", "config": {
    "name": "researcher",
    "model_client": {"provider": "autogen_ext.models.replay.ReplayChatCompletionClient", "component_type": "replay_chat_completion_client", "config": {
      "chat_completions": [` + call("c1", "http://"+host+"/page") + `, ` + call("c2", fmt.Sprintf("http://127.0.0.1:%d/page", port)) + `, "DONE"]}},
    "workbench": [{"provider": "autogen_core.tools.StaticStreamWorkbench", "component_type": "workbench", "config": {"tools": [
      {"provider": "autogen_core.tools.FunctionTool", "component_type": "tool", "config": {
        "source_code": ` + mustJSON(t, src) + `, "name": "fetch_webpage", "description": "Fetch a web page.",
        "global_imports": [], "has_cancellation_support": false}}]}}]}}],
  "termination_condition": {"provider": "autogen_agentchat.conditions.TextMentionTermination", "component_type": "termination", "config": {"text": "DONE"}},
  "max_turns": 3}}`)
		c := p.createTeam(teamBody(t, "Read the page.", team, `, "sandbox": {"network": {"allow": [`+mustJSON(t, host)+`]}}`))
		final := p.waitTerminal(c.ID, 2*time.Minute)
		if final.Status != "completed" {
			t.Fatalf("chat = %+v", final)
		}
		var results []string
		var errs []bool
		for _, m := range p.typedMessages(c.ID) {
			for _, r := range m.ToolResponses {
				results = append(results, r.Content)
				errs = append(errs, r.IsError)
			}
		}
		if len(results) != 2 {
			t.Fatalf("tool results = %q", results)
		}
		if errs[0] || !strings.Contains(results[0], "page of the local web 8086") {
			t.Errorf("the allowed fetch = %q (error %v)", results[0], errs[0])
		}
		if !errs[1] || !strings.Contains(results[1], "403") || !strings.Contains(results[1], "sandbox.network.allow") {
			t.Errorf("the fetch elsewhere = %q (error %v), want the proxy's refusal", results[1], errs[1])
		}
	})
}
