package spec

import (
	"slices"
	"strings"
	"testing"
)

// TestMagenticOneSelection: the method needs its orchestrator's model,
// bounds max_stalls and final_answer_prompt, refuses the other methods'
// fields, non-assistant agents and an agent named as the orchestrator, and
// its own fields are refused on the other methods.
func TestMagenticOneSelection(t *testing.T) {
	model := `{"provider": "openai", "model": "gpt-4o-mini"}`
	ok := `{"task": "t", "agents": [{"name": "a", "type": "assistant", "model": ` + model + `}],
		"speaker_selection": {"method": "magentic_one", "model": ` + model + `, "max_stalls": 0, "final_answer_prompt": "Answer."}}`
	if probs := problems(t, ok); len(probs) > 0 {
		t.Fatalf("unexpected problems %v", probs)
	}
	bad := `{"task": "t", "agents": [{"name": "MagenticOneOrchestrator", "type": "assistant", "model": ` + model + `},
		{"name": "u", "type": "user_proxy", "human_input_mode": "NEVER"}],
		"speaker_selection": {"method": "magentic_one", "max_stalls": 1001, "final_answer_prompt": "` + strings.Repeat("x", 33<<10) + `",
			"max_attempts": 2, "selector_prompt": "p", "transitions": {"u": ["u"]}, "seed": 1, "allow_repeated_speaker": true}}`
	got := paths(problems(t, bad))
	want := []string{"/agents/0/name", "/agents/1/type", "/speaker_selection/allow_repeated_speaker", "/speaker_selection/final_answer_prompt",
		"/speaker_selection/max_attempts", "/speaker_selection/max_stalls", "/speaker_selection/model", "/speaker_selection/seed",
		"/speaker_selection/selector_prompt", "/speaker_selection/transitions"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("problem paths =\n%v\nwant\n%v", got, want)
	}
	other := `{"task": "t", "agents": [{"name": "a", "type": "assistant", "model": ` + model + `}],
		"speaker_selection": {"method": "round_robin", "max_stalls": 3, "final_answer_prompt": "Answer."}}`
	got = paths(problems(t, other))
	slices.Sort(got)
	if want := []string{"/speaker_selection/final_answer_prompt", "/speaker_selection/max_stalls"}; !slices.Equal(got, want) {
		t.Fatalf("problem paths = %v, want %v", got, want)
	}
}

// TestMagenticOneMaxRoundDefault: without max_round a magentic_one chat
// has MagenticOneGroupChat's 20 rounds, the other methods 10.
func TestMagenticOneMaxRoundDefault(t *testing.T) {
	for method, want := range map[string]int{"magentic_one": 20, "round_robin": 10, "": 10} {
		sp := &Spec{SpeakerSelection: &Selection{Method: method}}
		if got := sp.DefaultMaxRound(); got != want {
			t.Errorf("%q: default max_round %d, want %d", method, got, want)
		}
	}
}
