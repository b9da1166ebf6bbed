package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// runView is a chat with its runs, as POST /runs and GET answer it.
type runView struct {
	chatView
	Run        int `json:"run"`
	QueuedRuns int `json:"queued_runs"`
	PostedRun  int `json:"posted_run"`
	ForkedFrom *struct {
		ChatID string `json:"chat_id"`
		Seq    int64  `json:"seq"`
	} `json:"forked_from"`
}

// postRun posts a run and returns the answer's status and body.
func (p *proc) postRun(id, body string) (int, []byte) {
	p.t.Helper()
	code, _, b := p.do("POST", "/v1/chats/"+id+"/runs", []byte(body))
	return code, b
}

func (p *proc) mustPostRun(id, body string, wantRun int) runView {
	p.t.Helper()
	code, b := p.postRun(id, body)
	if code != http.StatusAccepted {
		p.t.Fatalf("POST /runs %s: %d %s", body, code, b)
	}
	conforms(p.t, "RunPosted", b)
	var v runView
	mustUnmarshal(p.t, b, &v)
	if v.PostedRun != wantRun {
		p.t.Fatalf("POST /runs %s: posted run %d, want %d", body, v.PostedRun, wantRun)
	}
	return v
}

func (p *proc) getRun(id string) runView {
	p.t.Helper()
	_, _, b := p.do("GET", "/v1/chats/"+id, nil)
	conforms(p.t, "Chat", b)
	var v runView
	mustUnmarshal(p.t, b, &v)
	return v
}

// waitRun waits until run n of the chat has ended.
func (p *proc) waitRun(id string, n int, within time.Duration) runView {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for {
		v := p.getRun(id)
		if v.Run == n && (v.Status == "completed" || v.Status == "failed" || v.Status == "cancelled") {
			return v
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("run %d of chat %s has not ended: %+v", n, id, v)
		}
		p.do("GET", fmt.Sprintf("/v1/chats/%s/messages?after=%d&wait_s=1", id, v.LastSeq), nil)
	}
}

// runLog summarises a stream: "run N", "end N: detail", "name:content".
func runLog(evs []sseEvent) []string {
	var out []string
	for _, e := range evs {
		var d struct {
			Run        int    `json:"run"`
			StopDetail string `json:"stop_detail"`
			Name       string `json:"name"`
			Content    string `json:"content"`
		}
		_ = json.Unmarshal(e.Data, &d)
		switch e.Type {
		case "run.started":
			out = append(out, fmt.Sprintf("run %d", d.Run))
		case "chat.completed":
			out = append(out, fmt.Sprintf("end %d: %s", d.Run, d.StopDetail))
		case "chat.failed", "chat.cancelled":
			// How a run ended matters (an interrupted run is cancelled).
			out = append(out, fmt.Sprintf("%s %d: %s", strings.TrimPrefix(e.Type, "chat."), d.Run, d.StopDetail))
		case "message":
			out = append(out, d.Name+":"+d.Content)
		}
	}
	return out
}

// collectUntil reads a stream until stop says so, failing after within.
func collectUntil(t *testing.T, events <-chan sseEvent, within time.Duration, stop func([]sseEvent) bool) []sseEvent {
	t.Helper()
	var got []sseEvent
	timeout := time.After(within)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the stream closed after %d events: %v", len(got), runLog(got))
			}
			conformsEvent(t, ev)
			got = append(got, ev)
			if stop(got) {
				return got
			}
		case <-timeout:
			t.Fatalf("not there after %v: %v", within, runLog(got))
		}
	}
}

func endsRun(n int) func([]sseEvent) bool {
	want := fmt.Sprintf("end %d: ", n)
	return func(evs []sseEvent) bool {
		return slices.ContainsFunc(runLog(evs[len(evs)-1:]), func(s string) bool { return strings.HasPrefix(s, want) })
	}
}

// TestRunsWhenBusy drives runs over HTTP on both stores: reject answers
// 409 naming the active run, enqueue runs after it in order, interrupt
// cancels it and runs next; a stream that follows the chat sees every run,
// and one that does not ends after the last run's end, not an earlier's.
func TestRunsWhenBusy(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, env []string) {
		p := startAgentd(t, env...)
		c := p.create([]byte(`{"task": "go", "max_round": 1, "agents": [{"name": "a", "type": "assistant",
			"model": {"provider": "replay", "responses": [{"content": "r1", "delay_ms": 3000}, {"content": "r2", "delay_ms": 100},
			{"content": "r3", "delay_ms": 100}, {"content": "r4", "delay_ms": 2000}]}}]}`))
		events, stop := p.streamQuery(c.ID, "follow=true", 0)
		defer stop()

		code, b := p.postRun(c.ID, `{"task": "x"}`)
		if code != http.StatusConflict || !strings.Contains(string(b), "urn:agentd:problem:run-active") || !strings.Contains(string(b), "run 1 ") {
			t.Fatalf("POST /runs while run 1 runs: %d %s", code, b)
		}
		conforms(t, "Problem", b)
		if v := p.mustPostRun(c.ID, `{"task": "second", "if_busy": "enqueue"}`, 2); v.QueuedRuns != 1 {
			t.Fatalf("queued_runs = %d", v.QueuedRuns)
		}
		p.mustPostRun(c.ID, `{"task": "third", "if_busy": "enqueue"}`, 3)
		collectUntil(t, events, 30*time.Second, endsRun(3))
		p.mustPostRun(c.ID, `{"task": "fourth"}`, 4)
		for p.getRun(c.ID).Status != "running" {
			time.Sleep(20 * time.Millisecond)
		}
		p.mustPostRun(c.ID, `{"task": "fifth", "if_busy": "interrupt"}`, 5)
		collectUntil(t, events, 30*time.Second, endsRun(5))

		want := []string{"run 1", "user:go", "a:r1", "end 1: Maximum number of turns 1 reached.",
			"run 2", "user:second", "a:r2", "end 2: Maximum number of turns 1 reached.",
			"run 3", "user:third", "a:r3", "end 3: Maximum number of turns 1 reached.",
			"run 4", "user:fourth", "cancelled 4: External termination requested",
			"run 5", "user:fifth", "a:r4", "end 5: Maximum number of turns 1 reached."}
		all, stopAll := p.stream(c.ID, 0)
		defer stopAll()
		if got := runLog(collect(t, all, 30*time.Second)); !slices.Equal(got, want) {
			t.Fatalf("log =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if v := p.getRun(c.ID); v.Run != 5 || v.QueuedRuns != 0 || v.Status != "completed" {
			t.Fatalf("chat = %+v", v)
		}
		// A stream past the end without follow is told it is over.
		if code, _, _ := p.do("GET", fmt.Sprintf("/v1/chats/%s/events?after=%d", c.ID, p.getRun(c.ID).LastSeq), nil); code != http.StatusNoContent {
			t.Fatalf("stream past the end: %d", code)
		}
		// Bad runs: every problem at once.
		code, b = p.postRun(c.ID, `{"task": {"type": "HandoffMessage", "content": "x", "target": "ghost"}, "if_busy": "later", "max_round": 0}`)
		if code != http.StatusUnprocessableEntity || strings.Count(string(b), `"path"`) != 3 {
			t.Fatalf("bad run: %d %s", code, b)
		}
	})
}

// TestStopEndsTheRunAfterTheTurn: POST /stop in the middle of a turn lets
// it finish, then the run ends external; the chat takes runs after it.
func TestStopEndsTheRunAfterTheTurn(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, env []string) {
		p := startAgentd(t, env...)
		c := p.create([]byte(`{"task": "go", "max_round": 10, "agents": [{"name": "a", "type": "assistant",
			"model": {"provider": "replay", "responses": [{"content": "first", "delay_ms": 1500}, "second", "third"]}}]}`))
		events, stop := p.streamQuery(c.ID, "follow=true", 0)
		defer stop()
		got := collectUntil(t, events, 30*time.Second, func(evs []sseEvent) bool { return evs[len(evs)-1].Type == "speaker.selected" })
		code, _, b := p.do("POST", "/v1/chats/"+c.ID+"/stop", nil)
		if code != http.StatusAccepted {
			t.Fatalf("POST /stop: %d %s", code, b)
		}
		conforms(t, "Chat", b)
		got = append(got, collectUntil(t, events, 30*time.Second, endsRun(1))...)
		if want := []string{"run 1", "user:go", "a:first", "end 1: External termination requested"}; !slices.Equal(runLog(got), want) {
			t.Fatalf("run 1 = %v", runLog(got))
		}
		v := p.getRun(c.ID)
		if *v.StopReason != "external" {
			t.Fatalf("stop reason %s", *v.StopReason)
		}
		if code, _, _ := p.do("POST", "/v1/chats/"+c.ID+"/stop", nil); code != http.StatusOK {
			t.Fatalf("POST /stop with no run active: %d", code)
		}
		p.mustPostRun(c.ID, `{"max_round": 1}`, 2)
		got = collectUntil(t, events, 30*time.Second, endsRun(2))
		if l := runLog(got); l[len(l)-2] != "a:second" {
			t.Fatalf("run 2 = %v", l)
		}
	})
}

// TestForkCopiesTheLogExactly: a fork at a run's end holds exactly the
// source's events up to there and takes its own run; the source is
// untouched.
func TestForkCopiesTheLogExactly(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, env []string) {
		p := startAgentd(t, env...)
		c := p.create([]byte(`{"task": "argue", "max_round": 3, "agents": [
			{"name": "pro", "type": "assistant", "model": {"provider": "replay", "responses": ["yes", "yes!", "once more: yes"]}},
			{"name": "con", "type": "assistant", "model": {"provider": "replay", "responses": ["no", "no!"]}}]}`))
		p.waitTerminal(c.ID, 30*time.Second)
		src, stopSrc := p.stream(c.ID, 0)
		defer stopSrc()
		before := collect(t, src, 30*time.Second)
		end := before[len(before)-1].ID

		code, hdr, b := p.do("POST", "/v1/chats/"+c.ID+"/fork", fmt.Appendf(nil, `{"at_seq": %d, "run": {"task": "Once more, shorter.", "max_round": 1}}`, end))
		if code != http.StatusCreated || hdr.Get("Location") == "" {
			t.Fatalf("POST /fork: %d %s", code, b)
		}
		conforms(t, "Chat", b)
		var f runView
		mustUnmarshal(t, b, &f)
		if f.ForkedFrom == nil || f.ForkedFrom.ChatID != c.ID || f.ForkedFrom.Seq != end || f.ID == c.ID {
			t.Fatalf("fork = %s", b)
		}
		p.waitRun(f.ID, 2, 30*time.Second)
		fs, stopF := p.stream(f.ID, 0)
		defer stopF()
		forked := collect(t, fs, 30*time.Second)
		for i, e := range before {
			if forked[i].ID != e.ID || forked[i].Type != e.Type || string(forked[i].Data) != string(e.Data) {
				t.Fatalf("fork's event %d = %s %s, want %s %s", i+1, forked[i].Type, forked[i].Data, e.Type, e.Data)
			}
		}
		if l := runLog(forked[len(before):]); !slices.Equal(l, []string{"run 2", "user:Once more, shorter.", "con:no!", "end 2: Maximum number of turns 1 reached."}) {
			t.Fatalf("the fork's own run = %v", l)
		}
		after, stopAfter := p.stream(c.ID, 0)
		defer stopAfter()
		if got := collect(t, after, 30*time.Second); len(got) != len(before) {
			t.Fatalf("the source has %d events after the fork, had %d", len(got), len(before))
		}
		// Inside a turn is no place to fork.
		var sel int64
		for _, e := range before {
			if e.Type == "speaker.selected" {
				sel = e.ID
				break
			}
		}
		code, _, b = p.do("POST", "/v1/chats/"+c.ID+"/fork", fmt.Appendf(nil, `{"at_seq": %d}`, sel))
		if code != http.StatusUnprocessableEntity || !strings.Contains(string(b), "/at_seq") {
			t.Fatalf("fork inside a turn: %d %s", code, b)
		}
	})
}

// TestApproveEditRejectOverHTTP: a real http tool server; the held calls
// run only as the client decides, edits are checked against the schema,
// and a rejected call's result names the reason.
func TestApproveEditRejectOverHTTP(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var calls []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		calls = append(calls, fmt.Sprintf("%s %v", body.Name, body.Arguments))
		mu.Unlock()
		fmt.Fprintf(w, "%s done with %v", body.Name, body.Arguments["n"])
	}))
	t.Cleanup(ts.Close)
	tool := func(name string) string {
		return fmt.Sprintf(`{"name": %q, "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
			"implementation": {"type": "http", "url": %q}}`, name, ts.URL)
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if len(calls) != 2 || calls[0] != "pay map[n:10]" || calls[1] != "pay map[n:10]" {
			t.Errorf("tool server saw %v, want pay with the edit once per store", calls)
		}
	})
	backends(t, func(t *testing.T, env []string) {
		p := startAgentd(t, append(env, "AGENTD_TOOL_ALLOW_PRIVATE=true")...)
		c := p.create(fmt.Appendf(nil, `{"task": "pay", "max_round": 1, "tools": [%s, %s],
			"agents": [{"name": "a", "type": "assistant", "tools": ["pay", "refund"], "tool_approval": "always",
				"tool_call_summary_format": "{tool_name}: {result}",
				"model": {"provider": "replay", "responses": [{"tool_calls": [{"name": "pay", "arguments": {"n": 100}}, {"name": "refund", "arguments": {"n": 5}}]}]}}]}`,
			tool("pay"), tool("refund")))
		view, pend := p.waitPause(c.ID, "")
		var held struct {
			Kind      string `json:"kind"`
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		}
		_, _, b := p.do("GET", "/v1/chats/"+c.ID, nil)
		var full struct {
			PendingInput json.RawMessage `json:"pending_input"`
		}
		mustUnmarshal(t, b, &full)
		mustUnmarshal(t, full.PendingInput, &held)
		if view.Status != "awaiting_input" || held.Kind != "approval" || len(held.ToolCalls) != 2 {
			t.Fatalf("pending = %s", full.PendingInput)
		}
		pay, refund := held.ToolCalls[0].ID, held.ToolCalls[1].ID
		code, body := p.input(c.ID, map[string]any{"request_id": pend.RequestID, "approvals": []map[string]any{
			{"tool_call_id": pay, "approve": true, "arguments": map[string]any{"n": "ten"}}}})
		if code != http.StatusUnprocessableEntity || !strings.Contains(string(body), "/approvals/0/arguments") {
			t.Fatalf("an edit that fails the schema and a missing decision: %d %s", code, body)
		}
		code, body = p.input(c.ID, map[string]any{"request_id": pend.RequestID, "approvals": []map[string]any{
			{"tool_call_id": pay, "approve": true, "arguments": map[string]any{"n": 10}},
			{"tool_call_id": refund, "approve": false, "reason": "no refunds today"}}})
		if code != http.StatusAccepted {
			t.Fatalf("approvals: %d %s", code, body)
		}
		final := p.waitTerminal(c.ID, 30*time.Second)
		msgs := p.messages(c.ID)
		last := msgs[len(msgs)-1].Content
		if final.Status != "completed" || last != "pay: pay done with 10\nrefund: Error: Tool call was not approved. Reason: no refunds today" {
			t.Fatalf("chat %s, summary %q", final.Status, last)
		}
	})
}

// TestKill9WithARunEnqueued: a run queued behind an active one survives
// kill -9 and runs exactly once after the restart.
func TestKill9WithARunEnqueued(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, env []string) {
		env = append(env, "AGENTD_LEASE_TTL=1s")
		p := startAgentd(t, env...)
		c := p.create([]byte(`{"task": "go", "max_round": 2, "agents": [{"name": "a", "type": "assistant",
			"model": {"provider": "replay", "responses": [{"content": "r1", "delay_ms": 800}, {"content": "r2", "delay_ms": 800},
			"r3", "r4"]}}]}`))
		p.mustPostRun(c.ID, `{"task": "next", "if_busy": "enqueue"}`, 2)
		for p.getRun(c.ID).Turns < 1 {
			time.Sleep(20 * time.Millisecond)
		}
		p.kill9()
		p2 := startAgentd(t, env...)
		p2.waitRun(c.ID, 2, 60*time.Second)
		all, stop := p2.stream(c.ID, 0)
		defer stop()
		got := runLog(collect(t, all, 30*time.Second))
		want := []string{"run 1", "user:go", "a:r1", "a:r2", "end 1: Maximum number of turns 2 reached.",
			"run 2", "user:next", "a:r3", "a:r4", "end 2: Maximum number of turns 2 reached."}
		if !slices.Equal(got, want) {
			t.Fatalf("log =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// TestCodeApprovalOverHTTP: a code-running user_proxy with code_approval
// waits for a client; approved code runs in the sandbox, rejected code is
// answered as AgentChat's CodeExecutorAgent answers it.
func TestCodeApprovalOverHTTP(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bwrap"); err != nil {
		missing(t, "bwrap sandbox: bubblewrap is not installed (apt-get install bubblewrap)")
	}
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=bwrap", "AGENTD_SANDBOX_WORK_ROOT="+reachableDir(t))
	c := p.create([]byte("{\"task\": \"print twice\", \"max_round\": 4, \"agents\": [" +
		"{\"name\": \"coder\", \"type\": \"assistant\", \"model\": {\"provider\": \"replay\", \"responses\": [" +
		"\"```python\\nprint(6*7)\\n```\", \"```sh\\nrm -rf /tmp/x\\n```\"]}}," +
		"{\"name\": \"runner\", \"type\": \"user_proxy\", \"human_input_mode\": \"NEVER\", \"code_execution\": {}, \"code_approval\": true}]}"))
	_, pend := p.waitPause(c.ID, "")
	code, body := p.input(c.ID, map[string]any{"request_id": pend.RequestID, "approvals": []map[string]any{{"approve": true}}})
	if code != http.StatusAccepted {
		t.Fatalf("approve: %d %s", code, body)
	}
	_, pend2 := p.waitPause(c.ID, pend.RequestID)
	code, body = p.input(c.ID, map[string]any{"request_id": pend2.RequestID, "approvals": []map[string]any{{"approve": false, "reason": "no deleting"}}})
	if code != http.StatusAccepted {
		t.Fatalf("reject: %d %s", code, body)
	}
	p.waitTerminal(c.ID, 60*time.Second)
	var got []string
	for _, m := range p.messages(c.ID) {
		if m.Name == "runner" {
			got = append(got, m.Content)
		}
	}
	want := []string{"exitcode: 0 (execution succeeded)\nCode output: 42\n",
		"exitcode: 1 (execution failed)\nCode output: Code execution was not approved. Reason: no deleting"}
	if !slices.Equal(got, want) {
		t.Fatalf("runner said %q, want %q", got, want)
	}
}
