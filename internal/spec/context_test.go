package spec

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// checked is Check's problems of body.
func checked(body string) []Problem {
	_, _, probs := Check([]byte(body), Limits{}, Env{Providers: []string{"openai"}})
	return probs
}

const swarmAgents = `"models": {"m": {"provider": "replay", "responses": ["x"]}},
	"speaker_selection": {"method": "swarm"},
	"agents": [
		{"name": "triage", "type": "assistant", "model": "m", "handoffs": [%s]},
		{"name": "sales", "type": "assistant", "model": "m"},
		{"name": "escalation", "type": "assistant", "model": "m"}]`

func swarmSpec(vars, handoffs string) string {
	return `{"task": "t", "context_variables": ` + vars + `, ` + strings.Replace(swarmAgents, "%s", handoffs, 1) + `}`
}

// TestHandoffConditionsRefused: an invalid, non-boolean or unknown-variable
// expression is a 422 at its path, all at once; a null in the variables
// declares a name.
func TestHandoffConditionsRefused(t *testing.T) {
	t.Parallel()
	got := checked(swarmSpec(`{"severity": null, "tier": "gold"}`,
		`{"target": "escalation", "condition": "severity >="},
		 {"target": "escalation", "condition": "severity + 1"},
		 {"target": "escalation", "condition": "priority > 3"},
		 {"target": "sales", "condition": "severity >= 8 && tier == \"gold\""},
		 {"target": "sales", "condition": "tier == \"x\"", "name": "go", "description": "d"}`))
	checkProblems(t, got, map[string]string{
		"/agents/0/handoffs/0/condition":   "Syntax error",
		"/agents/0/handoffs/1/condition":   "must be a boolean expression (this one is of type int)",
		"/agents/0/handoffs/2/condition":   "undeclared reference to 'priority'",
		"/agents/0/handoffs/4/name":        "no name",
		"/agents/0/handoffs/4/description": "no description",
	})
	for _, p := range got {
		if p.Path == "/agents/0/handoffs/2/condition" && !strings.Contains(p.Message, "declared: severity, tier") {
			t.Errorf("unknown variable: %q does not list the declared ones", p.Message)
		}
	}
}

// TestHandoffObjects: AgentChat's Handoff fields are read and written
// back in the form given; their problems are at their paths.
func TestHandoffObjects(t *testing.T) {
	t.Parallel()
	body := swarmSpec(`{}`, `"sales", {"target": "escalation", "name": "escalate", "description": "Escalate the case."}`)
	sp, _, probs := Check([]byte(body), Limits{}, Env{Providers: []string{"openai"}})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	hs := sp.Agents[0].Handoffs
	if hs[0].ToolName() != "transfer_to_sales" || hs[0].ToolDescription() != "Handoff to sales." ||
		hs[1].ToolName() != "escalate" || hs[1].ToolDescription() != "Escalate the case." {
		t.Errorf("handoffs %+v", hs)
	}
	b, _ := json.Marshal(hs)
	if string(b) != `["sales",{"target":"escalation","name":"escalate","description":"Escalate the case."}]` {
		t.Errorf("written back as %s", b)
	}
	got := checked(swarmSpec(`{}`, `{"target": "nobody"}, {"target": "sales", "name": "bad name!"}, {"name": "x"},
		{"target": "sales", "colour": 1}, 7, {"target": "sales", "name": "same"}, {"target": "escalation", "name": "same"}`))
	checkProblems(t, got, map[string]string{
		"/agents/0/handoffs/0":        `names no agent: "nobody"`,
		"/agents/0/handoffs/1/name":   "must match",
		"/agents/0/handoffs/2/target": "is required",
		"/agents/0/handoffs/3/colour": "unknown field",
		"/agents/0/handoffs/4":        "must be an agent's name or a hand-off",
		"/agents/0/handoffs/6/name":   `another hand-off of this agent is named "same"`,
	})
}

// TestContextVariablesRefused: the variables are an object of at most
// 64 KiB, nesting at most 32 deep, with names of 1 to 256 bytes.
func TestContextVariablesRefused(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", MaxContextDepth+1) + strings.Repeat("]", MaxContextDepth+1)
	got := checked(swarmSpec(`{"": 1, "deep": `+deep+`, "`+strings.Repeat("k", 257)+`": 2, "ok": {"a": [1]}}`, ``))
	checkProblems(t, got, map[string]string{
		"/context_variables/":                            "a variable's name must be 1 to 256 bytes",
		"/context_variables/deep":                        "nests more than 32 levels deep",
		"/context_variables/" + strings.Repeat("k", 257): "a variable's name must be 1 to 256 bytes",
	})
	got = checked(swarmSpec(`{"big": "`+strings.Repeat("x", MaxContextBytes)+`"}`, ``))
	checkProblems(t, got, map[string]string{"/context_variables": "must be at most 65536 bytes encoded"})
	got = checked(swarmSpec(`["a"]`, ``))
	checkProblems(t, got, map[string]string{"/context_variables": "must be an object of variables"})
}

// TestSystemMessageTemplate: a format string of variables, checked at
// create; not beside system_message.
func TestSystemMessageTemplate(t *testing.T) {
	t.Parallel()
	body := `{"task": "t", "models": {"m": {"provider": "replay", "responses": ["x"]}}, "agents": [
		{"name": "a", "type": "assistant", "model": "m", "system_message_template": "Customer {customer} ({tier}), {{literal}}."},
		{"name": "b", "type": "assistant", "model": "m", "system_message_template": "Customer {customer"},
		{"name": "c", "type": "assistant", "model": "m", "system_message_template": "{0} {x!r}"},
		{"name": "d", "type": "assistant", "model": "m", "system_message": "s", "system_message_template": "t"}]}`
	checkProblems(t, checked(body), map[string]string{
		"/agents/1/system_message_template": "single '{' encountered",
		"/agents/2/system_message_template": "positional field",
		"/agents/3/system_message_template": "not both",
	})
}

// TestGraphEdgeExpressions: an edge's condition may be an expression over
// the variables, checked as a hand-off's is.
func TestGraphEdgeExpressions(t *testing.T) {
	t.Parallel()
	body := `{"task": "t", "context_variables": {"severity": 1}, "models": {"m": {"provider": "replay", "responses": ["x"]}},
		"agents": [{"name": "a", "type": "assistant", "model": "m"}, {"name": "b", "type": "assistant", "model": "m"}, {"name": "c", "type": "assistant", "model": "m"}],
		"speaker_selection": {"method": "graph", "graph": {"nodes": {
			"a": {"name": "a", "edges": [{"target": "b", "condition": {"expression": "severity >= 8"}},
			                             {"target": "c", "condition": {"expression": "level > 1"}},
			                             {"target": "c", "condition": {"expr": "x"}}]},
			"b": {"name": "b"}, "c": {"name": "c"}}}}}`
	got := checked(body)
	checkProblems(t, got, map[string]string{
		"/speaker_selection/graph/nodes/a/edges/1/condition/expression": "undeclared reference to 'level'",
		"/speaker_selection/graph/nodes/a/edges/2/condition":            `{"expression": ...} over the context variables`,
	})
	sp, _ := DecodeSpec([]byte(body))
	if src, ok := sp.SpeakerSelection.Graph.Nodes["a"].Edges[0].Expression(); !ok || src != "severity >= 8" {
		t.Errorf("Expression() = %q, %v", src, ok)
	}
	if !slices.Equal(sp.ContextNames(), []string{"severity"}) {
		t.Errorf("ContextNames() = %v", sp.ContextNames())
	}
}

// TestRunAndForkContextVariables: a run and a fork take context_variables,
// checked as a spec's are, their problems at their paths.
func TestRunAndForkContextVariables(t *testing.T) {
	t.Parallel()
	r := DecodeRunRequest([]byte(`{"task": "t", "context_variables": {"tier": "gold", "old": null}}`))
	if len(r.Problems) > 0 || string(r.ContextVariables["tier"]) != `"gold"` || string(r.ContextVariables["old"]) != "null" {
		t.Fatalf("run: %+v", r)
	}
	r = DecodeRunRequest([]byte(`{"context_variables": [1], "colour": 1}`))
	checkProblems(t, r.Problems, map[string]string{
		"/context_variables": "must be an object of variables",
		"/colour":            "use task, if_busy, max_round, context_variables",
	})
	f := DecodeForkRequest([]byte(`{"context_variables": {"": 1}, "run": {"context_variables": {"x": 1}}}`))
	checkProblems(t, f.Problems, map[string]string{"/context_variables/": "a variable's name must be 1 to 256 bytes"})
	if f.Run == nil || string(f.Run.ContextVariables["x"]) != "1" {
		t.Fatalf("fork's run: %+v", f.Run)
	}
}
