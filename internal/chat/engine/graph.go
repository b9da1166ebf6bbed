package engine

import (
	"maps"
	"slices"
	"strings"

	"github.com/agentd/agentd/internal/spec"
)

// This file is the graph method: AgentChat's GraphFlowManager as a fold of
// the log. Which nodes are ready, which edges of a join were taken, and
// which "any" groups already enqueued their target are decided by the
// messages that ended turns, in the order the log holds them, exactly as
// GraphFlow updates its bookkeeping on each agent response in the order the
// responses arrive. A worker rebuilt from the log so knows which nodes of a
// fan-out still run and how much of a join is done.

// graphStopDetail is GraphFlow's stop text.
const graphStopDetail = "Digraph execution is complete"

// graphState is GraphFlowManager's execution state.
type graphState struct {
	g *spec.Graph
	// remaining counts, per target and activation group, the edges of an
	// "all" group not yet taken.
	remaining map[string]map[string]int
	// enqueuedAny marks an "any" group that enqueued its target already.
	enqueuedAny map[string]map[string]bool
	// triggered are the groups that enqueued each target, reset when the
	// target is selected.
	triggered map[string][]string
	// ready is the queue of nodes to run next, in the order they became
	// ready.
	ready []string
	// task is the run's last task message while it is the last event:
	// GraphFlow applies the edges of the last of a run's task messages
	// only (see settle).
	task *graphTask
}

// graphTask is a task message's source and model text.
type graphTask struct{ source, text string }

// newGraphState is a graph's state before its first node ran: every start
// node ready.
func newGraphState(g *spec.Graph) *graphState {
	gs := &graphState{g: g}
	gs.reset()
	return gs
}

// reset is GraphFlow's _reset_execution_state, done when the graph
// completes: the joins count from the start and the start nodes are ready.
func (gs *graphState) reset() {
	gs.remaining = map[string]map[string]int{}
	gs.enqueuedAny = map[string]map[string]bool{}
	for _, n := range sortedNodes(gs.g) {
		for _, e := range gs.g.Nodes[n].Edges {
			if gs.remaining[e.Target] == nil {
				gs.remaining[e.Target] = map[string]int{}
				gs.enqueuedAny[e.Target] = map[string]bool{}
			}
			gs.remaining[e.Target][e.Group()]++
			gs.enqueuedAny[e.Target][e.Group()] = false
		}
	}
	gs.ready = startNodes(gs.g)
}

// clone is a copy that can change without changing gs.
func (gs *graphState) clone() *graphState {
	c := &graphState{g: gs.g, ready: slices.Clone(gs.ready), task: gs.task,
		remaining: make(map[string]map[string]int, len(gs.remaining)), enqueuedAny: make(map[string]map[string]bool, len(gs.enqueuedAny))}
	for k, v := range gs.remaining {
		c.remaining[k] = maps.Clone(v)
	}
	for k, v := range gs.enqueuedAny {
		c.enqueuedAny[k] = maps.Clone(v)
	}
	if gs.triggered != nil {
		c.triggered = make(map[string][]string, len(gs.triggered))
		for k, v := range gs.triggered {
			c.triggered[k] = slices.Clone(v)
		}
	}
	return c
}

// sortedNodes are the graph's node names in order: a stored spec keeps no
// order of its keys, and GraphFlow's own order of start nodes is a set's.
func sortedNodes(g *spec.Graph) []string {
	return slices.Sorted(maps.Keys(g.Nodes))
}

// startNodes are the nodes a graph starts at: default_start_node, or
// every node no edge leads to.
func startNodes(g *spec.Graph) []string {
	if g.DefaultStartNode != nil && *g.DefaultStartNode != "" {
		return []string{*g.DefaultStartNode}
	}
	targets := map[string]bool{}
	for _, n := range g.Nodes {
		for _, e := range n.Edges {
			targets[e.Target] = true
		}
	}
	var out []string
	for _, n := range sortedNodes(g) {
		if !targets[n] {
			out = append(out, n)
		}
	}
	return out
}

// taken applies a node's message to the edges leaving it (GraphFlow's
// update_message_thread): each edge whose condition the message's model
// text satisfies counts toward its target's group; a group that is
// complete ("all") or first taken ("any") enqueues the target.
func (gs *graphState) taken(source, text string, holds func(expr string) bool) {
	node, ok := gs.g.Nodes[source]
	if !ok {
		return
	}
	for _, e := range node.Edges {
		if cond, ok := e.Text(); ok && !strings.Contains(text, cond) {
			continue
		}
		if expr, ok := e.Expression(); ok && !holds(expr) {
			continue
		}
		target, group := e.Target, e.Group()
		if gs.activation(target, group) == spec.ActivationAny {
			if !gs.enqueuedAny[target][group] {
				gs.ready = append(gs.ready, target)
				gs.enqueuedAny[target][group] = true
				gs.trigger(target, group)
			}
			continue
		}
		gs.remaining[target][group]--
		if gs.remaining[target][group] == 0 {
			gs.ready = append(gs.ready, target)
			gs.trigger(target, group)
		}
	}
}

// settle applies the run's last task message, once an event that is not a
// task message follows it: a task message whose source is a node takes
// that node's edges, as GraphFlow's start does with the last of them.
func (gs *graphState) settle(holds func(expr string) bool) {
	if t := gs.task; t != nil {
		gs.task = nil
		gs.taken(t.source, t.text, holds)
	}
}

// readyNodes is the ready queue as it stands once the task messages folded
// last are applied.
func (gs *graphState) readyNodes(holds func(expr string) bool) []string {
	if gs.task == nil {
		return gs.ready
	}
	c := gs.clone()
	c.settle(holds)
	return c.ready
}

// activation is the activation condition of a target's group: that of the
// first edge of the group (they agree: the spec is validated).
func (gs *graphState) activation(target, group string) string {
	for _, n := range sortedNodes(gs.g) {
		for _, e := range gs.g.Nodes[n].Edges {
			if e.Target == target && e.Group() == group && e.Any() {
				return spec.ActivationAny
			}
		}
	}
	return spec.ActivationAll
}

func (gs *graphState) trigger(target, group string) {
	if gs.triggered == nil {
		gs.triggered = map[string][]string{}
	}
	if !slices.Contains(gs.triggered[target], group) {
		gs.triggered[target] = append(gs.triggered[target], group)
	}
}

// selected drains the ready queue into a step (GraphFlow's select_speaker):
// each selected node's triggered groups count from the start again.
func (gs *graphState) selected(agents []string) {
	gs.ready = slices.DeleteFunc(gs.ready, func(n string) bool { return slices.Contains(agents, n) })
	for _, a := range agents {
		for _, group := range gs.triggered[a] {
			if gs.activation(a, group) == spec.ActivationAny {
				gs.enqueuedAny[a][group] = false
			} else {
				gs.remaining[a][group] = gs.originalCount(a, group)
			}
		}
		delete(gs.triggered, a)
	}
}

// originalCount is how many edges a target's group has.
func (gs *graphState) originalCount(target, group string) int {
	n := 0
	for _, node := range gs.g.Nodes {
		for _, e := range node.Edges {
			if e.Target == target && e.Group() == group {
				n++
			}
		}
	}
	return n
}
