package chat

import (
	"encoding/json"
	"fmt"
	"slices"
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
	for _, e := range untyped(slices.Clone(evs)) {
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
