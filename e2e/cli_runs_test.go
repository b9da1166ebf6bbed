package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestChatCommandRuns: agentd chat again, stop, fork, approve and follow
// --all against the real server.
func TestChatCommandRuns(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Arguments map[string]any `json:"arguments"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		fmt.Fprintf(w, "paid %v", body.Arguments["n"])
	}))
	t.Cleanup(ts.Close)
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none", "AGENTD_TOOL_ALLOW_PRIVATE=true")

	spec := writeSpec(t, `{"task": "count", "max_round": 1, "agents": [
		{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["one", "two", "three"]}}]}`)
	out, errOut, code := p.cli(nil, "run", spec)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	id := strings.Fields(out)[1]

	// again: the next run, followed to its end (and not the end of run 1).
	out, errOut, code = p.cli(nil, "again", id, "and on")
	if code != 0 || !strings.Contains(out, "run 2 of chat "+id+" posted") || !strings.Contains(out, "two") || strings.Contains(out, "one") {
		t.Fatalf("again: exit %d\n%s%s", code, out, errOut)
	}
	// again without a task, as JSON: its events only, ending with run 3's end.
	out, _, code = p.cli(nil, "again", "--json", id)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || !strings.Contains(lines[0], `"run.started"`) || !strings.Contains(lines[len(lines)-1], `"run":3`) {
		t.Fatalf("again --json: exit %d\n%s", code, out)
	}
	// A busy chat without --enqueue is refused with the run's number.
	// (Nothing runs now: stop has nothing to stop.)
	if out, _, code = p.cli(nil, "stop", id); code != 0 || !strings.Contains(out, "completed") {
		t.Fatalf("stop of an ended chat: exit %d\n%s", code, out)
	}
	// fork at the end with a first run.
	out, errOut, code = p.cli(nil, "fork", "--json", id, "forked task")
	var fork struct {
		ID         string `json:"id"`
		ForkedFrom struct {
			ChatID string `json:"chat_id"`
		} `json:"forked_from"`
	}
	if code != 0 || json.Unmarshal([]byte(strings.TrimSpace(out)), &fork) != nil || fork.ForkedFrom.ChatID != id {
		t.Fatalf("fork: exit %d\n%s%s", code, out, errOut)
	}
	p.waitRun(fork.ID, 4, 30*time.Second)

	// approve: one call approved with an edit, one rejected.
	held := fmt.Sprintf(`{"task": "pay", "max_round": 1, "tools": [{"name": "pay",
		"parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}, "implementation": {"type": "http", "url": %q}}],
		"agents": [{"name": "a", "type": "assistant", "tools": ["pay"], "tool_approval": "always", "tool_call_summary_format": "{result}",
			"model": {"provider": "replay", "responses": [{"tool_calls": [{"name": "pay", "arguments": {"n": 1}}, {"name": "pay", "arguments": {"n": 2}}]}]}}]}`, ts.URL)
	c := p.create([]byte(held))
	p.waitPause(c.ID, "")
	_, _, b := p.do("GET", "/v1/chats/"+c.ID, nil)
	var v struct {
		PendingInput struct {
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"pending_input"`
	}
	mustUnmarshal(t, b, &v)
	calls := v.PendingInput.ToolCalls
	if len(calls) != 2 {
		t.Fatalf("held calls: %s", b)
	}
	out, errOut, code = p.cli(nil, "show", c.ID)
	if code != 0 || !strings.Contains(out, "waits for approval") {
		t.Fatalf("show of a held chat: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = p.cli(nil, "approve", c.ID, "--args", calls[0].ID+`={"n": 10}`, "--reject", calls[1].ID, "--reason", "too much")
	if code != 0 {
		t.Fatalf("approve: exit %d\n%s%s", code, out, errOut)
	}
	p.waitTerminal(c.ID, 30*time.Second)
	msgs := p.messages(c.ID)
	if got := msgs[len(msgs)-1].Content; got != "paid 10\nError: Tool call was not approved. Reason: too much" {
		t.Fatalf("the turn's summary = %q", got)
	}
}
