package e2e

import (
	"slices"
	"testing"
	"time"
)

// fanOutSpec is a graph chat a → (b, c) → d whose b answers slowly.
const fanOutSpec = `{"task": "go",
	"agents": [
		{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["A"]}},
		{"name": "b", "type": "assistant", "model": {"provider": "replay", "responses": [{"content": "B", "delay_ms": 4000}]}},
		{"name": "c", "type": "assistant", "model": {"provider": "replay", "responses": ["C"]}},
		{"name": "d", "type": "assistant", "model": {"provider": "replay", "responses": ["D"]}}],
	"speaker_selection": {"method": "graph", "graph": {"nodes": {
		"a": {"name": "a", "edges": [{"target": "b"}, {"target": "c"}]},
		"b": {"name": "b", "edges": [{"target": "d"}]},
		"c": {"name": "c", "edges": [{"target": "d"}]},
		"d": {"name": "d"}}}}}`

// TestGraphFanOutSurvivesKill9: agentd is killed while b's reply is under
// way and c's is committed. The restarted server finishes the parallel
// step from the log — b's model is asked again, c's reply stays once — and
// the join runs d: the transcript is the one without the crash.
func TestGraphFanOutSurvivesKill9(t *testing.T) {
	t.Parallel()
	env := []string{"AGENTD_DATA_DIR=" + t.TempDir(), "AGENTD_LEASE_TTL=1s"}
	p := startAgentd(t, env...)
	c := p.create([]byte(fanOutSpec))
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Contains(spoken(p.messages(c.ID)), "c:C") {
		if time.Now().After(deadline) {
			t.Fatalf("c never answered: %v", spoken(p.messages(c.ID)))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := spoken(p.messages(c.ID)); slices.Contains(got, "b:B") {
		t.Fatalf("b answered before the kill: %v", got)
	}
	p.kill9()

	p2 := startAgentd(t, env...)
	final := p2.waitTerminal(c.ID, 30*time.Second)
	if final.Status != "completed" || *final.StopReason != "graph_complete" || *final.StopDetail != "Digraph execution is complete" {
		t.Fatalf("chat = %+v", final)
	}
	if got, want := spoken(p2.messages(c.ID)), []string{"user:go", "a:A", "c:C", "b:B", "d:D"}; !slices.Equal(got, want) {
		t.Fatalf("messages %v, want %v", got, want)
	}
}

// somSpec is a team agent (an inner writer and an editor who approves
// slowly) in a round robin with a translator.
const somSpec = `{"task": "Write a story.", "max_round": 2,
	"agents": [
		{"name": "som", "type": "team", "model": {"provider": "replay", "responses": ["Story."]},
		 "team": {"agents": [
			{"name": "writer", "type": "assistant", "model": {"provider": "replay", "responses": ["draft"]}},
			{"name": "editor", "type": "assistant", "model": {"provider": "replay", "responses": [{"content": "APPROVE", "delay_ms": 4000}]}}],
		  "termination": {"text_mention": {"text": "APPROVE"}}}},
		{"name": "translator", "type": "assistant", "model": {"provider": "replay", "responses": ["Historia."]}}]}`

// TestTeamAgentSurvivesKill9: agentd is killed while the team agent's
// inner run is under way (the writer's draft committed, the editor's
// reply not). The restarted server goes on with the inner run from the
// log: the transcript is the one without the crash, the inner messages
// marked with the team.
func TestTeamAgentSurvivesKill9(t *testing.T) {
	t.Parallel()
	env := []string{"AGENTD_DATA_DIR=" + t.TempDir(), "AGENTD_LEASE_TTL=1s"}
	p := startAgentd(t, env...)
	c := p.create([]byte(somSpec))
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Contains(spoken(p.messages(c.ID)), "writer:draft") {
		if time.Now().After(deadline) {
			t.Fatalf("the inner writer never answered: %v", spoken(p.messages(c.ID)))
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.kill9()

	p2 := startAgentd(t, env...)
	final := p2.waitTerminal(c.ID, 30*time.Second)
	if final.Status != "completed" || *final.StopReason != "max_round" {
		t.Fatalf("chat = %+v", final)
	}
	msgs := p2.messages(c.ID)
	if got, want := spoken(msgs), []string{"user:Write a story.", "writer:draft", "editor:APPROVE", "som:Story.", "translator:Historia."}; !slices.Equal(got, want) {
		t.Fatalf("messages %v, want %v", got, want)
	}
	for i, team := range []string{"", "som", "som", "", ""} {
		if msgs[i].Team != team {
			t.Errorf("message %d (%s) is of team %q, want %q", i, msgs[i].Name, msgs[i].Team, team)
		}
	}
}

// spoken is each message as "name:content".
func spoken(ms []messageView) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name + ":" + m.Content
	}
	return out
}
