package spec

import (
	"fmt"
	"strings"
	"testing"
)

const replayModel = `{"provider": "replay", "responses": ["x"]}`

func assistantJSON(name, more string) string {
	return `{"name": "` + name + `", "type": "assistant", "model": ` + replayModel + more + `}`
}

// teamAgentJSON is a team agent named panel over the given inner agents.
func teamAgentJSON(more, innerAgents, innerMore string) string {
	return `{"name": "panel", "type": "team", "model": ` + replayModel + more +
		`, "team": {"agents": [` + innerAgents + `]` + innerMore + `}}`
}

// teamSpec is a chat of the given outer agents with the given top-level
// fields after them.
func teamSpec(agents, extra string) string {
	return `{"task": "t", "agents": [` + agents + `]` + extra + `}`
}

var writerEditor = assistantJSON("writer", "") + "," + assistantJSON("editor", "")

// TestValidateTeamAgent: a team agent and its inner team, each rule with
// its problem's pointer.
func TestValidateTeamAgent(t *testing.T) {
	t.Parallel()
	panel := teamAgentJSON("", writerEditor, `, "termination": {"text_mention": {"text": "APPROVE"}}, "max_round": 4`)
	graph := `{"method": "graph", "graph": {"nodes": {"panel": {"name": "panel", "edges": [{"target": "c"}]}, "c": {"name": "c", "edges": []}}}}`
	tests := []struct {
		name, body string
		want       map[string]string // path → part of the message
	}{
		{"in a round robin", teamSpec(panel+","+assistantJSON("c", ""), `, "max_round": 4`), nil},
		{"with every option of its own", teamSpec(teamAgentJSON(`, "description": "A panel.", "instruction": "Here is the transcript:", "response_prompt": "Answer."`,
			writerEditor, `, "speaker_selection": {"method": "auto", "model": `+replayModel+`, "allow_repeated_speaker": true}, "termination": {"max_messages": 3}`), ""), nil},
		{"in a selector", teamSpec(panel+","+assistantJSON("c", ""), `, "speaker_selection": {"method": "auto", "model": `+replayModel+`}`), nil},
		{"in a swarm", teamSpec(assistantJSON("c", `, "handoffs": ["panel"]`)+","+panel, `, "speaker_selection": {"method": "swarm"}`), nil},
		{"in a graph", teamSpec(panel+","+assistantJSON("c", ""), `, "speaker_selection": `+graph), nil},
		{"inner swarm and random", teamSpec(teamAgentJSON("", assistantJSON("writer", `, "handoffs": ["editor"]`)+","+assistantJSON("editor", `, "handoffs": ["writer"]`),
			`, "speaker_selection": {"method": "swarm"}`)+","+
			`{"name": "board", "type": "team", "model": `+replayModel+`, "team": {"agents": [`+assistantJSON("x", "")+`,`+assistantJSON("y", "")+`], "speaker_selection": {"method": "random", "seed": 2}}}`, ""), nil},
		{"no model, no team", teamSpec(`{"name": "panel", "type": "team"}`, ""),
			map[string]string{"/agents/0/model": "needs a model", "/agents/0/team": "needs a team"}},
		{"model of no entry", teamSpec(`{"name": "panel", "type": "team", "model": "m", "team": {"agents": [`+writerEditor+`]}}`, ""),
			map[string]string{"/agents/0/model": `names no entry of models: "m"`}},
		{"empty prompts", teamSpec(teamAgentJSON(`, "instruction": "", "response_prompt": ""`, writerEditor, ""), ""),
			map[string]string{"/agents/0/instruction": "must be 1 to 32768 bytes", "/agents/0/response_prompt": "AgentChat's default"}},
		{"long prompts", teamSpec(teamAgentJSON(`, "instruction": "`+strings.Repeat("x", 32<<10+1)+`", "response_prompt": "`+strings.Repeat("x", 32<<10+1)+`"`, writerEditor, ""), ""),
			map[string]string{"/agents/0/instruction": "must be 1 to 32768 bytes", "/agents/0/response_prompt": "must be 1 to 32768 bytes"}},
		{"options of other agent types", teamSpec(teamAgentJSON(`, "tools": ["f"], "handoffs": ["c"], "system_message": "s", "context": {"buffer_size": 2},
			"tool_approval": "always", "reflect_on_tool_use": true, "max_tool_iterations": 2, "tool_call_summary_format": "{result}", "human_input_mode": "NEVER",
			"functions": ["f"], "max_consecutive_auto_reply": 1, "default_auto_reply": "ok", "code_approval": false,
			"output_schema": {"name": "P", "schema": {"type": "object"}}, "message_filter": {"per_source": [{"source": "c"}]}`, writerEditor, "")+","+assistantJSON("c", ""),
			`, "tools": [{"name": "f", "implementation": {"type": "builtin", "name": "calculator"}}]`),
			map[string]string{"/tools/0": "runs no tools", "/agents/0/tools": "team agent has no tools: give the tools to the agents of its inner team",
				"/agents/0/handoffs": "has no handoffs", "/agents/0/system_message": "instruction and response_prompt", "/agents/0/context": "unbounded",
				"/agents/0/tool_approval": "calls no tools", "/agents/0/reflect_on_tool_use": "calls no tools", "/agents/0/max_tool_iterations": "calls no tools",
				"/agents/0/tool_call_summary_format": "calls no tools", "/agents/0/human_input_mode": "only a user_proxy takes human input",
				"/agents/0/functions": "executes functions", "/agents/0/max_consecutive_auto_reply": "option of a user_proxy",
				"/agents/0/default_auto_reply": "option of a user_proxy", "/agents/0/code_approval": "runs no code",
				"/agents/0/output_schema": "only an assistant gives structured output", "/agents/0/message_filter": "only an assistant has a message filter"}},
		{"no inner agents", teamSpec(teamAgentJSON("", "", ""), ""), map[string]string{"/agents/0/team/agents": "at least one agent is required"}},
		{"inner agents checked as the chat's", teamSpec(teamAgentJSON("", `{"name": "9x", "type": "assistant", "model": "nope", "tools": ["zed"], "context": {"buffer_size": 0}},`+
			`{"name": "writer", "type": "robot"}`, ""), ""),
			map[string]string{"/agents/0/team/agents/0/name": "must match", "/agents/0/team/agents/0/model": `names no entry of models: "nope"`,
				"/agents/0/team/agents/0/tools/0": `names no tool: "zed"`, "/agents/0/team/agents/0/context/buffer_size": "must be between 1 and",
				"/agents/0/team/agents/1/type": "must be assistant, user_proxy or team"}},
		{"names unique across the chat", teamSpec(teamAgentJSON("", assistantJSON("panel", "")+","+assistantJSON("c", "")+","+assistantJSON("user", "")+","+
			assistantJSON("w", "")+","+assistantJSON("w", ""), "")+","+assistantJSON("c", "")+","+
			`{"name": "board", "type": "team", "model": `+replayModel+`, "team": {"agents": [`+assistantJSON("w", "")+`]}}`, ""),
			map[string]string{"/agents/0/team/agents/0/name": `duplicate agent name "panel": agent names are unique across the chat, inner teams included`,
				"/agents/0/team/agents/1/name": `duplicate agent name "c"`, "/agents/0/team/agents/2/name": `"user" is reserved`,
				"/agents/0/team/agents/4/name": `duplicate agent name "w"`, "/agents/2/team/agents/0/name": `duplicate agent name "w": agent names are unique across the chat`}},
		{"a user_proxy and a team inside", teamSpec(teamAgentJSON("", `{"name": "human", "type": "user_proxy", "human_input_mode": "NEVER"},`+
			`{"name": "sub", "type": "team", "model": `+replayModel+`, "team": {"agents": [`+assistantJSON("deep", "")+`]}}`, ""), ""),
			map[string]string{"/agents/0/team/agents/0/type": "nobody can answer a user_proxy inside a team",
				"/agents/0/team/agents/1/type": "cannot be in another team agent's inner team"}},
		{"inner tool approval", teamSpec(teamAgentJSON("", assistantJSON("writer", `, "tools": ["f"], "tool_approval": ["f"]`)+","+assistantJSON("editor", `, "tool_approval": "never"`), ""),
			`, "tools": [{"name": "f", "implementation": {"type": "builtin", "name": "calculator"}}]`),
			map[string]string{"/tools/0": "runs no tools", "/agents/0/team/agents/0/tool_approval": "nobody can approve tool calls inside a team"}},
		{"inner handoffs out of the team", teamSpec(teamAgentJSON("", assistantJSON("writer", `, "handoffs": ["c", "user", "panel", "nobody", "editor"]`)+","+assistantJSON("editor", ""),
			`, "speaker_selection": {"method": "swarm"}`)+","+assistantJSON("c", ""), ""),
			map[string]string{"/agents/0/team/agents/0/handoffs/0": `"c" is not in this inner team`, "/agents/0/team/agents/0/handoffs/1": "hands off to no user",
				"/agents/0/team/agents/0/handoffs/2": `"panel" is not in this inner team`, "/agents/0/team/agents/0/handoffs/3": `names no agent: "nobody"`}},
		{"inner manual", teamSpec(teamAgentJSON("", writerEditor, `, "speaker_selection": {"method": "manual"}`), ""),
			map[string]string{"/agents/0/team/speaker_selection/method": "cannot use manual selection: it asks a client"}},
		{"inner graph", teamSpec(teamAgentJSON("", writerEditor, `, "speaker_selection": {"method": "graph", "graph": {"nodes": {}}}`), ""),
			map[string]string{"/agents/0/team/speaker_selection/method": "cannot use the graph method"}},
		{"inner selection checked as the chat's", teamSpec(teamAgentJSON("", writerEditor, `, "speaker_selection": {"method": "auto", "max_attempts": 20, "transitions": {"writer": ["c"]}}`)+","+assistantJSON("c", ""), ""),
			map[string]string{"/agents/0/team/speaker_selection/model": "needs a model for the selector", "/agents/0/team/speaker_selection/max_attempts": "between 1 and 10",
				"/agents/0/team/speaker_selection/transitions/writer/0": `names no agent: "c"`}},
		{"inner max_round and termination", teamSpec(teamAgentJSON("", writerEditor, `, "max_round": 0, "termination": {"any": [{"text_mention": {"text": "", "sources": ["c"]}}, {"max_messages": 0}, {"source_match": {"sources": ["editor", "user"]}}]}`)+","+assistantJSON("c", ""), ""),
			map[string]string{"/agents/0/team/max_round": "must be between 1 and 100", "/agents/0/team/termination/any/0/text_mention/text": "is required",
				"/agents/0/team/termination/any/0/text_mention/sources/0": `names no agent: "c"`, "/agents/0/team/termination/any/1/max_messages": "must be between 1"}},
		{"team fields on other agents", teamSpec(assistantJSON("a", `, "instruction": "i", "response_prompt": "r", "team": {"agents": []}`)+","+
			`{"name": "u", "type": "user_proxy", "human_input_mode": "NEVER", "team": {"agents": [`+assistantJSON("x", "")+`]}}`, ""),
			map[string]string{"/agents/0/instruction": "only a team agent (type team) has instruction", "/agents/0/response_prompt": "only a team agent",
				"/agents/0/team": "only a team agent (type team) has team", "/agents/1/team": "only a team agent"}},
		{"outer references to inner agents", teamSpec(panel+","+assistantJSON("c", `, "message_filter": {"per_source": [{"source": "writer"}]}`),
			`, "termination": {"source_match": {"sources": ["editor"]}}, "speaker_selection": {"method": "round_robin", "transitions": {"panel": ["writer"]}}`),
			map[string]string{"/agents/1/message_filter/per_source/0/source": `names no agent: "writer"`, "/termination/source_match/sources/0": `names no agent: "editor"`,
				"/speaker_selection/transitions/panel/0": `names no agent: "writer"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkProblems(t, problems(t, tc.body), tc.want)
		})
	}
}

// TestValidateInnerTeamLimit: an inner team has at most MaxAgents agents,
// and a saved team's team agents are checked as a chat's.
func TestValidateInnerTeamLimit(t *testing.T) {
	t.Parallel()
	body := teamSpec(teamAgentJSON("", assistantJSON("x", "")+","+assistantJSON("y", "")+","+assistantJSON("z", ""), `, "max_round": 200`), "")
	sp, probs := DecodeSpec([]byte(body))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	checkProblems(t, Validate(sp, Limits{MaxAgents: 2}, Env{}), map[string]string{
		"/agents/0/team/agents":    "at most 2 agents",
		"/agents/0/team/max_round": "must be between 1 and 100",
	})
	sp.Task = Task{}
	checkProblems(t, ValidateTeam(sp, Limits{MaxAgents: 2}, Env{}), map[string]string{
		"/agents/0/team/agents":    "at most 2 agents",
		"/agents/0/team/max_round": "must be between 1 and 100",
	})
}

// TestInnerSpec: the inner spec is the inner team with the chat's models,
// tools and sandbox, named after the team agent.
func TestInnerSpec(t *testing.T) {
	t.Parallel()
	sp, probs := DecodeSpec([]byte(teamSpec(teamAgentJSON("", writerEditor, `, "max_round": 3, "speaker_selection": {"method": "auto", "model": "m"}`),
		`, "models": {"m": `+replayModel+`}, "sandbox": {"timeout_s": 5}`)))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	in := sp.InnerSpec(&sp.Agents[0])
	got := fmt.Sprintln(in.Name, len(in.Agents), in.Agents[1].Name, *in.MaxRound, in.Method(), len(in.Models), *in.Sandbox.TimeoutS, in.Task.Empty())
	if want := "panel 2 editor 3 auto 1 5 true\n"; got != want {
		t.Errorf("inner spec = %s, want %s", got, want)
	}
}
