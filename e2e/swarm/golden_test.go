// Package swarm_test compares agentd's openai_swarm protocol with recorded
// runs of OpenAI Swarm's own run loop (testdata, made by record.py from
// scenarios; see README.md): the same spec and model script must give the
// same model requests, byte for byte, and each run must end with the same
// agent active and the same context variables.
package swarm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/e2e/golden"
	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/chat/engine"
	"github.com/agentd/agentd/internal/llm/openaitest"
	"github.com/agentd/agentd/internal/sandbox"
	"github.com/agentd/agentd/internal/spec"
)

// scenario is a file of scenarios/.
type scenario struct {
	Spec   json.RawMessage `json:"spec"`
	Script []scriptReply   `json:"script"`
	// Runs are the chat's runs after the first, each posted once the one
	// before it has ended.
	Runs []struct {
		Task             *string         `json:"task"`
		ContextVariables json.RawMessage `json:"context_variables"`
	} `json:"runs"`
}

type scriptReply struct {
	Content   string `json:"content"`
	ToolCalls []struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"tool_calls"`
}

// fixture is a file of testdata/: what Swarm did.
type fixture struct {
	Requests []json.RawMessage `json:"requests"`
	Runs     []runResult       `json:"runs"`
}

// runResult is one run's end: the index of its first request, the agent
// active when it ended and the context variables then.
type runResult struct {
	FirstRequest     int             `json:"first_request"`
	Agent            string          `json:"agent"`
	ContextVariables json.RawMessage `json:"context_variables"`
}

// run is what agentd did with a scenario.
type run struct {
	requests [][]byte
	runs     []runResult
}

func TestGoldenRunsOfSwarm(t *testing.T) {
	for _, name := range golden.Scenarios(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var sc scenario
			var want fixture
			golden.Load(t, name, &sc, &want)
			// The functions run in the sandbox: on each backend.
			for _, backend := range []string{sandbox.BackendDocker, sandbox.BackendBwrap} {
				t.Run(backend, func(t *testing.T) {
					t.Parallel()
					got := runAgentd(t, sc, golden.Sandbox(t, backend))
					for _, d := range compare(want, got) {
						t.Error(d)
					}
				})
			}
		})
	}
}

// TestGoldenComparisonSeesSwarmFields checks that compare reports a
// request without a reply's sender or a result's tool_name, or with
// another agent's, another final agent or other variables, and passes
// over what the API reads alike (a null and an absent field).
func TestGoldenComparisonSeesSwarmFields(t *testing.T) {
	var want fixture
	golden.Load(t, "triage_sales_parallel", &scenario{}, &want)
	edit := func(old, new string) func(*run) {
		return func(r *run) {
			b := bytes.Replace(r.requests[1], []byte(old), []byte(new), 1)
			if bytes.Equal(b, r.requests[1]) {
				t.Fatalf("request 1 has no %s", old)
			}
			r.requests[1] = b
		}
	}
	for _, c := range []struct {
		name    string
		change  func(*run)
		noticed bool
	}{
		{"a sender dropped", edit(`,"sender":"Triage Agent"`, ``), true},
		{"another sender", edit(`"sender":"Triage Agent"`, `"sender":"Sales Agent"`), true},
		{"a tool_name dropped", edit(`"tool_name":"check_stock",`, ``), true},
		{"a handoff result", edit(`{\"assistant\": \"Sales Agent\"}`, `{\"assistant\":\"Sales Agent\"}`), true},
		{"the final agent", func(r *run) { r.runs[0].Agent = "Triage Agent" }, true},
		{"the variables", func(r *run) { r.runs[0].ContextVariables = json.RawMessage(`{"x": 1}`) }, true},
		{"a null refusal absent", edit(`"refusal":null,`, ``), false},
		{"the model name", edit(`"model":"gpt-4o-mini"`, `"model":"other"`), false},
	} {
		got := run{runs: append([]runResult(nil), want.Runs...)}
		for _, r := range want.Requests {
			var b bytes.Buffer
			if err := json.Compact(&b, r); err != nil {
				t.Fatal(err)
			}
			got.requests = append(got.requests, b.Bytes())
		}
		if d := compare(want, got); len(d) > 0 {
			t.Fatalf("the fixture against itself: %v", d)
		}
		c.change(&got)
		if d := compare(want, got); (len(d) > 0) != c.noticed {
			t.Errorf("%s: noticed %v, want %v (%v)", c.name, len(d) > 0, c.noticed, d)
		}
	}
}

// runAgentd runs the scenario through agentd: the openai provider against
// openaitest answering from the script in order, the python_function
// tools in the sandbox.
func runAgentd(t *testing.T, sc scenario, sandboxes chat.Sandboxes) run {
	models := openaitest.New()
	t.Cleanup(models.Close)
	for _, r := range sc.Script {
		reply := openaitest.Reply{Content: r.Content, Usage: &openaitest.Usage{PromptTokens: 10, CompletionTokens: 5}}
		for _, c := range r.ToolCalls {
			tc := openaitest.Call(c.Name, c.Arguments)
			tc.ID = c.ID
			reply.ToolCalls = append(reply.ToolCalls, tc)
		}
		models.Reply(reply)
	}

	ctx := context.Background()
	rt, db := golden.Runtime(t, models.URL(), sandboxes)
	c, _, err := rt.Create(ctx, &chat.CreateParams{Body: sc.Spec})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	chatID := c.ID
	// Before the sandbox's work root goes (cleanups run last first).
	t.Cleanup(func() { _ = sandboxes.Release(context.Background(), chatID) })
	ended := func(n int) *chat.Chat {
		t.Helper()
		c := golden.Ended(t, rt, chatID, n, time.Minute)
		if c.Status != chat.StatusCompleted || c.StopReason != chat.StopSwarmComplete {
			t.Errorf("run %d %s (%s): %s", n, c.Status, c.StopReason, c.Error)
		}
		return c
	}
	var out run
	first := 0
	for i := 0; i <= len(sc.Runs); i++ {
		n := 1
		if i > 0 {
			first = len(models.Requests())
			req := map[string]any{}
			if r := sc.Runs[i-1]; r.Task != nil {
				req["task"] = *r.Task
			}
			if r := sc.Runs[i-1]; len(r.ContextVariables) > 0 {
				req["context_variables"] = r.ContextVariables
			}
			b, err := json.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			if _, n, err = rt.SubmitRun(ctx, "", chatID, "", spec.DecodeRunRequest(b)); err != nil {
				t.Fatalf("run %d: %v", i+1, err)
			}
		}
		c := ended(n)
		agent, vars, err := runEnd(ctx, db, chatID)
		if err != nil {
			t.Fatal(err)
		}
		if !sameJSON(c.ContextVariables, vars) {
			t.Errorf("run %d: the chat shows context variables %s, its log holds %s", n, c.ContextVariables, vars)
		}
		out.runs = append(out.runs, runResult{FirstRequest: first, Agent: agent, ContextVariables: vars})
	}
	for _, r := range models.Requests() {
		out.requests = append(out.requests, r.Body)
	}
	return out
}

// runEnd is how a run left the chat, as the log says: the agent a Swarm
// run returns as its agent (the one that made the last reply, unless a
// later tool message handed off, to the target recorded on it) and the
// context variables, the fold of the context.updated events.
func runEnd(ctx context.Context, db chat.Store, chatID string) (string, json.RawMessage, error) {
	evs, err := db.ListEvents(ctx, &chat.ListEventsParams{ChatID: chatID, Limit: 10000})
	if err != nil {
		return "", nil, err
	}
	agent := ""
	var vars map[string]json.RawMessage
	for _, e := range evs {
		switch e.Type {
		case chat.EventContextUpdated:
			var u chat.ContextUpdate
			if err := json.Unmarshal(e.Data, &u); err != nil {
				return "", nil, fmt.Errorf("event %d: %w", e.Seq, err)
			}
			vars = engine.ApplyContext(vars, u)
		case chat.EventMessage:
			var d struct {
				Handoff string `json:"handoff"`
			}
			_ = json.Unmarshal(e.Data, &d)
			switch {
			case e.Role == chat.RoleAssistant:
				agent = e.Name
			case e.Role == chat.RoleTool && d.Handoff != "":
				agent = d.Handoff
			}
		}
	}
	if agent == "" {
		return "", nil, errors.New("no agent replied")
	}
	return agent, engine.EncodeContext(vars), nil
}

// normalize is a request body as the comparison sees it: JSON (key order
// aside) without the model name and streaming options, and without null
// members, which the API reads as absent (Swarm's client writes
// tool_choice, refusal, audio and the like as null).
func normalize(body []byte) (string, error) {
	m, err := golden.Request(body)
	if err != nil {
		return "", err
	}
	out, err := json.MarshalIndent(dropNulls(m), "", " ")
	return string(out), err
}

func dropNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e == nil {
				delete(x, k)
				continue
			}
			x[k] = dropNulls(e)
		}
	case []any:
		for i, e := range x {
			x[i] = dropNulls(e)
		}
	}
	return v
}

// compare lists every difference between Swarm's runs and agentd's.
func compare(want fixture, got run) []string {
	var diffs []string
	for i := range max(len(want.Requests), len(got.requests)) {
		switch {
		case i >= len(got.requests):
			diffs = append(diffs, fmt.Sprintf("request %d: Swarm made it, agentd did not", i))
			continue
		case i >= len(want.Requests):
			diffs = append(diffs, fmt.Sprintf("request %d: agentd made it, Swarm did not:\n%s", i, got.requests[i]))
			continue
		}
		w, err := normalize(want.Requests[i])
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("request %d of the fixture: %v", i, err))
			continue
		}
		g, err := normalize(got.requests[i])
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("request %d of agentd: %v", i, err))
			continue
		}
		if w != g {
			diffs = append(diffs, fmt.Sprintf("request %d differs: %s", i, firstDiff(w, g)))
		}
	}
	if len(want.Runs) != len(got.runs) {
		return append(diffs, fmt.Sprintf("%d runs, Swarm's %d", len(got.runs), len(want.Runs)))
	}
	for i, w := range want.Runs {
		g := got.runs[i]
		if g.FirstRequest != w.FirstRequest {
			diffs = append(diffs, fmt.Sprintf("run %d starts at request %d, Swarm's at %d", i+1, g.FirstRequest, w.FirstRequest))
		}
		if g.Agent != w.Agent {
			diffs = append(diffs, fmt.Sprintf("run %d ends with agent %q, Swarm's with %q", i+1, g.Agent, w.Agent))
		}
		if !sameJSON(g.ContextVariables, w.ContextVariables) {
			diffs = append(diffs, fmt.Sprintf("run %d ends with context variables %s, Swarm's %s", i+1, g.ContextVariables, w.ContextVariables))
		}
	}
	return diffs
}

// sameJSON reports whether a and b are the same JSON value (key order
// aside).
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// firstDiff shows the first line where two normalized bodies differ, with
// the line before it for context.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			before := ""
			if i > 0 && i-1 < len(w) {
				before = w[i-1]
			}
			return fmt.Sprintf("at line %d (after %q):\n got  %q\n want %q\ngot:\n%s", i+1, strings.TrimSpace(before), gl, wl, got)
		}
	}
	return "in nothing"
}
