package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/llm/anthropictest"
	"github.com/agentd/agentd/internal/llm/openaitest"
)

// The keys of the endpoints in these tests: each must reach its own
// endpoint only, and none may appear in a response, a log line or an
// export.
const (
	keyGPT    = "sk-gpt-0123456789abcdef"
	keyLocal  = "sk-local-0123456789abcdef"
	keyAzure  = "az-key-0123456789abcdef"
	keyClaude = "sk-ant-0123456789abcdef"
	keyInFile = "sk-from-the-team-file-0123456789"
)

// fourEndpoints are a fake of each kind: two OpenAI-compatible servers, an
// Azure resource and Anthropic's Messages API.
type fourEndpoints struct {
	gpt, local, azure *openaitest.Server
	claude            *anthropictest.Server
	file              string // the models file
	env               []string
}

func startFourEndpoints(t *testing.T) *fourEndpoints {
	t.Helper()
	f := &fourEndpoints{
		gpt:    openaitest.New(openaitest.WithAPIKey(keyGPT)),
		local:  openaitest.New(openaitest.WithAPIKey(keyLocal)),
		azure:  openaitest.New(openaitest.WithAPIKey(keyAzure), openaitest.Azure("gpt4o-prod", "2024-10-21")),
		claude: anthropictest.New(anthropictest.WithAPIKey(keyClaude)),
	}
	t.Cleanup(func() { f.gpt.Close(); f.local.Close(); f.azure.Close(); f.claude.Close() })
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "claude.key")
	if err := os.WriteFile(keyFile, []byte(keyClaude+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.file = filepath.Join(dir, "models.yaml")
	yaml := fmt.Sprintf(`default: gpt
endpoints:
  - name: gpt
    kind: openai
    base_url: %s
    api_key_env: TEST_GPT_KEY
    models: ["gpt-*"]
  - name: local
    kind: openai
    base_url: %s
    api_key_env: TEST_LOCAL_KEY
    models: ["llama*", "deepseek-r1*"]
  - name: azure-prod
    kind: azure
    base_url: %s
    deployment: gpt4o-prod
    api_version: "2024-10-21"
    api_key_env: TEST_AZURE_KEY
  - name: claude
    kind: anthropic
    base_url: %s
    api_key_file: %s
    models: ["claude-*"]
`, f.gpt.URL(), f.local.URL(), f.azure.URL(), f.claude.URL(), keyFile)
	if err := os.WriteFile(f.file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	f.env = []string{"AGENTD_MODELS_FILE=" + f.file, "TEST_GPT_KEY=" + keyGPT, "TEST_LOCAL_KEY=" + keyLocal, "TEST_AZURE_KEY=" + keyAzure}
	return f
}

// noKeys fails the test when any endpoint's key (or a team file's) appears
// in what a client or an operator sees.
func noKeys(t *testing.T, what string, b []byte) {
	t.Helper()
	for _, k := range []string{keyGPT, keyLocal, keyAzure, keyClaude, keyInFile} {
		if strings.Contains(string(b), k) {
			t.Errorf("%s holds the key %s…", what, k[:8])
		}
	}
}

// problemSays reports whether a problem+json body lists a problem at path
// whose message holds says.
func problemSays(t *testing.T, body []byte, path, says string) bool {
	t.Helper()
	var p struct {
		Errors []struct{ Path, Message string }
	}
	mustUnmarshal(t, body, &p)
	for _, e := range p.Errors {
		if e.Path == path && strings.Contains(e.Message, says) {
			return true
		}
	}
	return false
}

type thoughtMessage struct {
	Seq     int64  `json:"seq"`
	Type    string `json:"type"`
	Name    string `json:"name"`
	Content string `json:"content"`
	Thought string `json:"thought"`
}

func (p *proc) thoughtMessages(id string) []thoughtMessage {
	p.t.Helper()
	code, _, b := p.do("GET", "/v1/chats/"+id+"/messages?limit=1000", nil)
	if code != http.StatusOK {
		p.t.Fatalf("messages: %d %s", code, b)
	}
	conforms(p.t, "MessageList", b)
	noKeys(p.t, "the messages", b)
	var page struct{ Messages []thoughtMessage }
	mustUnmarshal(p.t, b, &page)
	return page.Messages
}

// TestModelEndpointsOfThreeKindsInOneTeam: five agents on four endpoints of
// three kinds. Each endpoint receives only its agents' calls and only its
// own key; the Azure and Anthropic fakes, which refuse what those APIs
// refuse, answer 200; reasoning from both wire formats (reasoning_content, a
// <think> block, thinking blocks) is the messages' thought, never their
// content; an unknown endpoint and a model no endpoint serves are 422s
// listing the endpoints; no key appears in any response or log line.
//
// The analyst thinks (Anthropic's extended thinking) and runs a tool loop
// of two calls: its second call sends back the first reply's signed
// thinking block as the Messages API requires (the fake refuses the call,
// and the chat fails, without it); the block reaches no other agent and
// no client.
func TestModelEndpointsOfThreeKindsInOneTeam(t *testing.T) {
	t.Parallel()
	f := startFourEndpoints(t)
	f.gpt.Reply(openaitest.Reply{Content: "Plan: reverse it.", Reasoning: "The task is small."})
	f.local.Reply(openaitest.Text("<think>Slicing reverses.</think>\n\ns[::-1]"))
	f.azure.Reply(openaitest.Text("Reviewed: fine."))
	f.claude.Reply(anthropictest.Reply{Thinking: "Measure it first.", ToolUses: []anthropictest.ToolUse{{Name: "measure", Input: json.RawMessage(`{"s":"abc"}`)}}},
		anthropictest.Reply{Text: "It has 3 characters."},
		anthropictest.Reply{Thinking: "Check the edge cases.", Text: "Approved."})
	tools := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"length": 3}`) }))
	defer tools.Close()
	p := startAgentd(t, append(f.env, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_TOOL_ALLOW_PRIVATE=true")...)

	thinking := `"thinking": {"type": "enabled", "budget_tokens": 1024}`
	spec := fmt.Sprintf(`{"task": "Reverse a string.", "max_round": 5,
	  "tools": [{"name": "measure", "description": "Measures a string.", "parameters": {"type": "object", "properties": {"s": {"type": "string"}}},
	             "implementation": {"type": "http", "url": %q}}],
	  "agents": [
	    {"name": "planner", "type": "assistant", "system_message": "You plan.", "model": {"provider": "openai", "endpoint": "gpt", "model": "gpt-4o"}},
	    {"name": "worker", "type": "assistant", "system_message": "You code.", "model": {"provider": "openai", "model": "deepseek-r1:8b"}},
	    {"name": "reviewer", "type": "assistant", "system_message": "You review.", "model": {"provider": "azure", "model": "gpt-4o"}},
	    {"name": "analyst", "type": "assistant", "system_message": "You measure.", "tools": ["measure"], "max_tool_iterations": 2,
	     "model": {"provider": "anthropic", "model": "claude-sonnet-4-5", "max_tokens": 2048, %s}},
	    {"name": "critic", "type": "assistant", "system_message": "You criticise.", "model": {"provider": "anthropic", "model": "claude-sonnet-4-5", %s}}
	  ]}`, tools.URL, thinking, thinking)
	code, _, body := p.do("POST", "/v1/chats", []byte(spec))
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	noKeys(t, "the create response", body)
	var c chatView
	mustUnmarshal(t, body, &c)
	if final := p.waitTerminal(c.ID, 60*time.Second); final.Status != "completed" || *final.StopReason != "max_round" {
		t.Fatalf("chat = %+v", final)
	}

	for _, ep := range []struct {
		name, key, system string
		srv               *openaitest.Server
		auth              string
	}{
		{"gpt", keyGPT, "You plan.", f.gpt, "Authorization"},
		{"local", keyLocal, "You code.", f.local, "Authorization"},
		{"azure-prod", keyAzure, "You review.", f.azure, "Api-Key"},
	} {
		reqs := ep.srv.Requests()
		if len(reqs) != 1 || reqs[0].Status != http.StatusOK || reqs[0].Chat == nil || reqs[0].Chat.Messages[0].Text() != ep.system {
			t.Errorf("endpoint %s: requests %+v", ep.name, reqs)
			continue
		}
		if got := reqs[0].Header.Get(ep.auth); !strings.HasSuffix(got, ep.key) {
			t.Errorf("endpoint %s: %s = %q, want its own key", ep.name, ep.auth, got)
		}
	}
	if r := f.azure.Requests(); len(r) == 1 && (r[0].Path != "/openai/deployments/gpt4o-prod/chat/completions" || r[0].Query != "api-version=2024-10-21") {
		t.Errorf("azure request: %s?%s", r[0].Path, r[0].Query)
	}
	creqs := f.claude.Requests()
	if len(creqs) != 3 || creqs[0].Messages.SystemText() != "You measure." || creqs[1].Messages.SystemText() != "You measure." ||
		creqs[2].Messages.SystemText() != "You criticise." {
		t.Fatalf("anthropic requests: %+v", creqs)
	}
	for i, r := range creqs {
		if r.Status != http.StatusOK || string(r.Messages.Thinking) != `{"budget_tokens":1024,"type":"enabled"}` {
			t.Errorf("anthropic request %d: %d %s: %s", i, r.Status, r.Error, r.Body)
		}
		if got := r.Header.Get("Authorization") + r.Header.Get("X-Api-Key"); !strings.Contains(got, keyClaude) {
			t.Errorf("anthropic request %d carries %q, not its key", i, got)
		}
	}
	// The Messages API wants alternating turns: the earlier speakers'
	// messages and the task are one user turn.
	if m := creqs[0].Messages.Messages; len(m) != 1 || m[0].Role != "user" || len(m[0].Blocks) != 4 {
		t.Errorf("anthropic messages: %s", creqs[0].Body)
	}
	// The tool loop's second call: the assistant message that asked for the
	// tool starts with the signed thinking block of its reply.
	if m := creqs[1].Messages.Messages; len(m) != 3 || m[1].Role != "assistant" || len(m[1].Blocks) != 2 ||
		m[1].Blocks[0].Type != "thinking" || m[1].Blocks[0].Thinking != "Measure it first." || !strings.HasPrefix(m[1].Blocks[0].Signature, "sig_anthropictest") ||
		m[1].Blocks[1].Type != "tool_use" || m[2].Blocks[0].Type != "tool_result" || m[2].Blocks[0].ResultText() != `{"length": 3}` {
		t.Errorf("the tool loop's second call: %s", creqs[1].Body)
	}
	// Another agent sees the analyst's reply, never its thinking.
	if b := string(creqs[2].Body); strings.Contains(b, "sig_anthropictest") || strings.Contains(b, "Measure it first.") || !strings.Contains(b, "It has 3 characters.") {
		t.Errorf("the critic's call: %s", b)
	}
	for _, path := range []string{"/v1/chats/" + c.ID + "/messages?limit=1000", "/v1/chats/" + c.ID + "/events", "/v1/chats/" + c.ID + "/team"} {
		if _, _, b := p.do("GET", path, nil); strings.Contains(string(b), "sig_anthropictest") {
			t.Errorf("GET %s shows a thinking block's signature: %s", path, b)
		}
	}

	msgs := p.thoughtMessages(c.ID)
	want := []thoughtMessage{
		{Name: "user", Content: "Reverse a string."},
		{Name: "planner", Content: "Plan: reverse it.", Thought: "The task is small."},
		{Name: "worker", Content: "s[::-1]", Thought: "Slicing reverses."},
		{Name: "reviewer", Content: "Reviewed: fine."},
		{Name: "analyst", Content: "", Thought: "Measure it first."},
		{Name: "analyst", Content: ""},
		{Name: "analyst", Content: "It has 3 characters."},
		{Name: "critic", Content: "Approved.", Thought: "Check the edge cases."},
	}
	if len(msgs) != len(want) {
		t.Fatalf("messages = %+v", msgs)
	}
	for i, w := range want {
		if msgs[i].Name != w.Name || msgs[i].Content != w.Content || msgs[i].Thought != w.Thought {
			t.Errorf("message %d = %+v, want %+v", i, msgs[i], w)
		}
	}
	// Later speakers are not shown an earlier one's thought.
	for _, r := range f.azure.Requests() {
		if strings.Contains(string(r.Body), "Slicing reverses") || strings.Contains(string(r.Body), "task is small") {
			t.Errorf("a thought reached another model: %s", r.Body)
		}
	}

	// Create-time errors name the endpoints.
	for _, tc := range []struct{ model, path, says string }{
		{`{"provider": "openai", "endpoint": "nope", "model": "gpt-4o"}`, "/agents/0/model/endpoint", `names no endpoint of this server: "nope"; configured: "gpt" (openai: gpt-*)`},
		{`{"provider": "anthropic", "model": "gpt-4o"}`, "/agents/0/model/model", `no endpoint of kind anthropic serves model "gpt-4o"`},
		{`{"provider": "anthropic", "model": "claude-x", "temperature": 0}`, "/agents/0/model/temperature", `no temperature`},
		{`{"provider": "azure", "endpoint": "claude", "model": "gpt-4o"}`, "/agents/0/model/endpoint", `is of kind anthropic, not azure`},
	} {
		code, _, b := p.do("POST", "/v1/chats", []byte(`{"task": "x", "agents": [{"name": "a", "type": "assistant", "model": `+tc.model+`}]}`))
		conforms(t, "Problem", b)
		if code != http.StatusUnprocessableEntity || !problemSays(t, b, tc.path, tc.says) {
			t.Errorf("model %s: %d %s, want a 422 at %s saying %s", tc.model, code, b, tc.path, tc.says)
		}
	}
	_, _, b := p.do("GET", "/v1/chats/"+c.ID+"?include=spec", nil)
	noKeys(t, "the chat with its spec", b)
	_, _, b = p.do("GET", "/v1/chats/"+c.ID+"/team", nil)
	noKeys(t, "the export", b)
	noKeys(t, "the log", []byte(p.logs.String()))
	noKeys(t, "the metrics", []byte(p.scrape()))
}

// TestModelEndpointLimits: six chats on an endpoint with max_concurrency 2
// and slow replies: the endpoint never sees a third call at once, and all
// six complete, the wait shown as a metric; on an endpoint with rpm 300 the
// k-th call arrives no earlier than k × 200 ms after the first could start.
func TestModelEndpointLimits(t *testing.T) {
	t.Parallel()
	slow := openaitest.New()
	defer slow.Close()
	slow.Respond(func(openaitest.Request) openaitest.Reply {
		return openaitest.Reply{Content: "done", Delay: 400 * time.Millisecond}
	})
	paced := openaitest.New()
	defer paced.Close()
	paced.Respond(func(openaitest.Request) openaitest.Reply { return openaitest.Text("paced") })
	file := filepath.Join(t.TempDir(), "models.json")
	models := fmt.Sprintf(`{"endpoints": [
	  {"name": "slow", "kind": "openai", "base_url": %q, "max_concurrency": 2},
	  {"name": "paced", "kind": "openai", "base_url": %q, "rpm": 300}
	]}`, slow.URL(), paced.URL())
	if err := os.WriteFile(file, []byte(models), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_MODELS_FILE="+file)

	run := func(endpoint string, n int) {
		var (
			mu  sync.Mutex
			ids []string
			wg  sync.WaitGroup
		)
		for i := range n {
			wg.Go(func() {
				spec := fmt.Sprintf(`{"task": "call %d", "max_round": 1, "agents": [{"name": "a", "type": "assistant",
				  "model": {"provider": "openai", "endpoint": %q, "model": "m"}}]}`, i, endpoint)
				c := p.create([]byte(spec))
				mu.Lock()
				ids = append(ids, c.ID)
				mu.Unlock()
			})
		}
		wg.Wait()
		for _, id := range ids {
			if c := p.waitTerminal(id, 60*time.Second); c.Status != "completed" {
				t.Errorf("chat on %s: %+v", endpoint, c)
			}
		}
	}
	start := time.Now()
	run("paced", 4)
	run("slow", 6)

	if reqs := slow.Requests(); len(reqs) != 6 {
		t.Errorf("slow endpoint: %d requests, want 6", len(reqs))
	}
	if n := slow.MaxInFlight(); n > 2 {
		t.Errorf("slow endpoint saw %d calls at once, above its max_concurrency 2", n)
	} else if n < 2 {
		t.Logf("slow endpoint saw at most %d call at once (the chats did not overlap)", n)
	}
	reqs := paced.Requests()
	if len(reqs) != 4 {
		t.Fatalf("paced endpoint: %d requests", len(reqs))
	}
	first := reqs[0].Received
	if first.Before(start) {
		t.Fatalf("clock: first call at %v, before the start %v", first, start)
	}
	for k, r := range reqs {
		if min := time.Duration(k) * 200 * time.Millisecond; r.Received.Sub(start) < min {
			t.Errorf("paced call %d arrived %v after the start: rpm 300 allows it no earlier than %v", k+1, r.Received.Sub(start), min)
		}
	}
	m := p.scrape()
	for _, want := range []string{`agentd_model_queue_wait_seconds_count{endpoint="slow"} 6`, `agentd_model_queue_wait_seconds_count{endpoint="paced"} 4`,
		`agentd_model_calls_in_flight{endpoint="slow"} 0`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestTeamFileWithAzureAndAnthropicClients: an AgentChat team whose agents
// use AzureOpenAIChatCompletionClient and AnthropicChatCompletionClient (with
// extended thinking) runs on the configured endpoints with their keys, not
// the file's, the Anthropic client's thinking asked for; a client no
// endpoint serves is a 422 that lists the endpoints; the export writes the
// clients back without any key.
func TestTeamFileWithAzureAndAnthropicClients(t *testing.T) {
	t.Parallel()
	f := startFourEndpoints(t)
	f.azure.Reply(openaitest.Text("Looks right to me."))
	f.claude.Reply(anthropictest.Reply{Thinking: "Both agree.", Text: "APPROVED"})
	p := startAgentd(t, append(f.env, "AGENTD_DATA_DIR="+t.TempDir())...)

	team := func(azureEndpoint string) []byte {
		var tm map[string]any
		mustUnmarshal(t, teamFixture(t, "azure_client"), &tm)
		cfg := tm["config"].(map[string]any)
		reviewer := cfg["participants"].([]any)[0].(map[string]any)
		mc := reviewer["config"].(map[string]any)["model_client"].(map[string]any)["config"].(map[string]any)
		mc["azure_endpoint"], mc["azure_deployment"], mc["api_key"], mc["model"] = azureEndpoint, "gpt4o-prod", keyInFile, "gpt-4o"
		critic := map[string]any{}
		b, _ := json.Marshal(reviewer)
		mustUnmarshal(t, b, &critic)
		ccfg := critic["config"].(map[string]any)
		ccfg["name"] = "critic"
		ccfg["system_message"] = "You criticise."
		ccfg["model_client"] = map[string]any{
			"provider": "autogen_ext.models.anthropic.AnthropicChatCompletionClient", "component_type": "model", "version": 1, "component_version": 1,
			"config": map[string]any{"model": "claude-sonnet-4-5", "api_key": keyInFile, "max_tokens": 2048,
				"thinking": map[string]any{"type": "enabled", "budget_tokens": 1024}},
		}
		cfg["participants"] = []any{reviewer, critic}
		out, _ := json.Marshal(tm)
		return out
	}
	code, _, b := p.do("POST", "/v1/chats", teamBody(t, "Review: def rev(s): return s[::-1]", team("https://other.openai.azure.com"), ""))
	conforms(t, "Problem", b)
	if code != http.StatusUnprocessableEntity || !problemSays(t, b, "/team/config/participants/0/config/model_client", `"azure-prod" (azure: any model)`) {
		t.Errorf("a client no endpoint serves: %d %s", code, b)
	}
	noKeys(t, "the 422", b)

	c := p.createTeam(teamBody(t, "Review: def rev(s): return s[::-1]", team(f.azure.URL()), `, "max_round": 2`))
	final := p.waitTerminal(c.ID, 60*time.Second)
	if final.Status != "completed" || *final.StopDetail != "Text 'APPROVED' mentioned" {
		t.Fatalf("chat = %+v", final)
	}
	az, cl := f.azure.Requests(), f.claude.Requests()
	if len(az) != 1 || az[0].Status != 200 || az[0].Header.Get("Api-Key") != keyAzure || len(cl) != 1 || cl[0].Status != 200 ||
		!strings.Contains(cl[0].Header.Get("Authorization")+cl[0].Header.Get("X-Api-Key"), keyClaude) {
		t.Fatalf("azure %+v\nanthropic %+v", az, cl)
	}
	if string(cl[0].Messages.Thinking) != `{"budget_tokens":1024,"type":"enabled"}` {
		t.Errorf("the team file's thinking was not asked for: %s", cl[0].Body)
	}
	if len(f.gpt.Requests())+len(f.local.Requests()) != 0 {
		t.Error("the OpenAI endpoints were called")
	}
	msgs := p.thoughtMessages(c.ID)
	if len(msgs) != 3 || msgs[2].Name != "critic" || msgs[2].Content != "APPROVED" || msgs[2].Thought != "Both agree." {
		t.Errorf("messages = %+v", msgs)
	}
	code, _, b = p.do("GET", "/v1/chats/"+c.ID+"/team", nil)
	if code != http.StatusOK || !strings.Contains(string(b), "AzureOpenAIChatCompletionClient") || !strings.Contains(string(b), "AnthropicChatCompletionClient") ||
		!strings.Contains(string(b), `"azure_deployment":"gpt4o-prod"`) || !strings.Contains(string(b), `"thinking":{"budget_tokens":1024,"type":"enabled"}`) {
		t.Errorf("export: %d %s", code, b)
	}
	noKeys(t, "the export", b)
	noKeys(t, "the log", []byte(p.logs.String()))
}
