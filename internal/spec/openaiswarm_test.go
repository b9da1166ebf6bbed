package spec

import "testing"

// TestOpenAISwarmProtocol: under openai_swarm an agent's name is any text
// and a spec that OpenAI Swarm's run loop has no place for is refused at
// every path at once; elsewhere names keep their pattern and the protocol
// goes with the swarm method only.
func TestOpenAISwarmProtocol(t *testing.T) {
	t.Parallel()
	const models = `"models": {"m": {"provider": "replay", "responses": ["x"]}}`
	ok := `{"task": "t", ` + models + `, "speaker_selection": {"method": "swarm", "protocol": "openai_swarm"},
		"agents": [{"name": "Triage Agent", "type": "assistant", "model": "m", "parallel_tool_calls": false,
		            "handoffs": [{"target": "Rückgabe Team", "name": "transfer_to_refunds"}]},
		           {"name": "Rückgabe Team", "type": "assistant", "model": "m"}]}`
	checkProblems(t, checked(ok), nil)

	checkProblems(t, checked(`{"task": "t", `+models+`, "speaker_selection": {"method": "swarm"},
		"agents": [{"name": "Triage Agent", "type": "assistant", "model": "m"}]}`),
		map[string]string{"/agents/0/name": "must match"})
	checkProblems(t, checked(`{"task": "t", `+models+`, "speaker_selection": {"method": "round_robin", "protocol": "openai_swarm"},
		"agents": [{"name": "a", "type": "assistant", "model": "m"}]}`),
		map[string]string{"/speaker_selection/protocol": "goes with method swarm"})
	checkProblems(t, checked(`{"task": "t", `+models+`, "speaker_selection": {"method": "swarm", "protocol": "openai"},
		"agents": [{"name": "a", "type": "assistant", "model": "m"}]}`),
		map[string]string{"/speaker_selection/protocol": "must be agentchat or openai_swarm"})

	checkProblems(t, checked(`{"task": "t", `+models+`, "agents": [{"name": "t", "type": "team", "model": "m", "team": {
		"speaker_selection": {"method": "swarm", "protocol": "openai_swarm"}, "agents": [{"name": "a", "type": "assistant", "model": "m"}]}}]}`),
		map[string]string{"/agents/0/team/speaker_selection/protocol": "an inner team speaks AgentChat's protocol"})
	checkProblems(t, checked(`{"task": "t", `+models+`, "context_variables": {"x": 1},
		"speaker_selection": {"method": "swarm", "protocol": "openai_swarm"},
		"agents": [{"name": "a\u0007", "type": "assistant", "model": "m"},
		           {"name": "b", "type": "assistant", "model": "m", "reflect_on_tool_use": true, "max_tool_iterations": 2,
		            "handoffs": ["user", {"target": "c", "condition": "x > 0"}]},
		           {"name": "c", "type": "user_proxy"}]}`),
		map[string]string{
			"/agents/0/name":                 "without control characters",
			"/agents/1/reflect_on_tool_use":  "has no place in OpenAI Swarm's run loop",
			"/agents/1/max_tool_iterations":  "has no place in OpenAI Swarm's run loop",
			"/agents/1/handoffs/0":           "hands off to agents only",
			"/agents/1/handoffs/1/condition": "through functions only",
			"/agents/2/type":                 "must be assistant",
		})
}
