package engine

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/spec"
)

// runMagenticScript runs a magentic_one chat in memory with scripted
// orchestrator and agent replies. With crash, every step is taken by a
// state folded afresh from the log so far (a worker rebuilt after a crash)
// and the state the step's commit leaves is thrown away; at every step the
// rebuilt state must decide what the live one decides. It returns the log.
func runMagenticScript(t *testing.T, body string, orchestrator, agents []string, crash bool) []chat.Event {
	t.Helper()
	sp, _, probs := spec.DecodeCompact([]byte(body))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	maxRound := DerefOr(sp.MaxRound, sp.DefaultMaxRound())
	log := FirstEvents(sp, mustSpecTask(t, sp), t0)
	fold := func() *State {
		s := NewState(sp, maxRound)
		for _, e := range log {
			if err := s.Apply(chat.Storable(e)); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	live := fold()
	env := StepEnv{Now: t0, NewID: func() string { return "id" }}
	for range 200 {
		rebuilt := fold()
		st, rst := live.Next(env), rebuilt.Next(env)
		if st.Kind != rst.Kind || st.Magentic != rst.Magentic || st.Turn != rst.Turn || (st.Agent == nil) != (rst.Agent == nil) ||
			st.Agent != nil && st.Agent.Name != rst.Agent.Name {
			t.Fatalf("after seq %d the rebuilt state's next step is %v %q, the live state's %v %q", live.LastSeq, rst.Kind, rst.Magentic, st.Kind, st.Magentic)
		}
		if !reflect.DeepEqual(live.magentic, rebuilt.magentic) {
			t.Fatalf("after seq %d the orchestrator's state differs: live %+v, rebuilt %+v", live.LastSeq, live.magentic, rebuilt.magentic)
		}
		if crash {
			live, st = rebuilt, rst
		}
		var evs []chat.Event
		switch st.Kind {
		case StepWait:
			return log
		case StepAppend:
			evs = st.Events
		case StepMagentic:
			var err error
			evs, err = live.MagenticEvents(st, func([]chat.ModelMessage, bool, int) (*chat.ModelResponse, error) {
				if len(orchestrator) == 0 {
					t.Fatal("the orchestrator's script ran out")
				}
				r := orchestrator[0]
				orchestrator = orchestrator[1:]
				return &chat.ModelResponse{Content: r, Usage: chat.Usage{PromptTokens: 3, CompletionTokens: 2}}, nil
			})
			if err != nil {
				evs = []chat.Event{FailedEvent(err)}
			}
		case StepModel:
			if len(agents) == 0 {
				t.Fatal("the agents' script ran out")
			}
			ev, err := ModelReply(st.Agent, st.Turn, &chat.ModelResponse{Content: agents[0]}, &Toolbox{}, false)
			if err != nil {
				t.Fatal(err)
			}
			agents = agents[1:]
			evs = []chat.Event{ev}
		default:
			t.Fatalf("unexpected step %v", st.Kind)
		}
		next, out, err := live.Plan(evs, env, "c")
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, out...)
		live = next
	}
	t.Fatal("no end after 200 steps")
	return nil
}

// TestMagenticRebuiltMidPlanGoesOn: a worker rebuilt from the log at any
// point of a magentic_one run (mid-plan, between a stall and the next,
// right after a re-plan) decides what the live one decides, and the chat
// ends with the same log: the stall count survives the rebuild, so the
// second stall re-plans, and no committed step is made again.
func TestMagenticRebuiltMidPlanGoesOn(t *testing.T) {
	body := `{"task": "solve", "max_round": 10, "agents": [{"name": "a", "type": "assistant"}, {"name": "b", "type": "assistant"}],
		"speaker_selection": {"method": "magentic_one", "max_stalls": 2}}`
	orchestrator := []string{"facts", "plan",
		randomLedger(false, false, true, "a", "do a"),
		randomLedger(false, true, true, "b", "loop 1"),  // stalls 1
		randomLedger(false, false, false, "a", "stuck"), // stalls 2: re-plan
		"facts 2", "plan 2",
		randomLedger(false, false, true, "b", "do b"),  // stalls 1 (from 2)
		randomLedger(false, true, true, "a", "loop 2"), // stalls 2: re-plan
		"facts 3", "plan 3",
		randomLedger(true, false, true, "a", "done"),
		"the answer"}
	agents := []string{"a1", "b1", "b2"}
	want := runMagenticScript(t, body, slices.Clone(orchestrator), slices.Clone(agents), false)
	got := runMagenticScript(t, body, slices.Clone(orchestrator), slices.Clone(agents), true)
	chat.Untyped(want)
	chat.Untyped(got)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the log of a chat rebuilt at every step differs:\n got  %v\n want %v", got, want)
	}
	var steps []string
	for _, e := range want {
		if e.Type == chat.EventMessage {
			steps = append(steps, e.Name+":"+firstLine(e.Content))
		}
		if e.Type.Terminal() {
			steps = append(steps, "end: "+string(e.Data))
		}
	}
	wantSteps := []string{"user:solve", "MagenticOneOrchestrator:", "MagenticOneOrchestrator:do a", "a:a1",
		"MagenticOneOrchestrator:loop 1", "b:b1", "MagenticOneOrchestrator:", "MagenticOneOrchestrator:do b", "b:b2",
		"MagenticOneOrchestrator:", "MagenticOneOrchestrator:the answer",
		`end: {"status":"completed","stop_reason":"request_satisfied","stop_detail":"because","run":1}`}
	if !slices.Equal(steps, wantSteps) {
		t.Fatalf("messages =\n%q\nwant\n%q", steps, wantSteps)
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestReadLedgerAsAgentChat: a progress ledger reply is validated as
// pydantic validates a LedgerEntry (lax booleans, strings strict, extra
// members ignored), then read as the orchestrator reads the JSON (each
// answer by its Python truth value, one object from code blocks if any,
// the only agent as the next speaker of a team of one).
func TestReadLedgerAsAgentChat(t *testing.T) {
	two := &State{Spec: &spec.Spec{Agents: []spec.Agent{{Name: "a"}, {Name: "b"}}}}
	one := &State{Spec: &spec.Spec{Agents: []spec.Agent{{Name: "a"}}}}
	entry := func(answer string) string { return `{"reason": "r", "answer": ` + answer + `}` }
	reply := func(sat, loop, progress, next, instr string) string {
		return `{"is_request_satisfied": ` + entry(sat) + `, "is_in_loop": ` + entry(loop) + `, "is_progress_being_made": ` + entry(progress) +
			`, "next_speaker": ` + entry(next) + `, "instruction_or_question": ` + entry(instr) + `, "extra": 1}`
	}
	cases := []struct {
		name  string
		s     *State
		reply string
		want  *progressLedger // nil: the run fails
	}{
		{"plain", two, reply("false", "false", "true", `"b"`, `"go"`), &progressLedger{progress: true, next: "b", instruction: "go", reason: "r"}},
		{"satisfied names nobody", two, reply("true", "false", "true", `"nobody"`, `"x"`), &progressLedger{satisfied: true, progress: true, next: "nobody", instruction: "x", reason: "r"}},
		// pydantic accepts "false" as a boolean; the orchestrator then
		// reads the string, which Python takes as true.
		{"a word is a non-empty string", two, reply(`"false"`, "0", `"no"`, `"a"`, `"go"`), &progressLedger{satisfied: true, progress: true, next: "a", instruction: "go", reason: "r"}},
		{"numbers", two, reply("0", "1", "1.0", `"a"`, `"go"`), &progressLedger{loop: true, progress: true, next: "a", instruction: "go", reason: "r"}},
		{"team of one", one, reply("false", "false", "true", `"nobody"`, `"go"`), &progressLedger{progress: true, next: "a", instruction: "go", reason: "r"}},
		{"no such agent", two, reply("false", "false", "true", `"c"`, `"go"`), nil},
		{"not a boolean", two, reply(`"maybe"`, "false", "true", `"a"`, `"go"`), nil},
		{"2 is no boolean", two, reply("2", "false", "true", `"a"`, `"go"`), nil},
		{"a number is no string", two, reply("false", "false", "true", "1", `"go"`), nil},
		{"missing entry", two, `{"is_request_satisfied": ` + entry("true") + `}`, nil},
		{"not JSON", two, "Let me think.", nil},
		{"fenced", two, "```json\n" + reply("false", "false", "true", `"a"`, `"go"`) + "\n```", nil},
		// Text inside a JSON string has no newline, so AgentChat's code
		// block pattern never finds a block there.
		{"a code block inside a string", two, reply("false", "false", "true", `"a"`, `"run:\n`+"```python\\nprint(1)\\n```"+`"`),
			&progressLedger{progress: true, next: "a", instruction: "run:\n```python\nprint(1)\n```", reason: "r"}},
	}
	for _, c := range cases {
		got, err := c.s.readLedger(c.reply)
		switch {
		case c.want == nil && err == nil:
			t.Errorf("%s: read %+v, want an error", c.name, got)
		case c.want != nil && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != nil && *got != *c.want:
			t.Errorf("%s: read %+v, want %+v", c.name, got, c.want)
		}
	}
}

// mustSpecTask is the task of run 1 a spec gives (specTask), which must
// have no problem.
func mustSpecTask(t testing.TB, sp *spec.Spec) []spec.TaskMessage {
	t.Helper()
	task, probs := SpecTask(sp, spec.Limits{})
	if len(probs) > 0 {
		t.Fatalf("task: %v", probs)
	}
	return task
}
