package engine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/spec"
)

const openAISwarmSpec = `{"task": "I want a lamp.", "context_variables": {"customer": "Ada"},
	"models": {"m": {"provider": "replay", "responses": ["x"]}},
	"speaker_selection": {"method": "swarm", "protocol": "openai_swarm"},
	"agents": [
		{"name": "Triage Agent", "type": "assistant", "model": "m", "handoffs": ["Sales Agent"]},
		{"name": "Sales Agent", "type": "assistant", "model": "m",
		 "system_message_template": "Sales for {customer}{missing}."}]}`

// swarmBox is the toolbox of an agent of openAISwarmSpec: its hand-offs.
func swarmBox(a *spec.Agent) *Toolbox {
	b := &Toolbox{}
	for i := range a.Handoffs {
		b.Add(Offered{Def: SwarmHandoffDef(&a.Handoffs[i]), Handoff: a.Handoffs[i].Target})
	}
	return b
}

// TestOpenAISwarmRun drives a chat of the openai_swarm protocol through a
// hand-off: the shared history with sender and tool_name, Swarm's hand-off
// result and unknown-function error, the template as instructions, the run
// ending on a reply without tool calls, and the next run going on with
// the agent that made it.
func TestOpenAISwarmRun(t *testing.T) {
	t.Parallel()
	sp := mustSpec(t, openAISwarmSpec)
	task, _ := SpecTask(sp, spec.Limits{})
	log := FirstEvents(sp, task, t0)
	s := fold(t, sp, log)

	s, log, st := drive(t, s, log)
	if st.Kind != StepModel || st.Agent.Name != "Triage Agent" {
		t.Fatalf("step %v of %v, want Triage Agent's model call", st.Kind, st.Agent)
	}
	box := swarmBox(st.Agent)
	if d := box.Defs[0]; d.Name != "transfer_to_sales_agent" || d.Description != "" || d.Strict {
		t.Errorf("hand-off function %+v, want Swarm's transfer_to_sales_agent without docstring", d)
	}
	calls := []chat.ToolCall{
		{ID: "c1", Type: "function", Function: chat.FunctionCall{Name: "transfer_to_sales_agent", Arguments: "{}"}},
		{ID: "c2", Type: "function", Function: chat.FunctionCall{Name: "lookup", Arguments: `{"q": 1}`}},
	}
	ev, err := ModelReply(st.Agent, st.Turn, &chat.ModelResponse{ToolCalls: calls}, box, false)
	if err != nil {
		t.Fatal(err)
	}
	s, log = adopt(t, s, log, testEnv(), ev)
	s, log, st = drive(t, s, log)
	if st.Kind != StepTools {
		t.Fatalf("step %v, want the calls", st.Kind)
	}
	s, log = adopt(t, s, log, testEnv(), SwarmToolEvents(sp, st.Agent, st.Turn, st.Open, make([]chat.ToolResponse, 2), nil, box)...)

	s, log, st = drive(t, s, log)
	if st.Kind != StepModel || st.Agent.Name != "Sales Agent" {
		t.Fatalf("step %v of %v, want Sales Agent's model call", st.Kind, st.Agent)
	}
	msgs, err := s.ModelContext(st.Agent, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []chat.ModelMessage{
		{Role: chat.RoleSystem, Content: "Sales for Ada."},
		{Role: chat.RoleUser, Content: "I want a lamp."},
		{Role: chat.RoleAssistant, ToolCalls: calls, More: &chat.ModelMore{Sender: "Triage Agent"}},
		{Role: chat.RoleTool, ToolCallID: "c1", More: &chat.ModelMore{ToolName: "transfer_to_sales_agent"}, Content: `{"assistant": "Sales Agent"}`},
		{Role: chat.RoleTool, ToolCallID: "c2", More: &chat.ModelMore{ToolName: "lookup"}, Content: "Error: Tool lookup not found."},
	}
	if got, w := jsonOf(t, msgs), jsonOf(t, want); got != w {
		t.Errorf("Sales Agent sees\n %s\nwant\n %s", got, w)
	}

	s, log = reply(t, s, log, st, "It costs 40 EUR.")
	if s.Status != chat.StatusCompleted || s.stopReason != chat.StopSwarmComplete || !strings.Contains(s.stopDetail, "'Sales Agent' replied without tool calls") {
		t.Fatalf("after a reply without tool calls: %s %s %q", s.Status, s.stopReason, s.stopDetail)
	}

	// The next run goes on with Sales Agent, which sees its own reply with
	// its sender and the new task.
	s, log = adopt(t, s, log, testEnv(), s.RunStartEvents(2, QueuedRequest{Task: []spec.TaskMessage{{Type: chat.TypeTextMessage, Source: chat.UserName, Content: "And a desk?"}}})...)
	s, _, st = drive(t, s, log)
	if st.Kind != StepModel || st.Agent.Name != "Sales Agent" {
		t.Fatalf("run 2: step %v of %v, want Sales Agent's model call", st.Kind, st.Agent)
	}
	msgs, _ = s.ModelContext(st.Agent, nil)
	if n := len(msgs); n != 7 || msgs[5].Sender() != "Sales Agent" || msgs[6].Content != "And a desk?" || msgs[6].Name != "" {
		t.Errorf("run 2 context: %s", jsonOf(t, msgs))
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSwarmHandoffResult is json.dumps({"assistant": name}) with its
// default ensure_ascii.
func TestSwarmHandoffResult(t *testing.T) {
	for name, want := range map[string]string{
		"Sales":      `{"assistant": "Sales"}`,
		"Rückgabe":   `{"assistant": "R\u00fcckgabe"}`,
		`Say "hi" 🙂`: `{"assistant": "Say \"hi\" \ud83d\ude42"}`,
	} {
		if got := SwarmHandoffResult(name); got != want {
			t.Errorf("SwarmHandoffResult(%q) = %s, want %s", name, got, want)
		}
	}
}

// TestToolContextEvents: a function's changes are events by the agent and
// the function, in the calls' order, each checked against what the
// variables already hold; a change the limits refuse is no event, and its
// call's response says why.
func TestToolContextEvents(t *testing.T) {
	t.Parallel()
	sp := mustSpec(t, openAISwarmSpec)
	task, _ := SpecTask(sp, spec.Limits{})
	s := fold(t, sp, FirstEvents(sp, task, t0))
	calls := []chat.ToolCall{{ID: "a", Function: chat.FunctionCall{Name: "set"}}, {ID: "b", Function: chat.FunctionCall{Name: "none"}},
		{ID: "c", Function: chat.FunctionCall{Name: "deep"}}, {ID: "d", Function: chat.FunctionCall{Name: "drop"}}}
	deep := strings.Repeat("[", spec.MaxContextDepth+1) + strings.Repeat("]", spec.MaxContextDepth+1)
	results := []chat.ToolResult{
		{ContextSet: json.RawMessage(`{"discount": 10}`)},
		{},
		{ContextSet: json.RawMessage(`{"x": ` + deep + `}`)},
		{ContextRemoved: []string{"customer"}},
	}
	responses := make([]chat.ToolResponse, len(calls))
	evs, refused := s.ToolContextEvents("Sales Agent", calls, results, responses)
	if refused != 1 || len(evs) != 2 {
		t.Fatalf("%d events, %d refused; want 2 and 1", len(evs), refused)
	}
	if u := dataOf[chat.ContextUpdate](t, evs[0]); string(u.Set["discount"]) != "10" || u.By != (chat.ContextBy{Agent: "Sales Agent", Tool: "set"}) {
		t.Errorf("first update %+v", u)
	}
	if u := dataOf[chat.ContextUpdate](t, evs[1]); len(u.Set) != 0 || len(u.Removed) != 1 || u.By.Tool != "drop" {
		t.Errorf("second update %+v", u)
	}
	if r := responses[2]; !r.IsError || !strings.Contains(r.Content, "not kept") || !strings.Contains(r.Content, "levels deep") {
		t.Errorf("the refused call's response %+v", r)
	}
}
