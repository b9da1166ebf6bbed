// Package spectest makes chat specs for tests: random ones of every shape
// the engine's state tests explore, which the spec decoders are checked on
// too.
package spectest

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// RandomSpec returns the body of a random valid spec: one to three
// assistants with a tool and a handoff (some holding their calls for
// approval), sometimes a team agent with an inner team of two, a
// code-executing user_proxy with a function (sometimes holding its code
// for approval), any selection method, and often a termination condition.
// A swarm's assistants also hand off to p on a condition over a context
// variable, level, which the simulated tool t changes (engine.Effect).
func RandomSpec(rng *rand.Rand) string {
	methods := []string{"round_robin", "random", "auto", "manual", "swarm", "graph", "magentic_one"}
	return RandomSpecOf(rng, methods[rng.IntN(len(methods))])
}

// RandomSpecOf is RandomSpec with the given selection method.
func RandomSpecOf(rng *rand.Rand, method string) string {
	if method == "magentic_one" {
		return randomMagentic(rng)
	}
	modes := []string{"NEVER", "ALWAYS", "TERMINATE"}
	var agents []string
	n := 1 + rng.IntN(3)
	approvals := []string{"", `, "tool_approval": "always"`, `, "tool_approval": ["t"]`, ""}
	handoffs, vars := `["p"]`, ""
	if method == "swarm" {
		// Without drawing from rng: the other shapes stay as they were.
		handoffs, vars = `[{"target": "p", "condition": "level >= 3"}, "p"]`, `, "context_variables": {"level": 0}`
	}
	for i := range n {
		agents = append(agents, fmt.Sprintf(`{"name": "a%d", "type": "assistant", "tools": ["t"], "max_tool_iterations": %d, "reflect_on_tool_use": %v, "handoffs": %s%s}`,
			i, 1+rng.IntN(2), rng.IntN(2) == 0, handoffs, approvals[rng.IntN(len(approvals))]))
	}
	if rng.IntN(3) == 0 {
		// A team agent, whose inner team takes turns its own way.
		innerMethods := []string{"round_robin", "auto", "swarm"}
		agents = append(agents, fmt.Sprintf(`{"name": "s", "type": "team", "team": {"agents": [
			{"name": "i0", "type": "assistant", "tools": ["t"], "reflect_on_tool_use": %v, "handoffs": ["i1"]},
			{"name": "i1", "type": "assistant", "handoffs": ["i0"]}],
			"speaker_selection": {"method": %q, "max_attempts": 2}, "termination": {"text_mention": {"text": "STOP"}}, "max_round": %d}}`,
			rng.IntN(2) == 0, innerMethods[rng.IntN(len(innerMethods))], 1+rng.IntN(3)))
	}
	agents = append(agents, fmt.Sprintf(`{"name": "p", "type": "user_proxy", "human_input_mode": %q, "max_consecutive_auto_reply": %d, "code_execution": {}, "functions": ["f"], "code_approval": %v}`,
		modes[rng.IntN(3)], 1+rng.IntN(3), rng.IntN(3) == 0))
	conds := []string{`{"text_mention": {"text": "STOP"}}`, `{"max_messages": 12}`, `{"token_usage": {"max_total_tokens": 400}}`,
		`{"all": [{"source_match": {"sources": ["p"]}}, {"text_mention": {"text": "STOP"}}]}`, `{"handoff": {"target": "p"}}`, `{"function_call": {"name": "f"}}`,
		`{"all": [{"external": {}}, {"max_messages": 6}]}`}
	term := ""
	if rng.IntN(4) > 0 {
		term = `, "termination": ` + conds[rng.IntN(len(conds))]
	}
	selection := fmt.Sprintf(`{"method": %q, "seed": %d, "max_attempts": 2}`, method, rng.IntN(100))
	if method == "graph" {
		names := []string{"p"}
		for i := range n {
			names = append(names, fmt.Sprintf("a%d", i))
		}
		selection = fmt.Sprintf(`{"method": "graph", "graph": %s}`, randomGraph(rng, names))
	}
	return fmt.Sprintf(`{"task": "go", "agents": [%s], "max_round": %d, "tools": [{"name": "t"}, {"name": "f"}],
		"speaker_selection": %s%s%s}`,
		strings.Join(agents, ", "), 1+rng.IntN(8), selection, term, vars)
}

// randomGraph is a DiGraph over names: each node with up to three edges,
// all conditional ("STOP" or "ok", which the engine's random replies
// contain now and then) or all not; per target one activation condition,
// in one or two activation groups; sometimes a default start node.
func randomGraph(rng *rand.Rand, names []string) string {
	activation := map[string]string{}
	for _, n := range names {
		activation[n] = []string{"all", "any"}[rng.IntN(2)]
	}
	var nodes []string
	for _, n := range names {
		conditional := rng.IntN(2) == 0
		var edges []string
		for range rng.IntN(4) {
			target := names[rng.IntN(len(names))]
			cond := "null"
			if conditional {
				cond = []string{`"STOP"`, `"ok"`}[rng.IntN(2)]
			}
			edges = append(edges, fmt.Sprintf(`{"target": %q, "condition": %s, "activation_group": %q, "activation_condition": %q}`,
				target, cond, []string{"", "g"}[rng.IntN(2)], activation[target]))
		}
		nodes = append(nodes, fmt.Sprintf(`%q: {"name": %q, "edges": [%s]}`, n, n, strings.Join(edges, ", ")))
	}
	start := ""
	if rng.IntN(2) == 0 {
		start = fmt.Sprintf(`, "default_start_node": %q`, names[rng.IntN(len(names))])
	}
	return fmt.Sprintf(`{"nodes": {%s}%s}`, strings.Join(nodes, ", "), start)
}

// randomMagentic is a magentic_one spec: one to three assistants (the
// method runs assistants only) with a tool, some holding their calls for
// approval, a max_stalls of 0 to 3 (or the default), and often a
// termination condition.
func randomMagentic(rng *rand.Rand) string {
	var agents []string
	n := 1 + rng.IntN(3)
	approvals := []string{"", `, "tool_approval": "always"`, "", ""}
	for i := range n {
		agents = append(agents, fmt.Sprintf(`{"name": "a%d", "type": "assistant", "description": "Agent %d.", "tools": ["t"], "max_tool_iterations": %d, "reflect_on_tool_use": %v%s}`,
			i, i, 1+rng.IntN(2), rng.IntN(2) == 0, approvals[rng.IntN(len(approvals))]))
	}
	conds := []string{`{"text_mention": {"text": "STOP"}}`, `{"max_messages": 5}`, `{"token_usage": {"max_total_tokens": 400}}`,
		`{"source_match": {"sources": ["a0"]}}`, `{"all": [{"external": {}}, {"max_messages": 3}]}`}
	term := ""
	if rng.IntN(3) > 0 {
		term = `, "termination": ` + conds[rng.IntN(len(conds))]
	}
	stalls := ""
	if rng.IntN(4) > 0 {
		stalls = fmt.Sprintf(`, "max_stalls": %d`, rng.IntN(4))
	}
	return fmt.Sprintf(`{"task": "go", "agents": [%s], "max_round": %d, "tools": [{"name": "t"}],
		"speaker_selection": {"method": "magentic_one"%s}%s}`,
		strings.Join(agents, ", "), 1+rng.IntN(8), stalls, term)
}
