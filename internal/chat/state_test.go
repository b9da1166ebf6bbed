package chat

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/spec"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// created returns the first events of a chat, as Runtime.Create writes them.
func created(sp *spec.Spec) []Event {
	evs := []Event{{Seq: 1, Type: EventChatCreated, Data: mustJSON(map[string]any{"status": StatusQueued})}}
	evs = append(evs, Event{Seq: 2, Type: EventMessage, Role: RoleUser, Name: UserName, Content: sp.Task.Text,
		Data: mustJSON(messageData{Kind: kindTask})})
	for i := range evs {
		evs[i].CreatedAt = t0
	}
	return evs
}

// fold returns the state of a log as a store gives it back (no typed
// data: everything decoded), failing the test on an event that does not
// fold.
func fold(t *testing.T, sp *spec.Spec, evs []Event) *state {
	t.Helper()
	s := newState(sp, min(derefOr(sp.MaxRound, spec.DefaultMaxRound), spec.DefaultLimits.MaxRound))
	for _, e := range evs {
		e.typed = nil
		if err := s.apply(e); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func testEnv() stepEnv {
	n := 0
	return stepEnv{now: t0, newID: func() string { n++; return fmt.Sprintf("req-%d", n) }}
}

// adopt plans evs on s and returns the state after them and the log grown
// by them, as worker.commit does once the store confirmed.
func adopt(t *testing.T, s *state, log []Event, env stepEnv, evs ...Event) (*state, []Event) {
	t.Helper()
	next, planned, err := s.plan(evs, env, "c1")
	if err != nil {
		t.Fatal(err)
	}
	return next, append(log, planned...)
}

func dataOf[T any](t *testing.T, e Event) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(e.Data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestNextDecisions(t *testing.T) {
	two := `{"task": "t", "agents": [{"name": "a", "type": "assistant"}, {"name": "b", "type": "assistant"}]`
	for _, tt := range []struct {
		name  string
		spec  string
		extra func(s *state, log []Event) []Event // more events after chat.running
		check func(t *testing.T, st step)
	}{{
		name: "round robin selects the first agent",
		spec: two + `}`,
		check: func(t *testing.T, st step) {
			if st.kind != stepAppend || st.events[0].Type != EventSpeakerSelected {
				t.Fatalf("step %v %v", st.kind, st.events)
			}
			if sel := dataOf[selection](t, st.events[0]); sel.Agent != "a" || sel.Turn != 1 {
				t.Fatalf("selection %+v", sel)
			}
		},
	}, {
		name: "auto with two candidates asks the selector model",
		spec: two + `, "speaker_selection": {"method": "auto"}}`,
		check: func(t *testing.T, st step) {
			if st.kind != stepSelect || len(st.sel.Candidates) != 2 {
				t.Fatalf("step %v %+v", st.kind, st.sel)
			}
		},
	}, {
		name: "a selected assistant calls its model",
		spec: two + `}`,
		extra: func(*state, []Event) []Event {
			return []Event{selectedEvent(selection{Agent: "b", Method: spec.SelectRoundRobin, Turn: 1})}
		},
		check: func(t *testing.T, st step) {
			if st.kind != stepModel || st.agent.Name != "b" || st.turn != 1 || st.reflect {
				t.Fatalf("step %+v", st)
			}
		},
	}, {
		name: "manual selection asks for a speaker",
		spec: two + `, "speaker_selection": {"method": "manual"}}`,
		check: func(t *testing.T, st step) {
			if st.kind != stepAppend || st.events[0].Type != EventInputRequested {
				t.Fatalf("step %+v", st)
			}
			if p := dataOf[PendingInput](t, st.events[0]); p.Kind != "speaker" || p.RequestID == "" {
				t.Fatalf("request %+v", p)
			}
		},
	}, {
		name: "a code-executing proxy runs the blocks addressed to it",
		spec: `{"task": "t", "agents": [{"name": "w", "type": "assistant"}, {"name": "x", "type": "user_proxy", "human_input_mode": "NEVER", "code_execution": {}}]}`,
		extra: func(*state, []Event) []Event {
			return []Event{
				selectedEvent(selection{Agent: "w", Turn: 1}),
				{Type: EventMessage, Role: RoleAssistant, Name: "w", Content: "```python\nprint(1)\n```", Data: mustJSON(messageData{Kind: kindModel, Turn: 1, End: true})},
				selectedEvent(selection{Agent: "x", Turn: 2}),
			}
		},
		check: func(t *testing.T, st step) {
			if st.kind != stepCode || len(st.blocks) != 1 || st.blocks[0].Code != "print(1)" {
				t.Fatalf("step %+v", st)
			}
		},
	}, {
		name: "max_round stops after the last turn",
		spec: two + `, "max_round": 1}`,
		extra: func(*state, []Event) []Event {
			return []Event{
				selectedEvent(selection{Agent: "a", Turn: 1}),
				{Type: EventMessage, Role: RoleAssistant, Name: "a", Content: "hi", Data: mustJSON(messageData{Kind: kindModel, Turn: 1, End: true})},
			}
		},
		check: func(t *testing.T, st step) {
			t.Fatal("unreachable: plan appends the stop with the last message")
		},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			sp := specOf(t, tt.spec)
			s := fold(t, sp, created(sp))
			env := testEnv()
			st := s.next(env)
			if st.kind != stepAppend || st.events[0].Type != EventChatRunning {
				t.Fatalf("a queued chat starts running first; got %+v", st)
			}
			log := created(sp)
			s, log = adopt(t, s, log, env, st.events...)
			if tt.extra != nil {
				for _, e := range tt.extra(s, log) {
					s, log = adopt(t, s, log, env, e)
				}
			}
			if s.status.Terminal() {
				if tt.name != "max_round stops after the last turn" {
					t.Fatalf("ended: %s", s.stopDetail)
				}
				if last := log[len(log)-1]; last.Type != EventChatCompleted || s.stopReason != StopMaxRound ||
					s.stopDetail != "Maximum number of turns 1 reached." {
					t.Fatalf("last event %s, %s %q", last.Type, s.stopReason, s.stopDetail)
				}
				if st := s.next(env); st.kind != stepWait {
					t.Fatalf("a terminal chat has nothing to do; got %v", st.kind)
				}
				return
			}
			tt.check(t, s.next(env))
		})
	}
}

// TestPlanLeavesStateAlone: planning an append changes nothing until the
// worker adopts the result, so a failed append leaves the state as it was.
func TestPlanLeavesStateAlone(t *testing.T) {
	sp := specOf(t, `{"task": "t", "agents": [{"name": "a", "type": "assistant"}],
		"termination": {"any": [{"text_mention": {"text": "DONE"}}, {"max_messages": 9}]}}`)
	env := testEnv()
	s := fold(t, sp, created(sp))
	s, _ = adopt(t, s, nil, env, runningEvent(), selectedEvent(selection{Agent: "a", Turn: 1}))
	before := s.clone()
	next, evs, err := s.plan([]Event{{Type: EventMessage, Role: RoleAssistant, Name: "a", Content: "DONE",
		Data: mustJSON(messageData{Kind: kindModel, Turn: 1, End: true, Usage: &Usage{PromptTokens: 3}})}}, env, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[1].Type != EventChatCompleted || next.status != StatusCompleted {
		t.Fatalf("planned %d events, status %s", len(evs), next.status)
	}
	if s.status != StatusRunning || s.lastSeq != before.lastSeq || len(s.msgs) != len(before.msgs) || s.termFired ||
		s.usage != before.usage || s.turns != 0 || s.term.root.fired {
		t.Fatalf("plan changed the state it was asked about: %+v", s)
	}
}

// TestApplyErrorsNameTheSeq: an event that does not decode is an error
// naming its seq, never a zero value, and the chat then fails.
func TestApplyErrorsNameTheSeq(t *testing.T) {
	sp := specOf(t, `{"task": "t", "agents": [{"name": "a", "type": "assistant"}]}`)
	evs := created(sp)
	evs = append(evs, Event{Seq: 3, Type: EventChatRunning, CreatedAt: t0},
		Event{Seq: 4, Type: EventSpeakerSelected, Data: json.RawMessage(`{"agent": 7}`), CreatedAt: t0},
		Event{Seq: 5, Type: EventMessage, Role: RoleAssistant, Name: "a", Data: json.RawMessage(`{"kind":"model","turn":1,"end":true}`), CreatedAt: t0})
	s := newState(sp, 10)
	var errs []error
	for _, e := range evs {
		if err := s.apply(e); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "event seq 4") {
		t.Fatalf("errors %v", errs)
	}
	if s.lastSeq != 5 {
		t.Fatalf("lastSeq %d after a broken log, want 5 (the next append must follow the log)", s.lastSeq)
	}
	st := s.next(testEnv())
	if st.kind != stepAppend || st.events[0].Type != EventChatFailed {
		t.Fatalf("step %+v", st)
	}
	if d := dataOf[terminalData](t, st.events[0]); !strings.Contains(d.Error, "event seq 4") {
		t.Fatalf("error %q does not name the seq", d.Error)
	}
	gap := newState(sp, 10)
	if err := gap.apply(Event{Seq: 2, Type: EventChatCreated}); err == nil || !strings.Contains(err.Error(), "seq 2") {
		t.Fatalf("a gap: %v", err)
	}
}

// effect plays the world for one step: what a model, a tool, a sandbox
// would have produced, and returns the events the worker would append.
func effect(rng *rand.Rand, s *state, st step) []Event {
	if st.st != nil {
		// A step of a team agent's inner run: planned on the inner state,
		// its events marked as the team's, as worker.produce does.
		team := st.team
		st.st, st.team = nil, ""
		return tagTeam(effect(rng, s.inners[team].st, st), team)
	}
	switch st.kind {
	case stepAppend:
		return st.events
	case stepSelect:
		var replies []string
		for range 1 + rng.IntN(2) {
			replies = append(replies, st.sel.Candidates[rng.IntN(len(st.sel.Candidates))]+[]string{"", " and a0"}[rng.IntN(2)])
		}
		return []Event{selectedEvent(s.autoSelection(st.sel, replies, Usage{PromptTokens: 5}))}
	case stepModel:
		resp := &ModelResponse{Content: []string{"ok", "STOP", "```python\nprint(1)\n```", "x\x00y"}[rng.IntN(4)],
			Usage: Usage{PromptTokens: int64(rng.IntN(50)), CompletionTokens: int64(rng.IntN(50))}}
		box := &toolbox{byName: map[string]offered{
			"t":             {def: ToolDef{Name: "t"}},
			"f":             {def: ToolDef{Name: "f"}, executor: "p"},
			"transfer_to_p": {def: ToolDef{Name: "transfer_to_p"}, handoff: "p"},
		}}
		if !st.reflect && rng.IntN(2) == 0 {
			for i := range 1 + rng.IntN(2) {
				name := []string{"t", "f", "transfer_to_p", "nope"}[rng.IntN(4)]
				resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: fmt.Sprintf("call_%d_%d", s.lastSeq, i), Type: "function",
					Function: FunctionCall{Name: name, Arguments: "{}"}})
			}
		}
		ev, err := modelReply(st.agent, st.turn, resp, box, st.reflect)
		if err != nil {
			panic(err)
		}
		return []Event{ev}
	case stepTools:
		box := &toolbox{byName: map[string]offered{"t": {def: ToolDef{Name: "t"}}, "transfer_to_p": {def: ToolDef{Name: "transfer_to_p"}, handoff: "p"}}}
		calls, decided := s.approvedCalls(st.open.ToolCalls)
		results := make([]ToolResponse, len(st.open.ToolCalls))
		for i, c := range calls {
			results[i] = ToolResponse{ToolCallID: c.ID, Role: RoleTool, Content: "r " + c.Function.Arguments}
			if decided[i] != nil {
				results[i] = *decided[i]
			}
		}
		return toolTurnEvents(st.agent, st.turn, st.open, results, box)
	case stepRouted:
		results := make([]ToolResponse, len(st.open.ToolCalls))
		for i, c := range st.open.ToolCalls {
			results[i] = ToolResponse{ToolCallID: c.ID, Role: RoleTool, Content: "r"}
		}
		return []Event{routedReply(st.agent, st.turn, st.open, results, map[string]offered{"f": {}})}
	case stepCode:
		return []Event{codeReply(st.agent, st.turn, &CodeResult{ExitCode: rng.IntN(2), Output: "1\n"})}
	case stepMagentic:
		return magenticEffect(rng, s, st)
	}
	return nil
}

func randomInput(rng *rand.Rand, s *state) json.RawMessage {
	p := s.pendingInput
	switch rng.IntN(5) {
	case 0:
		return nil // nobody answered yet
	case 1:
		return mustJSON(Input{RequestID: p.RequestID, Content: new(string)})
	}
	if p.Kind == "speaker" {
		sp := p.Candidates[rng.IntN(len(p.Candidates))]
		return mustJSON(Input{RequestID: p.RequestID, Speaker: &sp})
	}
	if p.Kind == InputApproval {
		var as []Approval
		decide := func(id string) Approval {
			switch rng.IntN(3) {
			case 0:
				return Approval{ToolCallID: id, Approve: false, Reason: "no"}
			case 1:
				return Approval{ToolCallID: id, Approve: true, Arguments: json.RawMessage(`{"edited":1}`)}
			}
			return Approval{ToolCallID: id, Approve: true}
		}
		for _, c := range p.ToolCalls {
			as = append(as, decide(c.ID))
		}
		if len(p.CodeBlocks) > 0 {
			a := decide("")
			a.Arguments = nil
			as = append(as, a)
		}
		return mustJSON(Input{RequestID: p.RequestID, Approvals: as})
	}
	c := []string{"go on", "exit", "STOP"}[rng.IntN(3)]
	return mustJSON(Input{RequestID: p.RequestID, Content: &c})
}

// A worker folds its own events from the values they were encoded from,
// unless the encoding changed them: then it decodes, as a worker that reads
// the log does.
func TestWithDataKeepsOnlyWhatDecodesTheSame(t *testing.T) {
	for _, c := range []struct {
		out  string
		kept bool
	}{{"fine <ok> & done", true}, {"bad \xff byte", false}, {"nul \x00 char", false}} {
		e := storable(withData(Event{Type: EventMessage}, messageData{Kind: kindAuto, CodeResult: &CodeResult{Output: c.out}}))
		if (e.typed != nil) != c.kept {
			t.Errorf("%q: typed kept = %v, want %v", c.out, e.typed != nil, c.kept)
		}
		var typed, decoded messageData
		if err := decodeData(e, &typed); err != nil {
			t.Fatal(err)
		}
		e.typed = nil
		if err := decodeData(e, &decoded); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(typed, decoded) {
			t.Errorf("%q: folded %+v, the log gives %+v", c.out, typed.CodeResult, decoded.CodeResult)
		}
	}
}
