package engine

import (
	"slices"
	"testing"

	"github.com/agentd/agentd/internal/chat"
)

// foldAll folds evs (seqs set in order) into a new state of sp.
func foldAll(t *testing.T, st *State, evs ...chat.Event) {
	t.Helper()
	for _, e := range evs {
		e.Seq = st.LastSeq + 1
		if err := st.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
}

func said(kind string, name, content string, turn int) chat.Event {
	role := chat.RoleAssistant
	if kind == chat.KindTask || kind == chat.KindHuman {
		role = chat.RoleUser
	}
	return chat.WithData(chat.Event{Type: chat.EventMessage, Role: role, Name: name, Content: content}, chat.MessageData{Kind: kind, Turn: turn, End: turn > 0})
}

func graphSel(turn int, agents ...string) chat.Event {
	return SelectedEvent(chat.Selection{Agent: agents[0], Agents: agents, Method: "graph", Candidates: agents, Turn: turn})
}

// shown is a model context as "role name: content" lines, the system
// message left out.
func shown(t *testing.T, st *State, agent string) []string {
	t.Helper()
	msgs, err := st.ModelContext(st.agent(agent), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range msgs[1:] {
		out = append(out, string(m.Role)+" "+m.Name+": "+m.Content)
	}
	return out
}

// TestParallelSiblingsSeeEarlierRepliesAfterTheirOwn: in AgentChat a node
// of a parallel step gets a sibling's reply that arrived while it ran only
// once its own turn is over (its container handles one message at a time),
// so it sees it after its own reply; a sibling that finished first sees the
// later reply in log order.
func TestParallelSiblingsSeeEarlierRepliesAfterTheirOwn(t *testing.T) {
	sp := specOf(t, `{"task": "go", "agents": [{"name": "b", "type": "assistant"}, {"name": "c", "type": "assistant"}],
		"speaker_selection": {"method": "graph", "graph": {"nodes": {
			"b": {"name": "b", "edges": [{"target": "c", "condition": "AGAIN"}]},
			"c": {"name": "c", "edges": [{"target": "b", "condition": "AGAIN"}]},
			"start": {"name": "start", "edges": [{"target": "b"}, {"target": "c"}]}}, "default_start_node": "start"}}}`)
	st := NewState(sp, 10)
	foldAll(t, st, said(chat.KindTask, "user", "go", 0), runningEvent(),
		graphSel(1, "b", "c"), said(chat.KindModel, "c", "C first", 1), said(chat.KindModel, "b", "B second", 1))
	if st.Pending != nil || st.Turns != 1 {
		t.Fatalf("the step did not end with its last branch: pending %v, turns %d", st.Pending, st.Turns)
	}
	// While b's turn runs, c's reply is not shown to it at all.
	mid := NewState(sp, 10)
	foldAll(t, mid, said(chat.KindTask, "user", "go", 0), runningEvent(), graphSel(1, "b", "c"), said(chat.KindModel, "c", "C first", 1))
	if got, want := shown(t, mid, "b"), []string{"user user: go"}; !slices.Equal(got, want) {
		t.Errorf("b, still running, sees %q, want %q", got, want)
	}
	if got, want := shown(t, st, "b"), []string{"user user: go", "assistant : B second", "user c: C first"}; !slices.Equal(got, want) {
		t.Errorf("b sees %q, want %q", got, want)
	}
	if got, want := shown(t, st, "c"), []string{"user user: go", "assistant : C first", "user b: B second"}; !slices.Equal(got, want) {
		t.Errorf("c sees %q, want %q", got, want)
	}
}

// TestParallelStepChecksTerminationOnTheLastReplyOnly: AgentChat's manager
// checks its conditions on the response that ends the step, so a mention
// in an earlier sibling's reply does not stop the chat, and max_messages
// does not count that reply.
func TestParallelStepChecksTerminationOnTheLastReplyOnly(t *testing.T) {
	sp := specOf(t, `{"task": "go", "agents": [{"name": "b", "type": "assistant"}, {"name": "c", "type": "assistant"}],
		"termination": {"any": [{"text_mention": {"text": "DONE"}}, {"max_messages": 3}]},
		"speaker_selection": {"method": "graph", "graph": {"nodes": {"b": {"name": "b"}, "c": {"name": "c"}}}}}`)
	st := NewState(sp, 10)
	foldAll(t, st, said(chat.KindTask, "user", "go", 0), runningEvent(),
		graphSel(1, "b", "c"), said(chat.KindModel, "c", "DONE", 1), said(chat.KindModel, "b", "not yet", 1))
	if st.termFired {
		t.Fatal("a condition fired on a reply that did not end the step")
	}
	st = NewState(sp, 10)
	foldAll(t, st, said(chat.KindTask, "user", "go", 0), runningEvent(),
		graphSel(1, "b", "c"), said(chat.KindModel, "c", "not yet", 1), said(chat.KindModel, "b", "DONE", 1))
	if !st.termFired {
		t.Fatal("the mention in the reply that ended the step did not fire")
	}
	if ev, ok := st.AfterMessage(StepEnv{}); !ok || !slices.Contains([]string{string(chat.StopGraphComplete)}, stopOf(t, ev)) {
		// Both nodes are leaves: the graph is complete, which GraphFlow
		// checks before its conditions.
		t.Fatalf("after the step: %v %v", ev, ok)
	}
}

func stopOf(t *testing.T, e chat.Event) string {
	t.Helper()
	var d chat.TerminalData
	if err := chat.DecodeData(e, &d); err != nil {
		t.Fatal(err)
	}
	return string(d.StopReason)
}

// TestMessageFilterShowsWhatAgentChatGivesTheWrappedAgent: of the
// messages given for each turn, the filter's sources in the filter's
// order, first or last count of each.
func TestMessageFilterShowsWhatAgentChatGivesTheWrappedAgent(t *testing.T) {
	sp := specOf(t, `{"task": "go", "agents": [{"name": "a", "type": "assistant"}, {"name": "b", "type": "assistant"},
		{"name": "f", "type": "assistant", "message_filter": {"per_source": [{"source": "b", "position": "last", "count": 1}, {"source": "user", "position": "first", "count": 1}]}}]}`)
	st := NewState(sp, 10)
	foldAll(t, st, said(chat.KindTask, "user", "go", 0), runningEvent(),
		said(chat.KindModel, "a", "a1", 1), said(chat.KindModel, "b", "b1", 2), said(chat.KindModel, "b", "b2", 3),
		said(chat.KindModel, "f", "f1", 4), said(chat.KindModel, "a", "a2", 5), said(chat.KindModel, "b", "b3", 6))
	want := []string{"user b: b2", "user user: go", "assistant : f1", "user b: b3"}
	if got := shown(t, st, "f"); !slices.Equal(got, want) {
		t.Fatalf("f sees %q, want %q", got, want)
	}
}
