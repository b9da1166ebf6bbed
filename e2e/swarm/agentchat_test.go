package swarm_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/e2e/golden"
	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/llm/openaitest"
	"github.com/agentd/agentd/internal/sandbox"
)

// TestSwarmFunctionsUnderAgentChat: a Swarm function (context_variables,
// a Result) in a chat of AgentChat's protocol, on each sandbox backend: it
// is given the variables, its Result's value is the tool result (and the
// turn's summary), and what it sets is a context.updated event by the
// agent and the function that the chat object shows.
func TestSwarmFunctionsUnderAgentChat(t *testing.T) {
	t.Parallel()
	const spec = `{"task": "I want a lamp.", "context_variables": {"customer": "Ada"}, "max_round": 1,
	 "models": {"m": {"provider": "openai", "model": "gpt-4o-mini"}},
	 "tools": [{"name": "apply_discount", "implementation": {"type": "python_function",
	   "source_code": "def apply_discount(percent: int, context_variables):\n    \"\"\"Apply a discount.\"\"\"\n    return Result(value=f\"Applied {percent}% for {context_variables['customer']}\", context_variables={\"discount\": percent})\n",
	   "global_imports": [{"module": "swarm.types", "imports": ["Result"]}]}}],
	 "agents": [{"name": "sales", "type": "assistant", "model": "m", "tools": ["apply_discount"]}]}`
	for _, backend := range []string{sandbox.BackendDocker, sandbox.BackendBwrap} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			models := openaitest.New()
			t.Cleanup(models.Close)
			models.Reply(openaitest.Reply{ToolCalls: []openaitest.ToolCall{openaitest.Call("apply_discount", `{"percent": 10}`)}})
			sandboxes := golden.Sandbox(t, backend)
			rt, db := golden.Runtime(t, models.URL(), sandboxes)
			c, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: []byte(spec)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sandboxes.Release(context.Background(), c.ID) })
			c = golden.Ended(t, rt, c.ID, 1, time.Minute)
			if !sameJSON(c.ContextVariables, json.RawMessage(`{"customer": "Ada", "discount": 10}`)) {
				t.Errorf("variables %s (chat %s: %s)", c.ContextVariables, c.Status, c.Error)
			}
			// The function's schema hides context_variables.
			if req := models.Requests()[0].Chat; len(req.Tools) != 1 || !strings.Contains(string(req.Tools[0].Function.Parameters), `"percent"`) ||
				strings.Contains(string(req.Tools[0].Function.Parameters), "context_variables") {
				t.Errorf("tools %+v", req.Tools)
			}
			evs, err := db.ListEvents(context.Background(), &chat.ListEventsParams{ChatID: c.ID, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			var updates []chat.ContextUpdate
			var summary string
			for _, e := range evs {
				switch {
				case e.Type == chat.EventContextUpdated:
					var u chat.ContextUpdate
					if err := json.Unmarshal(e.Data, &u); err != nil {
						t.Fatal(err)
					}
					updates = append(updates, u)
				case e.Type == chat.EventMessage && e.Role == chat.RoleTool:
					if len(e.ToolResponses) != 1 || e.ToolResponses[0].Content != "Applied 10% for Ada" {
						t.Errorf("tool results %+v", e.ToolResponses)
					}
				case e.Type == chat.EventMessage && e.Role == chat.RoleAssistant && len(e.ToolCalls) == 0:
					summary = e.Content
				}
			}
			if len(updates) != 2 || updates[1].By != (chat.ContextBy{Agent: "sales", Tool: "apply_discount"}) || string(updates[1].Set["discount"]) != "10" {
				t.Errorf("context updates %+v", updates)
			}
			if summary != "Applied 10% for Ada" {
				t.Errorf("the turn's summary %q", summary)
			}
		})
	}
}
