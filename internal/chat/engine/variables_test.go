package engine

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/spec"
)

func mustSpec(t *testing.T, body string) *spec.Spec {
	t.Helper()
	sp, _, probs := spec.Check([]byte(body), spec.Limits{}, spec.Env{Providers: []string{"openai"}})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	return sp
}

// drive runs the chat's steps until the next model call (or a wait), as a
// worker does, and returns the state, the log and that step.
func drive(t *testing.T, s *State, log []chat.Event) (*State, []chat.Event, Step) {
	t.Helper()
	for range 20 {
		st := s.Next(testEnv())
		if st.Kind != StepAppend {
			return s, log, st
		}
		s, log = adopt(t, s, log, testEnv(), append(st.Before, st.Events...)...)
	}
	t.Fatal("no model call in 20 steps")
	return nil, nil, Step{}
}

// reply appends a model's text reply to the turn of step st.
func reply(t *testing.T, s *State, log []chat.Event, st Step, text string) (*State, []chat.Event) {
	t.Helper()
	ev, err := ModelReply(st.Agent, st.Turn, &chat.ModelResponse{Content: text}, &Toolbox{}, st.Reflect)
	if err != nil {
		t.Fatal(err)
	}
	return adopt(t, s, log, testEnv(), ev)
}

const conditionSpec = `{"task": "My lamp broke.", "context_variables": {"severity": 3, "tier": "gold", "case": null},
	"models": {"m": {"provider": "replay", "responses": ["x"]}},
	"speaker_selection": {"method": "swarm"},
	"agents": [
		{"name": "triage", "type": "assistant", "model": "m",
		 "handoffs": [{"target": "escalation", "condition": "severity >= 8 && tier == \"gold\""}, "sales"]},
		{"name": "sales", "type": "assistant", "model": "m"},
		{"name": "escalation", "type": "assistant", "model": "m",
		 "system_message_template": "Escalated: severity {severity}, tier {tier}, case {case}, {{braces}}."}]}`

// TestConditionalHandoff: a hand-off on a condition is no tool; it is
// taken as AG2 takes an OnContextCondition, when the agent is about to
// reply and the expression holds, with no model call, and the swarm goes
// on with its target, whose system message is rendered from the
// variables as they stand.
func TestConditionalHandoff(t *testing.T) {
	t.Parallel()
	sp := mustSpec(t, conditionSpec)
	task, _ := SpecTask(sp, spec.Limits{})
	log := FirstEvents(sp, task, t0)
	if log[1].Type != chat.EventContextUpdated {
		t.Fatalf("second event %s, want the spec's variables", log[1].Type)
	}
	if u := dataOf[chat.ContextUpdate](t, log[1]); !slices.Equal(slices.Sorted(maps.Keys(u.Set)), []string{"severity", "tier"}) || u.By.Client != chat.ContextByCreate {
		t.Fatalf("initial update %+v: a null only declares its name", u)
	}
	s := fold(t, sp, log)

	// severity 3: triage's model is called.
	s, log, st := drive(t, s, log)
	if st.Kind != StepModel || st.Agent.Name != "triage" {
		t.Fatalf("step %v of %v, want triage's model call", st.Kind, st.Agent)
	}
	s, log = reply(t, s, log, st, "Tell me more.")

	// A tool (or a client between runs) sets severity 9: triage's next
	// turn is the hand-off.
	s, log = adopt(t, s, log, testEnv(), chat.ContextEvent(chat.ContextUpdate{Set: map[string]json.RawMessage{"severity": json.RawMessage(`9`)},
		By: chat.ContextBy{Agent: "triage", Tool: "rate"}}))
	s, log, st = drive(t, s, log)
	if st.Kind != StepModel || st.Agent.Name != "escalation" {
		t.Fatalf("step %v of %v, want escalation's model call", st.Kind, st.Agent)
	}
	var handoff *chat.Message
	for i := range s.Msgs {
		if s.Msgs[i].Type == chat.TypeHandoffMessage {
			handoff = &s.Msgs[i]
		}
	}
	if handoff == nil || handoff.Name != "triage" || handoff.Handoff != "escalation" || handoff.Content != "[Handing off to escalation]" {
		t.Fatalf("handoff message %+v", handoff)
	}
	if n := s.ModelCallsOf("triage"); n != 1 {
		t.Errorf("triage made %d model calls, want 1: the hand-off takes none", n)
	}
	msgs, err := s.ModelContext(st.Agent, nil)
	if err != nil {
		t.Fatal(err)
	}
	if msgs[0].Content != "Escalated: severity 9, tier gold, case , {braces}." {
		t.Errorf("system message %q", msgs[0].Content)
	}

	// A rebuilt state has the same variables, and so does a fork's copy
	// of the log up to here.
	re := fold(t, sp, log)
	if !maps.EqualFunc(re.ContextVariables(), s.ContextVariables(), func(a, b json.RawMessage) bool { return string(a) == string(b) }) {
		t.Errorf("rebuilt variables %s, want %s", EncodeContext(re.ContextVariables()), EncodeContext(s.ContextVariables()))
	}
	if got := string(EncodeContext(re.ContextVariables())); got != `{"severity":9,"tier":"gold"}` {
		t.Errorf("variables %s", got)
	}
}

// TestConditionOnlyOnWhatHolds: a condition that cannot be evaluated (its
// variable unset, or of another type) does not hold; removing a variable
// folds.
func TestConditionOnlyOnWhatHolds(t *testing.T) {
	t.Parallel()
	sp := mustSpec(t, conditionSpec)
	task, _ := SpecTask(sp, spec.Limits{})
	log := FirstEvents(sp, task, t0)
	s := fold(t, sp, log)
	s, log = adopt(t, s, log, testEnv(), chat.ContextEvent(chat.ContextUpdateOf(map[string]json.RawMessage{
		"severity": json.RawMessage(`"very <high>"`), "tier": json.RawMessage(`null`), "o": json.RawMessage(`{"b": 1.50, "a": [1, 2]}`)},
		chat.ContextBy{Client: chat.ContextByPatch})))
	// As every store gives it back: objects in one form whatever the
	// store did to their spacing and key order.
	if got := string(EncodeContext(s.ContextVariables())); got != `{"o":{"a":[1,2],"b":1.50},"severity":"very <high>"}` {
		t.Fatalf("variables %s", got)
	}
	_, _, st := drive(t, s, log)
	if st.Kind != StepModel || st.Agent.Name != "triage" {
		t.Fatalf("step %v of %v, want triage's model call", st.Kind, st.Agent)
	}
}

// TestGraphExpressionEdge: an edge with an expression is taken when it
// holds as the source's turn ends.
func TestGraphExpressionEdge(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		severity string
		want     string
	}{{"9", "urgent"}, {"2", "normal"}} {
		sp := mustSpec(t, `{"task": "t", "context_variables": {"severity": `+tc.severity+`},
			"models": {"m": {"provider": "replay", "responses": ["x"]}},
			"agents": [{"name": "intake", "type": "assistant", "model": "m"}, {"name": "urgent", "type": "assistant", "model": "m"},
			           {"name": "normal", "type": "assistant", "model": "m"}],
			"speaker_selection": {"method": "graph", "graph": {"nodes": {
				"intake": {"name": "intake", "edges": [{"target": "urgent", "condition": {"expression": "severity >= 8"}},
				                                       {"target": "normal", "condition": {"expression": "severity < 8"}}]},
				"urgent": {"name": "urgent"}, "normal": {"name": "normal"}}}}}`)
		task, _ := SpecTask(sp, spec.Limits{})
		log := FirstEvents(sp, task, t0)
		s, log, st := drive(t, fold(t, sp, log), log)
		if st.Agent.Name != "intake" {
			t.Fatalf("first speaker %s", st.Agent.Name)
		}
		s, log = reply(t, s, log, st, "Noted.")
		_, _, st = drive(t, s, log)
		if st.Kind != StepModel || st.Agent.Name != tc.want {
			t.Errorf("severity %s: next %v of %v, want %s", tc.severity, st.Kind, st.Agent, tc.want)
		}
	}
}

func TestRenderTemplate(t *testing.T) {
	t.Parallel()
	vars := map[string]json.RawMessage{"n": json.RawMessage(`8`), "f": json.RawMessage(`2.50`), "l": json.RawMessage(`["a", true]`),
		"o": json.RawMessage(`{"k": null}`), "s": json.RawMessage(`"it's"`)}
	got := RenderTemplate("{n}|{f}|{l}|{o}|{s}|{missing}|{{x}}", vars)
	if want := "8|2.5|['a', True]|{'k': None}|it's||{x}"; got != want {
		t.Errorf("RenderTemplate = %q, want %q", got, want)
	}
}
