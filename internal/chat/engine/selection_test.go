package engine

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/spec"
)

func specOf(t *testing.T, s string) *spec.Spec {
	t.Helper()
	var sp spec.Spec
	if err := json.Unmarshal([]byte(s), &sp); err != nil {
		t.Fatal(err)
	}
	return &sp
}

func TestRoundRobinOrderAndTransitions(t *testing.T) {
	sp := specOf(t, `{"agents": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}`)
	var got []string
	last := "user"
	for range 5 {
		last = nextInOrder(sp, last, candidates(sp, last))
		got = append(got, last)
	}
	if want := []string{"a", "b", "c", "a", "b"}; !slices.Equal(got, want) {
		t.Fatalf("round robin = %v, want %v", got, want)
	}
	allowed := specOf(t, `{"agents": [{"name": "a"}, {"name": "b"}, {"name": "c"}],
		"speaker_selection": {"transitions": {"a": ["c"], "c": ["a", "b"]}, "transitions_type": "allowed"}}`)
	if got := nextInOrder(allowed, "a", candidates(allowed, "a")); got != "c" {
		t.Fatalf("after a with a→c only: %s", got)
	}
	if got := candidates(allowed, "b"); len(got) != 0 {
		t.Fatalf("b is not a key of allowed transitions, so it has no successor; got %v", got)
	}
	disallowed := specOf(t, `{"agents": [{"name": "a"}, {"name": "b"}, {"name": "c"}],
		"speaker_selection": {"transitions": {"a": ["b"]}, "transitions_type": "disallowed"}}`)
	if got := candidates(disallowed, "a"); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("disallowed a→b: candidates %v", got)
	}
	if got := candidates(disallowed, "b"); len(got) != 3 {
		t.Fatalf("b has no disallowed transitions: %v", got)
	}
}

// TestRandomSelectionProperty: for random transition graphs and seeds, the
// seeded random method is reproducible and never picks an agent that the
// transitions or allow_repeated_speaker exclude.
func TestRandomSelectionProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "b", "c", "d"}
	for range 300 {
		trans := map[string][]string{}
		for _, n := range names {
			for _, m := range names {
				if r.IntN(2) == 0 {
					trans[n] = append(trans[n], m)
				}
			}
		}
		seed, repeat := r.Int64(), r.IntN(2) == 0
		typ := []string{"allowed", "disallowed"}[r.IntN(2)]
		sp := &spec.Spec{Agents: []spec.Agent{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}},
			SpeakerSelection: &spec.Selection{Method: spec.SelectRandom, Seed: &seed, AllowRepeatedSpeaker: &repeat, Transitions: trans, TransitionsType: typ}}
		run := func() []string {
			var seq []string
			last := "user"
			for turn := 1; turn <= 30; turn++ {
				c := candidates(sp, last)
				if len(c) == 0 {
					break
				}
				next := pickRandom(sp, c, turn)
				if last != "user" {
					allowed := slices.Contains(trans[last], next)
					if typ == "disallowed" {
						allowed = !allowed
					}
					if !allowed {
						t.Fatalf("%s → %s violates %s transitions %v", last, next, typ, trans)
					}
					if !repeat && next == last && len(successors(sp, last)) > 1 {
						t.Fatalf("%s repeated although allow_repeated_speaker is false (successors %v)", last, successors(sp, last))
					}
				}
				seq = append(seq, next)
				last = next
			}
			return seq
		}
		if a, b := run(), run(); !slices.Equal(a, b) {
			t.Fatalf("seed %d: %v then %v", seed, a, b)
		}
	}
}

func TestJudgeSelectorReply(t *testing.T) {
	names := []string{"planner", "code_writer", "critic"}
	cands := []string{"code_writer", "critic"}
	tests := []struct {
		reply, agent, feedback string
	}{
		{"critic", "critic", ""},
		{"The next role is critic.", "critic", ""},
		{"code writer", "code_writer", ""},
		{"`code_writer`", "code_writer", ""},
		{"critics", "", "No valid name was mentioned"},
		{"criticize", "", "No valid name was mentioned"},
		{`code\_writer`, "code_writer", ""},
		{"critic or code_writer", "", "Expected exactly one name to be mentioned. Please select only one from: ['code_writer', 'critic']."},
		{"planner", "", "Repeated speaker is not allowed, please select a different name from: ['code_writer', 'critic']."},
		{"", "", "No valid name was mentioned. Please select from: ['code_writer', 'critic']."},
	}
	for _, tt := range tests {
		agent, feedback := JudgeSelectorReply(names, cands, tt.reply, "planner", false)
		if agent != tt.agent || !strings.Contains(feedback, tt.feedback) || (tt.feedback == "") != (feedback == "") {
			t.Errorf("%q: got %q %q, want %q %q", tt.reply, agent, feedback, tt.agent, tt.feedback)
		}
	}
}

func TestSelectorPrompt(t *testing.T) {
	sp := specOf(t, `{"agents": [{"name": "a", "description": "Plans."}, {"name": "b", "description": "Codes."}, {"name": "c", "description": "Idle."}],
		"speaker_selection": {"method": "auto"}}`)
	hist := []chat.Message{{Name: "user", Content: "task"}, {Name: "a", Content: "plan  "},
		{Name: "a", Type: chat.TypeToolCallRequestEvent}, {Name: "b", Content: "code"}, {Name: "a", Content: "ok"}}
	got, err := SelectorPrompt(sp, []string{"a", "b"}, hist[:3], nil)
	if err != nil {
		t.Fatal(err)
	}
	// AgentChat lists every agent in {roles}, the candidates in
	// {participants}, and each chat message of the history followed by a
	// blank line.
	for _, want := range []string{"a: Plans.\nb: Codes.\nc: Idle..\nRead", "select the next role from ['a', 'b'] to play",
		"\n\nuser: task\n\n\na: plan\n\n\n\nRead the above", "Only return the role.\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("prompt lacks %q:\n%q", want, got)
		}
	}
	custom := "Pick from {participants}. Roles: {roles}. History: {history}"
	sp.SpeakerSelection.SelectorPrompt = &custom
	if got, _ := SelectorPrompt(sp, []string{"a"}, nil, nil); got != "Pick from ['a']. Roles: a: Plans.\nb: Codes.\nc: Idle.. History: " {
		t.Errorf("custom prompt = %q", got)
	}
	// The selector's context bounds the history: a head and tail of one
	// chat message each.
	one := 1
	sp.SpeakerSelection.Context = &spec.ModelContext{Type: spec.ContextHeadAndTail, HeadSize: &one, TailSize: &one}
	got, err = SelectorPrompt(sp, []string{"a"}, hist, nil)
	if want := "History: user: task\n\n\nSystem: Skipped 2 messages.\n\n\na: ok\n\n"; err != nil || !strings.HasSuffix(got, want) {
		t.Errorf("bounded history = %q, %v; want it to end %q", got, err, want)
	}
}

func FuzzMentionedAgents(f *testing.F) {
	f.Add("critic, please")
	f.Add("code writer\u00e9critic")
	f.Fuzz(func(t *testing.T, reply string) {
		got := mentionedAgents([]string{"critic", "code_writer"}, reply)
		for _, n := range got {
			if !strings.Contains(reply, n) && !strings.Contains(reply, strings.ReplaceAll(n, "_", " ")) {
				t.Fatalf("%q mentions %q?", reply, n)
			}
		}
	})
}
