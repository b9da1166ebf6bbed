package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
)

// encodeMessages encodes creq with its own messages.
func encodeMessages(creq *openai.ChatCompletionRequest) ([]byte, error) {
	return encodeChatRequest(creq, len(creq.Messages), 0, func(i int) (openai.ChatCompletionMessage, error) { return creq.Messages[i], nil })
}

// goOpenAIBody is the body go-openai sends for req's streamed call: the
// request buildRequest makes of it, encoded by encoding/json.
func goOpenAIBody(t testing.TB, req *chat.ModelRequest) []byte {
	t.Helper()
	creq, err := buildRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	streamed(&creq)
	want, err := json.Marshal(creq)
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// TestChatRequestEncodesAsGoOpenAIDoes: the body of a streamed call is,
// byte for byte, the one go-openai encodes for the same request, and it is
// made the fast way (go-openai still writes the model, then the messages,
// first).
func TestChatRequestEncodesAsGoOpenAIDoes(t *testing.T) {
	t.Parallel()
	rgb, rgba := testImages(t)
	parts := []openai.ChatMessagePart{{Type: openai.ChatMessagePartTypeText, Text: "what is <this>?"},
		{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: "data:image/png;base64,AAAA", Detail: openai.ImageURLDetailLow}}}
	call := openai.ToolCall{ID: "call_1", Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: "search", Arguments: `{"q":"a&b"}`}}

	// A call's body, encoded from its messages.
	req := &chat.ModelRequest{
		Config: spec.Model{Model: "gpt-4o", Temperature: ptr(0.2), MaxTokens: ptr(100), Seed: ptr(3),
			ParallelToolCalls: ptr(false), ResponseFormat: json.RawMessage(`{"type":"json_object"}`)},
		Messages: []chat.ModelMessage{{Role: "system", Content: "Be brief."}, {Role: "user", Name: "ada lovelace", Content: "héllo \u2028 <b>"},
			{Role: "user", Name: "ada", Content: "<image> and text", More: chat.MoreParts([]chat.ContentPart{{Text: "look"}, {Image: &chat.Image{Data: rgb}}, {Text: ""}, {Image: &chat.Image{Data: rgba}}})},
			{Role: "assistant", Name: "coder", ToolCalls: []chat.ToolCall{{ID: "c1", Function: chat.FunctionCall{Name: "search me", Arguments: ``}}}},
			{Role: "tool", ToolCallID: "c1", Content: "found"}, {Role: "tool", ToolCallID: "c2"}, {Role: "assistant", Content: ""}},
		Tools: []chat.ToolDef{{Name: "search", Description: "Searches.", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
			{Name: "now"}},
	}
	got, err := encodeStreamBody(req)
	if err != nil {
		t.Fatal(err)
	}
	if want := goOpenAIBody(t, req); !bytes.Equal(got, want) {
		t.Errorf("a call's body:\n got %s\nwant %s", got, want)
	}

	// Any message go-openai has, and requests without messages.
	cases := map[string]openai.ChatCompletionRequest{
		"every message field": {Model: `m"odel`, Messages: []openai.ChatCompletionMessage{
			{Role: "user", MultiContent: parts, Name: "u"},
			{Role: "assistant", Refusal: "no", ReasoningContent: "because", ToolCalls: []openai.ToolCall{call}},
			{Role: "assistant", FunctionCall: &openai.FunctionCall{Name: "f", Arguments: "{}"}},
			{Role: "tool", ToolCallID: "call_1", Content: ""},
		}, Stop: []string{"END"}},
		"empty messages": {Model: "m", Messages: []openai.ChatCompletionMessage{}},
	}
	for name, creq := range cases {
		want, err := json.Marshal(creq)
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeMessages(&creq)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
		rest := creq
		rest.Messages = nil
		head, _ := json.Marshal(rest)
		model, _ := json.Marshal(creq.Model)
		if !bytes.HasPrefix(head, []byte(`{"model":`+string(model)+`,"messages":null`)) {
			t.Errorf("%s: go-openai no longer writes the model and the messages first: %s", name, head)
		}
	}
	bad := openai.ChatCompletionRequest{Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "a", MultiContent: parts}}}
	if _, err := encodeMessages(&bad); !errors.Is(err, openai.ErrContentFieldsMisused) {
		t.Errorf("content and parts: err = %v", err)
	}
	req.Messages[2].Parts()[1].Image.Data = []byte("not an image")
	if _, err := encodeStreamBody(req); err == nil || !strings.Contains(err.Error(), "message 2: read image") {
		t.Errorf("an image that does not decode: err = %v", err)
	}
}

// streamOutcome is what a reader made of a stream: the chunks' JSON, then
// the error it ended with.
type streamOutcome struct {
	chunks []string
	err    string
	status int
}

func (o streamOutcome) String() string {
	var b strings.Builder
	for _, c := range o.chunks {
		fmt.Fprintf(&b, "%.80q ", c)
	}
	fmt.Fprintf(&b, "then %s (status %d)", o.err, o.status)
	return b.String()
}

// TestStreamReadsAsGoOpenAIDoes reads the same responses through go-openai's
// stream and through openChatStream: the same chunks, the same end and the
// same errors (type, status, message), for what servers send besides plain
// chunks.
func TestStreamReadsAsGoOpenAIDoes(t *testing.T) {
	t.Parallel()
	chunk := func(s string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":` + s + `},"finish_reason":null}]}` + "\n\n"
	}
	long := strings.Repeat("x", 100_000)
	type resp struct {
		status int
		body   string
	}
	cases := map[string]resp{
		"plain":               {200, chunk(`"a"`) + chunk(`"b"`) + "data: [DONE]\n\n"},
		"comments and events": {200, ": ping\n\nevent: message\n" + chunk(`"a"`) + "retry: 10\n\n" + chunk(`"b"`) + "data: [DONE]\n\n"},
		"no space, CRLF":      {200, strings.ReplaceAll(strings.ReplaceAll(chunk(`"a"`), "data: ", "data:"), "\n", "\r\n") + "data:[DONE]\r\n\r\n"},
		"no DONE":             {200, chunk(`"a"`) + chunk(`"b"`)},
		"cut mid-line":        {200, chunk(`"a"`) + `data: {"id":"c","obj`},
		"a long line":         {200, chunk(`"`+long+`"`) + "data: [DONE]\n\n"},
		"error chunk":         {200, chunk(`"a"`) + `data: {"error":{"message":"overloaded","type":"server_error","code":"busy"}}` + "\n\n"},
		"error body on a 200": {200, `{"error":{"message":"quota","type":"insufficient_quota"}}`},
		"too many non-data":   {200, strings.Repeat(": ping\n", 301) + chunk(`"a"`)},
		"429 API error":       {429, `{"error":{"message":"slow down","type":"rate_limit_error","param":null,"code":"rate_limited"}}`},
		"500 text":            {500, "upstream broke"},
		"400 error object":    {400, `{"error":{"message":"bad","type":"invalid_request_error","param":"messages","code":null}}`},
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				_, _ = io.Copy(io.Discard, req.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(r.status)
				_, _ = io.WriteString(w, r.body)
			}))
			defer srv.Close()
			creq := openai.ChatCompletionRequest{Model: "m", Stream: true, Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}}
			call := &chat.ModelRequest{Config: spec.Model{Model: "m"}, Messages: []chat.ModelMessage{{Role: "user", Content: "hi"}}}

			cfg := openai.DefaultConfig("k")
			cfg.BaseURL = srv.URL + "/v1"
			stream, err := openai.NewClientWithConfig(cfg).CreateChatCompletionStream(t.Context(), creq)
			var theirs streamOutcome
			if err == nil {
				theirs = readOutcome(goOpenAIChunks{stream})
				stream.Close()
			} else {
				theirs.err, theirs.status = describe(err)
			}

			w := newOpenAIWire(&Endpoint{Kind: KindOpenAI, APIKey: "k"}, srv.URL+"/v1/", http.DefaultClient)
			s, err := w.openChatStream(t.Context(), call)
			var ours streamOutcome
			if err == nil {
				ours = readOutcome(s)
				_ = s.close()
			} else {
				ours.err, ours.status = describe(err)
			}

			if fmt.Sprint(ours) != fmt.Sprint(theirs) {
				t.Errorf("ours:      %s\ngo-openai: %s", ours, theirs)
			}
		})
	}
}

// readOutcome reads src to its end.
func readOutcome(src chunkSource) streamOutcome {
	var o streamOutcome
	for {
		raw, err := src.next()
		if err != nil {
			o.err, o.status = describe(err)
			return o
		}
		o.chunks = append(o.chunks, string(raw))
	}
}

// describe is an error as the retry policy and the error messages see it.
func describe(err error) (string, int) {
	if err == nil {
		return "<nil>", 0
	}
	return fmt.Sprintf("%T %s", err, errorMessage(err)), errorStatus(err)
}

// FuzzEncodeMessage holds the messages' own encoding, its string escaping
// above all, to go-openai's: any strings in any field, the same bytes.
func FuzzEncodeMessage(f *testing.F) {
	f.Add("user", "héllo \u2028 <b>&</b>", "ada", "c1")
	f.Add("assistant", "a\x00b\x1f\"\\\b\f\n\r\t\x7f", "", "")
	f.Add("tool", "\xff\xfe bad \xe2\x80 utf-8 \xed\xa0\x80", "x", "\u2029")
	f.Add("", "", "", "")
	f.Fuzz(func(t *testing.T, role, content, name, other string) {
		creq := openai.ChatCompletionRequest{Model: other, Stream: true, Messages: []openai.ChatCompletionMessage{
			{Role: role, Content: content, Name: name, ToolCallID: other},
			{Role: "assistant", Refusal: other, ReasoningContent: content,
				ToolCalls: []openai.ToolCall{{ID: name, Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: role, Arguments: content}}}},
			{Role: role, FunctionCall: &openai.FunctionCall{Name: name, Arguments: other}},
		}}
		want, err := json.Marshal(creq)
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeMessages(&creq)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("\n got %q\nwant %q", got, want)
		}

		// The same strings in a call's messages.
		req := &chat.ModelRequest{Config: spec.Model{Model: other, Stop: []string{content}}, Messages: []chat.ModelMessage{
			{Role: "user", Content: content, Name: name},
			{Role: "assistant", Content: content, Name: role, ToolCalls: []chat.ToolCall{{ID: name, Function: chat.FunctionCall{Name: role, Arguments: other}}}},
			{Role: "tool", ToolCallID: other + "x", Content: name},
			{Role: "system", Content: other},
		}}
		if other == "" {
			req.Config.Model = "m"
		}
		got, err = encodeStreamBody(req)
		if err != nil {
			t.Fatal(err)
		}
		if want := goOpenAIBody(t, req); !bytes.Equal(got, want) {
			t.Errorf("a call's body:\n got %q\nwant %q", got, want)
		}
	})
}
