package llm

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/llm/openaitest"
)

// TestOpenAIStreamsDeltasAndAssemblesTheReply: with OnDelta the call streams;
// the fragments add up to the content, and the response is what a plain
// call returns, usage and tool calls included.
func TestOpenAIStreamsDeltasAndAssemblesTheReply(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.srv.Reply(
		openaitest.Reply{Content: "Hello there, streaming world.", Usage: &openaitest.Usage{PromptTokens: 9, CompletionTokens: 6}},
		openaitest.Reply{Content: "Calling.", ToolCalls: []openaitest.ToolCall{openaitest.Call("search", `{"q":"go"}`), openaitest.Call("other", `{}`)}},
	)
	var mu sync.Mutex
	var deltas []string
	req := openaiRequest()
	req.OnDelta = func(d string) { mu.Lock(); deltas = append(deltas, d); mu.Unlock() }
	resp, err := f.c.Complete(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "Hello there, streaming world." || resp.Usage != (chat.Usage{PromptTokens: 9, CompletionTokens: 6}) {
		t.Fatalf("response = %+v", resp)
	}
	if len(deltas) < 2 || strings.Join(deltas, "") != resp.Content {
		t.Fatalf("deltas = %q", deltas)
	}
	if r := f.srv.Requests()[0]; !r.Chat.Stream || r.Chat.StreamOptions == nil || !r.Chat.StreamOptions.IncludeUsage {
		t.Fatalf("the request did not ask for a stream with usage: %+v", r.Chat)
	}

	req.Tools = []chat.ToolDef{{Name: "search"}, {Name: "other"}}
	resp, err = f.c.Complete(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 2 || resp.ToolCalls[0].Function.Name != "search" || resp.ToolCalls[0].Function.Arguments != `{"q":"go"}` ||
		resp.ToolCalls[0].ID == "" || resp.ToolCalls[1].Function.Name != "other" || resp.Content != "Calling." {
		t.Fatalf("streamed tool calls = %+v", resp)
	}
}

// A failure before anything was streamed is retried as usual.
func TestOpenAIStreamRetriesBeforeTheFirstDelta(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.srv.FailNext(http.StatusTooManyRequests, "0")
	f.srv.Reply(openaitest.Text("after a retry"))
	req := openaiRequest()
	req.OnDelta = func(string) {}
	resp, err := f.c.Complete(t.Context(), req)
	if err != nil || resp.Content != "after a retry" || len(f.srv.Requests()) != 2 {
		t.Fatalf("resp %+v, err %v, %d requests", resp, err, len(f.srv.Requests()))
	}
}

// A connection reset in the middle of a streamed reply is retried like any
// other transient failure; the caller is told to void the deltas it got,
// and the reply streams again from its start.
func TestOpenAIStreamRetriesAfterAMidStreamReset(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.srv.Reply(openaitest.Reply{Content: "a reply long enough to be cut in pieces", CutAfter: 2}, openaitest.Text("the whole reply"))
	req := openaiRequest()
	var got []string
	req.OnDelta = func(d string) { got = append(got, d) }
	req.OnReset = func() { got = append(got, "<reset>") }
	resp, err := f.c.Complete(t.Context(), req)
	if err != nil || resp.Content != "the whole reply" || len(f.srv.Requests()) != 2 {
		t.Fatalf("resp %+v, err %v, %d requests", resp, err, len(f.srv.Requests()))
	}
	i := slices.Index(got, "<reset>")
	if i != 2 || strings.Join(got[i+1:], "") != "the whole reply" {
		t.Fatalf("deltas %q: want two pieces, a reset, then the whole reply", got)
	}
}
