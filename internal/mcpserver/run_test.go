package mcpserver

import (
	"encoding/json"
	"testing"
)

func TestTaskOfReadsTheToolArguments(t *testing.T) {
	for _, tt := range []struct {
		args, task string
		bad        bool
	}{
		{`{"task": "do it"}`, "do it", false},
		{`{"task": "  "}`, "", true},
		{`{}`, "", true},
		{`{"task": 3}`, "", true},
		{`{"task": "x", "extra": 1}`, "", true},
		{`null`, "", true},
	} {
		task, msg := taskOf(json.RawMessage(tt.args))
		if task != tt.task || (msg != "") != tt.bad {
			t.Errorf("taskOf(%s) = %q, %q", tt.args, task, msg)
		}
	}
}
