package llm

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/llm/anthropictest"
	"github.com/agentd/agentd/internal/spec"
)

const anthropicKey = "sk-ant-test"

func anthropicFixture(t *testing.T) (*anthropictest.Server, *Client, *prometheus.Registry) {
	t.Helper()
	srv := anthropictest.New(anthropictest.WithAPIKey(anthropicKey))
	t.Cleanup(srv.Close)
	reg := prometheus.NewRegistry()
	c, err := New(Config{Endpoints: []Endpoint{{Name: "claude", Kind: KindAnthropic, BaseURL: srv.URL(), APIKey: anthropicKey}},
		OpenAI: OpenAIConfig{BackoffBase: time.Millisecond, BackoffMax: 50 * time.Millisecond}, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return srv, c, reg
}

func anthropicReq(msgs ...chat.ModelMessage) *chat.ModelRequest {
	return &chat.ModelRequest{ChatID: "chat-1", Caller: "reviewer", Config: spec.Model{Provider: KindAnthropic, Model: "claude-sonnet-4-5"}, Messages: msgs}
}

// thinkingOn enables extended thinking with the least budget on a request.
func thinkingOn(r *chat.ModelRequest) *chat.ModelRequest {
	budget := spec.MinThinkingBudget
	r.Config.Thinking = &spec.Thinking{Type: spec.ThinkingEnabled, BudgetTokens: &budget}
	return r
}

// TestAnthropicTextAndThinking: system messages become the top-level system
// prompt, group-chat messages of one role one turn, max_tokens is always
// sent, the key goes with the SDK's auth; the model's thinking is asked for
// and comes back as the thought, its signed block kept.
func TestAnthropicTextAndThinking(t *testing.T) {
	t.Parallel()
	srv, c, _ := anthropicFixture(t)
	srv.Reply(anthropictest.Reply{Thinking: "They want a greeting.", Text: "Hello!", Usage: &anthropictest.Usage{InputTokens: 21, OutputTokens: 4}})
	resp, err := c.Complete(t.Context(), thinkingOn(anthropicReq(
		chat.ModelMessage{Role: chat.RoleSystem, Content: "Be brief."},
		chat.ModelMessage{Role: chat.RoleUser, Name: "user", Content: "Greet us."},
		chat.ModelMessage{Role: chat.RoleUser, Name: "writer", Content: "I greet too."},
		chat.ModelMessage{Role: chat.RoleUser, Name: "critic", Content: ""},
	)))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "Hello!" || resp.Thought != "They want a greeting." || resp.Usage != (chat.Usage{PromptTokens: 21, CompletionTokens: 4}) ||
		len(resp.Thinking) != 1 || resp.Thinking[0].Thinking != resp.Thought || resp.Thinking[0].Signature == "" {
		t.Errorf("response = %+v", resp)
	}
	r := srv.Requests()[0]
	m := r.Messages
	if r.Status != 200 || m.SystemText() != "Be brief." || *m.MaxTokens != defaultAnthropicMaxTokens || len(m.Messages) != 1 ||
		string(m.Thinking) != `{"budget_tokens":1024,"type":"enabled"}` ||
		len(m.Messages[0].Blocks) != 2 || m.Temperature != nil || r.Header.Get("Anthropic-Version") == "" {
		t.Errorf("request %d %s: %s", r.Status, r.Error, r.Body)
	}
}

// TestAnthropicStopGoesAsStopSequences: a model's stop is the Messages
// API's stop_sequences.
func TestAnthropicStopGoesAsStopSequences(t *testing.T) {
	srv, c, _ := anthropicFixture(t)
	srv.Reply(anthropictest.Reply{Text: "Hello"})
	req := anthropicReq(chat.ModelMessage{Role: chat.RoleUser, Name: "user", Content: "Greet us."})
	req.Config.Stop = []string{"DONE", "END"}
	if _, err := c.Complete(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if r := srv.Requests()[0]; r.Status != 200 || strings.Join(r.Messages.StopSequences, ",") != "DONE,END" {
		t.Errorf("request %d %s: %s", r.Status, r.Error, r.Body)
	}
}

// TestAnthropicToolUseRoundTrip: tool definitions, a tool_use turn answered
// by tool_result blocks, a reflection without tools (the history's tools are
// still defined, tool_choice none), parallel_tool_calls false as
// disable_parallel_tool_use, and ids the API would refuse made acceptable;
// the fake refuses any request the API refuses.
func TestAnthropicToolUseRoundTrip(t *testing.T) {
	t.Parallel()
	srv, c, _ := anthropicFixture(t)
	srv.Reply(anthropictest.Reply{Text: "Let me look.", ToolUses: []anthropictest.ToolUse{{ID: "toolu_1", Name: "lookup", Input: json.RawMessage(`{"q":"go"}`)}}},
		anthropictest.Reply{Text: "Found it."})
	off := false
	req := anthropicReq(chat.ModelMessage{Role: chat.RoleSystem, Content: "Use tools."}, chat.ModelMessage{Role: chat.RoleUser, Name: "user", Content: "Find go."})
	req.Config.ParallelToolCalls = &off
	req.Tools = []chat.ToolDef{{Name: "lookup", Description: "Looks up.", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false}`)}}
	resp, err := c.Complete(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "Let me look." || len(resp.ToolCalls) != 1 || resp.ToolCalls[0].ID != "toolu_1" ||
		resp.ToolCalls[0].Function.Name != "lookup" || resp.ToolCalls[0].Function.Arguments != `{"q":"go"}` {
		t.Fatalf("response = %+v", resp)
	}
	// The reflection: the tool turn in the history, with an id from another
	// API, and no tools offered.
	call := resp.ToolCalls[0]
	call.ID = "call:abc.1"
	refl := anthropicReq(req.Messages[0], req.Messages[1],
		chat.ModelMessage{Role: chat.RoleAssistant, Name: "reviewer", Content: resp.Content, ToolCalls: []chat.ToolCall{call}},
		chat.ModelMessage{Role: chat.RoleTool, ToolCallID: call.ID, Content: "go is a language"},
		chat.ModelMessage{Role: chat.RoleUser, Name: "other", Content: "And?"})
	resp, err = c.Complete(t.Context(), refl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "Found it." {
		t.Errorf("reflection = %+v", resp)
	}
	reqs := srv.Requests()
	first, second := reqs[0].Messages, reqs[1].Messages
	if first.ToolChoice == nil || first.ToolChoice.Type != "auto" || first.ToolChoice.DisableParallelToolUse == nil || !*first.ToolChoice.DisableParallelToolUse ||
		len(first.Tools) != 1 || !strings.Contains(string(first.Tools[0].InputSchema), `"additionalProperties":false`) {
		t.Errorf("first request: %s", reqs[0].Body)
	}
	if second.ToolChoice == nil || second.ToolChoice.Type != "none" || len(second.Tools) != 1 || second.Tools[0].Name != "lookup" ||
		len(second.Messages) != 3 || second.Messages[1].Blocks[1].ID != "call_abc_1" || second.Messages[2].Blocks[0].ToolUseID != "call_abc_1" ||
		second.Messages[2].Blocks[1].Text != "And?" {
		t.Errorf("reflection request: %s", reqs[1].Body)
	}
}

// TestAnthropicStreaming: the event stream is put together into the same
// response, signed thinking and redacted thinking blocks included; only the
// reply's text is streamed as deltas.
func TestAnthropicStreaming(t *testing.T) {
	t.Parallel()
	srv, c, _ := anthropicFixture(t)
	srv.Reply(anthropictest.Reply{Thinking: "Consider the weather in Paris.", Redacted: true, Text: "Checking the weather now.",
		ToolUses: []anthropictest.ToolUse{{Name: "weather", Input: json.RawMessage(`{"city":"Paris","units":"metric"}`)}}})
	req := thinkingOn(anthropicReq(chat.ModelMessage{Role: chat.RoleUser, Name: "user", Content: "Weather in Paris?"}))
	req.Tools = []chat.ToolDef{{Name: "weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}
	var deltas strings.Builder
	req.OnDelta = func(d string) { deltas.WriteString(d) }
	resp, err := c.Complete(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "Checking the weather now." || resp.Thought != "Consider the weather in Paris." || len(resp.ToolCalls) != 1 ||
		resp.ToolCalls[0].Function.Arguments != `{"city":"Paris","units":"metric"}` || resp.Usage.CompletionTokens == 0 ||
		len(resp.Thinking) != 2 || resp.Thinking[0].Thinking != resp.Thought || resp.Thinking[0].Signature == "" ||
		resp.Thinking[1].Type != "redacted_thinking" || resp.Thinking[1].Data == "" {
		t.Errorf("response = %+v", resp)
	}
	if deltas.String() != resp.Content {
		t.Errorf("deltas = %q, want the text only", deltas.String())
	}
	if r := srv.Requests()[0]; !r.Messages.Stream {
		t.Errorf("request was not streamed: %s", r.Body)
	}
}

// TestAnthropicThinkingToolLoop: with thinking enabled, the assistant
// message of the tool loop a request ends in is sent back starting with its
// thinking and redacted_thinking blocks exactly as they came (the API
// refuses the request otherwise); those of an earlier turn, and any on a
// request without thinking enabled, are not sent.
func TestAnthropicThinkingToolLoop(t *testing.T) {
	t.Parallel()
	srv, c, _ := anthropicFixture(t)
	tools := []chat.ToolDef{{Name: "lookup", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}}
	ask := func(msgs ...chat.ModelMessage) *chat.ModelRequest {
		r := thinkingOn(anthropicReq(msgs...))
		r.Tools = tools
		return r
	}
	user := chat.ModelMessage{Role: chat.RoleUser, Name: "user", Content: "Find go."}

	// An earlier turn of the agent, with thinking blocks of its own.
	srv.Reply(anthropictest.Reply{Thinking: "An earlier thought.", ToolUses: []anthropictest.ToolUse{{ID: "toolu_old", Name: "lookup"}}})
	old, err := c.Complete(t.Context(), ask(user))
	if err != nil {
		t.Fatal(err)
	}
	earlier := []chat.ModelMessage{user,
		{Role: chat.RoleAssistant, ToolCalls: old.ToolCalls, More: chat.MoreThinking(old.Thinking)},
		{Role: chat.RoleTool, ToolCallID: "toolu_old", Content: "old result"},
		{Role: chat.RoleAssistant, Content: "That was it."},
		{Role: chat.RoleUser, Name: "user", Content: "Now find rust."}}

	srv.Reply(anthropictest.Reply{Thinking: "Look it up.", Redacted: true, Text: "Looking.", ToolUses: []anthropictest.ToolUse{{ID: "toolu_1", Name: "lookup", Input: json.RawMessage(`{"q":"rust"}`)}}},
		anthropictest.Reply{Text: "Found it."})
	first, err := c.Complete(t.Context(), ask(earlier...))
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Thinking) != 2 || first.Thinking[0].Type != "thinking" || first.Thinking[0].Thinking != "Look it up." || first.Thinking[0].Signature == "" ||
		first.Thinking[1].Type != "redacted_thinking" || first.Thinking[1].Data == "" || first.Thought != "Look it up." {
		t.Fatalf("first reply = %+v", first)
	}
	loop := append(slices.Clone(earlier),
		chat.ModelMessage{Role: chat.RoleAssistant, Content: first.Content, ToolCalls: first.ToolCalls, More: chat.MoreThinking(first.Thinking)},
		chat.ModelMessage{Role: chat.RoleTool, ToolCallID: "toolu_1", Content: "rust is a language"})
	resp, err := c.Complete(t.Context(), ask(loop...))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "Found it." {
		t.Errorf("second reply = %+v", resp)
	}
	reqs := srv.Requests()
	sent := reqs[2].Messages.Messages
	a := sent[len(sent)-2].Blocks
	if len(a) != 4 || a[0].Type != "thinking" || a[0].Thinking != "Look it up." || a[0].Signature != first.Thinking[0].Signature ||
		a[1].Type != "redacted_thinking" || a[1].Data != first.Thinking[1].Data || a[2].Type != "text" || a[3].Type != "tool_use" {
		t.Errorf("the loop's assistant message: %s", reqs[2].Body)
	}
	if strings.Contains(string(reqs[2].Body), "An earlier thought.") {
		t.Errorf("an earlier turn's thinking was sent: %s", reqs[2].Body)
	}

	// With thinking disabled, no blocks go out; the loop still works.
	srv.Reply(anthropictest.Reply{Text: "Found it again."})
	plain := anthropicReq(loop...)
	plain.Tools = tools
	plain.Config.Thinking = &spec.Thinking{Type: spec.ThinkingDisabled}
	if _, err := c.Complete(t.Context(), plain); err != nil {
		t.Fatal(err)
	}
	if r := srv.Requests()[3]; string(r.Messages.Thinking) != `{"type":"disabled"}` || strings.Contains(string(r.Body), `"type":"thinking"`) ||
		strings.Contains(string(r.Body), "redacted_thinking") {
		t.Errorf("blocks sent with thinking disabled: %s", r.Body)
	}

	// And what the API says when they are dropped.
	loop[len(loop)-2].More = nil
	if _, err := c.Complete(t.Context(), ask(loop...)); err == nil || !strings.Contains(err.Error(), "Expected `thinking` or `redacted_thinking`") {
		t.Errorf("the loop without its blocks: err = %v", err)
	}
}

// TestAnthropicRetriesRateLimits: a 429 with Retry-After and a 529
// (overloaded) are retried; a 400 is not.
func TestAnthropicRetriesRateLimits(t *testing.T) {
	t.Parallel()
	srv, c, reg := anthropicFixture(t)
	srv.Fail(anthropictest.Failure{Status: 429, RetryAfter: "0"}, anthropictest.Failure{Status: 529})
	srv.Reply(anthropictest.Reply{Text: "finally"})
	resp, err := c.Complete(t.Context(), anthropicReq(chat.ModelMessage{Role: chat.RoleUser, Content: "hi"}))
	if err != nil || resp.Content != "finally" {
		t.Fatalf("resp %+v, err %v", resp, err)
	}
	if n := counter(t, reg, "anthropic", "rate_limit"); n != 1 {
		t.Errorf("rate_limit retries = %v", n)
	}
	if n := counter(t, reg, "anthropic", "server_error"); n != 1 {
		t.Errorf("server_error retries = %v", n)
	}
	srv.Fail(anthropictest.Failure{Status: 400, Message: "bad"})
	_, err = c.Complete(t.Context(), anthropicReq(chat.ModelMessage{Role: chat.RoleUser, Content: "hi"}))
	if err == nil || !strings.Contains(err.Error(), "status 400: bad (type invalid_request_error)") || strings.Contains(err.Error(), anthropicKey) {
		t.Errorf("err = %v", err)
	}
	if got := len(srv.Requests()); got != 4 {
		t.Errorf("%d requests, want 4 (the 400 not retried)", got)
	}
}

// TestAnthropicStreamErrorEvent: an error event in the middle of a stream
// fails the attempt with the API's error, as the SDK's stream makes it;
// pings and the text before it are read as usual.
func TestAnthropicStreamErrorEvent(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("request-id", "req_42")
		_, _ = io.WriteString(w, "event: message_start\n"+
			`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":1}}}`+"\n\n"+
			"event: ping\ndata: {\"type\": \"ping\"}\n\n"+
			"event: content_block_start\n"+`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`+"\n\n"+
			"event: content_block_delta\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`+"\n\n"+
			"event: error\n"+`data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`+"\n\n")
	}))
	t.Cleanup(srv.Close)
	c, err := New(Config{Endpoints: []Endpoint{{Name: "claude", Kind: KindAnthropic, BaseURL: srv.URL, APIKey: anthropicKey}},
		OpenAI: OpenAIConfig{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	req := anthropicReq(chat.ModelMessage{Role: chat.RoleUser, Name: "user", Content: "Hi"})
	var deltas strings.Builder
	req.OnDelta = func(d string) { deltas.WriteString(d) }
	_, err = c.Complete(t.Context(), req)
	e, ok := errors.AsType[*anthropic.Error](err)
	if !ok || e.Message != "Overloaded" || e.Type() != "overloaded_error" || e.RequestID != "req_42" {
		t.Fatalf("err = %v, want the stream's overloaded_error", err)
	}
	if !strings.Contains(err.Error(), "Overloaded (type overloaded_error)") {
		t.Errorf("err = %v, want the API's message", err)
	}
	if deltas.String() != "Hel" {
		t.Errorf("deltas = %q, want the text before the error", deltas.String())
	}
}
