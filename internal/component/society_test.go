package component

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/spec"
)

// som builds a SocietyOfMindAgent component for table tests.
func som(name, team, extra string) string {
	return mk(provSocietyOfMind, `{"name": "`+name+`", "team": `+team+`, "model_client": `+replayModel()+extra+`}`)
}

// TestSocietyOfMindRefusals: what a SocietyOfMindAgent of a file may not
// hold, each with its pointer into the file.
func TestSocietyOfMindRefusals(t *testing.T) {
	t.Parallel()
	inner := rr(assistant("w", ""), `, "max_turns": 2`)
	tests := []struct {
		name, team, path, want string
	}{
		{"buffered model context", rr(som("panel", inner, `, "model_context": `+mk(provBuffered, `{"buffer_size": 3}`)), ""),
			"/team/config/participants/0/config/model_context", "other than UnboundedChatCompletionContext is not supported"},
		{"context with initial messages", rr(som("panel", inner, `, "model_context": `+mk(provUnbounded, `{"initial_messages": [{"content": "x", "source": "u", "type": "UserMessage"}]}`)), ""),
			"/team/config/participants/0/config/model_context/config/initial_messages", "initial_messages"},
		{"no team", rr(mk(provSocietyOfMind, `{"name": "panel", "model_client": `+replayModel()+`}`), ""),
			"/team/config/participants/0/config/team", "is required: the inner team"},
		{"no model client", rr(mk(provSocietyOfMind, `{"name": "panel", "team": `+inner+`}`), ""),
			"/team/config/participants/0/config/model_client", "the model client that answers for the team"},
		{"unknown inner team", rr(som("panel", mk("my.Team", `{}`), ""), ""),
			"/team/config/participants/0/config/team/provider", `unknown team provider "my.Team"`},
		{"inner agent refused", rr(som("panel", rr(mk(provCodeExecutor, `{"name": "x", "code_executor": `+mk("autogen_ext.code_executors.local.LocalCommandLineCodeExecutor", `{}`)+`}`), ""), ""), ""),
			"/team/config/participants/0/config/team/config/participants/0/config/code_executor", "DockerCommandLineCodeExecutor"},
		{"wrapped in a message filter", rr(mk(provMessageFilter, `{"name": "panel", "wrapped_agent": `+som("panel", inner, "")+`, "filter": {"per_source": []}}`), ""),
			"/team/config/participants/0/config/wrapped_agent", "cannot wrap a SocietyOfMindAgent"},
		{"a team as a participant", rr(inner, ""), "/team/config/participants/0", "wrap the inner team in a SocietyOfMindAgent"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseRequest(request(t, []byte(tc.team), ""), testEPs)
			wantProblem(t, err, tc.path, tc.want)
		})
	}
}

// TestSocietyOfMindTranslation: a SocietyOfMindAgent becomes a team agent
// (AgentChat's defaults left out, an empty text read as the default, as
// AgentChat's loader reads it), its inner agents' tools join the chat's,
// what agentd ignores is said, and the problems the spec's validation finds
// in the inner team point into the file.
func TestSocietyOfMindTranslation(t *testing.T) {
	t.Parallel()
	mcp := mk(provMcpWorkbench, `{"server_params": {"type": "StreamableHttpServerParams", "url": "http://127.0.0.1:9/mcp"}}`)
	inner := mk(provSwarm, `{"name": "crew", "participants": [`+assistant("w", `, "handoffs": ["c"], "workbench": [`+mcp+`]`)+`,`+assistant("e", "")+`]}`)
	team := rr(assistant("c", "")+","+som("panel", inner, `, "description": "", "instruction": "", "response_prompt": "Answer briefly."`), `, "max_turns": 3`)
	sp, req := specOf(t, request(t, []byte(team), ""))
	a := sp.Agents[1]
	if a.Type != spec.AgentTeam || a.Description != societyOfMindDescription || a.Instruction != nil || a.ResponsePrompt == nil ||
		*a.ResponsePrompt != "Answer briefly." || a.Team == nil || len(a.Team.Agents) != 2 || a.Team.SpeakerSelection.Method != spec.SelectSwarm {
		t.Fatalf("team agent = %s", req.Spec)
	}
	if len(sp.Tools) != 1 || !slices.Equal(a.Team.Agents[0].Tools, []string{sp.Tools[0].Name}) {
		t.Errorf("the inner agent's tool is not the chat's: tools %+v, agent %+v", sp.Tools, a.Team.Agents[0])
	}
	warned := map[string]string{}
	for _, w := range req.Translation.Warnings {
		warned[w.Path] = w.Message
	}
	for path, want := range map[string]string{
		"/team/config/participants/1/config/team/config/name":      "an inner team has no name of its own",
		"/team/config/participants/1/config/team/config/max_turns": "AgentChat would run the inner team until",
	} {
		if !strings.Contains(warned[path], want) {
			t.Errorf("warning at %s = %q, want it to say %q (all: %v)", path, warned[path], want, warned)
		}
	}
	got := map[string]string{}
	for _, p := range req.Translation.MapProblems(spec.Validate(sp, spec.Limits{}, env)) {
		got[p.Path] = p.Message
	}
	for path, want := range map[string]string{
		"/team/config/participants/1/config/team/config/participants/0/config/handoffs/0": `"c" is not in this inner team`,
	} {
		if !strings.Contains(got[path], want) {
			t.Errorf("problem at %s = %q, want it to say %q (all: %v)", path, got[path], want, got)
		}
	}
	if len(got) != 1 {
		t.Errorf("problems: %v", got)
	}
}

// TestSocietyOfMindExport: a native team agent exports as a
// SocietyOfMindAgent with AgentChat's defaults written out, which
// translates back to the same agent; what its inner team cannot express in
// AgentChat is a problem under the agent's path.
func TestSocietyOfMindExport(t *testing.T) {
	t.Parallel()
	sp, probs := spec.DecodeSpec([]byte(`{"task": "x",
		"agents": [{"name": "panel", "type": "team", "model": "m", "description": "A panel.",
		            "team": {"agents": [{"name": "w", "type": "assistant", "model": "m"}, {"name": "e", "type": "assistant", "model": "m"}],
		                     "speaker_selection": {"method": "auto", "model": "m"}, "termination": {"text_mention": {"text": "OK"}}, "max_round": 4}},
		           {"name": "c", "type": "assistant", "model": "m"}],
		"models": {"m": {"provider": "openai", "model": "gpt-4o-mini"}}, "max_round": 3}`))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	team, probs := ToTeam(sp, testEPs)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	raw, _ := marshal(team)
	var c struct {
		Config struct {
			Participants []struct {
				Provider string
				Config   map[string]json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	p := c.Config.Participants[0]
	if p.Provider != provSocietyOfMind || string(p.Config["instruction"]) != `"`+spec.DefaultInstruction+`"` ||
		string(p.Config["response_prompt"]) != `"`+spec.DefaultResponsePrompt+`"` || !strings.Contains(string(p.Config["team"]), provSelector) ||
		!strings.Contains(string(p.Config["model_context"]), provUnbounded) {
		t.Fatalf("exported team agent: %s", raw)
	}
	back, req := specOf(t, request(t, raw, ""))
	b := back.Agents[0]
	if b.Type != spec.AgentTeam || b.Description != "A panel." || b.Instruction != nil || b.ResponsePrompt != nil || *b.Team.MaxRound != 4 ||
		b.Team.Termination.TextMention.Text != "OK" || b.Team.SpeakerSelection.Method != spec.SelectAuto || b.Model.Inline.Model != "gpt-4o-mini" {
		t.Errorf("translated back: %s", req.Spec)
	}
	if probs := spec.Validate(back, spec.Limits{}, env); len(probs) > 0 {
		t.Errorf("invalid: %v", probs)
	}

	sp.Agents[0].Team.SpeakerSelection = &spec.Selection{Method: spec.SelectRandom}
	sp.Agents[0].Team.Termination = &spec.Condition{TextMatch: &spec.TextMatchCondition{Pattern: "x"}}
	_, probs = ToTeam(sp, testEPs)
	var paths []string
	for _, p := range probs {
		paths = append(paths, p.Path)
	}
	slices.Sort(paths)
	if want := []string{"/agents/0/team/speaker_selection/method", "/agents/0/team/termination/text_match"}; !slices.Equal(paths, want) {
		t.Errorf("problems at %v, want %v (%v)", paths, want, probs)
	}
}
