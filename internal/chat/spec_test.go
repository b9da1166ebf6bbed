package chat

import (
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
		"/agents/1/type":                  "must be assistant or user_proxy",
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
	f.Fuzz(func(t *testing.T, body string) {
		spec, probs := DecodeSpec([]byte(body))
		if spec == nil && len(probs) == 0 {
			t.Fatal("no spec and no problems")
		}
		if spec != nil {
			_ = Validate(spec, Limits{}, Env{}) // must not panic
		}
	})
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
