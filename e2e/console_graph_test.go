package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentd/agentd/internal/llm/openaitest"
)

// graphConsoleSpec is a graph chat a → (b, c) → d, with a conditional
// edge a → e that a's reply does not take. Each agent has a model of its
// own name on one OpenAI-wire server.
const graphConsoleSpec = `{"name": "fan-out", "task": "Plan the launch.",
	"agents": [
		{"name": "a", "type": "assistant", "model": {"provider": "openai", "model": "m-a"}},
		{"name": "b", "type": "assistant", "model": {"provider": "openai", "model": "m-b"}},
		{"name": "c", "type": "assistant", "model": {"provider": "openai", "model": "m-c"}},
		{"name": "d", "type": "assistant", "model": {"provider": "openai", "model": "m-d"}},
		{"name": "e", "type": "assistant", "model": {"provider": "openai", "model": "m-e"}}],
	"speaker_selection": {"method": "graph", "graph": {"nodes": {
		"a": {"name": "a", "edges": [{"target": "b", "condition": "ready"}, {"target": "c", "condition": "go"}, {"target": "e", "condition": "never"}]},
		"b": {"name": "b", "edges": [{"target": "d"}]},
		"c": {"name": "c", "edges": [{"target": "d"}]},
		"d": {"name": "d"},
		"e": {"name": "e"}}, "default_start_node": "a"}}}`

// graphState is what the drawing says of each node: name → data-state.
const graphState = `Object.fromEntries([...document.querySelectorAll('#graph-view .gnode')].map(g => [g.dataset.node, g.dataset.state]))`

// TestConsoleGraph follows a graph chat in the browser: a fan-out whose
// two branches stream at once (each model holds its reply after its first
// piece until the test lets it go), a fast branch that ends while the slow
// one still types, and a join. The drawing shows the nodes, the edge
// conditions, the join and the start, and which nodes run, have run and
// wait at each point; the parallel step's note names both agents, and its
// drafts and messages are marked as its branches; each draft is replaced
// by its own message; after the end every node that ran is done.
func TestConsoleGraph(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	gates := map[string]chan struct{}{"m-b": make(chan struct{}), "m-c": make(chan struct{})}
	var once sync.Map
	release := func(model string) {
		o, _ := once.LoadOrStore(model, &sync.Once{})
		o.(*sync.Once).Do(func() { close(gates[model]) })
	}
	held := func(model string) func(int) {
		return func(i int) {
			if i == 0 {
				<-gates[model]
			}
		}
	}
	model := openaitest.New()
	model.Respond(func(r openaitest.Request) openaitest.Reply {
		switch r.Chat.Model {
		case "m-a":
			return openaitest.Text("We are ready: go.")
		case "m-b":
			return openaitest.Reply{Pieces: []string{"B: the ", "slow ", "branch ", "is done."}, PieceDelay: 20 * time.Millisecond, Sent: held("m-b")}
		case "m-c":
			return openaitest.Reply{Pieces: []string{"C: the ", "fast ", "one."}, PieceDelay: 20 * time.Millisecond, Sent: held("m-c")}
		case "m-d":
			return openaitest.Text("D: both joined.")
		}
		return openaitest.Text("(not scripted)")
	})
	t.Cleanup(model.Close)
	t.Cleanup(func() { release("m-b"); release("m-c") }) // before Close, which waits for them
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none",
		"OPENAI_API_KEY=sk-console-test", "OPENAI_BASE_URL="+model.URL())
	c := p.create([]byte(graphConsoleSpec))
	b.openChat(p.base, c.ID)

	// The drawing: every node, the start, the edges with their conditions
	// as labels, and d's join of b and c.
	b.waitJS("the graph", `document.querySelectorAll('#graph-view svg.graph .gnode').length === 5`)
	nodes := eval[[]string](b, `[...document.querySelectorAll('#graph-view .gnode')].map(g => g.dataset.node + (g.hasAttribute('data-start') ? ' (start)' : ''))`)
	if want := []string{"a (start)", "b", "c", "d", "e"}; !slices.Equal(nodes, want) {
		t.Errorf("the graph's nodes are drawn as %v, want %v", nodes, want)
	}
	if !eval[bool](b, `!!document.querySelector('#graph-view .gstart[data-node="a"]')`) {
		t.Error("the start node a is not marked")
	}
	edges := eval[[]string](b, `[...document.querySelectorAll('#graph-view .gedge')].map(g => g.dataset.source + '→' + g.dataset.target + (g.dataset.condition !== undefined ? ' if ' + g.dataset.condition : ''))`)
	if want := []string{"a→b if ready", "a→c if go", "a→e if never", "b→d", "c→d"}; !slices.Equal(edges, want) {
		t.Errorf("the graph's edges are drawn as %v, want %v", edges, want)
	}
	labels := eval[[]string](b, `[...document.querySelectorAll('#graph-view .glabel')].map(g => g.dataset.source + '→' + g.dataset.target + ' ' + g.querySelector('text').textContent)`)
	if want := []string{`a→b "ready"`, `a→c "go"`, `a→e "never"`}; !slices.Equal(labels, want) {
		t.Errorf("the edge labels are %v, want %v", labels, want)
	}
	joins := eval[[]string](b, `[...document.querySelectorAll('#graph-view .gjoin')].map(g => g.dataset.node + ' ' + g.dataset.join + ': ' + g.querySelector('text').textContent)`)
	if want := []string{"d all: join: all"}; !slices.Equal(joins, want) {
		t.Errorf("the joins are marked %v, want %v", joins, want)
	}

	// b and c run at once and both type: a is done, d and e wait, and the
	// transcript shows the step's note and both drafts as its branches.
	b.waitJS("two drafts at once", `document.querySelector('li.msg.draft[data-draft="b"]')?.textContent.includes('B: the')
		&& document.querySelector('li.msg.draft[data-draft="c"]')?.textContent.includes('C: the')`)
	b.graphIs("both branches running", map[string]string{"a": "done", "b": "running", "c": "running", "d": "waiting", "e": "waiting"})
	note := eval[string](b, `document.querySelector('#transcript li.step-head')?.textContent ?? ''`)
	if note != "→ b, c run at once (turn 2, graph)" {
		t.Errorf("the parallel step's note reads %q", note)
	}
	step := eval[string](b, `document.querySelector('#transcript li.step-head').dataset.seq`)
	// (In the order their first pieces came.)
	drafts := eval[[]string](b, `[...document.querySelectorAll('#transcript li.msg.draft')].map(d => d.dataset.draft + ' ' + d.className + ' step ' + d.dataset.step + ' ' + d.querySelector('.branch-tag')?.textContent).sort()`)
	if want := []string{"b msg draft branch step " + step + " ∥ branch 1/2", "c msg draft branch step " + step + " ∥ branch 2/2"}; !slices.Equal(drafts, want) {
		t.Errorf("the drafts are shown as %q, want %q", drafts, want)
	}
	if lanes := eval[[]float64](b, `['b', 'c'].map(n => document.querySelector('li.msg.draft[data-draft="' + n + '"]').getBoundingClientRect().left)`); !(lanes[0] < lanes[1]) {
		t.Errorf("the two branches are not indented apart: left edges %v", lanes)
	}
	b.screenshot("graph-two-drafts")

	// c ends: its draft becomes its message, marked as its branch; b still
	// types, so the graph shows b running and c done.
	release("m-c")
	b.waitJS("c's message", `document.querySelector('#transcript li.msg[data-name="c"][data-seq]') && !document.querySelector('li.msg.draft[data-draft="c"]')`)
	b.graphIs("the slow branch running", map[string]string{"a": "done", "b": "running", "c": "done", "d": "waiting", "e": "waiting"})
	if got := eval[string](b, `document.querySelector('#transcript li.msg[data-name="c"][data-seq] > .content').textContent`); got != "C: the fast one." {
		t.Errorf("c's message shows %q", got)
	}
	if got := eval[string](b, `document.querySelector('li.msg.draft[data-draft="b"]')?.textContent ?? '(gone)'`); !strings.Contains(got, "B: the") || strings.Contains(got, "C:") {
		t.Errorf("b's draft shows %q after c's message came", got)
	}
	if got := eval[string](b, `(e => e.className + ' step ' + e.dataset.step)(document.querySelector('#transcript li.msg[data-name="c"][data-seq]'))`); got != "msg branch step "+step {
		t.Errorf("c's message is %q, want it marked as a branch of step %s", got, step)
	}
	if got := eval[string](b, `document.querySelector('#transcript li.msg[data-name="a"][data-seq]')?.className`); got != "msg" {
		t.Errorf("a's message, before the parallel step, is %q", got)
	}
	b.screenshot("graph-slow-branch")
	if out := os.Getenv("AGENTD_CONSOLE_GRAPH_SCREENSHOT"); out != "" {
		b.run(chromedp.EmulateViewport(1200, 900))
		eval[any](b, `document.querySelector('#main').scrollTop = 0`)
		png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// b ends, the join runs d, and the graph is complete: every node that
	// ran is done, e was never reached, and the edge to it was not taken.
	release("m-b")
	b.waitJS("the graph's end", `document.querySelector('#chat-end [data-stop-reason="graph_complete"]')`)
	end := eval[string](b, `document.querySelector('#chat-end').textContent`)
	if !strings.Contains(end, "Digraph execution is complete") {
		t.Errorf("the end reads %q", end)
	}
	final := map[string]string{"a": "done", "b": "done", "c": "done", "d": "done", "e": "skipped"}
	b.graphIs("the complete graph", final)
	if got := eval[string](b, `document.querySelector('#graph-view').dataset.complete`); got != "yes" {
		t.Errorf("the drawing's data-complete is %q after graph_complete", got)
	}
	taken := eval[[]string](b, `[...document.querySelectorAll('#graph-view .gedge')].map(g => g.dataset.source + '→' + g.dataset.target + ' ' + g.dataset.taken)`)
	if want := []string{"a→b yes", "a→c yes", "a→e no", "b→d yes", "c→d yes"}; !slices.Equal(taken, want) {
		t.Errorf("the edges taken are %v, want %v", taken, want)
	}
	if n := eval[int](b, `document.querySelectorAll('#transcript li.msg.draft').length`); n != 0 {
		t.Errorf("%d drafts left after the end", n)
	}
	b.shows("the graph's transcript", []string{"run 1: Plan the launch.", "user:Plan the launch.", "a:We are ready: go.",
		"c:C: the fast one.", "b:B: the slow branch is done.", "d:D: both joined.", "end 1: graph_complete"})
	marked := eval[[]string](b, `[...document.querySelectorAll('#transcript > li.msg[data-seq]')].map(li => li.dataset.name + (li.classList.contains('branch') ? ' branch ' + li.dataset.branch + ' of ' + li.dataset.step : ''))`)
	if want := []string{"user", "a", "c branch c of " + step, "b branch b of " + step, "d"}; !slices.Equal(marked, want) {
		t.Errorf("the messages are marked %v, want %v", marked, want)
	}
	b.checkTranscript(p, c.ID)
	b.screenshot("graph-complete")

	// A reload rebuilds the same from the log.
	b.run(chromedp.Reload())
	b.waitJS("the reloaded end", `document.querySelector('#chat-end [data-stop-reason="graph_complete"]') && document.querySelector('#graph-view[data-complete="yes"]')`)
	b.graphIs("the reloaded graph", final)
	if got := eval[[]string](b, `[...document.querySelectorAll('#transcript > li.msg.branch')].map(li => li.dataset.name)`); !slices.Equal(got, []string{"c", "b"}) {
		t.Errorf("after a reload the branches are %v", got)
	}

	// An any join: w runs once, after the first of y and z.
	anyJoin := p.create([]byte(`{"task": "go",
		"agents": [
			{"name": "x", "type": "assistant", "model": {"provider": "replay", "responses": ["X"]}},
			{"name": "y", "type": "assistant", "model": {"provider": "replay", "responses": ["Y"]}},
			{"name": "z", "type": "assistant", "model": {"provider": "replay", "responses": ["Z"]}},
			{"name": "w", "type": "assistant", "model": {"provider": "replay", "responses": ["W"]}}],
		"speaker_selection": {"method": "graph", "graph": {"nodes": {
			"x": {"name": "x", "edges": [{"target": "y"}, {"target": "z"}]},
			"y": {"name": "y", "edges": [{"target": "w", "activation_group": "first", "activation_condition": "any"}]},
			"z": {"name": "z", "edges": [{"target": "w", "activation_group": "first", "activation_condition": "any"}]},
			"w": {"name": "w", "activation": "any"}}}}}`))
	b.openChat(p.base, anyJoin.ID)
	b.waitJS("the any join's end", `document.querySelector('#chat-end [data-stop-reason="graph_complete"]') && document.querySelector('#graph-view[data-complete="yes"]')`)
	joins = eval[[]string](b, `[...document.querySelectorAll('#graph-view .gjoin')].map(g => g.dataset.node + ' ' + g.dataset.group + ' ' + g.dataset.join + ': ' + g.querySelector('text').textContent)`)
	if want := []string{"w first any: join: any"}; !slices.Equal(joins, want) {
		t.Errorf("the any join is marked %v, want %v", joins, want)
	}
	b.graphIs("the any join's graph", map[string]string{"x": "done", "y": "done", "z": "done", "w": "done"})
	if got := eval[string](b, `document.querySelector('#transcript li.step-head')?.textContent ?? ''`); got != "→ y, z run at once (turn 2, graph)" {
		t.Errorf("the any join's parallel step reads %q", got)
	}
	b.checkTranscript(p, anyJoin.ID)

	// A chat of another method has no drawing; a team agent's inner turns
	// and messages are marked with its team and set apart.
	other := p.create([]byte(strings.Replace(somSpec, `"delay_ms": 4000`, `"delay_ms": 0`, 1)))
	b.openChat(p.base, other.ID)
	// The end box shows from the chat's state, which can come before the
	// transcript: what follows reads the transcript, so wait for the
	// whole log of the ended chat.
	p.waitTerminal(other.ID, 30*time.Second)
	b.checkTranscript(p, other.ID)
	if eval[bool](b, `!!document.querySelector('#graph-view')`) {
		t.Error("a chat that is not a graph shows a graph")
	}
	inner := eval[[]string](b, `[...document.querySelectorAll('#transcript li.inner')].map(e => (e.dataset.team || '') + ' ' + (e.dataset.name || e.textContent))`)
	if want := []string{"som → writer speaks in som's team (turn 1, round_robin)", "som writer", "som → editor speaks in som's team (turn 2, round_robin)", "som editor"}; !slices.Equal(inner, want) {
		t.Errorf("the inner team's part of the transcript is %q, want %q", inner, want)
	}
	if n := eval[int](b, `document.querySelectorAll('#transcript li.msg:not(.inner)[data-name="som"]').length`); n != 1 {
		t.Errorf("the team agent's own answer is shown %d times outside its team", n)
	}
	b.sameOrigin(p)
}

// graphIs waits for the drawing to show each node in its state, and fails
// with what it shows otherwise.
func (b *browser) graphIs(what string, want map[string]string) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := eval[map[string]string](b, graphState)
		if fmt.Sprint(got) == fmt.Sprint(want) {
			summary := eval[string](b, `document.querySelector('#graph-view .graph-summary').textContent`)
			for node, state := range want {
				label := map[string]string{"skipped": "not reached", "stopped": "cut"}[state]
				if label == "" {
					label = state
				}
				if !strings.Contains(summary, label+":") || !slices.Contains(eval[[]string](b, fmt.Sprintf(`(document.querySelector('#graph-view .graph-summary [data-state="%s"]')?.dataset.nodes ?? '').split(',')`, state)), node) {
					b.t.Errorf("%s: the summary %q does not list %s as %s", what, summary, node, label)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s: the graph shows %v, want %v", what, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
