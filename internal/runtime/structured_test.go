package runtime_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/runtime/runtimetest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentd/agentd/internal/chat"
)

const structuredSpec = `{"task": "plan", "max_round": 2, "agents": [
	{"name": "p", "type": "assistant", "model": {"provider": "replay", "responses": [%s]},
	 "output_schema": {"name": "T", "schema": {"properties": {"b": {"type": "number"}, "a": {"type": "string"}}, "required": ["a", "b"], "type": "object"},
	  "format_string": "{a}={b}"}},
	{"name": "q", "type": "assistant", "model": {"provider": "replay", "responses": ["ok"]}}],
	"termination": {"text_message": {"source": "q"}}}`

// TestStructuredReply: an agent with an output_schema replies with a
// StructuredMessage whose content is its format string filled in and
// whose object is written in the schema's order (which survives the
// store), as pydantic writes it; a TextMessageTermination does not fire
// on it.
func TestStructuredReply(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	body := strings.Replace(structuredSpec, "%s", `" {\"a\": \"x\", \"b\": 1, \"c\": true} "`, 1)
	c, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	got := waitTerminal(t, rt, c.ID, 10*time.Second)
	if got.Status != chat.StatusCompleted || got.StopReason != chat.StopTextMessage {
		t.Fatalf("chat = %+v", got)
	}
	ms := messages(t, db, c.ID)
	if len(ms) != 3 {
		t.Fatalf("messages = %+v", ms)
	}
	m := ms[1]
	if m.Type != "StructuredMessage[T]" || m.Content != "x=1.0" || string(m.Structured) != `{"b":1.0,"a":"x"}` {
		t.Fatalf("structured message = type %s, content %q, structured %s", m.Type, m.Content, m.Structured)
	}
	// Clients see the object as JSON.
	out, err := json.Marshal(m)
	if err != nil || !strings.Contains(string(out), `"structured":{"b":1.0,"a":"x"}`) {
		t.Fatalf("message JSON %s (%v)", out, err)
	}
	if ms[2].Type != chat.TypeTextMessage || ms[2].Name != "q" {
		t.Fatalf("last message = %+v", ms[2])
	}
}

// TestInvalidStructuredReplyFailsTheRun: a reply that is not a valid
// object of the type fails the run, as it fails AgentChat's team.run, and
// adds no message; it is counted.
func TestInvalidStructuredReplyFailsTheRun(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	reg := prometheus.NewRegistry()
	rt := runtimetest.New(t, db, func(c *runtime.Config) { c.Registerer = reg })
	body := strings.Replace(structuredSpec, "%s", `"{\"a\": \"x\"}"`, 1)
	c, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	got := waitTerminal(t, rt, c.ID, 10*time.Second)
	if got.Status != chat.StatusFailed || !strings.Contains(got.Error, "not a valid T") || !strings.Contains(got.Error, "b: field required") {
		t.Fatalf("chat = %+v", got)
	}
	if ms := messages(t, db, c.ID); len(ms) != 1 {
		t.Fatalf("messages = %+v, want the task only", ms)
	}
	want := `# HELP agentd_structured_replies_invalid_total Model replies that did not validate against their agent's output_schema; each fails its run, as in AgentChat.
# TYPE agentd_structured_replies_invalid_total counter
agentd_structured_replies_invalid_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "agentd_structured_replies_invalid_total"); err != nil {
		t.Fatal(err)
	}
}
