package llm

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// Every attempt of a call sends the same request, streamed or not: the
// first attempt's request is built when the call is prepared and dropped
// once sent, and a retry builds it again.
func TestRetriesSendTheFirstAttemptsRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for _, stream := range []bool{true, false} {
		f.srv.Fail(openaitest.Failure{Status: http.StatusInternalServerError}, openaitest.Failure{Status: http.StatusTooManyRequests, RetryAfter: "0"})
		f.srv.Reply(openaitest.Text("third time"))
		req := openaiRequest()
		req.Config.Temperature, req.Config.MaxTokens = ptr(0.0), ptr(64)
		req.Tools = []chat.ToolDef{{Name: "search", Description: "Searches."}}
		if stream {
			req.OnDelta = func(string) {}
		}
		before := len(f.srv.Requests())
		resp, err := f.c.Complete(t.Context(), req)
		if err != nil || resp.Content != "third time" {
			t.Fatalf("stream %t: reply %+v, err %v", stream, resp, err)
		}
		rs := f.srv.Requests()[before:]
		if len(rs) != 3 {
			t.Fatalf("stream %t: %d attempts, want 3", stream, len(rs))
		}
		for i, r := range rs[1:] {
			if !bytes.Equal(r.Body, rs[0].Body) {
				t.Errorf("stream %t: attempt %d sent\n%s\nthe first sent\n%s", stream, i+2, r.Body, rs[0].Body)
			}
		}
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

// Calls made at once reuse the connections of earlier ones: an endpoint
// keeps as many idle connections as calls were in flight, not net/http's
// two, so a round of 20 concurrent streaming calls after another opens no
// new connection.
func TestConcurrentCallsReuseTheirConnections(t *testing.T) {
	t.Parallel()
	fake := openaitest.New()
	defer fake.Close()
	c, opened := countingServer(t, fake.Handler())
	const calls = 20
	answerInRounds(fake, calls)
	round := func() {
		var wg sync.WaitGroup
		for range calls {
			wg.Go(func() {
				req := openaiRequest()
				req.OnDelta = func(string) {}
				if _, err := c.Complete(t.Context(), req); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	round()
	first := opened.Load()
	round()
	if again := opened.Load() - first; again != 0 || first != calls {
		t.Fatalf("%d connections for the first %d calls at once, %d more for the next %d", first, calls, again, calls)
	}
}

// A streamed reply's connection goes back to the pool even when the
// chunked encoding's terminator comes a moment after the stream's last
// event: five calls one after another use one connection.
func TestStreamKeepsItsConnectionWhenItsEndComesLate(t *testing.T) {
	t.Parallel()
	c, opened := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`+"\n\n")
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
		w.(http.Flusher).Flush()
		time.Sleep(20 * time.Millisecond) // then the handler returns: the terminator
	}))
	for range 5 {
		req := openaiRequest()
		var got strings.Builder
		req.OnDelta = func(s string) { got.WriteString(s) }
		resp, err := c.Complete(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Content != "hi" || got.String() != "hi" {
			t.Fatalf("reply %q, deltas %q: want hi", resp.Content, got.String())
		}
	}
	if n := opened.Load(); n != 1 {
		t.Fatalf("5 streamed calls one after another opened %d connections, want 1", n)
	}
}

// answerInRounds makes fake answer "ab" to each round of n calls once all of
// them have come, so that they are in flight at once however slowly the
// machine starts them.
func answerInRounds(fake *openaitest.Server, n int) {
	var (
		mu      sync.Mutex
		arrived int
		all     = make(chan struct{})
	)
	fake.Respond(func(openaitest.Request) openaitest.Reply {
		mu.Lock()
		defer mu.Unlock()
		hold := all
		if arrived++; arrived == n {
			close(all)
			arrived, all = 0, make(chan struct{})
		}
		return openaitest.Reply{Pieces: []string{"a", "b"}, Hold: hold}
	})
}

// countingServer serves h and returns a client of it, with the count of
// the connections the server accepted.
func countingServer(t *testing.T, h http.Handler) (*Client, *atomic.Int64) {
	t.Helper()
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := New(Config{OpenAI: OpenAIConfig{APIKey: "k", BaseURL: srv.URL + "/v1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, &opened
}

// An endpoint with h2c speaks HTTP/2 without TLS to its http:// server:
// 20 streamed calls at once are streams of the connection of the call
// before them, not 20 connections.
func TestH2CEndpointMultiplexesItsCalls(t *testing.T) {
	t.Parallel()
	fake := openaitest.New()
	defer fake.Close()
	const calls = 20
	answerInRounds(fake, calls)
	var http1 atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			http1.Add(1)
		}
		fake.Handler().ServeHTTP(w, r)
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	var opened atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c, err := New(Config{Endpoints: []Endpoint{{Name: "local", Kind: KindOpenAI, BaseURL: srv.URL + "/v1", H2C: true}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	call := func() {
		req := openaiRequest()
		var got strings.Builder
		req.OnDelta = func(d string) { got.WriteString(d) }
		resp, err := c.Complete(t.Context(), req)
		if err != nil || resp.Content != "ab" || got.String() != "ab" {
			t.Errorf("reply %+v, deltas %q, err %v", resp, got.String(), err)
		}
	}
	// One call first: calls that start together before any connection is
	// up each dial one (net/http does not wait for the first to learn it
	// speaks HTTP/2).
	fake.Reply(openaitest.Reply{Pieces: []string{"a", "b"}})
	call()
	var wg sync.WaitGroup
	for range calls {
		wg.Go(call)
	}
	wg.Wait()
	if n, h1 := opened.Load(), http1.Load(); n != 1 || h1 != 0 {
		t.Fatalf("a call, then %d at once: %d connections, %d requests in HTTP/1; want 1 connection, all HTTP/2", calls, n, h1)
	}
}

// Over https an endpoint offers HTTP/2 and takes it when the server does, as
// hosted APIs do, even with a TLS configuration of its own (which makes
// net/http fall back to HTTP/1.1 unless told to attempt HTTP/2).
func TestHTTPSEndpointNegotiatesHTTP2(t *testing.T) {
	t.Parallel()
	fake := openaitest.New()
	defer fake.Close()
	fake.Reply(openaitest.Text("over h2"))
	proto := make(chan string, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto <- r.Proto
		fake.Handler().ServeHTTP(w, r)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	c, err := New(Config{Endpoints: []Endpoint{{Name: "hosted", Kind: KindOpenAI, BaseURL: srv.URL + "/v1"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Trust the test server's certificate, as a private CA would be.
	tr := c.router.eps[0].http.Transport.(*http.Transport)
	tr.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	req := openaiRequest()
	req.OnDelta = func(string) {}
	resp, err := c.Complete(t.Context(), req)
	if err != nil || resp.Content != "over h2" {
		t.Fatalf("reply %+v, err %v", resp, err)
	}
	if p := <-proto; p != "HTTP/2.0" {
		t.Fatalf("the call went as %s, want HTTP/2.0", p)
	}
}
