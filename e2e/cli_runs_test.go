package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
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
	// Nothing runs now: stop has nothing to stop.
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

	// A busy chat: again is refused with the active run's number, then
	// --enqueue waits its turn, and --interrupt cuts the run in progress.
	busy := p.create([]byte(`{"task": "go", "max_round": 1, "agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": [
		{"content": "slow one", "delay_ms": 3000}, "two", {"content": "slow three", "delay_ms": 4000}, "four"]}}]}`))
	for p.getRun(busy.ID).Status != "running" {
		time.Sleep(20 * time.Millisecond)
	}
	if out, errOut, code = p.cli(nil, "again", busy.ID, "now"); code == 0 || !strings.Contains(errOut, "run 1") {
		t.Fatalf("again on a busy chat: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code = p.cli(nil, "again", "--enqueue", busy.ID, "second"); code != 0 || !strings.Contains(out, "run 2 of chat") || !strings.Contains(out, "two") {
		t.Fatalf("again --enqueue: exit %d\n%s%s", code, out, errOut)
	}
	p.mustPostRun(busy.ID, `{"task": "third"}`, 3)
	for p.getRun(busy.ID).Status != "running" {
		time.Sleep(20 * time.Millisecond)
	}
	if out, errOut, code = p.cli(nil, "again", "--interrupt", busy.ID, "fourth"); code != 0 || !strings.Contains(out, "run 4 of chat") {
		t.Fatalf("again --interrupt: exit %d\n%s%s", code, out, errOut)
	}
	all, stopAll := p.stream(busy.ID, 0)
	defer stopAll()
	want := []string{"run 1", "user:go", "a:slow one", "end 1: Maximum number of turns 1 reached.",
		"run 2", "user:second", "a:two", "end 2: Maximum number of turns 1 reached.",
		"run 3", "user:third", "cancelled 3: External termination requested",
		// The cut call was never recorded: the replay answers it again.
		"run 4", "user:fourth", "a:slow three", "end 4: Maximum number of turns 1 reached."}
	if got := runLog(collect(t, all, 30*time.Second)); !slices.Equal(got, want) {
		t.Fatalf("the busy chat's log =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// --to: the task hands a Swarm back to an agent (after a hand-off to
	// the user ended the run).
	swarm := p.create([]byte(`{"task": "refund please", "max_round": 5, "speaker_selection": {"method": "swarm"},
		"termination": {"any": [{"handoff": {"target": "user"}}, {"text_mention": {"text": "TERMINATE"}}]},
		"agents": [{"name": "triage", "type": "assistant", "handoffs": ["user", "billing"], "model": {"provider": "replay", "responses": [
			{"tool_calls": [{"name": "transfer_to_user", "arguments": {}}]}]}},
		           {"name": "billing", "type": "assistant", "model": {"provider": "replay", "responses": ["Refunded. TERMINATE"]}}]}`))
	p.waitRun(swarm.ID, 1, 30*time.Second)
	if out, errOut, code = p.cli(nil, "again", "--to", "billing", swarm.ID, "order 7"); code != 0 || !strings.Contains(out, "Refunded. TERMINATE") {
		t.Fatalf("again --to: exit %d\n%s%s", code, out, errOut)
	}

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
