package llm

import (
	"encoding/json"
	"testing"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/llm/openaitest"
	"github.com/agentd/agentd/internal/spec"
)

// TestOpenAISwarmWire: a request of the openai_swarm protocol goes out as
// Swarm's run loop sends it — replies with sender and null content, tool
// messages with tool_name, user messages without a name, tools with their
// description even when empty and no strict, no tool_choice — streamed or
// not, with the model's options as for any request.
func TestOpenAISwarmWire(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		f := newFixture(t, nil)
		f.srv.Reply(openaitest.Text("ok"))
		req := openaiRequest(
			chat.ModelMessage{Role: chat.RoleSystem, Content: "You are a helpful agent."},
			chat.ModelMessage{Role: chat.RoleUser, Content: "I want a lamp."},
			chat.ModelMessage{Role: chat.RoleAssistant, More: &chat.ModelMore{Sender: "Triage Agent"}, ToolCalls: []chat.ToolCall{
				{ID: "c1", Type: "function", Function: chat.FunctionCall{Name: "transfer_to_sales", Arguments: "{}"}}}},
			chat.ModelMessage{Role: chat.RoleTool, ToolCallID: "c1", More: &chat.ModelMore{ToolName: "transfer_to_sales"}, Content: `{"assistant": "Sales"}`},
			chat.ModelMessage{Role: chat.RoleAssistant, More: &chat.ModelMore{Sender: "Sales"}, Content: "Hello."},
		)
		req.Protocol = spec.ProtocolOpenAISwarm
		req.Config.ParallelToolCalls = ptr(false)
		req.Config.Temperature = ptr(0.5)
		req.Tools = []chat.ToolDef{{Name: "transfer_back", Parameters: json.RawMessage(`{"type":"object","properties":{},"required":[]}`)}}
		if stream {
			req.OnDelta = func(string) {}
		}
		if _, err := f.c.Complete(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		var body map[string]json.RawMessage
		if err := json.Unmarshal(f.srv.Requests()[0].Body, &body); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"messages": `[{"role":"system","content":"You are a helpful agent."},{"role":"user","content":"I want a lamp."},` +
				`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"transfer_to_sales","arguments":"{}"}}],"sender":"Triage Agent"},` +
				`{"role":"tool","content":"{\"assistant\": \"Sales\"}","tool_call_id":"c1","tool_name":"transfer_to_sales"},` +
				`{"role":"assistant","content":"Hello.","sender":"Sales"}]`,
			"tools":               `[{"type":"function","function":{"name":"transfer_back","description":"","parameters":{"type":"object","properties":{},"required":[]}}}]`,
			"parallel_tool_calls": `false`,
			"temperature":         `0.5`,
		}
		for k, w := range want {
			if got := string(body[k]); got != w {
				t.Errorf("stream %v: %s = %s\n want %s", stream, k, got, w)
			}
		}
		if _, ok := body["tool_choice"]; ok {
			t.Errorf("stream %v: tool_choice sent: %s", stream, body["tool_choice"])
		}
		if got := string(body["stream"]) == "true"; got != stream {
			t.Errorf("stream %v: the body's stream is %s", stream, body["stream"])
		}
	}
}
