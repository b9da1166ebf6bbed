package chat

import (
	"slices"
	"testing"
)

// foldAll folds evs (seqs set in order) into a new state of sp.
func foldAll(t *testing.T, st *state, evs ...Event) {
	t.Helper()
	for _, e := range evs {
		e.Seq = st.lastSeq + 1
		if err := st.apply(e); err != nil {
			t.Fatal(err)
		}
	}
}

func said(kind string, name, content string, turn int) Event {
	role := RoleAssistant
	if kind == kindTask || kind == kindHuman {
		role = RoleUser
	}
	return withData(Event{Type: EventMessage, Role: role, Name: name, Content: content}, messageData{Kind: kind, Turn: turn, End: turn > 0})
}

func graphSel(turn int, agents ...string) Event {
	return selectedEvent(selection{Agent: agents[0], Agents: agents, Method: "graph", Candidates: agents, Turn: turn})
}

// shown is a model context as "role name: content" lines, the system
// message left out.
func shown(t *testing.T, st *state, agent string) []string {
	t.Helper()
	msgs, err := st.modelContext(st.agent(agent), nil)
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
	st := newState(sp, 10)
	foldAll(t, st, said(kindTask, "user", "go", 0), runningEvent(),
		graphSel(1, "b", "c"), said(kindModel, "c", "C first", 1), said(kindModel, "b", "B second", 1))
	if st.pending != nil || st.turns != 1 {
		t.Fatalf("the step did not end with its last branch: pending %v, turns %d", st.pending, st.turns)
	}
	// While b's turn runs, c's reply is not shown to it at all.
	mid := newState(sp, 10)
	foldAll(t, mid, said(kindTask, "user", "go", 0), runningEvent(), graphSel(1, "b", "c"), said(kindModel, "c", "C first", 1))
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
	st := newState(sp, 10)
	foldAll(t, st, said(kindTask, "user", "go", 0), runningEvent(),
		graphSel(1, "b", "c"), said(kindModel, "c", "DONE", 1), said(kindModel, "b", "not yet", 1))
	if st.termFired {
		t.Fatal("a condition fired on a reply that did not end the step")
	}
	st = newState(sp, 10)
	foldAll(t, st, said(kindTask, "user", "go", 0), runningEvent(),
		graphSel(1, "b", "c"), said(kindModel, "c", "not yet", 1), said(kindModel, "b", "DONE", 1))
	if !st.termFired {
		t.Fatal("the mention in the reply that ended the step did not fire")
	}
	if ev, ok := st.afterMessage(stepEnv{}); !ok || !slices.Contains([]string{string(StopGraphComplete)}, stopOf(t, ev)) {
		// Both nodes are leaves: the graph is complete, which GraphFlow
		// checks before its conditions.
		t.Fatalf("after the step: %v %v", ev, ok)
	}
}

func stopOf(t *testing.T, e Event) string {
	t.Helper()
	var d terminalData
	if err := decodeData(e, &d); err != nil {
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
	st := newState(sp, 10)
	foldAll(t, st, said(kindTask, "user", "go", 0), runningEvent(),
		said(kindModel, "a", "a1", 1), said(kindModel, "b", "b1", 2), said(kindModel, "b", "b2", 3),
		said(kindModel, "f", "f1", 4), said(kindModel, "a", "a2", 5), said(kindModel, "b", "b3", 6))
	want := []string{"user b: b2", "user user: go", "assistant : f1", "user b: b3"}
	if got := shown(t, st, "f"); !slices.Equal(got, want) {
		t.Fatalf("f sees %q, want %q", got, want)
	}
}
