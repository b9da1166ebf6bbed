package component

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/spec"
)

// TestGraphErrorsAsAgentChat: for each graph AgentChat 0.7.5's
// DiGraph.graph_validate refuses (testdata/graph_errors.json, recorded by
// e2e/autogen/components/dump.py), agentd's validation refuses it with
// AgentChat's message (agentd may add a hint after it).
func TestGraphErrorsAsAgentChat(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("testdata", "graph_errors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases map[string]struct {
		Graph json.RawMessage `json:"graph"`
		Error *string         `json:"error"`
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 8 {
		t.Fatalf("%d recorded graphs, want every rule", len(cases))
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if tc.Error == nil {
				t.Fatal("AgentChat accepted the graph: the recording is not of a refused graph")
			}
			want := strings.TrimSuffix(*tc.Error, ".")
			body := `{"task": "x", "agents": [` + strings.Join([]string{agentJSON("a"), agentJSON("b"), agentJSON("c"), agentJSON("d")}, ",") +
				`], "speaker_selection": {"method": "graph", "graph": ` + string(tc.Graph) + `}}`
			sp, probs := spec.DecodeSpec([]byte(body))
			if len(probs) > 0 {
				t.Fatal(probs)
			}
			probs = spec.Validate(sp, spec.Limits{}, env)
			if !slices.ContainsFunc(probs, func(p spec.Problem) bool {
				return strings.HasPrefix(p.Path, "/speaker_selection/graph") && strings.HasPrefix(p.Message, want)
			}) {
				t.Errorf("no problem saying %q: %v", *tc.Error, probs)
			}
		})
	}
}

func agentJSON(name string) string {
	return `{"name": "` + name + `", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]}}`
}

// graphFlow builds a GraphFlow component over assistants a, b and c.
func graphFlow(graph, extra string) string {
	return mk(provGraphFlow, `{"participants": [`+assistant("a", "")+`,`+assistant("b", "")+`,`+assistant("c", "")+`], "graph": `+graph+extra+`}`)
}

const loopGraph = `{"nodes": {"a": {"name": "a", "edges": [{"target": "b"}]},
	"b": {"name": "b", "edges": [{"target": "a", "condition": "again"}, {"target": "c", "condition": "done"}]},
	"c": {"name": "c", "edges": []}}, "default_start_node": "a"}`

// TestGraphFlowRefusals: what a GraphFlow or MessageFilterAgent file may
// not hold, each with its pointer into the file.
func TestGraphFlowRefusals(t *testing.T) {
	t.Parallel()
	filter := func(name, wrapped, per string) string {
		return mk(provMessageFilter, `{"name": "`+name+`", "wrapped_agent": `+wrapped+`, "filter": {"per_source": [`+per+`]}}`)
	}
	tests := []struct {
		name, team, path, want string
	}{
		{"cycle without termination or max_turns", graphFlow(loopGraph, ""), "/team/config/max_turns",
			"A termination condition is required for cyclic graphs without a maximum turn limit."},
		{"no graph", mk(provGraphFlow, `{"participants": [`+assistant("a", "")+`]}`), "/team/config/graph", "is required"},
		{"graph without nodes", graphFlow(`{}`, ""), "/team/config/graph/nodes", "is required"},
		{"edge without target", graphFlow(`{"nodes": {"a": {"name": "a", "edges": [{"condition": "x"}]}}}`, ""),
			"/team/config/graph/nodes/a/edges/0/target", "is required"},
		{"filter named otherwise", rr(filter("x", assistant("a", ""), `{"source": "user"}`), ""), "/team/config/participants/0/config/name",
			`must be the wrapped agent's name "a"`},
		{"filter of a filter", rr(filter("a", filter("a", assistant("a", ""), `{"source": "user"}`), `{"source": "user"}`), ""),
			"/team/config/participants/0/config/wrapped_agent", "wraps another MessageFilterAgent"},
		{"filter of a team", rr(filter("a", rr(assistant("a", ""), ""), `{"source": "user"}`), ""),
			"/team/config/participants/0/config/wrapped_agent/provider", "unknown agent provider"},
		{"filter without wrapped agent", rr(mk(provMessageFilter, `{"name": "a", "filter": {"per_source": []}}`), ""),
			"/team/config/participants/0/config/wrapped_agent", "is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseRequest(request(t, []byte(tc.team), ""), testEPs)
			wantProblem(t, err, tc.path, tc.want)
		})
	}
}

// TestGraphFlowAccepted: a cycle with max_turns or a termination condition
// is fine, as in AgentChat; and the spec's validation problems of a graph
// or filter point into the file.
func TestGraphFlowAccepted(t *testing.T) {
	t.Parallel()
	for _, extra := range []string{`, "max_turns": 5`, `, "termination_condition": ` + mk(provMaxMessage, `{"max_messages": 5}`)} {
		if _, err := ParseRequest(request(t, []byte(graphFlow(loopGraph, extra)), ""), testEPs); err != nil {
			t.Errorf("%s: %v", extra, err)
		}
	}
	bad := `{"nodes": {"a": {"name": "a", "edges": [{"target": "b", "condition": {"code": "lambda m: True"}}, {"target": "c"}]},
		"b": {"name": "b", "edges": []}, "c": {"name": "c", "edges": [], "activation": "some"}}}`
	team := mk(provGraphFlow, `{"participants": [`+assistant("a", "")+`,`+assistant("b", "")+`,`+
		mk(provMessageFilter, `{"name": "c", "wrapped_agent": `+assistant("c", "")+`, "filter": {"per_source": [{"source": "ghost", "position": "top", "count": -1}]}}`)+
		`], "graph": `+bad+`}`)
	sp, req := specOf(t, request(t, []byte(team), ""))
	got := map[string]string{}
	for _, p := range req.Translation.MapProblems(spec.Validate(sp, spec.Limits{}, env)) {
		got[p.Path] = p.Message
	}
	for path, want := range map[string]string{
		"/team/config/graph/nodes/a/edges/0/condition":                    "callable condition is code",
		"/team/config/graph/nodes/a/edges":                                "mix of conditional and unconditional edges",
		"/team/config/graph/nodes/c/activation":                           "must be all or any",
		"/team/config/participants/2/config/filter/per_source/0/source":   `names no agent: "ghost"`,
		"/team/config/participants/2/config/filter/per_source/0/position": "must be first or last",
		"/team/config/participants/2/config/filter/per_source/0/count":    "must be between 1",
	} {
		if !strings.Contains(got[path], want) {
			t.Errorf("problem at %s = %q, want it to say %q (all: %v)", path, got[path], want, got)
		}
	}
}

// TestMessageFilterCounts: AgentChat reads a count of 0, or a count
// without a position, as every message of the source; the spec leaves the
// count out then, and says so in a warning.
func TestMessageFilterCounts(t *testing.T) {
	t.Parallel()
	team := rr(mk(provMessageFilter, `{"name": "a", "wrapped_agent": `+assistant("a", "")+`,
		"filter": {"per_source": [{"source": "user", "position": "first", "count": 0}, {"source": "a", "count": 3}, {"source": "a", "position": "last", "count": 2}]}}`), "")
	sp, req := specOf(t, request(t, []byte(team), ""))
	f := sp.Agents[0].MessageFilter
	if f == nil || len(f.PerSource) != 3 || f.PerSource[0].Count != nil || f.PerSource[1].Count != nil || f.PerSource[2].Count == nil || *f.PerSource[2].Count != 2 {
		t.Fatalf("message_filter = %+v", f)
	}
	for _, p := range []string{"/team/config/participants/0/config/filter/per_source/0/count", "/team/config/participants/0/config/filter/per_source/1/count"} {
		if !slices.ContainsFunc(req.Translation.Warnings, func(w Warning) bool { return w.Path == p }) {
			t.Errorf("no warning at %s: %v", p, req.Translation.Warnings)
		}
	}
	if probs := spec.Validate(sp, spec.Limits{}, env); len(probs) > 0 {
		t.Errorf("the translated spec is invalid: %v", probs)
	}
}

// TestExportGraphNative: a native graph spec, with defaults left out,
// exports as GraphFlow with every default written (as AgentChat dumps
// them), and a message filter as a MessageFilterAgent around the agent.
func TestExportGraphNative(t *testing.T) {
	t.Parallel()
	sp, probs := spec.DecodeSpec([]byte(`{"task": "x", "max_round": 4,
		"agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]},
		            "message_filter": {"per_source": [{"source": "user", "position": "last", "count": 1}, {"source": "b"}]}},
		           {"name": "b", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]}}],
		"speaker_selection": {"method": "graph", "graph": {"nodes": {
			"a": {"name": "a", "edges": [{"target": "b", "condition": "go"}, {"target": "a", "condition": "again", "activation_group": "loop", "activation_condition": "any"}]},
			"b": {"name": "b"}}, "default_start_node": "a"}}}`))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	if probs := spec.Validate(sp, spec.Limits{}, env); len(probs) > 0 {
		t.Fatal(probs)
	}
	team, probs := ToTeam(sp, testEPs)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	var got struct {
		Provider string `json:"provider"`
		Config   struct {
			Description    string          `json:"description"`
			Name           string          `json:"name"`
			MaxTurns       int             `json:"max_turns"`
			EmitTeamEvents *bool           `json:"emit_team_events"`
			Graph          json.RawMessage `json:"graph"`
			Participants   []Component     `json:"participants"`
		} `json:"config"`
	}
	b, _ := marshal(team)
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	const wantGraph = `{"default_start_node":"a","nodes":{"a":{"activation":"all","edges":[{"activation_condition":"all","activation_group":"b","condition":"go","target":"b"},` +
		`{"activation_condition":"any","activation_group":"loop","condition":"again","target":"a"}],"name":"a"},"b":{"activation":"all","edges":[],"name":"b"}}}`
	if got.Provider != provGraphFlow || got.Config.Name != "GraphFlow" || got.Config.Description != "A team of agents" || got.Config.MaxTurns != 4 ||
		got.Config.EmitTeamEvents != nil || string(got.Config.Graph) != wantGraph {
		t.Errorf("export = %s", b)
	}
	p := got.Config.Participants
	if len(p) != 2 || p[0].Provider != provMessageFilter || p[1].Provider != provAssistant ||
		!strings.Contains(string(p[0].Config), `"filter":{"per_source":[{"count":1,"position":"last","source":"user"},{"source":"b"}]}`) ||
		!strings.Contains(string(p[0].Config), `"wrapped_agent":{"provider":"`+provAssistant) {
		t.Errorf("participants = %s", b)
	}
	// And back: the same graph and filter.
	again, req := specOf(t, request(t, b, ""))
	if !sameJSON(t, again.SpeakerSelection, sp.SpeakerSelection, true) || !sameJSON(t, again.Agents[0].MessageFilter, sp.Agents[0].MessageFilter, false) {
		t.Errorf("round trip: %s", req.Spec)
	}
}

// sameJSON compares two values by their JSON; with graphDefaults the
// second one's graph gets the defaults an export writes.
func sameJSON(t *testing.T, got, want any, graphDefaults bool) bool {
	t.Helper()
	if graphDefaults {
		sel := *want.(*spec.Selection)
		g := *sel.Graph
		g.Nodes = map[string]spec.GraphNode{}
		for k, n := range sel.Graph.Nodes {
			n.Activation = "all"
			n.Edges = slices.Clone(n.Edges)
			for i := range n.Edges {
				n.Edges[i].ActivationGroup = n.Edges[i].Group()
				if n.Edges[i].ActivationCondition == "" {
					n.Edges[i].ActivationCondition = "all"
				}
			}
			g.Nodes[k] = n
		}
		sel.Graph = &g
		want = &sel
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	return string(a) == string(b)
}
