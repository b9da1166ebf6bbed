package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/spec"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// created returns the first events of a chat, as Runtime.Create writes them.
func created(sp *spec.Spec) []chat.Event {
	evs := []chat.Event{{Seq: 1, Type: chat.EventChatCreated, Data: chat.MustJSON(map[string]any{"status": chat.StatusQueued})}}
	evs = append(evs, chat.Event{Seq: 2, Type: chat.EventMessage, Role: chat.RoleUser, Name: chat.UserName, Content: sp.Task.Text,
		Data: chat.MustJSON(chat.MessageData{Kind: chat.KindTask})})
	for i := range evs {
		evs[i].CreatedAt = t0
	}
	return evs
}

// fold returns the state of a log as a store gives it back (no typed
// data: everything decoded), failing the test on an event that does not
// fold.
func fold(t *testing.T, sp *spec.Spec, evs []chat.Event) *State {
	t.Helper()
	s := NewState(sp, min(DerefOr(sp.MaxRound, spec.DefaultMaxRound), spec.DefaultLimits.MaxRound))
	for _, e := range chat.Untyped(slices.Clone(evs)) {
		if err := s.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func testEnv() StepEnv {
	n := 0
	return StepEnv{Now: t0, NewID: func() string { n++; return fmt.Sprintf("req-%d", n) }}
}

// adopt plans evs on s and returns the state after them and the log grown
// by them, as worker.commit does once the store confirmed.
func adopt(t *testing.T, s *State, log []chat.Event, env StepEnv, evs ...chat.Event) (*State, []chat.Event) {
	t.Helper()
	next, planned, err := s.Plan(evs, env, "c1")
	if err != nil {
		t.Fatal(err)
	}
	return next, append(log, planned...)
}

func dataOf[T any](t *testing.T, e chat.Event) T {
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
		extra func(s *State, log []chat.Event) []chat.Event // more events after chat.running
		check func(t *testing.T, st Step)
	}{{
		name: "round robin selects the first agent",
		spec: two + `}`,
		check: func(t *testing.T, st Step) {
			if st.Kind != StepAppend || st.Events[0].Type != chat.EventSpeakerSelected {
				t.Fatalf("step %v %v", st.Kind, st.Events)
			}
			if sel := dataOf[chat.Selection](t, st.Events[0]); sel.Agent != "a" || sel.Turn != 1 {
				t.Fatalf("selection %+v", sel)
			}
		},
	}, {
		name: "auto with two candidates asks the selector model",
		spec: two + `, "speaker_selection": {"method": "auto"}}`,
		check: func(t *testing.T, st Step) {
			if st.Kind != StepSelect || len(st.Sel.Candidates) != 2 {
				t.Fatalf("step %v %+v", st.Kind, st.Sel)
			}
		},
	}, {
		name: "a selected assistant calls its model",
		spec: two + `}`,
		extra: func(*State, []chat.Event) []chat.Event {
			return []chat.Event{SelectedEvent(chat.Selection{Agent: "b", Method: spec.SelectRoundRobin, Turn: 1})}
		},
		check: func(t *testing.T, st Step) {
			if st.Kind != StepModel || st.Agent.Name != "b" || st.Turn != 1 || st.Reflect {
				t.Fatalf("step %+v", st)
			}
		},
	}, {
		name: "manual selection asks for a speaker",
		spec: two + `, "speaker_selection": {"method": "manual"}}`,
		check: func(t *testing.T, st Step) {
			if st.Kind != StepAppend || st.Events[0].Type != chat.EventInputRequested {
				t.Fatalf("step %+v", st)
			}
			if p := dataOf[chat.PendingInput](t, st.Events[0]); p.Kind != "speaker" || p.RequestID == "" {
				t.Fatalf("request %+v", p)
			}
		},
	}, {
		name: "a code-executing proxy runs the blocks addressed to it",
		spec: `{"task": "t", "agents": [{"name": "w", "type": "assistant"}, {"name": "x", "type": "user_proxy", "human_input_mode": "NEVER", "code_execution": {}}]}`,
		extra: func(*State, []chat.Event) []chat.Event {
			return []chat.Event{
				SelectedEvent(chat.Selection{Agent: "w", Turn: 1}),
				{Type: chat.EventMessage, Role: chat.RoleAssistant, Name: "w", Content: "```python\nprint(1)\n```", Data: chat.MustJSON(chat.MessageData{Kind: chat.KindModel, Turn: 1, End: true})},
				SelectedEvent(chat.Selection{Agent: "x", Turn: 2}),
			}
		},
		check: func(t *testing.T, st Step) {
			if st.Kind != StepCode || len(st.Blocks) != 1 || st.Blocks[0].Code != "print(1)" {
				t.Fatalf("step %+v", st)
			}
		},
	}, {
		name: "max_round stops after the last turn",
		spec: two + `, "max_round": 1}`,
		extra: func(*State, []chat.Event) []chat.Event {
			return []chat.Event{
				SelectedEvent(chat.Selection{Agent: "a", Turn: 1}),
				{Type: chat.EventMessage, Role: chat.RoleAssistant, Name: "a", Content: "hi", Data: chat.MustJSON(chat.MessageData{Kind: chat.KindModel, Turn: 1, End: true})},
			}
		},
		check: func(t *testing.T, st Step) {
			t.Fatal("unreachable: plan appends the stop with the last message")
		},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			sp := specOf(t, tt.spec)
			s := fold(t, sp, created(sp))
			env := testEnv()
			st := s.Next(env)
			if st.Kind != StepAppend || st.Events[0].Type != chat.EventChatRunning {
				t.Fatalf("a queued chat starts running first; got %+v", st)
			}
			log := created(sp)
			s, log = adopt(t, s, log, env, st.Events...)
			if tt.extra != nil {
				for _, e := range tt.extra(s, log) {
					s, log = adopt(t, s, log, env, e)
				}
			}
			if s.Status.Terminal() {
				if tt.name != "max_round stops after the last turn" {
					t.Fatalf("ended: %s", s.stopDetail)
				}
				if last := log[len(log)-1]; last.Type != chat.EventChatCompleted || s.stopReason != chat.StopMaxRound ||
					s.stopDetail != "Maximum number of turns 1 reached." {
					t.Fatalf("last event %s, %s %q", last.Type, s.stopReason, s.stopDetail)
				}
				if st := s.Next(env); st.Kind != StepWait {
					t.Fatalf("a terminal chat has nothing to do; got %v", st.Kind)
				}
				return
			}
			tt.check(t, s.Next(env))
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
	s, _ = adopt(t, s, nil, env, runningEvent(), SelectedEvent(chat.Selection{Agent: "a", Turn: 1}))
	before := s.clone()
	next, evs, err := s.Plan([]chat.Event{{Type: chat.EventMessage, Role: chat.RoleAssistant, Name: "a", Content: "DONE",
		Data: chat.MustJSON(chat.MessageData{Kind: chat.KindModel, Turn: 1, End: true, Usage: &chat.Usage{PromptTokens: 3}})}}, env, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[1].Type != chat.EventChatCompleted || next.Status != chat.StatusCompleted {
		t.Fatalf("planned %d events, status %s", len(evs), next.Status)
	}
	if s.Status != chat.StatusRunning || s.LastSeq != before.LastSeq || len(s.Msgs) != len(before.Msgs) || s.termFired ||
		s.usage != before.usage || s.Turns != 0 || s.term.root.fired {
		t.Fatalf("plan changed the state it was asked about: %+v", s)
	}
}

// TestApplyErrorsNameTheSeq: an event that does not decode is an error
// naming its seq, never a zero value, and the chat then fails.
func TestApplyErrorsNameTheSeq(t *testing.T) {
	sp := specOf(t, `{"task": "t", "agents": [{"name": "a", "type": "assistant"}]}`)
	evs := created(sp)
	evs = append(evs, chat.Event{Seq: 3, Type: chat.EventChatRunning, CreatedAt: t0},
		chat.Event{Seq: 4, Type: chat.EventSpeakerSelected, Data: json.RawMessage(`{"agent": 7}`), CreatedAt: t0},
		chat.Event{Seq: 5, Type: chat.EventMessage, Role: chat.RoleAssistant, Name: "a", Data: json.RawMessage(`{"kind":"model","turn":1,"end":true}`), CreatedAt: t0})
	s := NewState(sp, 10)
	var errs []error
	for _, e := range evs {
		if err := s.Apply(e); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "event seq 4") {
		t.Fatalf("errors %v", errs)
	}
	if s.LastSeq != 5 {
		t.Fatalf("lastSeq %d after a broken log, want 5 (the next append must follow the log)", s.LastSeq)
	}
	st := s.Next(testEnv())
	if st.Kind != StepAppend || st.Events[0].Type != chat.EventChatFailed {
		t.Fatalf("step %+v", st)
	}
	if d := dataOf[chat.TerminalData](t, st.Events[0]); !strings.Contains(d.Error, "event seq 4") {
		t.Fatalf("error %q does not name the seq", d.Error)
	}
	gap := NewState(sp, 10)
	if err := gap.Apply(chat.Event{Seq: 2, Type: chat.EventChatCreated}); err == nil || !strings.Contains(err.Error(), "seq 2") {
		t.Fatalf("a gap: %v", err)
	}
}
