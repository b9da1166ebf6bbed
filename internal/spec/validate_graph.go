package spec

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/spec/problem"
	"github.com/agentd/agentd/internal/varexpr"
)

// Bounds of a graph and a message filter that no server setting bounds.
// A graph has at most one node per agent (limits.MaxAgents).
const (
	maxGraphEdges          = 1024
	maxGraphConditionBytes = 4096
	maxSourceFilters       = 64
	maxSourceFilterCount   = 1_000_000
)

// checkGraph checks the graph method's DiGraph with GraphFlow 0.7.5's own
// rules (DiGraph.graph_validate, has_cycles_with_exit and
// _validate_activation_conditions, in their wording), and what agentd adds:
// every node is an agent, every edge leads to a node, conditions are text.
// AgentChat stops at the first problem; here every one is listed. Nodes
// are visited in the order of their names, so where AgentChat's message
// depends on the order of the nodes in the file (which node a cycle is
// told from, which of two conflicting edges is named first), agentd's
// message may start from another node of the same cycle or name the two
// edges the other way round.
func (v *validator) checkGraph(p string, g *Graph) {
	if len(g.Nodes) == 0 {
		v.add(p+"/nodes", "Graph has no nodes.")
		return
	}
	if len(g.Nodes) > v.limits.MaxAgents {
		v.add(p+"/nodes", "at most %d nodes are allowed (one per agent)", v.limits.MaxAgents)
		return
	}
	names := slices.Sorted(maps.Keys(g.Nodes))
	edges := 0
	for _, n := range names {
		edges += len(g.Nodes[n].Edges)
	}
	if edges > maxGraphEdges {
		v.add(p+"/nodes", "at most %d edges are allowed (found %d)", maxGraphEdges, edges)
		return
	}
	hasParent := map[string]bool{}
	for _, n := range names {
		node := g.Nodes[n]
		np := p + "/nodes/" + problem.Escape(n)
		switch {
		case node.Name != n:
			v.add(np+"/name", "must be the node's key %q: a node is the agent of that name", n)
		case !v.agentNamed(n):
			v.add(np, "names no agent: %q", n)
		}
		switch node.Activation {
		case "", ActivationAll, ActivationAny:
		default:
			v.add(np+"/activation", "must be all or any")
		}
		conditional, unconditional := false, false
		for i := range node.Edges {
			e := &node.Edges[i]
			ep := np + "/edges/" + strconv.Itoa(i)
			if _, ok := g.Nodes[e.Target]; !ok {
				v.add(ep+"/target", "names no node of the graph: %q", e.Target)
			}
			hasParent[e.Target] = true
			switch e.ActivationCondition {
			case "", ActivationAll, ActivationAny:
			default:
				v.add(ep+"/activation_condition", "must be all or any")
			}
			if len(e.ActivationGroup) > maxGraphConditionBytes {
				v.add(ep+"/activation_group", "must be at most %d bytes", maxGraphConditionBytes)
			}
			if v.checkEdgeCondition(ep+"/condition", e.Condition) {
				conditional = true
			} else {
				unconditional = true
			}
		}
		if conditional && unconditional {
			v.add(np+"/edges", "Node '%s' has a mix of conditional and unconditional edges.", n)
		}
	}
	if s := g.DefaultStartNode; s != nil {
		if _, ok := g.Nodes[*s]; !ok {
			v.add(p+"/default_start_node", "names no node of the graph: %q", *s)
		}
	} else if !slices.ContainsFunc(names, func(n string) bool { return !hasParent[n] }) {
		v.add(p+"/nodes", "Graph must have at least one start node: a node no edge leads to, or default_start_node")
	}
	if !slices.ContainsFunc(names, func(n string) bool { return len(g.Nodes[n].Edges) == 0 }) {
		v.add(p+"/nodes", "Graph must have at least one leaf node: a node without edges, where the run can end")
	}
	v.checkActivationConditions(p, g, names)
	v.checkCycles(p, g, names)
}

// checkEdgeCondition checks an edge's condition, which is the text the
// source's message must contain, or null; it reports whether the edge is
// conditional. A callable condition is Python code: AgentChat cannot dump
// one (it writes null), and agentd never runs code from a spec or file.
func (v *validator) checkEdgeCondition(path string, raw json.RawMessage) bool {
	if isNull(raw) {
		return false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil && obj["expression"] != nil {
		v.checkEdgeExpression(path, obj)
		return true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		v.add(path, "must be the text the message must contain, {\"expression\": ...} over the context variables, or null for an unconditional edge: "+
			"a callable condition is code, which agentd never runs; give the text instead (AgentChat's string condition: "+
			"the edge is taken when the source's message contains it)")
		return true
	}
	switch {
	case s == "":
		v.add(path, "must not be empty: every message contains the empty text; use null for an unconditional edge")
	case len(s) > maxGraphConditionBytes:
		v.add(path, "must be at most %d bytes", maxGraphConditionBytes)
	}
	return true
}

// checkEdgeExpression checks an edge's {"expression": "..."}: a boolean
// CEL expression over the spec's context variables, evaluated when the
// source's turn ends.
func (v *validator) checkEdgeExpression(path string, x map[string]json.RawMessage) {
	for k := range x {
		if k != "expression" {
			v.add(problem.Key(path, k), "unknown field: an edge's condition object has only expression")
		}
	}
	var src string
	if err := json.Unmarshal(x["expression"], &src); err != nil {
		v.add(path+"/expression", "must be a string: a boolean expression over the context variables, e.g. \"severity >= 8\"")
		return
	}
	if _, err := varexpr.Compile(src, v.spec.ContextNames()); err != nil {
		v.add(path+"/expression", "%s", err)
	}
}

// checkActivationConditions: the edges of one target and activation group
// agree on all or any (AgentChat's _validate_activation_conditions, which
// names the node of the first edge seen and the node of the other).
func (v *validator) checkActivationConditions(p string, g *Graph, names []string) {
	type key struct{ target, group string }
	first := map[key]struct{ cond, from string }{}
	for _, n := range names {
		for i := range g.Nodes[n].Edges {
			e := &g.Nodes[n].Edges[i]
			cond := cmp.Or(e.ActivationCondition, ActivationAll)
			k := key{e.Target, e.Group()}
			f, seen := first[k]
			if !seen {
				first[k] = struct{ cond, from string }{cond, n}
				continue
			}
			if f.cond != cond {
				v.add(p+"/nodes/"+problem.Escape(n)+"/edges/"+strconv.Itoa(i)+"/activation_condition",
					"Conflicting activation conditions for target '%s' group '%s': '%s' (from node '%s') and '%s' (from node '%s')",
					e.Target, k.group, f.cond, f.from, cond, n)
			}
		}
	}
}

// checkCycles: every cycle has at least one conditional edge among the
// edges of its nodes, so that the run can leave it (AgentChat's
// has_cycles_with_exit, the same depth-first search). A graph with a cycle
// needs a turn limit too, which a spec always has (max_round).
func (v *validator) checkCycles(p string, g *Graph, names []string) {
	visited, onPath := map[string]bool{}, map[string]bool{}
	var path []string
	var dfs func(n string)
	dfs = func(n string) {
		visited[n], onPath[n] = true, true
		path = append(path, n)
		for i, e := range g.Nodes[n].Edges {
			if _, ok := g.Nodes[e.Target]; !ok {
				continue // reported
			}
			if !visited[e.Target] {
				dfs(e.Target)
				continue
			}
			if !onPath[e.Target] {
				continue
			}
			cycle := path[slices.Index(path, e.Target):]
			exit := slices.ContainsFunc(cycle, func(c string) bool {
				return slices.ContainsFunc(g.Nodes[c].Edges, func(e GraphEdge) bool { return !isNull(e.Condition) })
			})
			if !exit {
				v.add(p+"/nodes/"+problem.Escape(n)+"/edges/"+strconv.Itoa(i),
					"Cycle detected without exit condition: %s", strings.Join(append(slices.Clone(cycle), cycle[0]), " -> "))
			}
		}
		onPath[n] = false
		path = path[:len(path)-1]
	}
	for _, n := range names {
		if !visited[n] {
			dfs(n)
		}
	}
}

// isNull reports whether a condition is absent or null.
func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// checkMessageFilter checks an agent's message_filter (MessageFilterAgent's
// per-source filters). AgentChat reads a count of 0 or none as "every
// message of the source", and ignores a count without a position; a spec
// says so by leaving count out, so a count is at least 1 and goes with a
// position.
func (v *validator) checkMessageFilter(p string, a *Agent) {
	f := a.MessageFilter
	if f == nil {
		return
	}
	if a.Type != AgentAssistant {
		v.add(p, "only an assistant has a message filter")
	}
	switch {
	case len(f.PerSource) == 0:
		v.add(p+"/per_source", "at least one source filter is required")
	case len(f.PerSource) > maxSourceFilters:
		v.add(p+"/per_source", "at most %d source filters are allowed", maxSourceFilters)
		return
	}
	for i, sf := range f.PerSource {
		sp := p + "/per_source/" + strconv.Itoa(i)
		switch {
		case sf.Source == "":
			v.add(sp+"/source", "is required: the name of an agent, or user")
		case sf.Source != UserName && !v.agentNamed(sf.Source):
			v.add(sp+"/source", "names no agent: %q (nor user)", sf.Source)
		}
		switch sf.Position {
		case "", "first", "last":
		default:
			v.add(sp+"/position", "must be first or last")
		}
		if sf.Count != nil {
			switch {
			case *sf.Count < 1 || *sf.Count > maxSourceFilterCount:
				v.add(sp+"/count", "must be between 1 and %d; leave count out for every message of the source", maxSourceFilterCount)
			case sf.Position == "":
				v.add(sp+"/count", "needs a position (first or last); without one the agent sees every message of the source")
			}
		}
	}
}

// checkGraphSelection checks the graph method: its graph, and none of the
// options of the other methods (the graph's edges choose who speaks).
func (v *validator) checkGraphSelection(p string, sel *Selection) {
	if sel.Graph == nil {
		v.add(p+"/graph", "the graph method needs a graph: its nodes and edges")
	} else {
		v.checkGraph(p+"/graph", sel.Graph)
	}
	for i := range v.spec.Agents {
		if a := &v.spec.Agents[i]; a.Type == AgentUserProxy && len(a.Functions) > 0 {
			// Routing calls to the user_proxy that executes them is AutoGen
			// 0.2's group chat; in a graph the edges alone say who speaks,
			// so the calls would never be answered.
			v.add("/agents/"+strconv.Itoa(i)+"/functions", "a graph chat routes no tool calls to a user_proxy: give the tools to the assistants that call them")
		}
	}
	for _, o := range []struct {
		set  bool
		name string
	}{
		{sel.Model != nil, "model"}, {sel.MaxAttempts != nil, "max_attempts"}, {sel.SelectorPrompt != nil, "selector_prompt"},
		{sel.Context != nil, "context"}, {sel.AllowRepeatedSpeaker != nil, "allow_repeated_speaker"}, {sel.Seed != nil, "seed"},
		{len(sel.Transitions) > 0, "transitions"}, {sel.TransitionsType != "", "transitions_type"},
	} {
		if o.set {
			v.add(p+"/"+o.name, "the graph method has no %s: the graph's edges say who speaks next", o.name)
		}
	}
}

// HasCycle reports whether the graph has a cycle (edges to no node
// aside). GraphFlow needs a termination condition or a turn limit for a
// graph with one.
func (g *Graph) HasCycle() bool {
	state := map[string]int{} // 1: on the path, 2: done
	var dfs func(n string) bool
	dfs = func(n string) bool {
		state[n] = 1
		for _, e := range g.Nodes[n].Edges {
			if _, ok := g.Nodes[e.Target]; !ok {
				continue
			}
			if state[e.Target] == 1 || state[e.Target] == 0 && dfs(e.Target) {
				return true
			}
		}
		state[n] = 2
		return false
	}
	for _, n := range slices.Sorted(maps.Keys(g.Nodes)) {
		if state[n] == 0 && dfs(n) {
			return true
		}
	}
	return false
}
