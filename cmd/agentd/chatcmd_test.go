package main

import (
	"bytes"
	"testing"

	"github.com/agentd/agentd/internal/api"
	"github.com/agentd/agentd/internal/client"
)

// A message as agentd chat prints it, byte for byte: a tool result's lines
// line up after its mark, and a code result without content is shown.
func TestPrinterMessage(t *testing.T) {
	for _, c := range []struct {
		name string
		m    client.Message
		want string
	}{
		{"tool results", client.Message{Message: api.Message{Seq: 7, Name: "triage", Role: "tool", ToolResponses: []client.ToolResponse{
			{ToolCallID: "call_1", Content: "one line"},
			{ToolCallID: "call_2", Content: "first\nsecond\n", IsError: true},
		}}}, "#7 triage (tool)\n  ← one line  call_1\n  ✗ first\n    second  call_2\n"},
		{"code result in the content", client.Message{Message: api.Message{Seq: 8, Name: "executor", Role: "user",
			Content:    "exitcode: 0 (execution succeeded)\nCode output: 385",
			CodeResult: &client.CodeResult{ExitCode: 0, Output: "385"},
		}}, "#8 executor (user)\n  exitcode: 0 (execution succeeded)\n  Code output: 385\n"},
		{"code result alone", client.Message{Message: api.Message{Seq: 8, Name: "executor", Role: "user",
			CodeResult: &client.CodeResult{ExitCode: 1, Output: "Traceback\nNameError"},
		}}, "#8 executor (user)\n  exit code 1\n  | Traceback\n  | NameError\n"},
	} {
		var b bytes.Buffer
		(&printer{w: &b}).message(c.m)
		if b.String() != c.want {
			t.Errorf("%s: printed\n%q\nwant\n%q", c.name, b.String(), c.want)
		}
	}
}

// A context.updated event as agentd chat follow prints it.
func TestContextChange(t *testing.T) {
	for data, want := range map[string]string{
		`{"set": {"tier": "gold"}, "by": {"client": "create"}}`:                       `set {"tier": "gold"} (by create)`,
		`{"set": {}, "removed": ["a", "b"], "by": {"client": "patch"}}`:               `removed a, b (by patch)`,
		`{"set": {"n": 1}, "removed": ["x"], "by": {"agent": "sales", "tool": "fn"}}`: `set {"n": 1} removed x (by sales fn)`,
	} {
		if got := contextChange([]byte(data)); got != want {
			t.Errorf("contextChange(%s) = %q, want %q", data, got, want)
		}
	}
}
