package tool_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/sandbox"
	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/tool"
)

// TestPythonFunctionSwarm runs functions as OpenAI Swarm programs write
// them, in each real sandbox backend: given the context variables, changing
// them in place and through a Result, returning an Agent, and a value as
// str() makes it from the model's arguments as they are; under AgentChat's
// protocol a context_variables parameter is given them too.
func TestPythonFunctionSwarm(t *testing.T) {
	t.Parallel()
	result := []json.RawMessage{json.RawMessage(`{"module": "swarm.types", "imports": ["Result"]}`)}
	agent := []json.RawMessage{json.RawMessage(`{"module": "swarm", "imports": ["Agent"]}`)}
	vars := json.RawMessage(`{"customer": "Ada", "n": 1}`)
	cases := []struct {
		name, source string
		imports      []json.RawMessage
		swarm        bool
		args         string
		want         chat.ToolResult
	}{
		{"change", "def change(x, context_variables):\n    context_variables['seen'] = True\n    del context_variables['n']\n" +
			"    return Result(value=f\"{x} {context_variables['customer']}\", context_variables={'k': [1, 2], 'seen': False})\n",
			result, true, `{"x": 1}`,
			chat.ToolResult{Content: "1 Ada", ContextSet: json.RawMessage(`{"seen": false, "k": [1, 2]}`), ContextRemoved: []string{"n"}}},
		{"hand_off", "def hand_off():\n    return Agent(name='Sales Agent')\n", agent, true, `{}`,
			chat.ToolResult{Content: `{"assistant": "Sales Agent"}`, Handoff: "Sales Agent"}},
		{"result_agent", "def result_agent():\n    return Result(value='done', agent=Agent(name='Triage'))\n",
			[]json.RawMessage{json.RawMessage(`{"module": "swarm.types", "imports": ["Result", "Agent"]}`)}, true, `{}`,
			chat.ToolResult{Content: "done", Handoff: "Triage"}},
		{"as_str", "def as_str(a: int, b=None):\n    return {'a': a, 'b': b}\n", nil, true, `{"a": 2.5}`,
			chat.ToolResult{Content: "{'a': 2.5, 'b': None}"}},
		{"bad_value", "def bad_value():\n    return Result(value=3)\n", result, true, `{}`,
			chat.ToolResult{Content: "Result.value must be a string", IsError: true}},
		{"agentchat", "def agentchat(percent: int, context_variables):\n    return f\"{percent} {context_variables['customer']}\"\n",
			nil, false, `{"percent": 10}`, chat.ToolResult{Content: "10 Ada"}},
	}
	for _, backend := range []string{sandbox.BackendDocker, sandbox.BackendBwrap} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			sb := openSandbox(t, backend)
			r := newRunner(t, tool.Config{Sandboxes: sb, DefaultTimeout: 30 * time.Second})
			chatID := "swarm" + backend
			t.Cleanup(func() { _ = sb.Release(context.Background(), chatID) })
			for _, c := range cases {
				tl := functionTool(t, c.name, c.source, c.imports)
				check, describe, protocol := r.CheckTool, r.Describe, ""
				if c.swarm {
					check, describe, protocol = r.CheckSwarmTool, r.DescribeSwarm, spec.ProtocolOpenAISwarm
				}
				if probs := check(tl); len(probs) > 0 {
					t.Fatalf("%s: %+v", c.name, probs)
				}
				defs, err := describe(context.Background(), chatID, tl)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				got := r.Call(ctx, &chat.ToolRequest{ChatID: chatID, Tool: tl, Function: defs[0], CallID: "call_1", Arguments: c.args,
					Protocol: protocol, ContextVariables: vars})
				cancel()
				if got.Content != c.want.Content || got.IsError != c.want.IsError || got.Handoff != c.want.Handoff ||
					!sameJSON(got.ContextSet, c.want.ContextSet) || !slices.Equal(got.ContextRemoved, c.want.ContextRemoved) {
					t.Errorf("%s: %+v (set %s)\n want %+v (set %s)", c.name, got, got.ContextSet, c.want, c.want.ContextSet)
				}
			}
		})
	}
}

// sameJSON reports whether a and b hold the same JSON value, both absent
// counting as the same.
func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
