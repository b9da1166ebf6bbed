package spec

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func problems(t *testing.T, body string) []Problem {
	t.Helper()
	spec, probs := DecodeSpec([]byte(body))
	if len(probs) > 0 {
		return probs
	}
	return Validate(spec, Limits{}, Env{Providers: []string{"openai"}})
}

func paths(probs []Problem) []string {
	var ps []string
	for _, p := range probs {
		ps = append(ps, p.Path)
	}
	return ps
}

func TestDecodeSpecReportsEveryShapeProblem(t *testing.T) {
	body := `{"task": 3, "agents": [{"name": "a", "type": "assistant", "colour": "red"}], "max_round": 1.5,
		"models": {"m": {"provider": "replay", "responses": ["x", {"content": "y", "bogus": 1}]}}, "speaker_selection": []}`
	got := paths(problems(t, body))
	want := []string{"/agents/0/colour", "/max_round", "/models/m/responses/1/bogus", "/speaker_selection", "/task"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("problem paths = %v, want %v", got, want)
	}
}

func TestValidateReportsFiveMistakesAtOnce(t *testing.T) {
	body := `{"task": "", "agents": [
		{"name": "9bad", "type": "assistant", "model": "missing"},
		{"name": "b", "type": "robot"}],
		"max_round": 0,
		"termination": {"text_match": {"pattern": "("}}}`
	got := problems(t, body)
	want := map[string]string{
		"/task":                           "is required",
		"/agents/0/name":                  "must match",
		"/agents/0/model":                 "names no entry of models",
		"/agents/1/type":                  "must be assistant, user_proxy or team",
		"/max_round":                      "must be between 1 and 100",
		"/termination/text_match/pattern": "not a valid RE2 pattern",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d problems %v, want %d", len(got), got, len(want))
	}
	for _, p := range got {
		w, ok := want[p.Path]
		if !ok || !strings.Contains(p.Message, w) {
			t.Errorf("unexpected problem %s: %s", p.Path, p.Message)
		}
	}
}

func TestValidateAcceptsExampleSpecs(t *testing.T) {
	for name, body := range map[string]string{
		"round robin": `{"task": "t", "agents": [{"name": "a", "type": "assistant", "model": "m"}, {"name": "u", "type": "user_proxy", "human_input_mode": "NEVER"}],
			"models": {"m": {"provider": "replay", "responses": ["hi"]}}, "termination": {"any": [{"text_mention": {"text": "DONE"}}, {"max_messages": 5}]}}`,
		"inline openai": `{"task": "t", "agents": [{"name": "a", "type": "assistant", "model": {"provider": "openai", "model": "gpt-4o-mini"}}],
			"speaker_selection": {"method": "random", "seed": 3, "allow_repeated_speaker": false}, "metadata": {"k": "v"}}`,
	} {
		if probs := problems(t, body); len(probs) > 0 {
			t.Errorf("%s: unexpected problems %v", name, probs)
		}
	}
}

func TestValidateRejectsUnsupportedFeaturesWithPaths(t *testing.T) {
	body := `{"task": "t", "agents": [{"name": "a", "type": "assistant", "model": {"provider": "nope"}, "tools": ["x"]},
		{"name": "u", "type": "user_proxy", "code_execution": {}, "human_input_mode": "SOMETIMES"}],
		"speaker_selection": {"method": "auto", "transitions": {"a": ["zed"]}}, "termination": {"handoff": {"target": "zed"}}}`
	got := paths(problems(t, body))
	for _, want := range []string{"/agents/0/model/provider", "/agents/0/tools/0", "/agents/1/code_execution", "/agents/1/human_input_mode",
		"/speaker_selection/model", "/speaker_selection/transitions/a/0", "/termination/handoff/target"} {
		if !slices.Contains(got, want) {
			t.Errorf("no problem at %s (got %v)", want, got)
		}
	}
}

func FuzzDecodeSpec(f *testing.F) {
	f.Add(`{"task": "t", "agents": [{"name": "a", "type": "assistant", "model": "m"}], "models": {"m": {"provider": "replay", "responses": ["x"]}}}`)
	f.Add(`{"termination": {"all": [{"any": []}, {"max_messages": -1}]}}`)
	f.Add(`[1, 2]`)
	f.Add(`{"task": "t", "agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]}, "message_filter": {"per_source": [{"source": "a", "position": "last", "count": 1}]}}],
		"speaker_selection": {"method": "graph", "graph": {"nodes": {"a": {"name": "a", "edges": [{"target": "a", "condition": "x"}, {"target": "b", "condition": 1}]}, "b": {"name": "b"}}, "default_start_node": "a"}}}`)
	f.Fuzz(func(t *testing.T, body string) {
		spec, probs := DecodeSpec([]byte(body))
		if spec == nil && len(probs) == 0 {
			t.Fatal("no spec and no problems")
		}
		if spec != nil {
			_ = Validate(spec, Limits{}, Env{}) // must not panic
		}
		// Nor may the validation of what decodes of a spec with shape
		// problems, and a spec it gives has none.
		if s, _, probs := Check([]byte(body), Limits{}, Env{}); s != nil && len(probs) > 0 {
			t.Fatalf("Check gave a spec and problems %v", probs)
		}
	})
}

// TestEveryCountAndDurationHasAnUpperBound: values beyond the bounds are
// problems with their paths (a timeout of 1e10 s would overflow a duration).
func TestEveryCountAndDurationHasAnUpperBound(t *testing.T) {
	body := `{"task": "t", "max_round": 1000000, "input_timeout_s": 100000000,
		"sandbox": {"timeout_s": 100000, "memory_mb": 100000000, "cpus": 1000},
		"agents": [{"name": "a", "type": "assistant", "max_tool_iterations": 1000, "context": {"buffer_size": 100000000},
			"model": {"provider": "replay", "max_tokens": 100000000, "responses": [{"content": "x", "delay_ms": 100000000, "usage": {"prompt_tokens": 9000000000000000000}}]}},
			{"name": "p", "type": "user_proxy", "max_consecutive_auto_reply": 1000000000, "code_execution": {"timeout_s": 1000000}}],
		"speaker_selection": {"max_attempts": 1000},
		"termination": {"any": [{"timeout_s": 1e10}, {"max_messages": 1000000000}, {"token_usage": {"max_total_tokens": 9000000000000000000}}]}}`
	spec, probs := DecodeSpec([]byte(body))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	got := paths(Validate(spec, Limits{}, Env{Sandbox: "bwrap"}))
	for _, want := range []string{"/max_round", "/input_timeout_s", "/sandbox/timeout_s", "/sandbox/memory_mb", "/sandbox/cpus",
		"/agents/0/max_tool_iterations", "/agents/0/context/buffer_size", "/agents/0/model/max_tokens",
		"/agents/0/model/responses/0/delay_ms", "/agents/0/model/responses/0/usage/prompt_tokens",
		"/agents/1/max_consecutive_auto_reply", "/agents/1/code_execution/timeout_s", "/speaker_selection/max_attempts",
		"/termination/any/0/timeout_s", "/termination/any/1/max_messages", "/termination/any/2/token_usage/max_total_tokens"} {
		if !slices.Contains(got, want) {
			t.Errorf("no problem at %s; problems at %v", want, got)
		}
	}
}

// TestSpecsNoStoreCanHoldAreProblems: NUL, lone surrogates, invalid UTF-8
// and numbers beyond float64 are reported before anything reaches a store.
func TestSpecsNoStoreCanHoldAreProblems(t *testing.T) {
	base := `{"task": "t", "agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]}}]`
	for _, tt := range []struct{ name, body, path string }{
		{"NUL in the task", `{"task": "a\u0000b", "agents": []}`, "/task"},
		{"NUL in metadata", base + `, "metadata": {"k": "\u0000"}}`, "/metadata/k"},
		{"NUL in a key", base + `, "metadata": {"\u0000": 1}}`, "/metadata/\x00"},
		{"lone high surrogate", base + `, "metadata": {"k": "\ud800x"}}`, ""},
		{"lone low surrogate", base + `, "name": "\udc00"}`, ""},
		{"invalid UTF-8", base + `, "name": "` + "\xff" + `"}`, ""},
		{"number out of range", base + `, "metadata": {"n": 1e400}}`, "/metadata/n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, probs := DecodeSpec([]byte(tt.body))
			if len(probs) == 0 || probs[0].Path != tt.path {
				t.Fatalf("problems %v, want one at %q", probs, tt.path)
			}
		})
	}
	if _, probs := DecodeSpec([]byte(base + `, "metadata": {"pair": "\ud83d\ude00", "esc": "\\u0000 is text"}}`)); len(probs) > 0 {
		t.Fatalf("a surrogate pair and an escaped backslash are fine: %v", probs)
	}
}

// TestHistoryMessageTypes: a history message may name its AgentChat type
// where the shape does not tell it (an assistant's tool-call summary), and
// nothing else.
func TestHistoryMessageTypes(t *testing.T) {
	const agents = `"agents": [{"name": "a", "type": "assistant", "model": {"provider": "openai", "model": "m"}}]`
	ok := `{"task": "t", ` + agents + `, "messages": [
		{"role": "user", "content": "go"},
		{"type": "ToolCallRequestEvent", "role": "assistant", "name": "a", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
		{"type": "ToolCallExecutionEvent", "role": "tool", "name": "a", "tool_responses": [{"tool_call_id": "c1", "role": "tool", "content": "r"}]},
		{"type": "ToolCallSummaryMessage", "role": "assistant", "name": "a", "content": "r"},
		{"type": "TextMessage", "role": "assistant", "name": "a", "content": "done"}]}`
	if probs := problems(t, ok); len(probs) != 0 {
		t.Fatalf("problems: %+v", probs)
	}
	bad := `{"task": "t", ` + agents + `, "messages": [
		{"type": "HandoffMessage", "role": "assistant", "name": "a", "content": "x"},
		{"type": "ToolCallSummaryMessage", "role": "user", "content": "x"},
		{"type": "TextMessage", "role": "tool", "name": "a", "tool_responses": [{"tool_call_id": "c1", "role": "tool", "content": "r"}]}]}`
	got := paths(problems(t, bad))
	for _, want := range []string{"/messages/0/type", "/messages/1/type", "/messages/2/type"} {
		if !slices.Contains(got, want) {
			t.Errorf("no problem at %s (got %v)", want, got)
		}
	}
}

// TestApprovalsHandoffsToUserAndExternal: tool_approval takes a mode or the
// agent's own tools, code_approval needs code execution, a handoff (and a
// handoff condition) may name user, and external is a condition.
func TestApprovalsHandoffsToUserAndExternal(t *testing.T) {
	ok := `{"task": "t", "agents": [
		{"name": "a", "type": "assistant", "model": "m", "tools": ["x"], "tool_approval": ["x"], "handoffs": ["user", "p"]},
		{"name": "b", "type": "assistant", "model": "m", "tool_approval": "always"},
		{"name": "p", "type": "user_proxy", "code_execution": {}, "code_approval": true}],
		"models": {"m": {"provider": "replay", "responses": ["r"]}}, "tools": [{"name": "x"}],
		"termination": {"any": [{"handoff": {"target": "user"}}, {"external": {}}]}}`
	sp, probs := DecodeSpec([]byte(ok))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	if probs := Validate(sp, Limits{}, Env{Sandbox: "bwrap", Tools: acceptTools{}}); len(probs) > 0 {
		t.Fatal(probs)
	}
	if !sp.Agents[0].ToolApproval.Needs("x") || sp.Agents[0].ToolApproval.Needs("y") || !sp.Agents[1].ToolApproval.Needs("y") {
		t.Fatalf("tool_approval = %+v, %+v", sp.Agents[0].ToolApproval, sp.Agents[1].ToolApproval)
	}
	if b, _ := json.Marshal(sp.Agents[0].ToolApproval); string(b) != `["x"]` {
		t.Fatalf("tool_approval marshals as %s", b)
	}
	bad := `{"task": "t", "agents": [
		{"name": "a", "type": "assistant", "model": "m", "tools": ["x"], "tool_approval": ["y"], "code_approval": true, "handoffs": ["nobody"]},
		{"name": "b", "type": "assistant", "model": "m", "tool_approval": "sometimes"},
		{"name": "p", "type": "user_proxy", "code_approval": true, "tool_approval": "always"}],
		"models": {"m": {"provider": "replay", "responses": ["r"]}}, "tools": [{"name": "x"}],
		"termination": {"external": {}, "max_messages": 3}}`
	got := paths(problems(t, bad))
	slices.Sort(got)
	want := []string{"/agents/0/code_approval", "/agents/0/handoffs/0", "/agents/0/tool_approval/0", "/agents/1/tool_approval",
		"/agents/2/code_approval", "/agents/2/tool_approval", "/termination", "/tools/0"}
	if !slices.Equal(got, want) {
		t.Fatalf("problem paths = %v, want %v", got, want)
	}
	if _, probs := DecodeSpec([]byte(`{"task": "t", "agents": [{"name": "a", "type": "assistant", "tool_approval": 3}]}`)); len(probs) != 1 || probs[0].Path != "/agents/0/tool_approval" {
		t.Fatalf("a number for tool_approval: %v", probs)
	}
}

type acceptTools struct{}

func (acceptTools) CheckTool(*Tool) []Problem      { return nil }
func (acceptTools) CheckSwarmTool(*Tool) []Problem { return nil }

// permitHosts permits the hosts of its list, as the operator's list does.
type permitHosts []string

func (p permitHosts) CheckSandboxHost(h string) string {
	if slices.Contains(p, h) {
		return ""
	}
	return "host " + h + " is not permitted"
}

// TestSandboxNetwork: every host a spec asks for that the server does not
// permit is a problem at its own pointer; no network without a sandbox or
// an operator list.
func TestSandboxNetwork(t *testing.T) {
	spec := func(allow string) *Spec {
		body := `{"task": "t", "agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]}}],
			"sandbox": {"network": {"allow": ` + allow + `}}}`
		sp, probs := DecodeSpec([]byte(body))
		if len(probs) > 0 {
			t.Fatal(probs)
		}
		return sp
	}
	env := Env{Sandbox: "bwrap", SandboxHosts: permitHosts{"pypi.org", "files.pythonhosted.org:443"}}
	if probs := Validate(spec(`["pypi.org", "files.pythonhosted.org:443"]`), Limits{}, env); len(probs) > 0 {
		t.Errorf("permitted hosts: %v", probs)
	}
	many := `["pypi.org"` + strings.Repeat(`, "pypi.org"`, MaxSandboxHosts) + `]`
	for _, tt := range []struct {
		allow string
		env   Env
		want  []string
	}{
		{`["evil.example", "pypi.org", "10.0.0.1"]`, env, []string{"/sandbox/network/allow/0", "/sandbox/network/allow/2"}},
		{`[]`, env, []string{"/sandbox/network/allow"}},
		{many, env, []string{"/sandbox/network/allow"}},
		{`["pypi.org"]`, Env{Sandbox: "bwrap"}, []string{"/sandbox/network"}},
		{`["pypi.org"]`, Env{SandboxHosts: env.SandboxHosts}, []string{"/sandbox/network"}},
	} {
		got := paths(Validate(spec(tt.allow), Limits{}, tt.env))
		if !slices.Equal(got, tt.want) {
			t.Errorf("allow %s: problems at %v, want %v", tt.allow, got, tt.want)
		}
	}
	if _, probs := DecodeSpec([]byte(`{"task": "t", "agents": [], "sandbox": {"network": {"allow": ["x"], "deny": ["y"]}}}`)); len(probs) == 0 {
		t.Error("an unknown field of sandbox.network is accepted")
	}
}

// TestThinkingIsCheckedAsTheMessagesAPIChecksIt: a budget below 1024 or not
// below max_tokens (set, or the default 4096), a missing budget, an
// unknown type, a budget on disabled thinking and thinking on a model no
// anthropic endpoint serves are problems at their paths; valid settings
// pass.
func TestThinkingIsCheckedAsTheMessagesAPIChecksIt(t *testing.T) {
	env := Env{Providers: []string{"openai", "anthropic"}}
	check := func(model string) []Problem {
		t.Helper()
		sp, probs := DecodeSpec([]byte(`{"task": "t", "agents": [{"name": "a", "type": "assistant", "model": ` + model + `}]}`))
		if len(probs) > 0 {
			t.Fatalf("%s: %v", model, probs)
		}
		return Validate(sp, Limits{}, env)
	}
	for _, model := range []string{
		`{"provider": "anthropic", "model": "claude", "thinking": {"type": "enabled", "budget_tokens": 1024}}`,
		`{"provider": "anthropic", "model": "claude", "thinking": {"type": "enabled", "budget_tokens": 4095}}`,
		`{"provider": "anthropic", "model": "claude", "max_tokens": 20000, "thinking": {"type": "enabled", "budget_tokens": 16000}}`,
		`{"provider": "anthropic", "model": "claude", "thinking": {"type": "disabled"}}`,
	} {
		if probs := check(model); len(probs) > 0 {
			t.Errorf("%s: problems %v", model, probs)
		}
	}
	for _, tt := range []struct{ model, path, msg string }{
		{`{"provider": "anthropic", "model": "claude", "thinking": {"type": "enabled", "budget_tokens": 1023}}`, "/agents/0/model/thinking/budget_tokens", "at least 1024"},
		{`{"provider": "anthropic", "model": "claude", "thinking": {"type": "enabled", "budget_tokens": 4096}}`, "/agents/0/model/thinking/budget_tokens", "less than max_tokens (4096, the default)"},
		{`{"provider": "anthropic", "model": "claude", "max_tokens": 2000, "thinking": {"type": "enabled", "budget_tokens": 2000}}`, "/agents/0/model/thinking/budget_tokens", "less than max_tokens (2000)"},
		{`{"provider": "anthropic", "model": "claude", "thinking": {"type": "enabled"}}`, "/agents/0/model/thinking/budget_tokens", "is required"},
		{`{"provider": "anthropic", "model": "claude", "thinking": {"type": "disabled", "budget_tokens": 2000}}`, "/agents/0/model/thinking/budget_tokens", "only enabled thinking"},
		{`{"provider": "anthropic", "model": "claude", "thinking": {"type": "adaptive"}}`, "/agents/0/model/thinking/type", `must be "enabled" or "disabled"`},
		{`{"provider": "openai", "model": "gpt-4o", "thinking": {"type": "enabled", "budget_tokens": 2000}}`, "/agents/0/model/thinking", `only a model of provider anthropic`},
		{`{"provider": "replay", "responses": ["x"], "thinking": {"type": "disabled"}}`, "/agents/0/model/thinking", `only a model of provider anthropic`},
	} {
		probs := check(tt.model)
		if len(probs) != 1 || probs[0].Path != tt.path || !strings.Contains(probs[0].Message, tt.msg) {
			t.Errorf("%s: problems %v, want one at %s saying %q", tt.model, probs, tt.path, tt.msg)
		}
	}
	if _, probs := DecodeSpec([]byte(`{"task": "t", "agents": [{"name": "a", "type": "assistant", "model": {"provider": "anthropic", "model": "c", "thinking": {"type": "enabled", "budget": 2000}}}]}`)); len(probs) != 1 || probs[0].Path != "/agents/0/model/thinking/budget" {
		t.Errorf("an unknown field of thinking: problems %v", probs)
	}
}

// TestModelOptionsAreChecked: stop sequences, penalties and
// reasoning_effort within the API's limits; every problem at its place.
func TestModelOptionsAreChecked(t *testing.T) {
	env := Env{Providers: []string{"openai"}}
	sp, probs := DecodeSpec([]byte(`{"task": "t", "agents": [
		{"name": "a", "type": "assistant", "model": {"provider": "openai", "model": "gpt-4o", "stop": ["END"], "frequency_penalty": 2, "presence_penalty": -2, "reasoning_effort": "minimal"}},
		{"name": "b", "type": "assistant", "model": {"provider": "openai", "model": "gpt-4o", "stop": ["1", "", "3", "4", "5"], "frequency_penalty": 2.5, "presence_penalty": -3, "reasoning_effort": "extreme"}}]}`))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	var got []string
	for _, p := range Validate(sp, Limits{}, env) {
		got = append(got, p.Path)
	}
	slices.Sort(got)
	want := []string{"/agents/1/model/frequency_penalty", "/agents/1/model/presence_penalty", "/agents/1/model/reasoning_effort",
		"/agents/1/model/stop", "/agents/1/model/stop/1"}
	if !slices.Equal(got, want) {
		t.Errorf("problems at %v, want %v", got, want)
	}
}
