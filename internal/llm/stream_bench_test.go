package llm

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/chat"
)

// cannedStream answers every request with the same streamed reply, read
// from memory: what the model client spends on a streamed reply without a
// network or a server beside it.
type cannedStream []byte

func (c cannedStream) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"text/event-stream"}},
		Body:    io.NopCloser(bytes.NewReader(c)),
		Request: r}, nil
}

// streamedReply is a reply of n tokens in chat.completion.chunk events, as
// OpenAI sends it: a chunk a token, the finish reason, the usage, [DONE].
func streamedReply(n int) []byte {
	var b bytes.Buffer
	const chunk = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]}` + "\n\n"
	for i := range n {
		fmt.Fprintf(&b, chunk, fmt.Sprintf(" word%d", i))
	}
	b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	fmt.Fprintf(&b, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n", n, n+100)
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// BenchmarkOpenAIStreamedReply is one streamed call of ten tokens on a
// history of twenty messages: building and encoding the request, reading
// the stream and putting the reply together. The HTTP exchange itself is
// left out (the response comes from memory).
func BenchmarkOpenAIStreamedReply(b *testing.B) {
	c, err := New(Config{OpenAI: OpenAIConfig{APIKey: "k", BaseURL: "http://model.invalid/v1",
		HTTPClient: &http.Client{Transport: cannedStream(streamedReply(10))}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	msgs := []chat.ModelMessage{{Role: "system", Content: "You are a helpful assistant. Answer briefly."}}
	for i := range 20 {
		msgs = append(msgs, chat.ModelMessage{Role: "user", Name: fmt.Sprintf("agent_%d", i%3), Content: strings.Repeat("a sentence of a reply ", 10)})
	}
	req := openaiRequest(msgs...)
	var deltas int
	req.OnDelta = func(string) { deltas++ }
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Complete(b.Context(), req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.Usage.CompletionTokens != 10 {
			b.Fatalf("usage = %+v", resp.Usage)
		}
	}
	b.ReportMetric(float64(deltas)/float64(b.N), "deltas/op")
}
