package component

import (
	"cmp"
	"maps"
	"slices"
	"strconv"

	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/spec/problem"
)

// AgentChat 0.7.5's GraphFlow and MessageFilterAgent: what their dumps
// hold that a spec does not repeat.
const (
	provGraphFlow     = "autogen_agentchat.teams.GraphFlow"
	provMessageFilter = "autogen_agentchat.agents.MessageFilterAgent"

	graphFlowDescription     = "A team that runs a group chat following a Directed Graph execution pattern."
	graphFlowTeamDescription = "A team of agents" // GraphFlow.DEFAULT_DESCRIPTION, without the other teams' period
	messageFilterDescription = "A wrapper agent that filters incoming messages before passing them to the inner agent."
)

// graphFlow translates a GraphFlow's graph into the graph method. The
// graph keeps the file's shape (a spec's graph is AgentChat's DiGraph), so
// every pointer under it maps onto the same pointer in the file, and the
// spec's validation checks it with GraphFlow's own rules.
func (tr *translator) graphFlow(c *comp) {
	cfg := c.cfg
	sel := &spec.Selection{Method: spec.SelectGraph}
	tr.mapPath("/speaker_selection", c.path+"/config")
	gp := cfg.at("graph")
	tr.mapPath("/speaker_selection/graph", gp)
	raw := cfg.raw("graph")
	if raw == nil {
		tr.r.problem(gp, "is required: the DiGraph of the flow")
		tr.t.SpeakerSelection = sel
		return
	}
	g := newObject(&tr.r, gp, raw)
	if g == nil {
		return
	}
	sel.Graph = &spec.Graph{Nodes: map[string]spec.GraphNode{}}
	sel.Graph.DefaultStartNode = g.str("default_start_node")
	if nodes := g.raw("nodes"); nodes != nil {
		if m := newObject(&tr.r, g.at("nodes"), nodes); m != nil {
			for _, k := range slices.Sorted(maps.Keys(m.m)) {
				m.used[k] = true
				sel.Graph.Nodes[k] = tr.graphNode(m.at(k), m.m[k])
			}
		}
	} else {
		tr.r.problem(g.at("nodes"), "is required")
	}
	g.done()
	tr.t.SpeakerSelection = sel
	// GraphFlowManager refuses a graph with a cycle when the team has
	// neither a termination condition nor max_turns; so does agentd, for
	// the file to mean what it means in AgentChat.
	if sel.Graph.HasCycle() && cfg.raw("termination_condition") == nil && cfg.raw("max_turns") == nil {
		tr.r.problem(cfg.at("max_turns"), "A termination condition is required for cyclic graphs without a maximum turn limit. "+
			"Set max_turns or termination_condition (AgentChat refuses this team too)")
	}
}

func (tr *translator) graphNode(path string, raw any) spec.GraphNode {
	o := newObject(&tr.r, path, raw)
	if o == nil {
		return spec.GraphNode{}
	}
	// Defaults are written out, as AgentChat's own dump writes them (and
	// as an export does, so that a file and its export make one spec).
	n := spec.GraphNode{Name: o.required("name"), Activation: spec.ActivationAll}
	if a := o.str("activation"); a != nil && *a != "" {
		n.Activation = *a
	}
	for i, e := range o.list("edges") {
		eo := newObject(&tr.r, idx(o.at("edges"), i), e)
		if eo == nil {
			continue
		}
		edge := spec.GraphEdge{Target: eo.required("target"), Condition: eo.rawJSON("condition"), ActivationCondition: spec.ActivationAll}
		if s := eo.str("activation_group"); s != nil {
			edge.ActivationGroup = *s
		}
		edge.ActivationGroup = edge.Group()
		if s := eo.str("activation_condition"); s != nil && *s != "" {
			edge.ActivationCondition = *s
		}
		eo.done()
		n.Edges = append(n.Edges, edge)
	}
	o.done()
	return n
}

// messageFilter translates a MessageFilterAgent: the agent it wraps, with
// the filter as its message_filter. The wrapped agent's messages carry the
// wrapped agent's name, which is the name the team (and a graph's nodes)
// know it by, so the two names must be the same. AgentChat's
// MessageFilterAgent describes itself as the wrapped agent's description
// followed by " (with message filtering)"; the spec keeps the wrapped
// agent's own description.
func (tr *translator) messageFilter(c *comp) spec.Agent {
	cfg := c.cfg
	name := cfg.required("name")
	var a spec.Agent
	wp := cfg.at("wrapped_agent")
	if raw := cfg.raw("wrapped_agent"); raw != nil {
		if w := readComponent(&tr.r, wp, raw); w != nil {
			switch w.provider {
			case provAssistant:
				a = tr.assistant(w)
			case provUserProxy:
				a = tr.userProxy(w)
			case provCodeExecutor:
				a = tr.codeExecutor(w)
			case provMessageFilter:
				tr.r.problem(wp, "a MessageFilterAgent wraps another MessageFilterAgent: give the inner agent one filter")
			case provSocietyOfMind:
				tr.r.problem(wp, "a MessageFilterAgent cannot wrap a SocietyOfMindAgent: a team agent has no message filter; its inner team gets every message given to it")
			default:
				w.unsupported(&tr.r, "agent", agentProviders...)
			}
			w.cfg.done()
		}
	} else {
		tr.r.problem(wp, "is required: the agent whose messages are filtered")
	}
	if name != "" && a.Name != "" && name != a.Name {
		tr.r.problem(cfg.at("name"), "must be the wrapped agent's name %q: the wrapped agent's messages carry its name, which is how the team knows the agent", a.Name)
	}
	ap := idx("/agents", len(tr.t.Agents))
	fp := cfg.at("filter")
	tr.mapPath(ap+"/message_filter", fp)
	f := &spec.MessageFilter{PerSource: []spec.SourceFilter{}}
	if o := newObject(&tr.r, fp, cfg.raw("filter")); o != nil {
		for i, s := range o.list("per_source") {
			so := newObject(&tr.r, idx(o.at("per_source"), i), s)
			if so == nil {
				continue
			}
			sf := spec.SourceFilter{Source: so.required("source")}
			if p := so.str("position"); p != nil {
				sf.Position = *p
			}
			sf.Count = so.integer("count")
			switch {
			case sf.Count == nil:
			case *sf.Count == 0:
				// MessageFilterAgent slices only when count is truthy.
				tr.r.warn(so.at("count"), "0 means every message of the source in AgentChat, and so in agentd: left out")
				sf.Count = nil
			case sf.Position == "":
				tr.r.warn(so.at("count"), "ignored without a position, as AgentChat ignores it: the agent sees every message of the source")
				sf.Count = nil
			}
			so.done()
			f.PerSource = append(f.PerSource, sf)
		}
		o.done()
	}
	a.MessageFilter = f
	return a
}

// exportGraph writes a graph as GraphFlow's dump holds it: every default
// filled in (an edge's activation group is its target), a condition only
// when the edge has one.
func (e *exporter) exportGraph(path string, g *spec.Graph) map[string]any {
	nodes := make(map[string]any, len(g.Nodes))
	for k, n := range g.Nodes {
		edges := make([]map[string]any, 0, len(n.Edges))
		for i := range n.Edges {
			ed := &n.Edges[i]
			m := map[string]any{"target": ed.Target, "activation_group": ed.Group(),
				"activation_condition": cmp.Or(ed.ActivationCondition, spec.ActivationAll)}
			if s, ok := ed.Text(); ok {
				m["condition"] = s
			} else if len(ed.Condition) > 0 && string(ed.Condition) != "null" {
				e.r.problem(problem.Key(path+"/nodes", k)+"/edges/"+strconv.Itoa(i)+"/condition", "AgentChat's edge condition is a text: an expression over context variables is agentd's")
			}
			edges = append(edges, m)
		}
		nodes[k] = map[string]any{"name": n.Name, "edges": edges, "activation": cmp.Or(n.Activation, spec.ActivationAll)}
	}
	out := map[string]any{"nodes": nodes}
	if g.DefaultStartNode != nil {
		out["default_start_node"] = *g.DefaultStartNode
	}
	return out
}

// exportMessageFilter wraps an agent's component in a MessageFilterAgent.
func exportMessageFilter(name string, inner Component, f *spec.MessageFilter) Component {
	per := make([]map[string]any, len(f.PerSource))
	for i, s := range f.PerSource {
		m := map[string]any{"source": s.Source}
		if s.Position != "" {
			m["position"] = s.Position
		}
		if s.Count != nil {
			m["count"] = *s.Count
		}
		per[i] = m
	}
	return newComponent(provMessageFilter, messageFilterDescription,
		map[string]any{"name": name, "wrapped_agent": inner, "filter": map[string]any{"per_source": per}})
}
