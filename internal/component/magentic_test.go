package component

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/spec"
)

// magenticTeam builds a MagenticOneGroupChat component of the given
// participants.
func magenticTeam(participants, extra string) string {
	return mk(provMagentic, `{"participants": [`+participants+`], "model_client": `+replayModel()+extra+`}`)
}

// TestMagenticExportDefaults: a native magentic_one spec that leaves
// max_round, max_stalls and final_answer_prompt out exports them as
// AgentChat's dump writes its defaults (the fixture magentic_one, dumped by
// AgentChat with its defaults), and the export translates back to the same
// chat.
func TestMagenticExportDefaults(t *testing.T) {
	t.Parallel()
	sp, probs := spec.DecodeSpec([]byte(`{"task": "x",
		"agents": [{"name": "a", "type": "assistant", "model": "m"}, {"name": "b", "type": "assistant", "model": "m"}],
		"models": {"m": {"provider": "openai", "model": "gpt-4o"}},
		"speaker_selection": {"method": "magentic_one", "model": "m"}}`))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	team, probs := ToTeam(sp, testEPs)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	var got map[string]any
	if err := json.Unmarshal(team.Config, &got); err != nil {
		t.Fatal(err)
	}
	var dumped struct {
		Config map[string]any `json:"config"`
	}
	if err := json.Unmarshal(readFixture(t, "magentic_one"), &dumped); err != nil {
		t.Fatal(err)
	}
	if team.Provider != provMagentic || team.ComponentType != "team" {
		t.Errorf("provider %s, type %s", team.Provider, team.ComponentType)
	}
	for _, k := range []string{"name", "description", "max_turns", "max_stalls", "final_answer_prompt", "emit_team_events"} {
		if got[k] != dumped.Config[k] {
			t.Errorf("%s = %#v, AgentChat's default is %#v", k, got[k], dumped.Config[k])
		}
	}
	if mc, _ := got["model_client"].(map[string]any); mc == nil || mc["provider"] != provOpenAI {
		t.Errorf("model_client = %v, want the orchestrator's OpenAI client", got["model_client"])
	}
	raw, _ := marshal(team)
	back, req := specOf(t, request(t, raw, ""))
	sel := back.SpeakerSelection
	if sel.Method != spec.SelectMagentic || *back.MaxRound != 20 || *sel.MaxStalls != 3 || *sel.FinalAnswerPrompt != magenticFinalAnswerPrompt ||
		sel.Model.Inline.Model != "gpt-4o" {
		t.Errorf("translated back: %s", req.Spec)
	}
	if probs := spec.Validate(back, spec.Limits{}, env); len(probs) > 0 {
		t.Errorf("invalid: %v", probs)
	}
}

// TestMagenticFile: a hand-written MagenticOneGroupChat without max_stalls
// and final_answer_prompt leaves them to the engine's defaults (AgentChat's),
// and one without max_turns is warned about agentd's 20 rounds.
func TestMagenticFile(t *testing.T) {
	t.Parallel()
	sp, req := specOf(t, request(t, []byte(magenticTeam(assistant("a", "")+","+assistant("b", ""), `, "emit_team_events": false`)), ""))
	sel := sp.SpeakerSelection
	if sel == nil || sel.Method != spec.SelectMagentic || sel.Model == nil || sel.Model.Inline.Provider != "replay" ||
		sel.MaxStalls != nil || sel.FinalAnswerPrompt != nil || sp.MaxRound != nil || len(sp.Agents) != 2 {
		t.Fatalf("spec: %s", req.Spec)
	}
	i := slices.IndexFunc(req.Translation.Warnings, func(w Warning) bool { return w.Path == "/team/config/max_turns" })
	if i < 0 || !strings.Contains(req.Translation.Warnings[i].Message, "default 20") {
		t.Errorf("warnings %v: want one about max_turns naming the default 20 rounds", req.Translation.Warnings)
	}
	if probs := spec.Validate(sp, spec.Limits{}, env); len(probs) > 0 {
		t.Errorf("invalid: %v", probs)
	}
}

// TestMagenticRefusals: what a MagenticOneGroupChat may not hold, each
// problem pointing into the file, whether the translation or the spec's
// validation finds it.
func TestMagenticRefusals(t *testing.T) {
	t.Parallel()
	human := mk(provUserProxy, `{"name": "h"}`)
	tests := []struct {
		name, team, path, want string
	}{
		{"no model client", mk(provMagentic, `{"participants": [`+assistant("a", "")+`]}`), "/team/config/model_client", "is required"},
		{"a user proxy", magenticTeam(assistant("a", "")+","+human, ""), "/team/config/participants/1/provider", "assistants only"},
		{"the orchestrator's name", magenticTeam(assistant("MagenticOneOrchestrator", ""), ""), "/team/config/participants/0/config/name",
			"orchestrator's name"},
		{"negative max_stalls", magenticTeam(assistant("a", ""), `, "max_stalls": -1`), "/team/config/max_stalls", "must be between 0 and"},
		{"max_stalls not a number", magenticTeam(assistant("a", ""), `, "max_stalls": "3"`), "/team/config/max_stalls", "integer"},
		{"nested in a team", rr(magenticTeam(assistant("a", ""), ""), ""), "/team/config/participants/0", "nested teams are not supported"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, err := ParseRequest(request(t, []byte(tc.team), ""), testEPs)
			var probs []spec.Problem
			if ve, ok := err.(*spec.ValidationError); ok {
				probs = ve.Problems
			} else if err != nil {
				t.Fatal(err)
			} else {
				sp, dprobs := spec.DecodeSpec(req.Spec)
				if len(dprobs) > 0 {
					t.Fatal(dprobs)
				}
				probs = req.Translation.MapProblems(spec.Validate(sp, spec.Limits{}, env))
			}
			i := slices.IndexFunc(probs, func(p spec.Problem) bool { return p.Path == tc.path })
			if i < 0 {
				t.Fatalf("no problem at %s: %v", tc.path, probs)
			}
			if !strings.Contains(probs[i].Message, tc.want) {
				t.Errorf("problem at %s = %q, want it to say %q", tc.path, probs[i].Message, tc.want)
			}
		})
	}
}
