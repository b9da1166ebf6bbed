package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/llm/openaitest"
)

// AgentChat team components, dumped by AgentChat 0.7.5 itself
// (e2e/autogen/components/dump.py), with the runs AgentChat made of them.
func teamFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "internal", "component", "testdata", "agentchat", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// agentChatRun is what AgentChat's team.run returned for a fixture.
type agentChatRun struct {
	Task       string `json:"task"`
	StopReason string `json:"stop_reason"`
	Messages   []struct {
		Type    string `json:"type"`
		Source  string `json:"source"`
		Content string `json:"content"`
		// Structured is a StructuredMessage's object as model_dump_json
		// writes it.
		Structured string `json:"structured"`
	} `json:"messages"`
}

func teamBody(t *testing.T, task string, team []byte, extra string) []byte {
	t.Helper()
	tb, err := json.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(`{"task": ` + string(tb) + `, "team": ` + string(team) + extra + `}`)
}

// teamChat is the create answer in the team form.
type teamChat struct {
	chatView
	Spec     json.RawMessage `json:"spec"`
	Warnings []struct {
		Path    string `json:"path"`
		Message string `json:"message"`
	} `json:"warnings"`
}

func (p *proc) createTeam(body []byte) teamChat {
	p.t.Helper()
	code, _, b := p.do("POST", "/v1/chats", body)
	if code != http.StatusCreated {
		p.t.Fatalf("create from a team: %d %s", code, b)
	}
	conforms(p.t, "Chat", b)
	var c teamChat
	mustUnmarshal(p.t, b, &c)
	if c.Warnings == nil {
		p.t.Fatalf("no warnings array in the answer to a team: %s", b)
	}
	return c
}

type typedMessage struct {
	Type          string          `json:"type"`
	Name          string          `json:"name"`
	Content       string          `json:"content"`
	Structured    json.RawMessage `json:"structured"`
	ToolResponses []struct {
		Content string `json:"content"`
		IsError bool   `json:"is_error"`
	} `json:"tool_responses"`
}

func (p *proc) typedMessages(id string) []typedMessage {
	p.t.Helper()
	_, _, b := p.do("GET", "/v1/chats/"+id+"/messages?limit=1000", nil)
	var page struct{ Messages []typedMessage }
	mustUnmarshal(p.t, b, &page)
	return page.Messages
}

// TestAgentChatTeamsRunLikeAgentChat: real RoundRobinGroupChat,
// SelectorGroupChat and Swarm components run to completion, and agentd's
// messages and stop text are those of AgentChat's own run of the same team.
func TestAgentChatTeamsRunLikeAgentChat(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, env []string) {
		p := startAgentd(t, env...)
		// "example" is examples/agentchat-team.json, the guide's example (docs/autogen.md).
		for _, name := range []string{"round_robin", "selector", "swarm", "example", "contexts", "structured", "graph_sequence", "graph_loop", "graph_groups", "graph_message_filter", "som_round_robin", "som_inner_selector", "magentic_custom"} {
			t.Run(name, func(t *testing.T) {
				b, err := os.ReadFile(filepath.Join("..", "internal", "component", "testdata", "runs", name+".json"))
				if err != nil {
					t.Fatal(err)
				}
				var want agentChatRun
				mustUnmarshal(t, b, &want)
				var team []byte
				if name == "example" {
					team = readExample(t, "agentchat-team.json")
				} else {
					team = teamFixture(t, name)
				}
				c := p.createTeam(teamBody(t, want.Task, team, ""))
				final := p.waitTerminal(c.ID, 30*time.Second)
				if final.Status != "completed" || final.StopDetail == nil || *final.StopDetail != want.StopReason {
					t.Fatalf("chat = %+v, want completed with %q", final, want.StopReason)
				}
				got := p.typedMessages(c.ID)
				if len(got) != len(want.Messages) {
					t.Fatalf("%d messages, AgentChat had %d:\n%+v", len(got), len(want.Messages), got)
				}
				for i, w := range want.Messages {
					g := got[i]
					// A message's type is compared once agentd reports one.
					if g.Type != "" && g.Type != w.Type || g.Name != w.Source {
						t.Errorf("message %d = %s from %s, AgentChat: %s from %s", i, g.Type, g.Name, w.Type, w.Source)
					}
					// Tool events are compared by kind and source: AgentChat's
					// to_text() renders Python reprs of calls and results.
					if !strings.HasPrefix(w.Type, "ToolCall") && g.Content != w.Content {
						t.Errorf("message %d content = %q, AgentChat: %q", i, g.Content, w.Content)
					}
					// A structured object byte for byte: its fields in the
					// type's order, also after the spec went through jsonb.
					if string(g.Structured) != w.Structured {
						t.Errorf("message %d structured = %s, AgentChat: %s", i, g.Structured, w.Structured)
					}
				}
			})
		}
	})
}

// TestAgentChatTeamWithFiveRefusedParts: one 422 lists every refused part (its
// FunctionTool is none: it runs in the sandbox), each with the JSON path and
// provider; nothing is created. A team that is accepted
// keeps the Idempotency-Key semantics of a spec.
func TestAgentChatTeamWithFiveRefusedParts(t *testing.T) {
	t.Parallel()
	// Its FunctionTool is not one: it runs in the sandbox.
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir())
	code, _, b := p.do("POST", "/v1/chats", teamBody(t, "go", teamFixture(t, "refused_five"), ""))
	if code != http.StatusUnprocessableEntity {
		t.Fatalf("status %d: %s", code, b)
	}
	conforms(t, "Problem", b)
	var prob struct {
		Errors []struct{ Path, Message string }
	}
	mustUnmarshal(t, b, &prob)
	if len(prob.Errors) != 4 {
		t.Fatalf("%d problems, want 4: %s", len(prob.Errors), b)
	}
	for _, e := range prob.Errors {
		if !strings.HasPrefix(e.Path, "/team/config/") || !strings.Contains(e.Message, `provider "`) {
			t.Errorf("problem without a path into the team or a provider: %+v", e)
		}
	}
	_, _, list := p.do("GET", "/v1/chats", nil)
	if !bytes.Contains(list, []byte(`"chats":[]`)) {
		t.Errorf("a chat was created: %s", list)
	}

	// The team form keeps Idempotency-Key semantics: same key and team,
	// same chat.
	body := teamBody(t, "go", teamFixture(t, "round_robin"), "")
	first := p.createTeam(body)
	code, _, b = p.do("POST", "/v1/chats", body, "Idempotency-Key", "team-1")
	if code != http.StatusCreated {
		t.Fatalf("with a key: %d %s", code, b)
	}
	var c teamChat
	mustUnmarshal(t, b, &c)
	code, _, b = p.do("POST", "/v1/chats", body, "Idempotency-Key", "team-1")
	var again teamChat
	mustUnmarshal(t, b, &again)
	if code != http.StatusOK || again.ID != c.ID || c.ID == first.ID {
		t.Errorf("repeat with the key: %d %s (first %s)", code, b, c.ID)
	}
	conforms(t, "Chat", b)
}

// TestAgentChatTeamExportRoundTrips: the exported team, posted again, makes
// the same spec; a native spec exports too, and one AgentChat cannot
// express gets a 422 listing why.
func TestAgentChatTeamExportRoundTrips(t *testing.T) {
	t.Parallel()
	// Endpoints for the fixtures' model clients (OpenAI, the Azure
	// deployments they name, Anthropic); no model is called here. The
	// assistant_options fixture's MCP workbench is on loopback, which only an
	// operator's AGENTD_TOOL_ALLOW_PRIVATE lets a spec name.
	fake := openaitest.New()
	defer fake.Close()
	models := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(models, []byte(`endpoints:
  - {name: openai, kind: openai, base_url: "`+fake.URL()+`"}
  - {name: azure-gpt4o, kind: azure, base_url: "https://example.openai.azure.com", deployment: gpt4o-prod, api_version: "2024-06-01", api_key_env: AZ_KEY}
  - {name: azure-review, kind: azure, base_url: "https://example.openai.azure.com", deployment: review-prod, api_version: "2024-06-01", api_key_env: AZ_KEY}
  - {name: claude, kind: anthropic, api_key_env: ANT_KEY, models: ["claude-*"]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_MODELS_FILE="+models, "AZ_KEY=az-server-key", "ANT_KEY=sk-ant-server",
		"AGENTD_TOOL_ALLOW_PRIVATE=true")
	for _, name := range []string{"round_robin", "selector", "swarm", "terminations", "assistant_options", "openai_client", "azure_client", "anthropic_client", "structured", "magentic_one", "magentic_custom"} {
		first := p.createTeam(teamBody(t, "go", teamFixture(t, name), ""))
		code, _, exported := p.do("GET", "/v1/chats/"+first.ID+"/team", nil)
		if code != http.StatusOK {
			t.Fatalf("%s: export: %d %s", name, code, exported)
		}
		conforms(t, "TeamComponent", exported)
		second := p.createTeam(teamBody(t, "go", exported, ""))
		if !bytes.Equal(first.Spec, second.Spec) {
			t.Errorf("%s: the export made another spec:\nfirst  %s\nsecond %s", name, first.Spec, second.Spec)
		}
		p.do("POST", "/v1/chats/"+first.ID+"/cancel", nil)
		p.do("POST", "/v1/chats/"+second.ID+"/cancel", nil)
	}

	native := p.create(readExample(t, "swarm-triage.json"))
	code, _, b := p.do("GET", "/v1/chats/"+native.ID+"/team", nil)
	if code != http.StatusOK {
		t.Fatalf("export of a native swarm: %d %s", code, b)
	}
	conforms(t, "TeamComponent", b)
	if !bytes.Contains(b, []byte(`"provider":"autogen_agentchat.teams.Swarm"`)) {
		t.Errorf("not a Swarm: %s", b)
	}

	random := p.create(readExample(t, "random-brainstorm.json"))
	code, _, b = p.do("GET", "/v1/chats/"+random.ID+"/team", nil)
	if code != http.StatusUnprocessableEntity || !bytes.Contains(b, []byte("/speaker_selection/method")) {
		t.Fatalf("export of random selection: %d %s", code, b)
	}
	conforms(t, "Problem", b)

	code, _, _ = p.do("GET", "/v1/chats/00000000-0000-0000-0000-000000000000/team", nil)
	if code != http.StatusNotFound {
		t.Errorf("export of an unknown chat: %d", code)
	}
}

// TestAgentChatOpenAIClientUsesTheServersEndpoint: an
// OpenAIChatCompletionClient with a key and a base_url in the file that no
// endpoint of the server has calls the server's endpoint that serves its
// model, with that endpoint's key and the file's model and options, and the
// answer says that the file's key was ignored and which endpoint is used;
// an AzureOpenAIChatCompletionClient on a server without an azure endpoint
// is a 422 that lists the endpoints.
func TestAgentChatOpenAIClientUsesTheServersEndpoint(t *testing.T) {
	t.Parallel()
	fake := openaitest.New(openaitest.WithAPIKey("sk-server-key"))
	defer fake.Close()
	fake.Reply(openaitest.Text("Looks right. APPROVED"))
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "OPENAI_API_KEY=sk-server-key", "OPENAI_BASE_URL="+fake.URL())
	c := p.createTeam(teamBody(t, "Review: def rev(s): return s[::-1]", teamFixture(t, "openai_client"), ""))
	var said []string
	for _, w := range c.Warnings {
		said = append(said, w.Message)
	}
	if all := strings.Join(said, "\n"); len(c.Warnings) != 2 || !strings.Contains(all, `ignored: api_key; agentd calls the model through its endpoint "openai"`) ||
		!strings.Contains(all, `the model is called through endpoint "openai"`) {
		t.Errorf("warnings = %+v, want the file's key ignored and its base URL unserved", c.Warnings)
	}
	final := p.waitTerminal(c.ID, 30*time.Second)
	if final.Status != "completed" || *final.StopDetail != "Text 'APPROVED' mentioned" {
		t.Fatalf("chat = %+v", final)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 || reqs[0].Status != http.StatusOK || reqs[0].Chat == nil {
		t.Fatalf("requests = %+v", reqs)
	}
	chat := reqs[0].Chat
	// go-openai cannot send a zero temperature; internal/llm sends the
	// smallest float32 instead.
	if chat.Model != "gpt-4o-mini" || chat.Temperature == nil || *chat.Temperature > 1e-6 ||
		chat.Messages[0].Text() != "You review code. Say APPROVED when it is right." {
		t.Errorf("request = %s", reqs[0].Body)
	}

	code, _, b := p.do("POST", "/v1/chats", teamBody(t, "Review.", teamFixture(t, "azure_client"), ""))
	if code != http.StatusUnprocessableEntity || !problemSays(t, b, "/team/config/participants/0/config/model_client", `"openai" (openai: any model)`) {
		t.Errorf("an Azure client without an azure endpoint: %d %s", code, b)
	}
}

// TestAgentChatUserProxyTakesInputOverHTTP: a UserProxyAgent asks for its
// input through pending_input and POST /input.
func TestAgentChatUserProxyTakesInputOverHTTP(t *testing.T) {
	t.Parallel()
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir())
	c := p.createTeam(teamBody(t, "Draft a reply.", teamFixture(t, "human"), `, "max_round": 6`))
	_, pending := p.waitPause(c.ID, "")
	if pending.Kind != "message" || pending.Agent != "reviewer" {
		t.Fatalf("pending = %+v", pending)
	}
	if code, b := p.input(c.ID, map[string]string{"request_id": pending.RequestID, "content": "Make it shorter."}); code != http.StatusAccepted {
		t.Fatalf("input: %d %s", code, b)
	}
	final := p.waitTerminal(c.ID, 30*time.Second)
	if final.Status != "completed" || *final.StopDetail != "Text 'APPROVE' mentioned" {
		t.Fatalf("chat = %+v", final)
	}
	msgs := p.typedMessages(c.ID)
	if len(msgs) != 4 || msgs[2].Name != "reviewer" || msgs[2].Content != "Make it shorter." || msgs[3].Content != "Revised. APPROVE" {
		t.Errorf("messages = %+v", msgs)
	}
}

// TestAgentChatCodeExecutorRunsInTheSandbox: a CodeExecutorAgent with a
// DockerCommandLineCodeExecutor runs the code in agentd's sandbox.
func TestAgentChatCodeExecutorRunsInTheSandbox(t *testing.T) {
	t.Parallel()
	sandboxes(t, func(t *testing.T, env []string) {
		p := startAgentd(t, append(env, "AGENTD_DATA_DIR="+t.TempDir())...)
		c := p.createTeam(teamBody(t, "Print 6 times 7.", teamFixture(t, "code_executor"), ""))
		final := p.waitTerminal(c.ID, 60*time.Second)
		if final.Status != "completed" {
			t.Fatalf("chat = %+v", final)
		}
		msgs := p.typedMessages(c.ID)
		if len(msgs) != 3 || msgs[2].Name != "executor" || !strings.Contains(msgs[2].Content, "42") {
			t.Fatalf("messages = %+v", msgs)
		}
	})
}

// functionTeam is an AgentChat team file whose assistant calls a
// FunctionTool with the given source twice (a replay model), then says
// DONE.
func functionTeam(source string) []byte {
	src, _ := json.Marshal(source)
	return []byte(`{"provider": "autogen_agentchat.teams.RoundRobinGroupChat", "component_type": "team", "config": {
  "participants": [{"provider": "autogen_agentchat.agents.AssistantAgent", "component_type": "agent", "config": {
    "name": "weather",
    "model_client": {"provider": "autogen_ext.models.replay.ReplayChatCompletionClient", "component_type": "replay_chat_completion_client", "config": {
      "chat_completions": [
        {"finish_reason": "function_calls", "content": [{"id": "c1", "name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 2.0}"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}, "cached": false},
        {"finish_reason": "function_calls", "content": [{"id": "c2", "name": "get_weather", "arguments": "{\"city\": \"Atlantis\"}"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}, "cached": false},
        "DONE"]}},
    "workbench": [{"provider": "autogen_core.tools.StaticStreamWorkbench", "component_type": "workbench", "config": {"tools": [
      {"provider": "autogen_core.tools.FunctionTool", "component_type": "tool", "config": {
        "source_code": ` + string(src) + `, "name": "get_weather", "description": "Get the weather.",
        "global_imports": [{"module": "typing", "imports": ["Annotated"]}], "has_cancellation_support": false}}]}}]}}],
  "termination_condition": {"provider": "autogen_agentchat.conditions.TextMentionTermination", "component_type": "termination", "config": {"text": "DONE"}},
  "max_turns": 3}}`)
}

// TestAgentChatFunctionToolRunsInTheSandbox: a team file's FunctionTool runs
// in the chat's sandbox through the real binary, with the schema AgentChat
// derives; its exception is an error result and the chat goes on; a
// signature agentd cannot translate is a 422 naming the parameter.
func TestAgentChatFunctionToolRunsInTheSandbox(t *testing.T) {
	t.Parallel()
	sandboxes(t, func(t *testing.T, env []string) {
		p := startAgentd(t, append(env, "AGENTD_DATA_DIR="+t.TempDir())...)
		src := "def get_weather(city: Annotated[str, 'The city'], days: int = 1) -> dict:\n" +
			"    if city == 'Atlantis':\n        raise ValueError('no such city: ' + city)\n" +
			"    return {'city': city, 'days': days, 'sandboxed': __import__('os').environ.get('HOME') == '/work'}\n"
		c := p.createTeam(teamBody(t, "Weather in Paris?", functionTeam(src), ""))
		final := p.waitTerminal(c.ID, 90*time.Second)
		if final.Status != "completed" {
			t.Fatalf("chat = %+v", final)
		}
		var results []string
		for _, m := range p.typedMessages(c.ID) {
			for _, r := range m.ToolResponses {
				results = append(results, r.Content)
			}
		}
		want := []string{"{'city': 'Paris', 'days': 2, 'sandboxed': True}", "no such city: Atlantis"}
		if !slices.Equal(results, want) {
			t.Errorf("tool results = %q, want %q", results, want)
		}

		code, _, b := p.do("POST", "/v1/chats", teamBody(t, "x", functionTeam("def get_weather(when: datetime) -> str:\n    return ''\n"), ""))
		if code != http.StatusUnprocessableEntity || !bytes.Contains(b, []byte(`/team/config/participants/0/config/workbench/0/config/tools/0/config/source_code`)) ||
			!bytes.Contains(b, []byte(`parameter \"when\"`)) {
			t.Errorf("an untranslatable signature: %d %s", code, b)
		}
	})
}

// TestAgentChatFunctionToolIsContained: a team file's FunctionTool that
// tries the network, a file of the host, a fork bomb and 10 GB of memory,
// each in a turn of its own, gets an error result each time through the
// real binary on both sandbox backends, and the chat goes on: the next
// call of the same function works and the chat completes.
func TestAgentChatFunctionToolIsContained(t *testing.T) {
	t.Parallel()
	// A file any user of the host may read: the sandbox must not see it.
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(dir, "host-secret.txt")
	if err := os.WriteFile(secret, []byte("host secret 51c3"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := "def escape(kind: str) -> str:\n" +
		"    import os, socket\n" +
		"    if kind == 'network':\n        socket.create_connection(('1.1.1.1', 53), timeout=3)\n        return 'connected'\n" +
		"    if kind == 'host_file':\n        return open(" + strconv.Quote(secret) + ").read()\n" +
		"    if kind == 'fork_bomb':\n        while True:\n            os.fork()\n" +
		"    if kind == 'memory':\n        blocks = [bytearray(1024 * 1024) for _ in range(10 * 1024)]\n        return 'allocated 10 GB'\n" +
		"    return 'ok'\n"
	kinds := []string{"network", "host_file", "fork_bomb", "memory", "fine"}
	var replies []string
	for i, k := range kinds {
		replies = append(replies, fmt.Sprintf(`{"finish_reason": "function_calls", "content": [{"id": "c%d", "name": "escape", "arguments": "{\"kind\": \"%s\"}"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}, "cached": false}`, i, k))
	}
	replies = append(replies, `"DONE"`)
	s, _ := json.Marshal(src)
	team := []byte(`{"provider": "autogen_agentchat.teams.RoundRobinGroupChat", "component_type": "team", "config": {
  "participants": [{"provider": "autogen_agentchat.agents.AssistantAgent", "component_type": "agent", "config": {
    "name": "prober",
    "model_client": {"provider": "autogen_ext.models.replay.ReplayChatCompletionClient", "component_type": "replay_chat_completion_client", "config": {
      "chat_completions": [` + strings.Join(replies, ",") + `]}},
    "workbench": [{"provider": "autogen_core.tools.StaticStreamWorkbench", "component_type": "workbench", "config": {"tools": [
      {"provider": "autogen_core.tools.FunctionTool", "component_type": "tool", "config": {
        "source_code": ` + string(s) + `, "name": "escape", "description": "Tries to leave the sandbox.",
        "global_imports": [], "has_cancellation_support": false}}]}}]}}],
  "termination_condition": {"provider": "autogen_agentchat.conditions.TextMentionTermination", "component_type": "termination", "config": {"text": "DONE"}},
  "max_turns": 6}}`)
	sandboxes(t, func(t *testing.T, env []string) {
		p := startAgentd(t, append(env, "AGENTD_DATA_DIR="+t.TempDir())...)
		c := p.createTeam(teamBody(t, "Probe the sandbox.", team, ""))
		final := p.waitTerminal(c.ID, 4*time.Minute)
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
		if len(results) != len(kinds) {
			t.Fatalf("tool results = %q, want one per call of %q", results, kinds)
		}
		for i, k := range kinds[:4] {
			if !errs[i] || strings.Contains(results[i], "host secret") {
				t.Errorf("%s was not contained: %q", k, results[i])
			}
			t.Logf("%s: %s", k, results[i])
		}
		if results[4] != "ok" || errs[4] {
			t.Errorf("the call after them = %q, want ok", results[4])
		}
	})
}

// TestAgentChatHttpToolCallsItsAPIWithASecret: a team file's HttpTool,
// whose Authorization header names a server secret, calls a real local REST
// API through the binary as HttpTool does; the API receives the secret's
// value, and the value appears in no response (the chat, its spec, its
// messages, its export) and in no log line. A file naming a secret the
// server lacks is a 422 at the header.
func TestAgentChatHttpToolCallsItsAPIWithASecret(t *testing.T) {
	t.Parallel()
	const secret = "Bearer e2e-secret-4711"
	type seen struct{ target, auth string }
	got := make(chan seen, 4)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.RequestURI, r.Header.Get("Authorization")}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"count": 2, "open": true, "titles": ["a", "b"]}`)
	}))
	t.Cleanup(api.Close)
	u, err := url.Parse(api.URL)
	if err != nil {
		t.Fatal(err)
	}
	team := func(secretName string) []byte {
		return []byte(`{"provider": "autogen_agentchat.teams.RoundRobinGroupChat", "component_type": "team", "config": {
  "participants": [{"provider": "autogen_agentchat.agents.AssistantAgent", "component_type": "agent", "config": {
    "name": "triager",
    "model_client": {"provider": "autogen_ext.models.replay.ReplayChatCompletionClient", "component_type": "replay_chat_completion_client", "config": {
      "chat_completions": [
        {"finish_reason": "function_calls", "content": [{"id": "c1", "name": "list_issues", "arguments": "{\"owner\": \"agentd\", \"repo\": \"server\", \"state\": \"open\"}"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}, "cached": false},
        "DONE"]}},
    "workbench": [{"provider": "autogen_core.tools.StaticStreamWorkbench", "component_type": "workbench", "config": {"tools": [
      {"provider": "autogen_ext.tools.http.HttpTool", "component_type": "tool", "config": {
        "name": "list_issues", "description": "List a repository's issues.", "scheme": "http", "host": "` + u.Hostname() + `", "port": ` + u.Port() + `,
        "path": "/repos/{owner}/{repo}/issues", "method": "GET", "return_type": "json", "timeout": 5.0,
        "headers": {"Authorization": {"secret": "` + secretName + `"}},
        "json_schema": {"type": "object", "properties": {"owner": {"type": "string"}, "repo": {"type": "string"}, "state": {"type": "string"}}, "required": ["owner", "repo"]}}}]}}]}}],
  "termination_condition": {"provider": "autogen_agentchat.conditions.TextMentionTermination", "component_type": "termination", "config": {"text": "DONE"}},
  "max_turns": 3}}`)
	}
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_TOOL_ALLOW_PRIVATE=true", `AGENTD_TOOL_SECRETS={"github": "`+secret+`"}`)
	c := p.createTeam(teamBody(t, "How many open issues?", team("github"), ""))
	final := p.waitTerminal(c.ID, 90*time.Second)
	if final.Status != "completed" {
		t.Fatalf("chat = %+v", final)
	}
	select {
	case s := <-got:
		if s.target != "/repos/agentd/server/issues?state=open" || s.auth != secret {
			t.Errorf("the API saw %+v", s)
		}
	default:
		t.Fatal("the API was not called")
	}
	var results []string
	for _, m := range p.typedMessages(c.ID) {
		for _, r := range m.ToolResponses {
			results = append(results, r.Content)
		}
	}
	if want := []string{"{'count': 2, 'open': True, 'titles': ['a', 'b']}"}; !slices.Equal(results, want) {
		t.Errorf("tool results = %q, want %q", results, want)
	}
	for _, path := range []string{"/v1/chats/" + c.ID + "?include=spec", "/v1/chats/" + c.ID + "/messages", "/v1/chats/" + c.ID + "/events", "/v1/chats/" + c.ID + "/team"} {
		code, _, b := p.do("GET", path, nil)
		if code != http.StatusOK || !bytes.Contains(b, []byte("github")) && strings.HasSuffix(path, "/team") {
			t.Errorf("GET %s: %d %.300s", path, code, b)
		}
		if bytes.Contains(b, []byte("e2e-secret")) {
			t.Errorf("GET %s shows the secret's value", path)
		}
	}
	if strings.Contains(p.logs.String(), "e2e-secret") {
		t.Error("the log shows the secret's value")
	}

	code, _, b := p.do("POST", "/v1/chats", teamBody(t, "x", team("gitlab"), ""))
	if code != http.StatusUnprocessableEntity ||
		!bytes.Contains(b, []byte(`/team/config/participants/0/config/workbench/0/config/tools/0/config/headers/Authorization/secret`)) ||
		!bytes.Contains(b, []byte("defined: github")) {
		t.Errorf("a secret the server lacks: %d %s", code, b)
	}
}
