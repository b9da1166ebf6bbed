package spec

import (
	"fmt"
	"strings"
	"testing"
)

// graphSpec is a spec of assistants a, b, c and d with the given
// speaker_selection and extra top-level fields.
func graphSpec(selection, extra string) string {
	agent := func(n, more string) string {
		return `{"name": "` + n + `", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]}` + more + `}`
	}
	return `{"task": "t", "agents": [` + agent("a", "") + `,` + agent("b", "") + `,` + agent("c", "") + `,` + agent("d", "") + `]` +
		`, "speaker_selection": ` + selection + extra + `}`
}

func graph(nodes string, more string) string {
	return `{"method": "graph", "graph": {"nodes": {` + nodes + `}` + more + `}}`
}

func node(name, edges string) string {
	return `"` + name + `": {"name": "` + name + `", "edges": [` + edges + `]}`
}

func edge(target, more string) string { return `{"target": "` + target + `"` + more + `}` }

// TestValidateGraph: each rule of a graph is checked, with AgentChat's
// wording where AgentChat has the rule, and the problem's pointer.
func TestValidateGraph(t *testing.T) {
	t.Parallel()
	seq := node("a", edge("b", "")) + "," + node("b", edge("c", "")) + "," + node("c", "")
	loop := node("a", edge("b", "")) + "," + node("b", edge("a", `, "condition": "again"`)+","+edge("c", `, "condition": "done"`)) + "," + node("c", "")
	tests := []struct {
		name, body string
		want       map[string]string // path → part of the message
	}{
		{"sequence", graphSpec(graph(seq, ""), ""), nil},
		{"loop with an exit and a start node", graphSpec(graph(loop, `, "default_start_node": "a"`), ""), nil},
		{"fan-out, any join, groups", graphSpec(graph(node("a", edge("b", "")+","+edge("c", ""))+","+
			node("b", edge("d", `, "activation_condition": "any", "activation_group": "j"`))+","+
			node("c", edge("d", `, "activation_condition": "any", "activation_group": "j"`))+","+node("d", ""), ""), ""), nil},
		{"graph without method graph", graphSpec(`{"method": "round_robin", "graph": {"nodes": {`+seq+`}}}`, ""),
			map[string]string{"/speaker_selection/graph": "goes with method graph"}},
		{"graph with the default method", graphSpec(`{"graph": {"nodes": {`+seq+`}}}`, ""),
			map[string]string{"/speaker_selection/graph": "goes with method graph"}},
		{"method graph without graph", graphSpec(`{"method": "graph"}`, ""),
			map[string]string{"/speaker_selection/graph": "needs a graph"}},
		{"options of other methods", graphSpec(`{"method": "graph", "graph": {"nodes": {`+seq+`}}, "model": {"provider": "replay", "responses": ["a"]},
			"max_attempts": 2, "selector_prompt": "p", "allow_repeated_speaker": true, "seed": 1, "transitions": {"a": ["b"]}, "transitions_type": "allowed",
			"context": {"type": "buffered", "buffer_size": 2}}`, ""),
			map[string]string{"/speaker_selection/model": "graph method has no model", "/speaker_selection/max_attempts": "no max_attempts",
				"/speaker_selection/selector_prompt": "no selector_prompt", "/speaker_selection/allow_repeated_speaker": "no allow_repeated_speaker",
				"/speaker_selection/seed": "no seed", "/speaker_selection/transitions": "no transitions",
				"/speaker_selection/transitions_type": "no transitions_type", "/speaker_selection/context": "no context"}},
		{"no nodes", graphSpec(graph("", ""), ""), map[string]string{"/speaker_selection/graph/nodes": "Graph has no nodes."}},
		{"a user_proxy executing functions", strings.Replace(graphSpec(graph(seq, ""), `, "tools": [{"name": "f", "implementation": {"type": "builtin", "name": "calculator"}}]`),
			`"agents": [`, `"agents": [{"name": "p", "type": "user_proxy", "functions": ["f"]}, `, 1),
			map[string]string{"/agents/0/functions": "routes no tool calls to a user_proxy", "/tools/0": "runs no tools"}},
		{"key and name differ", graphSpec(graph(`"a": {"name": "b", "edges": [{"target": "c"}]}, `+node("c", ""), ""), ""),
			map[string]string{"/speaker_selection/graph/nodes/a/name": `must be the node's key "a"`}},
		{"node of no agent", graphSpec(graph(node("a", edge("zed", ""))+","+node("zed", ""), ""), ""),
			map[string]string{"/speaker_selection/graph/nodes/zed": `names no agent: "zed"`}},
		{"edge to no node", graphSpec(graph(node("a", edge("b", ""))+","+node("c", ""), ""), ""),
			map[string]string{"/speaker_selection/graph/nodes/a/edges/0/target": `names no node of the graph: "b"`}},
		{"start node of no node", graphSpec(graph(seq, `, "default_start_node": "d"`), ""),
			map[string]string{"/speaker_selection/graph/default_start_node": `names no node of the graph: "d"`}},
		{"no start node", graphSpec(graph(node("a", edge("b", `, "condition": "x"`))+","+node("b", edge("a", `, "condition": "y"`)+","+edge("c", `, "condition": "z"`))+","+node("c", ""), ""), ""),
			map[string]string{"/speaker_selection/graph/nodes": "Graph must have at least one start node"}},
		{"no leaf node", graphSpec(graph(node("a", edge("b", ""))+","+node("b", edge("a", `, "condition": "x"`)), `, "default_start_node": "a"`), ""),
			map[string]string{"/speaker_selection/graph/nodes": "Graph must have at least one leaf node"}},
		{"mixed edges", graphSpec(graph(node("a", edge("b", `, "condition": "yes"`)+","+edge("c", ""))+","+node("b", "")+","+node("c", ""), ""), ""),
			map[string]string{"/speaker_selection/graph/nodes/a/edges": "Node 'a' has a mix of conditional and unconditional edges."}},
		{"conflicting activation", graphSpec(graph(node("a", edge("c", `, "activation_condition": "all"`))+","+
			node("b", edge("c", `, "activation_condition": "any"`))+","+node("c", ""), ""), ""),
			map[string]string{"/speaker_selection/graph/nodes/b/edges/0/activation_condition": "Conflicting activation conditions for target 'c' group 'c': 'all' (from node 'a') and 'any' (from node 'b')"}},
		{"default activation conflicts with any", graphSpec(graph(node("a", edge("c", ""))+","+
			node("b", edge("c", `, "activation_condition": "any"`))+","+node("c", ""), ""), ""),
			map[string]string{"/speaker_selection/graph/nodes/b/edges/0/activation_condition": "'all' (from node 'a') and 'any' (from node 'b')"}},
		{"cycle without exit", graphSpec(graph(node("a", edge("b", ""))+","+node("b", edge("c", ""))+","+node("c", edge("b", ""))+","+node("d", ""), ""), ""),
			map[string]string{"/speaker_selection/graph/nodes/c/edges/0": "Cycle detected without exit condition: b -> c -> b"}},
		{"activation values", graphSpec(graph(`"a": {"name": "a", "activation": "most", "edges": [{"target": "b", "activation_condition": "some"}]}, `+node("b", ""), ""), ""),
			map[string]string{"/speaker_selection/graph/nodes/a/activation": "must be all or any",
				"/speaker_selection/graph/nodes/a/edges/0/activation_condition": "must be all or any"}},
		{"callable condition", graphSpec(graph(node("a", edge("b", `, "condition": {"callable": "lambda m: True"}`))+","+node("b", ""), ""), ""),
			map[string]string{"/speaker_selection/graph/nodes/a/edges/0/condition": "a callable condition is code"}},
		{"empty condition", graphSpec(graph(node("a", edge("b", `, "condition": ""`))+","+node("b", ""), ""), ""),
			map[string]string{"/speaker_selection/graph/nodes/a/edges/0/condition": "must not be empty"}},
		{"long condition", graphSpec(graph(node("a", edge("b", `, "condition": "`+strings.Repeat("x", maxGraphConditionBytes+1)+`"`))+","+node("b", ""), ""), ""),
			map[string]string{"/speaker_selection/graph/nodes/a/edges/0/condition": fmt.Sprintf("at most %d bytes", maxGraphConditionBytes)}},
		{"too many edges", graphSpec(graph(node("a", strings.TrimSuffix(strings.Repeat(edge("b", "")+",", maxGraphEdges+1), ","))+","+node("b", ""), ""), ""),
			map[string]string{"/speaker_selection/graph/nodes": fmt.Sprintf("at most %d edges", maxGraphEdges)}},
		{"unknown method", graphSpec(`{"method": "tree"}`, ""), map[string]string{"/speaker_selection/method": "swarm, graph"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkProblems(t, problems(t, tc.body), tc.want)
		})
	}
}

// TestValidateGraphNodeCount: a graph has at most one node per agent.
func TestValidateGraphNodeCount(t *testing.T) {
	t.Parallel()
	sp, probs := DecodeSpec([]byte(graphSpec(graph(node("a", edge("b", ""))+","+node("b", edge("c", ""))+","+node("c", ""), ""), "")))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	checkProblems(t, Validate(sp, Limits{MaxAgents: 2}, Env{Providers: []string{"openai"}}), map[string]string{
		"/agents":                        "at most 2 agents",
		"/speaker_selection/graph/nodes": "at most 2 nodes are allowed (one per agent)",
	})
}

// TestValidateMessageFilter: per_source, source, position and count, and
// only an assistant filters.
func TestValidateMessageFilter(t *testing.T) {
	t.Parallel()
	spec := func(filter string, typ string) string {
		a := `{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]}, "message_filter": ` + filter + `}`
		if typ == "user_proxy" {
			a = `{"name": "a", "type": "user_proxy", "human_input_mode": "NEVER", "message_filter": ` + filter + `}`
		}
		return `{"task": "t", "agents": [` + a + `, {"name": "b", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]}}]}`
	}
	tests := []struct {
		name, body string
		want       map[string]string
	}{
		{"valid", spec(`{"per_source": [{"source": "user", "position": "first", "count": 1}, {"source": "b", "position": "last", "count": 2},
			{"source": "a"}, {"source": "b", "position": "last"}]}`, ""), nil},
		{"no sources", spec(`{"per_source": []}`, ""), map[string]string{"/agents/0/message_filter/per_source": "at least one source filter"}},
		{"too many sources", spec(`{"per_source": [`+strings.TrimSuffix(strings.Repeat(`{"source": "b"},`, maxSourceFilters+1), ",")+`]}`, ""),
			map[string]string{"/agents/0/message_filter/per_source": fmt.Sprintf("at most %d source filters", maxSourceFilters)}},
		{"empty source", spec(`{"per_source": [{"source": ""}]}`, ""), map[string]string{"/agents/0/message_filter/per_source/0/source": "is required"}},
		{"source of no agent", spec(`{"per_source": [{"source": "zed"}]}`, ""),
			map[string]string{"/agents/0/message_filter/per_source/0/source": `names no agent: "zed" (nor user)`}},
		{"position", spec(`{"per_source": [{"source": "b", "position": "middle"}]}`, ""),
			map[string]string{"/agents/0/message_filter/per_source/0/position": "must be first or last"}},
		{"count zero", spec(`{"per_source": [{"source": "b", "position": "last", "count": 0}]}`, ""),
			map[string]string{"/agents/0/message_filter/per_source/0/count": "leave count out for every message"}},
		{"count without position", spec(`{"per_source": [{"source": "b", "count": 2}]}`, ""),
			map[string]string{"/agents/0/message_filter/per_source/0/count": "needs a position"}},
		{"on a user proxy", spec(`{"per_source": [{"source": "b"}]}`, "user_proxy"),
			map[string]string{"/agents/0/message_filter": "only an assistant has a message filter"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkProblems(t, problems(t, tc.body), tc.want)
		})
	}
}

// checkProblems: exactly the wanted paths, each message containing its
// wanted part.
func checkProblems(t *testing.T, got []Problem, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("got %d problems, want %d: %v", len(got), len(want), got)
	}
	for _, p := range got {
		w, ok := want[p.Path]
		switch {
		case !ok:
			t.Errorf("unexpected problem %s: %s", p.Path, p.Message)
		case !strings.Contains(p.Message, w):
			t.Errorf("problem %s = %q, want it to say %q", p.Path, p.Message, w)
		}
	}
}

func TestGraphHasCycle(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		nodes string
		want  bool
	}{
		{node("a", edge("b", "")) + "," + node("b", edge("c", "")) + "," + node("c", ""), false},
		{node("a", edge("b", "")+","+edge("c", "")) + "," + node("b", edge("c", "")) + "," + node("c", ""), false},
		{node("a", edge("b", "")) + "," + node("b", edge("a", `, "condition": "x"`)+","+edge("c", `, "condition": "y"`)) + "," + node("c", ""), true},
		{node("a", edge("a", `, "condition": "x"`)+","+edge("b", `, "condition": "y"`)) + "," + node("b", ""), true},
		{node("a", edge("zed", "")), false},
	} {
		sp, probs := DecodeSpec([]byte(graphSpec(graph(tc.nodes, ""), "")))
		if len(probs) > 0 {
			t.Fatal(probs)
		}
		if got := sp.SpeakerSelection.Graph.HasCycle(); got != tc.want {
			t.Errorf("HasCycle(%s) = %v, want %v", tc.nodes, got, tc.want)
		}
	}
}
