package runtime_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/runtime/runtimetest"
)

// somSpec is a team agent (an inner writer and editor, stopping at
// APPROVE) in a round robin with a translator; the writer's first reply
// may be slow.
func somSpec(writerDelayMS int) []byte {
	return []byte(`{"task": "Write a story.", "max_round": 4,
	"agents": [
		{"name": "som", "type": "team", "model": {"provider": "replay", "responses": ["Story v1.", "Story v2."]},
		 "team": {"agents": [
			{"name": "writer", "type": "assistant", "model": {"provider": "replay", "responses": [{"content": "draft 1", "delay_ms": ` + strconv.Itoa(writerDelayMS) + `}, "draft 2"]}},
			{"name": "editor", "type": "assistant", "model": {"provider": "replay", "responses": ["APPROVE", "APPROVE"]}}],
		  "termination": {"text_mention": {"text": "APPROVE"}}}},
		{"name": "translator", "type": "assistant", "model": {"provider": "replay", "responses": ["Historia 1.", "Historia 2."]}}]}`)
}

// teamSaid is the chat's messages as "team/name:content" ("" team: the
// chat's own thread).
func teamSaid(ms []chat.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Team+"/"+m.Name+":"+m.Content)
	}
	return out
}

// innerWriterSelected: the log ends with the inner writer's selection.
func innerWriterSelected(evs []chat.Event) bool {
	return len(evs) > 4 && evs[len(evs)-1].Type == chat.EventSpeakerSelected
}

var somTranscript = []string{"/user:Write a story.",
	"som/writer:draft 1", "som/editor:APPROVE", "/som:Story v1.", "/translator:Historia 1.",
	"som/writer:draft 2", "som/editor:APPROVE", "/som:Story v2.", "/translator:Historia 2."}

// TestTeamAgentRunsItsInnerTeamThenAnswers: each turn of the team agent
// runs its inner team afresh to its own termination, then the agent's
// model answers; the inner messages are in the log, marked with the team.
func TestTeamAgentRunsItsInnerTeamThenAnswers(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	c, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: somSpec(0)})
	if err != nil {
		t.Fatal(err)
	}
	got := waitTerminal(t, rt, c.ID, 15*time.Second)
	if got.Status != chat.StatusCompleted || got.StopReason != chat.StopMaxRound || got.Turns != 4 {
		t.Fatalf("chat = %+v", got)
	}
	if g := teamSaid(messages(t, db, c.ID)); !slices.Equal(g, somTranscript) {
		t.Fatalf("messages\n %v\nwant\n %v", g, somTranscript)
	}
	if got.MessageCount != len(somTranscript) {
		t.Fatalf("message_count %d, want %d", got.MessageCount, len(somTranscript))
	}
}

// TestTeamAgentSurvivesAWorkerStopMidInnerRun: the runtime stops while the
// inner writer's reply is under way; another runtime finishes the inner
// run from the log and the chat ends with the same transcript.
func TestTeamAgentSurvivesAWorkerStopMidInnerRun(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt1 := stoppableRuntime(t, db)
	c, _, err := rt1.Create(context.Background(), &chat.CreateParams{Body: somSpec(1500)})
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, rt1, db, c.ID, "the inner writer's selection", innerWriterSelected)
	stopRuntime(t, rt1)
	rt2 := runtimetest.New(t, db)
	got := waitTerminal(t, rt2, c.ID, 15*time.Second)
	if g := teamSaid(messages(t, db, c.ID)); !slices.Equal(g, somTranscript) || got.StopReason != chat.StopMaxRound {
		t.Fatalf("messages\n %v (%s)\nwant\n %v", g, got.StopReason, somTranscript)
	}
}

// TestStopWaitsForTheTeamAgentsAnswer: POST /stop while the inner team
// runs ends the run after the team agent's turn — its inner run and its
// answer — as AgentChat's ExternalTermination on the outer team does; the
// inner team is not stopped early.
func TestStopWaitsForTheTeamAgentsAnswer(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	c, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: somSpec(800)})
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, rt, db, c.ID, "the inner writer's selection", innerWriterSelected)
	if _, _, err := rt.StopRun(context.Background(), "", c.ID, ""); err != nil {
		t.Fatal(err)
	}
	got := waitTerminal(t, rt, c.ID, 15*time.Second)
	if got.StopReason != chat.StopExternal {
		t.Fatalf("chat = %+v", got)
	}
	if g, want := teamSaid(messages(t, db, c.ID)), somTranscript[:4]; !slices.Equal(g, want) {
		t.Fatalf("messages\n %v\nwant\n %v", g, want)
	}
}
