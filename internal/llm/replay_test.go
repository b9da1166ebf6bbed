package llm

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
)

func replayClient(t *testing.T) *Client {
	t.Helper()
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// script decodes responses the way a spec carries them.
func script(t *testing.T, js string) []spec.ReplayResponse {
	t.Helper()
	var rs []spec.ReplayResponse
	if err := json.Unmarshal([]byte(js), &rs); err != nil {
		t.Fatal(err)
	}
	return rs
}

func replayRequest(responses []spec.ReplayResponse, callIndex int) *chat.ModelRequest {
	return &chat.ModelRequest{
		ChatID: "chat-1", Caller: "coder", CallIndex: callIndex,
		Config:   spec.Model{Provider: "replay", Responses: responses},
		Messages: []chat.ModelMessage{{Role: "user", Name: "user", Content: "Reverse a string."}},
	}
}

func TestReplayAnswersByCallIndex(t *testing.T) {
	t.Parallel()
	c := replayClient(t)
	rs := script(t, `["first", {"content": "second"}, {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}]}]`)
	for _, tc := range []struct {
		index     int
		content   string
		toolCalls int
	}{
		{2, "", 1}, // out of order on purpose: the position is the request's, not the client's
		{0, "first", 0},
		{1, "second", 0},
		{0, "first", 0},
	} {
		resp, err := c.Complete(t.Context(), replayRequest(rs, tc.index))
		if err != nil {
			t.Fatalf("call %d: %v", tc.index, err)
		}
		if resp.Content != tc.content || len(resp.ToolCalls) != tc.toolCalls {
			t.Errorf("call %d = %+v, want content %q and %d tool calls", tc.index, resp, tc.content, tc.toolCalls)
		}
	}
}

func TestReplayExhausted(t *testing.T) {
	t.Parallel()
	c := replayClient(t)
	rs := script(t, `["only"]`)
	for _, tc := range []struct {
		caller string
		index  int
		want   []string
	}{
		{"coder", 1, []string{`agent "coder"`, "response 2", "script has 1"}},
		{"", 5, []string{"speaker selector", "response 6", "script has 1"}},
		{"coder", -1, []string{`agent "coder"`}},
	} {
		req := replayRequest(rs, tc.index)
		req.Caller = tc.caller
		_, err := c.Complete(t.Context(), req)
		if !errors.Is(err, chat.ErrReplayExhausted) {
			t.Fatalf("caller %q index %d: err = %v, want ErrReplayExhausted", tc.caller, tc.index, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("err = %q, want it to mention %q", err, w)
			}
		}
	}
	if _, err := c.Complete(t.Context(), replayRequest(nil, 0)); !errors.Is(err, chat.ErrReplayExhausted) {
		t.Errorf("empty script: err = %v, want ErrReplayExhausted", err)
	}
}

func TestReplayDelay(t *testing.T) {
	t.Parallel()
	c := replayClient(t)
	start := time.Now()
	if _, err := c.Complete(t.Context(), replayRequest(script(t, `[{"content": "slow", "delay_ms": 30}]`), 0)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("returned after %v, want at least the 30ms delay", d)
	}
}

func TestReplayDelayHonoursCancel(t *testing.T) {
	t.Parallel()
	c := replayClient(t)
	rs := script(t, `[{"content": "never", "delay_ms": 3600000}]`)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Complete(ctx, replayRequest(rs, 0))
		errc <- err
	}()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Complete did not return after cancel")
	}

	// Already cancelled, no delay: still no response.
	if _, err := c.Complete(ctx, replayRequest(script(t, `["x"]`), 0)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx without delay: err = %v, want context.Canceled", err)
	}
}

func TestReplayToolCallsAreDeterministic(t *testing.T) {
	t.Parallel()
	c := replayClient(t)
	rs := script(t, `[
		{"content": "calling", "tool_calls": [
			{"name": "write_file", "arguments": {"path": "a.txt",  "content": "x"}},
			{"name": "noargs"},
			{"name": "nullargs", "arguments": null},
			{"name": "raw", "arguments": "{not json"}
		]},
		{"tool_calls": [{"name": "write_file", "arguments": {}}]}
	]`)
	first, err := c.Complete(t.Context(), replayRequest(rs, 0))
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Complete(t.Context(), replayRequest(rs, 0))
	if err != nil {
		t.Fatal(err)
	}
	wantArgs := []string{`{"path":"a.txt","content":"x"}`, "{}", "{}", "{not json"}
	seen := map[string]bool{}
	for i, tc := range first.ToolCalls {
		if tc.ID != again.ToolCalls[i].ID {
			t.Errorf("call %d: id %q then %q, want the same id on a redo", i, tc.ID, again.ToolCalls[i].ID)
		}
		if !strings.HasPrefix(tc.ID, "call_") || len(tc.ID) != len("call_")+24 {
			t.Errorf("call %d: id %q, want call_ + 24 hex digits", i, tc.ID)
		}
		if seen[tc.ID] {
			t.Errorf("call %d: id %q repeats", i, tc.ID)
		}
		seen[tc.ID] = true
		if tc.Type != "function" || tc.Function.Arguments != wantArgs[i] {
			t.Errorf("call %d = %+v, want type function and arguments %s", i, tc, wantArgs[i])
		}
	}

	// Any change of chat, caller or position changes the id.
	base := toolCallID("chat-1", "coder", 0, 0)
	for _, other := range []string{
		toolCallID("chat-2", "coder", 0, 0),
		toolCallID("chat-1", "reviewer", 0, 0),
		toolCallID("chat-1", "", 0, 0),
		toolCallID("chat-1", "coder", 1, 0),
		toolCallID("chat-1", "coder", 0, 1),
		toolCallID("chat-1c", "oder", 0, 0), // no ambiguity where fields meet
	} {
		if other == base {
			t.Errorf("toolCallID collides: %s", other)
		}
	}
	second, err := c.Complete(t.Context(), replayRequest(rs, 1))
	if err != nil {
		t.Fatal(err)
	}
	if seen[second.ToolCalls[0].ID] {
		t.Errorf("call index 1 reused id %s", second.ToolCalls[0].ID)
	}
}

func TestReplayUsage(t *testing.T) {
	t.Parallel()
	c := replayClient(t)
	rs := script(t, `[
		{"content": "scripted", "usage": {"prompt_tokens": 100, "completion_tokens": 7}},
		{"content": "abcde"},
		{"tool_calls": [{"name": "f", "arguments": {"a": 1}}]}
	]`)
	req := replayRequest(rs, 0)
	req.Messages = []chat.ModelMessage{
		{Role: "system", Content: "1234"},
		{Role: "user", Content: "héllo"}, // five characters, six bytes
	}
	for i, want := range []chat.Usage{
		{PromptTokens: 100, CompletionTokens: 7},
		{PromptTokens: 3, CompletionTokens: 2}, // ceil(9/4), ceil(5/4)
		{PromptTokens: 3, CompletionTokens: 2}, // "f" + `{"a":1}` = 8 characters
	} {
		req.CallIndex = i
		resp, err := c.Complete(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Usage != want {
			t.Errorf("response %d: usage %+v, want %+v", i, resp.Usage, want)
		}
	}
}

func TestReplayArguments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", "{}"},
		{"null", "{}"},
		{" { \"a\" : [1, 2] } ", `{"a":[1,2]}`},
		{`"{\"a\":1}"`, `{"a":1}`},
		{"42", "42"},
	} {
		got, err := replayArguments(json.RawMessage(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("replayArguments(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := replayArguments(json.RawMessage("{bad")); err == nil {
		t.Error("replayArguments of invalid JSON: err = nil")
	}
}
