package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/runtime/runtimetest"
	"github.com/agentd/agentd/internal/spec"
)

// graphSpec is a graph chat whose agents answer from replay scripts:
// replies maps an agent to its responses (each "text" or "text@delay_ms").
func graphSpec(graph string, replies map[string][]string, extra string) []byte {
	var agents, models []string
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range replies {
			if !yield(k) {
				return
			}
		}
	}) {
		var rs []string
		for _, r := range replies[name] {
			text, delay, _ := strings.Cut(r, "@")
			if delay == "" {
				delay = "0"
			}
			rs = append(rs, fmt.Sprintf(`{"content": %q, "delay_ms": %s}`, text, delay))
		}
		agents = append(agents, fmt.Sprintf(`{"name": %q, "type": "assistant", "model": %q}`, name, "m"+name))
		models = append(models, fmt.Sprintf(`%q: {"provider": "replay", "responses": [%s]}`, "m"+name, strings.Join(rs, ",")))
	}
	return fmt.Appendf(nil, `{"task": "go", "agents": [%s], "models": {%s},
		"speaker_selection": {"method": "graph", "graph": %s}%s}`,
		strings.Join(agents, ","), strings.Join(models, ","), graph, extra)
}

// said is the chat's messages as "name:content".
func said(ms []chat.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name+":"+m.Content)
	}
	return out
}

// selections are the agents of each speaker.selected event of the chat.
func selections(t *testing.T, db chat.Store, id string) [][]string {
	t.Helper()
	evs, err := db.ListEvents(context.Background(), &chat.ListEventsParams{ChatID: id, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, e := range evs {
		if e.Type != chat.EventSpeakerSelected {
			continue
		}
		var d struct {
			Agent  string   `json:"agent"`
			Agents []string `json:"agents"`
			Method string   `json:"method"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.Method != "graph" || len(d.Agents) == 0 || d.Agent != d.Agents[0] {
			t.Fatalf("graph selection %s", e.Data)
		}
		out = append(out, d.Agents)
	}
	return out
}

const fanOut = `{"nodes": {
	"a": {"name": "a", "edges": [{"target": "b"}, {"target": "c"}]},
	"b": {"name": "b", "edges": [{"target": "d", "activation_condition": %[1]q}]},
	"c": {"name": "c", "edges": [{"target": "d", "condition": %[2]s, "activation_condition": %[1]q}]},
	"d": {"name": "d"}}}`

// TestGraphRunsReadyNodesAtOnce: b and c become ready together and run at
// once; c, faster, is appended first although b is selected first (one
// after the other, b would come first), and d waits for both.
func TestGraphRunsReadyNodesAtOnce(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	body := graphSpec(fmt.Sprintf(fanOut, "all", "null"), map[string][]string{
		"a": {"A"}, "b": {"B@400"}, "c": {"C"}, "d": {"D"}}, "")
	c, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: body})
	if err != nil {
		t.Fatal(err)
	}
	got := waitTerminal(t, rt, c.ID, 15*time.Second)
	if got.Status != chat.StatusCompleted || got.StopReason != chat.StopGraphComplete || got.StopDetail != "Digraph execution is complete" {
		t.Fatalf("chat = %+v", got)
	}
	if want := []string{"user:go", "a:A", "c:C", "b:B", "d:D"}; !slices.Equal(said(messages(t, db, c.ID)), want) {
		t.Fatalf("messages %v, want %v", said(messages(t, db, c.ID)), want)
	}
	if want := [][]string{{"a"}, {"b", "c"}, {"d"}}; !slices.EqualFunc(selections(t, db, c.ID), want, slices.Equal) {
		t.Fatalf("selections %v, want %v", selections(t, db, c.ID), want)
	}
	// A step is one turn, as AgentChat counts the manager's turns.
	if got.Turns != 3 {
		t.Fatalf("turns %d, want 3", got.Turns)
	}
}

// joinLoop sends d back to a through an "all" join of b and c, until d
// says DONE.
const joinLoop = `{"nodes": {
	"a": {"name": "a", "edges": [{"target": "b"}, {"target": "c"}]},
	"b": {"name": "b", "edges": [{"target": "d"}]},
	"c": {"name": "c", "edges": [{"target": "d"}]},
	"d": {"name": "d", "edges": [{"target": "a", "condition": "AGAIN"}, {"target": "e", "condition": "DONE"}]},
	"e": {"name": "e"}}, "default_start_node": "a"}`

// TestGraphJoinsAllAndAny: c's edge to d is taken only when c says "GO".
// With an "all" join d never runs (b's edge alone does not complete it);
// with "any", b's edge is enough. An "all" join on a loop counts its
// edges afresh once its target ran: it fires again on the second pass.
func TestGraphJoinsAllAndAny(t *testing.T) {
	for _, tc := range []struct {
		name    string
		graph   string
		replies map[string][]string
		want    []string
	}{
		{"all", fmt.Sprintf(fanOut, "all", `"GO"`), map[string][]string{"a": {"A"}, "b": {"B"}, "c": {"STOP@200"}, "d": {"D"}},
			[]string{"user:go", "a:A", "b:B", "c:STOP"}},
		{"any", fmt.Sprintf(fanOut, "any", `"GO"`), map[string][]string{"a": {"A"}, "b": {"B"}, "c": {"STOP@200"}, "d": {"D"}},
			[]string{"user:go", "a:A", "b:B", "c:STOP", "d:D"}},
		{"all in a loop", joinLoop, map[string][]string{"a": {"A1", "A2"}, "b": {"B1", "B2"}, "c": {"C1@200", "C2@200"}, "d": {"AGAIN", "DONE"}, "e": {"E"}},
			[]string{"user:go", "a:A1", "b:B1", "c:C1", "d:AGAIN", "a:A2", "b:B2", "c:C2", "d:DONE", "e:E"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := runtimetest.OpenSQLite(t)
			rt := runtimetest.New(t, db)
			c, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: graphSpec(tc.graph, tc.replies, "")})
			if err != nil {
				t.Fatal(err)
			}
			got := waitTerminal(t, rt, c.ID, 15*time.Second)
			if got.StopReason != chat.StopGraphComplete {
				t.Fatalf("chat = %+v", got)
			}
			if g := said(messages(t, db, c.ID)); !slices.Equal(g, tc.want) {
				t.Fatalf("messages %v, want %v", g, tc.want)
			}
		})
	}
}

const reviewLoop = `{"nodes": {
	"writer": {"name": "writer", "edges": [{"target": "reviewer"}]},
	"reviewer": {"name": "reviewer", "edges": [{"target": "writer", "condition": "REVISE"}, {"target": "done", "condition": "APPROVE"}]},
	"done": {"name": "done"}}, "default_start_node": "writer"}`

// TestGraphLoopsUntilItsExitCondition: the reviewer sends the writer back
// until it approves; then done runs and the graph is complete.
func TestGraphLoopsUntilItsExitCondition(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	body := graphSpec(reviewLoop, map[string][]string{
		"writer": {"w1", "w2", "w3"}, "reviewer": {"REVISE 1", "REVISE 2", "APPROVE"}, "done": {"ok"}}, "")
	c, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: body})
	if err != nil {
		t.Fatal(err)
	}
	got := waitTerminal(t, rt, c.ID, 15*time.Second)
	want := []string{"user:go", "writer:w1", "reviewer:REVISE 1", "writer:w2", "reviewer:REVISE 2", "writer:w3", "reviewer:APPROVE", "done:ok"}
	if g := said(messages(t, db, c.ID)); !slices.Equal(g, want) || got.StopReason != chat.StopGraphComplete {
		t.Fatalf("messages %v (%s), want %v", g, got.StopReason, want)
	}
}

// TestGraphRunsGoOn: a run stopped by max_round goes on where the graph
// was (the nodes that were ready); a run after the graph completed starts
// again at the start node.
func TestGraphRunsGoOn(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	body := graphSpec(reviewLoop, map[string][]string{
		"writer": {"w1", "w2", "w3", "w4"}, "reviewer": {"REVISE 1", "APPROVE", "REVISE 3"}, "done": {"ok"}}, `, "max_round": 3`)
	c, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: body})
	if err != nil {
		t.Fatal(err)
	}
	if got := waitTerminal(t, rt, c.ID, 15*time.Second); got.StopReason != chat.StopMaxRound {
		t.Fatalf("run 1 = %+v", got)
	}
	run := func(task string) *chat.Chat {
		t.Helper()
		_, n, err := rt.SubmitRun(context.Background(), "", c.ID, "", spec.DecodeRunRequest([]byte(`{"task": "`+task+`"}`)))
		if err != nil {
			t.Fatal(err)
		}
		for {
			if got := waitTerminal(t, rt, c.ID, 15*time.Second); got.Run >= n {
				return got
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if got := run("again"); got.StopReason != chat.StopGraphComplete || got.Run != 2 {
		t.Fatalf("run 2 = %+v", got)
	}
	if got := run("once more"); got.StopReason != chat.StopMaxRound || got.Run != 3 {
		t.Fatalf("run 3 = %+v", got)
	}
	want := []string{"user:go", "writer:w1", "reviewer:REVISE 1", "writer:w2",
		"user:again", "reviewer:APPROVE", "done:ok",
		"user:once more", "writer:w3", "reviewer:REVISE 3", "writer:w4"}
	if g := said(messages(t, db, c.ID)); !slices.Equal(g, want) {
		t.Fatalf("messages %v, want %v", g, want)
	}
}

// TestGraphFanOutSurvivesAWorkerStop: the runtime stops while b's slow
// reply is under way and c's is committed; another runtime finishes the
// step from the log (b only: c's reply stays once) and the graph.
func TestGraphFanOutSurvivesAWorkerStop(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt1 := stoppableRuntime(t, db)
	body := graphSpec(fmt.Sprintf(fanOut, "all", "null"), map[string][]string{
		"a": {"A"}, "b": {"B@1500"}, "c": {"C"}, "d": {"D"}}, "")
	c, _, err := rt1.Create(context.Background(), &chat.CreateParams{Body: body})
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, rt1, db, c.ID, "c's answer", func([]chat.Event) bool { return slices.Contains(said(messages(t, db, c.ID)), "c:C") })
	stopRuntime(t, rt1)
	if g := said(messages(t, db, c.ID)); slices.Contains(g, "b:B") {
		t.Fatalf("b answered before the stop: %v", g)
	}
	rt2 := runtimetest.New(t, db)
	got := waitTerminal(t, rt2, c.ID, 15*time.Second)
	if want := []string{"user:go", "a:A", "c:C", "b:B", "d:D"}; !slices.Equal(said(messages(t, db, c.ID)), want) || got.StopReason != chat.StopGraphComplete {
		t.Fatalf("messages %v (%+v), want %v", said(messages(t, db, c.ID)), got, want)
	}
}
