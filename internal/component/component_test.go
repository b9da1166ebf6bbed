package component

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/tool"
)

var update = flag.Bool("update", false, "rewrite the golden specs and exports in testdata")

// Fixtures dumped by AgentChat 0.7.5 (e2e/autogen/components/dump.py) that
// agentd accepts; refused_five is the one it refuses.
var accepted = []string{"round_robin", "selector", "swarm", "assistant_options", "openai_client", "azure_client", "anthropic_client", "human", "code_executor", "terminations", "function_tools", "http_tools", "contexts", "structured",
	"graph_sequence", "graph_loop", "graph_fan_out_all", "graph_fan_out_any", "graph_groups", "graph_message_filter",
	"som_round_robin", "som_inner_selector", "magentic_one", "magentic_custom"}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "agentchat", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// request wraps a team in a POST /v1/chats body.
func request(t *testing.T, team []byte, extra string) []byte {
	t.Helper()
	body := `{"task": "go", "team": ` + string(team) + extra + `}`
	return []byte(body)
}

// specOf translates a request body and decodes the spec it makes.
func specOf(t *testing.T, body []byte) (*spec.Spec, *Request) {
	t.Helper()
	req, err := ParseRequest(body, testEPs)
	if err != nil {
		t.Fatalf("ParseRequest: %v", err)
	}
	if req == nil {
		t.Fatal("ParseRequest: not a team request")
	}
	sp, probs := spec.DecodeSpec(req.Spec)
	if len(probs) > 0 {
		t.Fatalf("DecodeSpec of the translated spec: %v\n%s", probs, req.Spec)
	}
	return sp, req
}

// acceptAll is a tool checker that accepts every definition: the tool
// checks themselves are internal/tool's and are tested there (and in e2e).
type acceptAll struct{ chat.Tools }

func (acceptAll) CheckTool(*spec.Tool) []spec.Problem { return nil }

var env = spec.Env{Providers: []string{"openai", "azure", "anthropic"}, Tools: acceptAll{}, Sandbox: "bwrap"}

// testEPs are the model endpoints of the tests' server: the real routing of
// internal/llm, seen through Endpoints as cmd/agentd wires it.
var testEPs = newTestEndpoints()

type llmEndpoints struct{ c *llm.Client }

func (e llmEndpoints) Match(m ModelClient) (string, error) {
	return e.c.MatchEndpoint(llm.ClientRef{Kind: m.Kind, Model: m.Model, BaseURL: m.BaseURL, Deployment: m.Deployment})
}

func (e llmEndpoints) Describe(name string) (EndpointInfo, bool) {
	info, ok := e.c.EndpointInfo(name)
	return EndpointInfo{Kind: info.Kind, BaseURL: info.BaseURL, APIVersion: info.APIVersion, Deployment: info.Deployment}, ok
}

func newTestEndpoints() Endpoints {
	c, err := llm.New(llm.Config{Endpoints: []llm.Endpoint{
		{Name: "openai", Kind: "openai", APIKey: "sk-server"},
		{Name: "azure-review", Kind: "azure", BaseURL: "https://example.openai.azure.com", Deployment: "review-prod", APIVersion: "2024-06-01", APIKey: "az-server"},
		{Name: "azure-gpt4o", Kind: "azure", BaseURL: "https://example.openai.azure.com", Deployment: "gpt4o-prod", APIVersion: "2024-06-01", APIKey: "az-server"},
		{Name: "claude", Kind: "anthropic", APIKey: "sk-ant-server", Models: []string{"claude-*"}},
	}})
	if err != nil {
		panic(err)
	}
	return llmEndpoints{c: c}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatal(err)
	}
	buf.WriteByte('\n')
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(want, buf.Bytes()) {
		t.Errorf("%s differs from what the code produces now:\n%s\n(run go test -update after checking the change)", path, buf.Bytes())
	}
}

// TestAcceptedFixtures: every fixture of a supported component translates
// without problems into a spec that passes the spec's own validation, and
// the spec is the reviewed golden one.
func TestAcceptedFixtures(t *testing.T) {
	t.Parallel()
	for _, name := range accepted {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sp, req := specOf(t, request(t, readFixture(t, name), ""))
			if probs := spec.Validate(sp, spec.Limits{}, env); len(probs) > 0 {
				t.Fatalf("the translated spec is invalid: %v", req.Translation.MapProblems(probs))
			}
			golden(t, filepath.Join("testdata", "spec", name+".json"), req.Spec)
		})
	}
}

// TestRoundTrip: a team from AgentChat, translated, exported and translated
// again gives the same spec; the export is the reviewed golden one, and
// AgentChat 0.7.5 loaded exactly these exports (testdata/load_check.json,
// written by e2e/autogen/components/check.py).
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, name := range accepted {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sp, req := specOf(t, request(t, readFixture(t, name), ""))
			team, probs := ToTeam(sp, testEPs)
			if len(probs) > 0 {
				t.Fatalf("ToTeam: %v", probs)
			}
			exported, err := marshal(team)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", "export", name+".json"), exported)
			_, again := specOf(t, request(t, exported, ""))
			if !bytes.Equal(req.Spec, again.Spec) {
				t.Errorf("round trip changed the spec:\nfirst  %s\nsecond %s", req.Spec, again.Spec)
			}
		})
	}
}

// TestAgentChatLoadsExports checks the committed result of AgentChat's own
// Team.load_component over the committed exports: every export was loaded,
// and the check ran on the exports as they are now.
func TestAgentChatLoadsExports(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("testdata", "load_check.json"))
	if err != nil {
		t.Fatal(err)
	}
	var check map[string]struct {
		SHA256   string   `json:"sha256"`
		Loaded   bool     `json:"loaded"`
		Error    string   `json:"error"`
		Team     string   `json:"team"`
		Agents   []string `json:"agents"`
		Redumped bool     `json:"redumped_equal"`
		Graph    bool     `json:"graph_validated"`
		// Inner is each SocietyOfMindAgent's inner team: its class,
		// then its agents.
		Inner map[string][]string `json:"inner_teams"`
	}
	if err := json.Unmarshal(b, &check); err != nil {
		t.Fatal(err)
	}
	for _, name := range accepted {
		exp, err := os.ReadFile(filepath.Join("testdata", "export", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(exp)
		c, ok := check[name]
		switch {
		case !ok:
			t.Errorf("%s: not in load_check.json; run check.py", name)
		case c.SHA256 != hex.EncodeToString(sum[:]):
			t.Errorf("%s: load_check.json checked another version of the export; run check.py", name)
		case !c.Loaded:
			t.Errorf("%s: AgentChat could not load the export: %s", name, c.Error)
		case !c.Redumped:
			t.Errorf("%s: AgentChat's dump of the loaded team differs from the export", name)
		case bytes.Contains(exp, []byte(provMagentic)) && c.Team != "MagenticOneGroupChat":
			t.Errorf("%s: AgentChat built a %s, not a MagenticOneGroupChat", name, c.Team)
		case c.Team == "GraphFlow" && !c.Graph:
			t.Errorf("%s: AgentChat did not check the graph of the export", name)
		case bytes.Contains(exp, []byte(provSocietyOfMind)) && len(c.Inner) == 0:
			t.Errorf("%s: AgentChat built no SocietyOfMindAgent's inner team", name)
		}
	}
}

// TestStructuredRefused: an output_content_type with a nested model and a
// dict (AgentChat's dump of it) is refused, each part with the pointer
// into the file's json_schema.
func TestStructuredRefused(t *testing.T) {
	t.Parallel()
	sp, req := specOf(t, request(t, readFixture(t, "structured_refused"), ""))
	probs := req.Translation.MapProblems(spec.Validate(sp, spec.Limits{}, env))
	const schema = "/team/config/participants/0/config/structured_message_factory/config/json_schema"
	want := map[string]bool{schema + "/$defs": true, schema + "/properties/steps/items/$ref": true, schema + "/properties/owners/additionalProperties": true}
	for _, p := range probs {
		delete(want, p.Path)
		if !strings.HasPrefix(p.Path, schema) {
			t.Errorf("problem outside the schema: %s: %s", p.Path, p.Message)
		}
	}
	for p := range want {
		t.Errorf("no problem at %s; got %v", p, probs)
	}
}

// TestRefusedFive: the fixture with parts agentd refuses gets exactly one
// problem for each, naming its JSON path and provider (its FunctionTool is
// not one: it runs in the sandbox).
func TestRefusedFive(t *testing.T) {
	t.Parallel()
	_, err := ParseRequest(request(t, readFixture(t, "refused_five"), ""), nil)
	ve, ok := err.(*spec.ValidationError)
	if !ok {
		t.Fatalf("err = %v, want a *spec.ValidationError", err)
	}
	want := []struct{ path, provider string }{
		{"/team/config/participants/1/config/code_executor", "autogen_ext.code_executors.local.LocalCommandLineCodeExecutor"},
		{"/team/config/participants/2/config/workbench/0/config/server_params", "autogen_ext.tools.mcp.McpWorkbench"},
		{"/team/config/participants/3/config/workbench/0/config/tools/0", "autogen_agentchat.tools.AgentTool"},
		{"/team/config/termination_condition/config/conditions/1/provider", "__main__.CustomTermination"},
	}
	if len(ve.Problems) != len(want) {
		t.Fatalf("%d problems, want %d: %v", len(ve.Problems), len(want), ve.Problems)
	}
	for i, w := range want {
		p := ve.Problems[i]
		if p.Path != w.path || !strings.Contains(p.Message, `"`+w.provider+`"`) {
			t.Errorf("problem %d = %s: %s; want path %s naming %s", i, p.Path, p.Message, w.path, w.provider)
		}
	}
}

// mk builds a component for table tests.
func mk(provider, config string) string {
	return `{"provider": "` + provider + `", "component_type": "x", "config": ` + config + `}`
}

func replayModel() string { return mk(provReplay, `{"chat_completions": ["hi"]}`) }

func assistant(name, extra string) string {
	return mk(provAssistant, `{"name": "`+name+`", "model_client": `+replayModel()+extra+`}`)
}

func rr(participants string, extra string) string {
	return mk(provRoundRobin, `{"participants": [`+participants+`]`+extra+`}`)
}

// TestRefusals lists each refused part with the path and what the message
// must say.
func TestRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, team, path, want string
	}{
		{"function tool with a cancellation token", rr(assistant("a", `, "tools": [`+mk("autogen_core.tools.FunctionTool", `{"source_code": "def f(): pass", "name": "f", "description": "", "global_imports": [], "has_cancellation_support": true}`)+`]`), ""),
			"/team/config/participants/0/config/tools/0/config/has_cancellation_support", "CancellationToken"},
		{"two function tools of one name", rr(assistant("a", `, "tools": [`+mk("autogen_core.tools.FunctionTool", `{"source_code": "def f(): pass", "name": "f", "description": "", "global_imports": []}`)+`,`+mk("autogen_core.tools.FunctionTool", `{"source_code": "def g(): pass", "name": "f", "description": "", "global_imports": []}`)+`]`), ""),
			"/team/config/participants/0/config/tools/1", "two tools named"},
		{"code tool with a local executor", rr(assistant("a", `, "tools": [`+mk(provCodeTool, `{"executor": `+mk("autogen_ext.code_executors.local.LocalCommandLineCodeExecutor", `{}`)+`}`)+`]`), ""),
			"/team/config/participants/0/config/tools/0/config/executor", "DockerCommandLineCodeExecutor"},
		{"selector_func", mk(provSelector, `{"participants": [`+assistant("a", "")+`], "model_client": `+replayModel()+`, "selector_func": {"provider": "x"}}`),
			"/team/config/selector_func", `provider "autogen_agentchat.teams.SelectorGroupChat": selector_func is Python code`},
		{"candidate_func", mk(provSelector, `{"participants": [`+assistant("a", "")+`], "model_client": `+replayModel()+`, "candidate_func": "lambda m: []"}`),
			"/team/config/candidate_func", "candidate_func is Python code"},
		{"local executor", rr(mk(provCodeExecutor, `{"name": "x", "code_executor": `+mk("autogen_ext.code_executors.local.LocalCommandLineCodeExecutor", `{}`)+`}`), ""),
			"/team/config/participants/0/config/code_executor", "DockerCommandLineCodeExecutor"},
		{"jupyter executor", rr(mk(provCodeExecutor, `{"name": "x", "code_executor": `+mk("autogen_ext.code_executors.jupyter.JupyterCodeExecutor", `{}`)+`}`), ""),
			"/team/config/participants/0/config/code_executor", "host"},
		{"code executor with a model", rr(mk(provCodeExecutor, `{"name": "x", "model_client": `+replayModel()+`, "code_executor": `+mk(provDockerExecutor, `{}`)+`}`), ""),
			"/team/config/participants/0/config/model_client", "without model_client"},
		{"unknown team", mk("my.Team", `{}`), "/team/provider", `unknown team provider "my.Team"`},
		{"unknown model", rr(mk(provAssistant, `{"name": "a", "model_client": `+mk("autogen_ext.models.llama_cpp.LlamaCppChatCompletionClient", `{"model": "llama3"}`)+`}`), ""),
			"/team/config/participants/0/config/model_client/provider", "unknown model client provider"},
		{"nested team", rr(rr(assistant("a", ""), ""), ""), "/team/config/participants/0", "nested teams"},
		{"memory", rr(assistant("a", `, "memory": [{"provider": "m"}]`), ""), "/team/config/participants/0/config/memory", "memory is not supported"},
		{"initial messages", rr(assistant("a", `, "model_context": `+mk(provUnbounded, `{"initial_messages": [{"content": "x", "source": "u", "type": "UserMessage"}]}`)), ""),
			"/team/config/participants/0/config/model_context/config/initial_messages", "initial_messages"},
		{"stdio mcp", rr(assistant("a", `, "workbench": [`+mk(provMcpWorkbench, `{"server_params": {"type": "StdioServerParams", "command": "uvx"}}`)+`]`), ""),
			"/team/config/participants/0/config/workbench/0/config/server_params", "SseServerParams"},
		{"tool overrides", rr(assistant("a", `, "workbench": [`+mk(provMcpWorkbench, `{"server_params": {"type": "StreamableHttpServerParams", "url": "http://x/mcp"}, "tool_overrides": {"f": {"name": "g"}}}`)+`]`), ""),
			"/team/config/participants/0/config/workbench/0/config/tool_overrides", "tool_overrides"},
		{"http tool without a host", rr(assistant("a", `, "tools": [`+mk(provHTTPTool, `{"name": "h", "port": 80, "json_schema": {"type": "object"}}`)+`]`), ""),
			"/team/config/participants/0/config/tools/0/config/host", "is required"},
		{"http tool path", rr(assistant("a", `, "tools": [`+mk(provHTTPTool, `{"name": "h", "host": "x", "port": 80, "path": "x", "json_schema": {"type": "object"}}`)+`]`), ""),
			"/team/config/participants/0/config/tools/0/config/path", "must begin with '/'"},
		{"no provider", rr(`{"config": {}}`, ""), "/team/config/participants/0/provider", "is required"},
		{"team field beside team", "", "/agents", "comes from the team"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := request(t, []byte(tc.team), "")
			if tc.team == "" {
				body = []byte(`{"task": "x", "agents": [], "team": ` + rr(assistant("a", ""), "") + `}`)
			}
			_, err := ParseRequest(body, testEPs)
			wantProblem(t, err, tc.path, tc.want)
		})
	}
}

// TestConditions maps each termination condition of AgentChat 0.7.5.
func TestConditions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, cond, want string
	}{
		{"max messages", mk(provMaxMessage, `{"max_messages": 5, "include_agent_event": false}`), `{"max_messages":5}`},
		{"max messages with agent events", mk(provMaxMessage, `{"max_messages": 5, "include_agent_event": true}`), `{"max_messages":5,"include_agent_event":true}`},
		{"text message", mk(provTextMessage, `{"source": null}`), `{"text_message":{}}`},
		{"text message from a source", mk(provTextMessage, `{"source": "a"}`), `{"text_message":{"source":"a"}}`},
		{"text mention", mk(provTextMention, `{"text": "STOP"}`), `{"text_mention":{"text":"STOP"}}`},
		{"token usage", mk(provTokenUsage, `{"max_total_token": 100}`), `{"token_usage":{"max_total_tokens":100}}`},
		{"handoff", mk(provHandoff, `{"target": "a"}`), `{"handoff":{"target":"a"}}`},
		{"timeout", mk(provTimeout, `{"timeout_seconds": 1.5}`), `{"timeout_s":1.5}`},
		{"source match", mk(provSourceMatch, `{"sources": ["a"]}`), `{"source_match":{"sources":["a"]}}`},
		{"function call", mk(provFunction, `{"function_name": "f"}`), `{"function_call":{"name":"f"}}`},
		{"or", mk(provOr, `{"conditions": [`+mk(provMaxMessage, `{"max_messages": 5}`)+`,`+mk(provTextMention, `{"text": "X"}`)+`]}`),
			`{"any":[{"max_messages":5},{"text_mention":{"text":"X"}}]}`},
		{"and", mk(provAnd, `{"conditions": [`+mk(provMaxMessage, `{"max_messages": 5}`)+`,`+mk(provTextMention, `{"text": "X"}`)+`]}`),
			`{"all":[{"max_messages":5},{"text_mention":{"text":"X"}}]}`},
		{"nested or flattened", mk(provOr, `{"conditions": [`+mk(provOr, `{"conditions": [`+mk(provMaxMessage, `{"max_messages": 5}`)+`,`+mk(provTextMention, `{"text": "X"}`)+`]}`)+`,`+mk(provHandoff, `{"target": "a"}`)+`]}`),
			`{"any":[{"max_messages":5},{"text_mention":{"text":"X"}},{"handoff":{"target":"a"}}]}`},
		{"stop message dropped from or", mk(provOr, `{"conditions": [`+mk(provStopMessage, `{}`)+`,`+mk(provTextMention, `{"text": "X"}`)+`]}`),
			`{"any":[{"text_mention":{"text":"X"}}]}`},
		{"external alone", mk(provExternal, `{}`), `{"external":{}}`},
		{"external in an and", mk(provAnd, `{"conditions": [`+mk(provExternal, `{}`)+`,`+mk(provTextMention, `{"text": "X"}`)+`]}`),
			`{"all":[{"external":{}},{"text_mention":{"text":"X"}}]}`},
		{"and with a part that never fires", mk(provAnd, `{"conditions": [`+mk(provStopMessage, `{}`)+`,`+mk(provTextMention, `{"text": "X"}`)+`]}`), `null`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr, probs := FromTeam("/team", []byte(rr(assistant("a", ""), `, "termination_condition": `+tc.cond)), nil)
			if len(probs) > 0 {
				t.Fatal(probs)
			}
			got, _ := json.Marshal(tr.Termination)
			if string(got) != tc.want {
				t.Errorf("termination = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestModelClients: a file's model clients map onto the server's endpoints
// (an OpenAI client by base_url, else by model; an Azure client by
// azure_endpoint and azure_deployment; Anthropic and Ollama clients by
// model); keys in a file are never used, and the response says so; a client
// no endpoint serves is a problem that lists the endpoints.
func TestModelClients(t *testing.T) {
	t.Parallel()
	sp, req := specOf(t, request(t, readFixture(t, "assistant_options"), ""))
	for i, want := range []string{`{"provider":"openai","endpoint":"openai","model":"gpt-4o-mini","temperature":0.2,"top_p":0.9,"max_tokens":256,"seed":7,"parallel_tool_calls":false,"stop":["END"],"frequency_penalty":0.5,"presence_penalty":-0.25,"reasoning_effort":"low"}`,
		`{"provider":"azure","endpoint":"azure-gpt4o","model":"gpt-4o"}`} {
		got, _ := json.Marshal(sp.Agents[i].Model)
		if string(got) != want {
			t.Errorf("agent %d model = %s, want %s", i, got, want)
		}
	}
	if bytes.Contains(req.Spec, []byte("in-the-file")) || bytes.Contains(req.Spec, []byte("example")) {
		t.Errorf("a key or endpoint of the file reached the spec: %s", req.Spec)
	}
	var said []string
	for _, w := range req.Translation.Warnings {
		said = append(said, w.Path+": "+w.Message)
	}
	all := strings.Join(said, "\n")
	for _, want := range []string{
		`participants/0/config/model_client/config/base_url: no endpoint of this server has the base URL https://models.example.invalid/v1: the model is called through endpoint "openai"`,
		`participants/0/config/model_client/config: ignored: api_key; agentd calls the model through its endpoint "openai"`,
		`participants/1/config/model_client/config: ignored: api_key, api_version; agentd calls the model through its endpoint "azure-gpt4o"`} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings do not say %q:\n%s", want, all)
		}
	}

	client := func(provider, cfg string) []byte {
		return request(t, []byte(rr(mk(provAssistant, `{"name": "a", "model_client": `+mk(provider, cfg)+`}`), "")), "")
	}
	for _, tc := range []struct {
		name, provider, cfg, want string
	}{
		{"anthropic by model", provAnthropic, `{"model": "claude-sonnet-4-5", "api_key": "sk-ant-file", "max_tokens": 300, "temperature": 0.5}`,
			`{"provider":"anthropic","endpoint":"claude","model":"claude-sonnet-4-5","max_tokens":300}`},
		{"anthropic with thinking off", provAnthropic, `{"model": "claude-sonnet-4-5", "thinking": {"type": "disabled"}}`,
			`{"provider":"anthropic","endpoint":"claude","model":"claude-sonnet-4-5","thinking":{"type":"disabled"}}`},
		{"ollama on an openai endpoint", provOllama, `{"model": "llama3.1", "host": "http://localhost:11434"}`,
			`{"provider":"openai","endpoint":"openai","model":"llama3.1"}`},
		{"azure by endpoint and deployment", provAzure, `{"model": "gpt-4o", "azure_endpoint": "https://example.openai.azure.com/", "azure_deployment": "review-prod", "api_version": "2024-06-01", "api_key": "k"}`,
			`{"provider":"azure","endpoint":"azure-review","model":"gpt-4o"}`},
	} {
		sp, req := specOf(t, client(tc.provider, tc.cfg))
		if got, _ := json.Marshal(sp.Agents[0].Model); string(got) != tc.want {
			t.Errorf("%s: model = %s, want %s", tc.name, got, tc.want)
		}
		if bytes.Contains(req.Spec, []byte("file")) || bytes.Contains(req.Spec, []byte("localhost")) {
			t.Errorf("%s: a key or URL of the file reached the spec: %s", tc.name, req.Spec)
		}
	}
	// A thinking setting that is not an object is a problem where it is.
	_, err := ParseRequest(client(provAnthropic, `{"model": "claude-sonnet-4-5", "thinking": "on"}`), testEPs)
	if ve, ok := errors.AsType[*spec.ValidationError](err); !ok || len(ve.Problems) != 1 ||
		ve.Problems[0].Path != "/team/config/participants/0/config/model_client/config/thinking" {
		t.Errorf("thinking \"on\": err = %v, want one problem at its path", err)
	}
	for _, tc := range []struct{ name, provider, cfg string }{
		{"azure resource nobody serves", provAzure, `{"model": "gpt-4o", "azure_endpoint": "https://other.openai.azure.com", "azure_deployment": "x", "api_version": "2024-06-01"}`},
		{"azure deployment nobody serves", provAzure, `{"model": "gpt-4o", "azure_endpoint": "https://example.openai.azure.com", "azure_deployment": "x", "api_version": "2024-06-01"}`},
	} {
		_, err := ParseRequest(client(tc.provider, tc.cfg), testEPs)
		var ve *spec.ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Path != "/team/config/participants/0/config/model_client" ||
			!strings.Contains(ve.Problems[0].Message, `"azure-review" (azure: any model)`) {
			t.Errorf("%s: err = %v, want one problem listing the endpoints", tc.name, err)
		}
	}
}

// TestRequestOptions: the request's own options win over the team's, and a
// team without max_turns is warned about agentd's max_round.
func TestRequestOptions(t *testing.T) {
	t.Parallel()
	sp, _ := specOf(t, request(t, readFixture(t, "round_robin"), `, "name": "poem", "max_round": 3, "metadata": {"k": "v"}`))
	if sp.Name != "poem" || sp.MaxRound == nil || *sp.MaxRound != 3 || string(sp.Metadata) != `{"k":"v"}` {
		t.Errorf("spec = name %q, max_round %v, metadata %s", sp.Name, sp.MaxRound, sp.Metadata)
	}
	_, req := specOf(t, request(t, readFixture(t, "human"), ""))
	if !slices.ContainsFunc(req.Translation.Warnings, func(w Warning) bool { return w.Path == "/team/config/max_turns" }) {
		t.Errorf("no warning about max_turns: %v", req.Translation.Warnings)
	}
	if r, err := ParseRequest([]byte(`{"task": "x", "agents": []}`), testEPs); r != nil || err != nil {
		t.Errorf("a native spec: %v, %v", r, err)
	}
	// A key spelled with escapes is still the team.
	body := request(t, readFixture(t, "round_robin"), "")
	escaped := bytes.Replace(body, []byte(`"team"`), []byte(`"t\u0065am"`), 1)
	if r, err := ParseRequest(escaped, testEPs); bytes.Equal(escaped, body) || r == nil || err != nil {
		t.Errorf("a team under an escaped key: %v, %v", r, err)
	}
	for body, want := range map[string]bool{`{"task": "x"}`: false, `{"t\u0065am": {}}`: true, `{"task": "a team"}`: true} {
		if got := mayHoldKey([]byte(body), teamKey); got != want {
			t.Errorf("mayHoldKey(%s) = %v, want %v", body, got, want)
		}
	}
}

// TestMapProblems: problems the spec's validation finds point into the file.
func TestMapProblems(t *testing.T) {
	t.Parallel()
	team := rr(assistant("a", `, "handoffs": ["nobody"]`), `, "max_turns": 1000, "termination_condition": `+
		mk(provOr, `{"conditions": [`+mk(provOr, `{"conditions": [`+mk(provMaxMessage, `{"max_messages": 5}`)+`,`+mk(provHandoff, `{"target": "ghost"}`)+`]}`)+`]}`))
	sp, req := specOf(t, request(t, []byte(team), ""))
	got := map[string]bool{}
	// A server without the openai provider: the problem is the client's provider.
	sp.Agents[0].Model.Inline.Provider = "openai"
	for _, p := range req.Translation.MapProblems(spec.Validate(sp, spec.Limits{}, spec.Env{Tools: acceptAll{}})) {
		got[p.Path] = true
	}
	for _, want := range []string{
		"/team/config/participants/0/config/handoffs/0",
		"/team/config/max_turns",
		"/team/config/termination_condition/config/conditions/0/config/conditions/1/handoff/target",
		"/team/config/participants/0/config/model_client/provider",
	} {
		if !got[want] {
			t.Errorf("no problem at %s; got %v", want, got)
		}
	}
}

// TestExportProblems: what AgentChat cannot express is listed, every one.
func TestExportProblems(t *testing.T) {
	t.Parallel()
	sp, probs := spec.DecodeSpec([]byte(`{"task": "x",
		"agents": [{"name": "a", "type": "assistant", "model": "m", "tools": ["t"], "tool_approval": "always", "parallel_tool_calls": false},
		           {"name": "p", "type": "user_proxy", "human_input_mode": "TERMINATE", "functions": ["t"]},
		           {"name": "x", "type": "user_proxy", "human_input_mode": "NEVER", "code_execution": {}, "code_approval": true}],
		"models": {"m": {"provider": "replay", "responses": [{"content": "x", "delay_ms": 5}]}},
		"tools": [{"name": "t", "parameters": {"type": "object"}, "implementation": {"type": "http", "url": "http://x"}}],
		"speaker_selection": {"method": "random", "seed": 1},
		"termination": {"text_match": {"pattern": "x"}}}`))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	_, probs = ToTeam(sp, testEPs)
	var paths []string
	for _, p := range probs {
		paths = append(paths, p.Path)
	}
	want := []string{"/agents/0/model/responses/0/delay_ms", "/agents/0/tools/0", "/agents/0/tool_approval", "/agents/0/parallel_tool_calls", "/agents/1/functions", "/agents/1/human_input_mode",
		"/agents/2/code_approval",
		"/termination/text_match", "/speaker_selection/seed", "/speaker_selection/method"}
	slices.Sort(paths)
	slices.Sort(want)
	if !slices.Equal(paths, want) {
		t.Errorf("problems at %v, want %v (%v)", paths, want, probs)
	}

	// OpenAI Swarm's protocol has no AgentChat team.
	sp, probs = spec.DecodeSpec([]byte(`{"task": "x", "agents": [{"name": "a", "type": "assistant", "model": "m"}],
		"models": {"m": {"provider": "replay", "responses": ["x"]}},
		"speaker_selection": {"method": "swarm", "protocol": "openai_swarm"}}`))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	if _, probs = ToTeam(sp, testEPs); len(probs) != 1 || probs[0].Path != "/speaker_selection/protocol" {
		t.Errorf("an openai_swarm chat exports with problems %v, want one at /speaker_selection/protocol", probs)
	}
}

// TestExportNative: a native spec exports, and its translation back means
// the same chat (named models become inline, defaults become explicit).
func TestExportNative(t *testing.T) {
	t.Parallel()
	sp, probs := spec.DecodeSpec([]byte(`{"task": "x", "name": "n",
		"agents": [{"name": "a", "type": "assistant", "model": "m", "handoffs": ["b", {"target": "c", "name": "go_c", "description": "Go to c."}]},
		           {"name": "b", "type": "assistant", "model": "m", "system_message": ""},
		           {"name": "c", "type": "assistant", "model": "m"}],
		"models": {"m": {"provider": "openai", "model": "gpt-4o-mini", "temperature": 0}},
		"speaker_selection": {"method": "swarm"},
		"max_round": 4,
		"termination": {"any": [{"handoff": {"target": "b"}}, {"max_messages": 9}]}}`))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	team, probs := ToTeam(sp, testEPs)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	raw, _ := marshal(team)
	back, req := specOf(t, request(t, raw, ""))
	if back.Name != "n" || *back.MaxRound != 4 || back.SpeakerSelection.Method != spec.SelectSwarm ||
		back.Agents[0].Model.Inline.Model != "gpt-4o-mini" || *back.Agents[0].Model.Inline.Temperature != 0 ||
		*back.Agents[0].SystemMessage != defaultSystemMessage || *back.Agents[1].SystemMessage != "" ||
		!slices.Equal(back.Agents[0].Handoffs, []spec.Handoff{spec.HandoffTo("b"), {Target: "c", Name: "go_c", Description: "Go to c."}}) {
		t.Errorf("translated back: %s", req.Spec)
	}
	if probs := spec.Validate(back, spec.Limits{}, env); len(probs) > 0 {
		t.Errorf("invalid: %v", probs)
	}
}

// FuzzFromTeam: no file makes the translation panic, and whatever it
// accepts exports and translates back to the same spec.
func FuzzFromTeam(f *testing.F) {
	for _, name := range append(accepted, "refused_five") {
		b, err := os.ReadFile(filepath.Join("testdata", "agentchat", name+".json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"provider": "autogen_agentchat.teams.RoundRobinGroupChat", "config": {"participants": [1, null, "x"]}}`))
	f.Fuzz(func(t *testing.T, team []byte) {
		if !json.Valid(team) {
			return
		}
		req, err := ParseRequest([]byte(`{"task": "x", "team": `+string(team)+`}`), nil)
		if err != nil || req == nil {
			return
		}
		sp, probs := spec.DecodeSpec(req.Spec)
		if len(probs) > 0 || len(spec.Validate(sp, spec.Limits{}, env)) > 0 {
			return // the spec's own validation reports it
		}
		exported, probs := ToTeam(sp, testEPs)
		if len(probs) > 0 {
			return
		}
		raw, err := marshal(exported)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseRequest([]byte(`{"task": "x", "team": `+string(raw)+`}`), nil)
		if err != nil {
			t.Fatalf("the export of an accepted team is refused: %v\n%s", err, raw)
		}
		if !bytes.Equal(req.Spec, again.Spec) {
			t.Fatalf("round trip changed the spec:\n%s\n%s", req.Spec, again.Spec)
		}
	})
}

// TestHugeFilesAreRefusedInOneProblem: thousands of nested conditions, or
// of components side by side, end in one problem (reading them all would
// cost depth times size, or more).
func TestHugeFilesAreRefusedInOneProblem(t *testing.T) {
	t.Parallel()
	cond := mk(provMaxMessage, `{"max_messages": 5}`)
	for range 3000 {
		cond = mk(provOr, `{"conditions": [`+cond+`, `+mk(provTextMention, `{"text": "X"}`)+`]}`)
	}
	_, probs := FromTeam("/team", []byte(rr(assistant("a", ""), `, "termination_condition": `+cond)), nil)
	if len(probs) != 1 || !strings.Contains(probs[0].Message, "nested at most 128 levels") {
		t.Fatalf("deep: problems = %v", probs)
	}
	wide := strings.Repeat(mk(provTextMention, `{"text": "X"}`)+",", 3000)
	cond = mk(provOr, `{"conditions": [`+wide+mk(provTextMention, `{"text": "X"}`)+`]}`)
	_, probs = FromTeam("/team", []byte(rr(assistant("a", ""), `, "termination_condition": `+cond)), nil)
	if len(probs) != 1 || !strings.Contains(probs[0].Message, "more than 1000 components") {
		t.Fatalf("wide: problems = %v", probs)
	}
}

// BenchmarkFromTeam prints the cost of translating the largest fixture and
// of refusing a file at the body limit nested as deep as allowed.
func BenchmarkFromTeam(b *testing.B) {
	fixture, err := os.ReadFile(filepath.Join("testdata", "agentchat", "terminations.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("terminations", func(b *testing.B) {
		for b.Loop() {
			if _, probs := FromTeam("/team", fixture, nil); len(probs) > 0 {
				b.Fatal(probs)
			}
		}
	})
	// 40 nested | (120 levels) around 1 MiB of text.
	cond := mk(provTextMention, `{"text": "`+strings.Repeat("x", 1<<20)+`"}`)
	for range 40 {
		cond = mk(provOr, `{"conditions": [`+cond+`]}`)
	}
	deep := []byte(rr(assistant("a", ""), `, "termination_condition": `+cond))
	b.Run("deep-1MiB", func(b *testing.B) {
		b.SetBytes(int64(len(deep)))
		for b.Loop() {
			FromTeam("/team", deep, nil)
		}
	})
}

// TestHandoffToUser: AgentChat's human-in-the-loop Swarm hands off to
// user; the team runs in agentd, and its export hands off to user again.
func TestHandoffToUser(t *testing.T) {
	t.Parallel()
	team := strings.Replace(rr(assistant("triage", `, "handoffs": [{"target": "user", "name": "transfer_to_user", "description": "Handoff to user.", "message": "Transferred to user, adopting the role of user immediately."}]`),
		`, "termination_condition": `+mk(provHandoff, `{"target": "user"}`)), "RoundRobinGroupChat", "Swarm", 1)
	sp, req := specOf(t, request(t, []byte(team), ""))
	if probs := spec.Validate(sp, spec.Limits{}, env); len(probs) > 0 {
		t.Fatalf("the translated spec is invalid: %v", req.Translation.MapProblems(probs))
	}
	if !slices.Equal(sp.Agents[0].Handoffs, []spec.Handoff{spec.HandoffTo("user")}) || sp.Termination.Handoff.Target != "user" {
		t.Fatalf("handoffs %v, termination %+v", sp.Agents[0].Handoffs, sp.Termination)
	}
	exported, probs := ToTeam(sp, testEPs)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	b, _ := marshal(exported)
	if !strings.Contains(string(b), `"target": "user"`) && !strings.Contains(string(b), `"target":"user"`) {
		t.Fatalf("export lost the handoff to user: %s", b)
	}
}

// TestToolProblemsMapToTheFile: the tool runner's problems with a file's
// HttpTool and MCP servers (a secret the server does not have, a schema
// agentd cannot translate) name the file's JSON paths.
func TestToolProblemsMapToTheFile(t *testing.T) {
	t.Parallel()
	runner, err := tool.New(tool.Config{Secrets: map[string]string{"github": "Bearer x"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runner.Close() })
	file := strings.Replace(string(readFixture(t, "http_tools")), `"description": "The account"`, `"description": "The account", "pattern": "^[a-z]+$"`, 1)
	if !strings.Contains(file, "pattern") {
		t.Fatal("the fixture changed: no schema to spoil")
	}
	sp, req := specOf(t, request(t, []byte(file), ""))
	got := map[string]string{}
	for _, p := range req.Translation.MapProblems(spec.Validate(sp, spec.Limits{}, spec.Env{Providers: env.Providers, Tools: runner})) {
		got[p.Path] = p.Message
	}
	for _, want := range []string{
		"/team/config/participants/0/config/workbench/0/config/tools/0/config/json_schema/properties/owner/pattern",
		"/team/config/participants/1/config/workbench/0/config/server_params/headers/Authorization/secret",
		"/team/config/participants/1/config/workbench/1/config/server_params/headers/X-Api-Key/secret",
	} {
		if _, ok := got[want]; !ok {
			t.Errorf("no problem at %s; got %v", want, got)
		}
	}
	if len(got) != 3 {
		t.Errorf("problems: %v", got)
	}
}

// wantProblem fails unless err is a *spec.ValidationError with a problem at
// path whose message says want.
func wantProblem(t *testing.T, err error, path, want string) {
	t.Helper()
	ve, ok := err.(*spec.ValidationError)
	if !ok {
		t.Fatalf("err = %v, want a *spec.ValidationError", err)
	}
	i := slices.IndexFunc(ve.Problems, func(p spec.Problem) bool { return p.Path == path })
	if i < 0 {
		t.Fatalf("no problem at %s: %v", path, ve.Problems)
	}
	if !strings.Contains(ve.Problems[i].Message, want) {
		t.Errorf("problem at %s = %q, want it to say %q", path, ve.Problems[i].Message, want)
	}
}
