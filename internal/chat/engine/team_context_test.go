package engine

import (
	"slices"
	"testing"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/spec"
)

func inner(team, name, content string, turn int) chat.Event {
	return chat.WithData(chat.Event{Type: chat.EventMessage, Role: chat.RoleAssistant, Name: name, Content: content},
		chat.MessageData{Kind: chat.KindModel, Turn: turn, End: true, Team: team})
}

func innerSel(team, agent string, turn int) chat.Event {
	return SelectedEvent(chat.Selection{Agent: agent, Method: "round_robin", Candidates: []string{agent}, Turn: turn, Team: team})
}

// lines is a model context as "role name: content" lines.
func lines(msgs []chat.ModelMessage) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Role)+" "+m.Name+": "+m.Content)
	}
	return out
}

// TestTeamAgentContexts: what each model is shown around a team agent, as
// AgentChat's SocietyOfMindAgent shows it: the inner agents get the
// messages given to the team agent (from its second turn on after a
// handoff carrying the earlier ones), the team agent's model gets the
// inner messages between its instruction and response prompt, and the
// chat's other agents never see the inner messages.
func TestTeamAgentContexts(t *testing.T) {
	sp := specOf(t, `{"task": "Write a story.", "agents": [
		{"name": "som", "type": "team", "team": {"agents": [{"name": "writer", "type": "assistant"}, {"name": "editor", "type": "assistant"}],
		 "termination": {"text_mention": {"text": "APPROVE"}}}},
		{"name": "translator", "type": "assistant"}]}`)
	st := NewState(sp, 10)
	foldAll(t, st, said(chat.KindTask, "user", "Write a story.", 0), runningEvent(),
		SelectedEvent(chat.Selection{Agent: "som", Method: "round_robin", Turn: 1}),
		innerSel("som", "writer", 1), inner("som", "writer", "draft 1", 1),
		innerSel("som", "editor", 2), inner("som", "editor", "APPROVE", 2))
	if s := st.Next(StepEnv{NewID: func() string { return "r" }}); s.Kind != StepModel || s.Agent.Name != "som" || s.Inner != nil {
		t.Fatalf("after the inner run stopped, the next step is %v of %v", s.Kind, s.Agent)
	}
	msgs, err := st.ModelContext(st.agent("som"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"system : " + spec.DefaultInstruction, "user writer: draft 1", "user editor: APPROVE", "system : " + spec.DefaultResponsePrompt}
	if got := lines(msgs); !slices.Equal(got, want) {
		t.Errorf("som's model is asked\n %q\nwant\n %q", got, want)
	}
	foldAll(t, st, said(chat.KindModel, "som", "Story v1.", 1),
		SelectedEvent(chat.Selection{Agent: "translator", Method: "round_robin", Turn: 2}))
	if st.inners != nil && st.inners["som"] != nil {
		t.Fatal("the inner run outlived the team agent's answer")
	}
	if got, want := shown(t, st, "translator"), []string{"user user: Write a story.", "user som: Story v1."}; !slices.Equal(got, want) {
		t.Errorf("translator sees %q, want %q", got, want)
	}
	foldAll(t, st, said(chat.KindModel, "translator", "Historia 1.", 2),
		SelectedEvent(chat.Selection{Agent: "som", Method: "round_robin", Turn: 3}),
		innerSel("som", "writer", 1))
	in := st.inners["som"].st
	msgs, err = in.ModelContext(in.agent("writer"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"system : " + defaultSystemMessage, "user user: Write a story.", "user som: relevant previous messages", "user translator: Historia 1."}
	if got := lines(msgs); !slices.Equal(got, want) {
		t.Errorf("the inner writer's second run is shown\n %q\nwant\n %q", got, want)
	}
	if st.msgCount != 5 || len(st.Msgs) != 3 {
		t.Errorf("counts: %d messages in the log, %d in the thread", st.msgCount, len(st.Msgs))
	}
}
