// Package anthropictest is a fake of Anthropic's Messages API for tests: of
// internal/llm's anthropic endpoints, and of anything that drives agentd
// against one (end-to-end tests point the real binary at URL()).
//
// It answers POST /v1/messages from a script of replies, as a JSON Message or,
// with "stream": true, as the API's server-sent events (message_start,
// content_block_start/delta/stop for thinking, text and tool_use blocks,
// message_delta, message_stop). It records every request and checks each one
// the way the API does, answering 400 with the API's error body when the
// request is one the API rejects: no anthropic-version, a missing max_tokens,
// a system message inside messages, roles that do not alternate, empty text
// blocks, a tool_result that answers no tool_use of the message before it or
// a tool_use left unanswered, tool blocks without tool definitions,
// sampling parameters on API version 2026-10-21, unknown fields.
//
// Extended thinking is served as the API serves it: a reply thinks (a
// thinking block with a signature this server issued) only when the
// request enables thinking, and then always at the start of an assistant
// turn. With thinking enabled the server refuses a budget below 1024 or not
// below max_tokens, a temperature other than 1, top_k, a top_p below 0.95,
// a tool_choice that forces tool use, and a request in a tool loop whose
// assistant turn does not start with a thinking block; and it refuses any
// thinking or redacted_thinking block that is not exactly one it issued.
// A client that passes against this server sends requests the API accepts.
//
// The wire types are written from the API reference, not borrowed from the
// SDK, so that the fake does not share the client's blind spots.
package anthropictest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Versions are the anthropic-version values the server accepts.
var Versions = []string{"2023-06-01", "2026-10-21"}

const maxBody = 32 << 20

// Server is a fake Messages API on a loopback listener. It is safe for
// concurrent use; replies and failures are consumed in arrival order.
type Server struct {
	srv       *httptest.Server
	apiKey    string
	done      chan struct{}
	closeOnce sync.Once

	mu        sync.Mutex
	replies   []Reply
	failures  []Failure
	responder func(Request) Reply
	requests  []*Request
	// issued are the signatures of the thinking blocks the server sent,
	// with their text, and the data of its redacted_thinking blocks.
	issued    map[string]string
	redacted  map[string]bool
	served    int
	inFlight  int
	maxFlight int
}

// Option configures a Server.
type Option func(*Server)

// WithAPIKey makes the server require the key, in x-api-key or as a bearer
// token (x-api-key wins when both are sent, as the API does).
func WithAPIKey(key string) Option { return func(s *Server) { s.apiKey = key } }

// New starts a Server. Close it when done.
func New(opts ...Option) *Server {
	s := &Server{done: make(chan struct{}), issued: map[string]string{}, redacted: map[string]bool{}}
	for _, o := range opts {
		o(s)
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	return s
}

// URL is the API's base URL (no path), as an endpoint's base_url takes it.
func (s *Server) URL() string { return s.srv.URL }

// Close ends delayed responses and shuts the listener down; safe to call
// twice.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.srv.Close()
	})
}

// Reply is one scripted answer. Its blocks are sent in the order thinking,
// redacted thinking, text, tool uses.
type Reply struct {
	// Thinking is sent only when the request enables thinking; then a
	// reply that starts an assistant turn thinks even without it (the
	// text is DefaultThinking).
	Thinking string
	// Redacted adds a redacted_thinking block (when thinking is enabled).
	Redacted bool
	Text     string
	ToolUses []ToolUse
	// Usage defaults to an estimate of a token per four characters.
	Usage *Usage
	// StopReason defaults to "tool_use" with tool uses, else "end_turn".
	StopReason string
	// Delay holds the answer back (until the client leaves or the server
	// closes).
	Delay time.Duration
}

// ToolUse is a scripted tool_use block; ID defaults to "toolu_<n>_<i>".
type ToolUse struct {
	ID    string
	Name  string
	Input json.RawMessage // a JSON object; default {}
}

// DefaultThinking is the thinking of a reply that starts an assistant
// turn while thinking is enabled and whose script says none.
const DefaultThinking = "Let me think about this."

// Usage is a reply's token usage.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Failure is an injected error response, consumed by the next valid request.
type Failure struct {
	Status     int
	RetryAfter string
	Type       string // default from Status (rate_limit_error, overloaded_error, api_error, ...)
	Message    string
}

// Reply appends replies to the script.
func (s *Server) Reply(rs ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, rs...)
}

// Respond sets the function that answers once the script is used up.
func (s *Server) Respond(f func(Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.responder = f
}

// Fail queues failures.
func (s *Server) Fail(fs ...Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, fs...)
}

// Request is one recorded request.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         []byte
	// Messages is the decoded body; nil when it did not decode.
	Messages *MessagesRequest
	Status   int
	Error    string
	Received time.Time
}

// Requests returns copies of the requests so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		out[i] = *r
	}
	return out
}

// MaxInFlight is the most requests the server was answering at once.
func (s *Server) MaxInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxFlight
}

// apiError is an error the server answers with.
type apiError struct {
	status int
	typ    string
	msg    string
}

func invalid(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", msg: fmt.Sprintf(format, args...)}
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	rec := &Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Received: time.Now()}
	s.mu.Lock()
	s.requests = append(s.requests, rec)
	seq := len(s.requests)
	s.inFlight++
	s.maxFlight = max(s.maxFlight, s.inFlight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	w.Header().Set("Request-Id", fmt.Sprintf("req_anthropictest%06d", seq))
	switch {
	case err != nil:
		s.writeError(w, rec, &apiError{status: http.StatusRequestEntityTooLarge, typ: "request_too_large", msg: "Request exceeds the maximum allowed number of bytes."})
		return
	case r.URL.Path != "/v1/messages":
		s.writeError(w, rec, &apiError{status: http.StatusNotFound, typ: "not_found_error", msg: fmt.Sprintf("Not Found: %s %s", r.Method, r.URL.Path)})
		return
	case r.Method != http.MethodPost:
		s.writeError(w, rec, &apiError{status: http.StatusMethodNotAllowed, typ: "invalid_request_error", msg: "Method Not Allowed"})
		return
	}
	if e := s.checkAuth(r); e != nil {
		s.writeError(w, rec, e)
		return
	}
	version := r.Header.Get("Anthropic-Version")
	switch {
	case version == "":
		s.writeError(w, rec, invalid("anthropic-version: header is required"))
		return
	case !contains(Versions, version):
		s.writeError(w, rec, invalid("anthropic-version: %q is not a valid version", version))
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		s.writeError(w, rec, invalid("content-type must be application/json"))
		return
	}
	req, e := parseRequest(body, version)
	s.mu.Lock()
	rec.Messages = req
	s.mu.Unlock()
	if e == nil {
		e = s.checkSigned(req)
	}
	if e != nil {
		s.writeError(w, rec, e)
		return
	}
	s.mu.Lock()
	var (
		fail  *Failure
		reply Reply
		have  bool
	)
	if len(s.failures) > 0 {
		f := s.failures[0]
		fail, s.failures = &f, s.failures[1:]
	} else if len(s.replies) > 0 {
		reply, have, s.replies = s.replies[0], true, s.replies[1:]
	}
	responder := s.responder
	s.mu.Unlock()
	if fail != nil {
		if fail.RetryAfter != "" {
			w.Header().Set("Retry-After", fail.RetryAfter)
		}
		typ := fail.Type
		if typ == "" {
			switch {
			case fail.Status == http.StatusTooManyRequests:
				typ = "rate_limit_error"
			case fail.Status == 529:
				typ = "overloaded_error"
			case fail.Status >= 500:
				typ = "api_error"
			case fail.Status == http.StatusUnauthorized:
				typ = "authentication_error"
			default:
				typ = "invalid_request_error"
			}
		}
		s.writeError(w, rec, &apiError{status: fail.Status, typ: typ, msg: cmp.Or(fail.Message, "Injected failure (anthropictest)")})
		return
	}
	if !have && responder != nil {
		reply, have = responder(*rec), true
	}
	if !have {
		s.writeError(w, rec, invalid("anthropictest: no scripted reply left for this request"))
		return
	}
	if !s.wait(r.Context(), reply.Delay) {
		return
	}
	s.mu.Lock()
	s.served++
	n := s.served
	rec.Status = http.StatusOK
	s.mu.Unlock()
	msg := s.message(req, reply, n)
	if req.Stream {
		s.stream(w, msg)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(msg)
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// checkAuth wants the key in x-api-key or, failing that, as a bearer token.
func (s *Server) checkAuth(r *http.Request) *apiError {
	if s.apiKey == "" {
		return nil
	}
	got := r.Header.Get("X-Api-Key")
	if got == "" {
		got, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	switch {
	case got == "":
		return &apiError{status: http.StatusUnauthorized, typ: "authentication_error", msg: "x-api-key header is required"}
	case got != s.apiKey:
		return &apiError{status: http.StatusUnauthorized, typ: "authentication_error", msg: "invalid x-api-key"}
	}
	return nil
}

func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-s.done:
	}
	return false
}

func (s *Server) writeError(w http.ResponseWriter, rec *Request, e *apiError) {
	s.mu.Lock()
	rec.Status, rec.Error = e.status, e.msg
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": e.typ, "message": e.msg}})
}

// message is the reply as the API's Message object.
func (s *Server) message(req *MessagesRequest, r Reply, n int) *message {
	m := &message{ID: fmt.Sprintf("msg_anthropictest%06d", n), Type: "message", Role: "assistant", Model: req.Model,
		Content: []block{}}
	if req.thinking {
		if r.Thinking == "" && !req.inToolLoop() {
			r.Thinking = DefaultThinking
		}
		if r.Thinking != "" {
			sig := s.issue(&r.Thinking, n)
			m.Content = append(m.Content, block{Type: "thinking", Thinking: &r.Thinking, Signature: &sig})
		}
		if r.Redacted {
			data := s.issue(nil, n)
			m.Content = append(m.Content, block{Type: "redacted_thinking", Data: &data})
		}
	} else {
		r.Thinking = "" // counted in no usage either
	}
	if r.Text != "" {
		m.Content = append(m.Content, block{Type: "text", Text: &r.Text})
	}
	for i, tu := range r.ToolUses {
		input := tu.Input
		if len(input) == 0 {
			input = json.RawMessage(`{}`)
		}
		m.Content = append(m.Content, block{Type: "tool_use", ID: cmp.Or(tu.ID, fmt.Sprintf("toolu_%d_%d", n, i)), Name: tu.Name, Input: input})
	}
	stop := r.StopReason
	if stop == "" {
		stop = "end_turn"
		if len(r.ToolUses) > 0 {
			stop = "tool_use"
		}
	}
	m.StopReason = &stop
	if r.Usage != nil {
		m.Usage = usage{InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens}
	} else {
		out := utf8.RuneCountInString(r.Thinking + r.Text)
		for _, tu := range r.ToolUses {
			out += len(tu.Name) + len(tu.Input)
		}
		m.Usage = usage{InputTokens: (req.chars + 3) / 4, OutputTokens: (out + 3) / 4}
	}
	return m
}

func ptr[T any](v T) *T { return &v }

// issue makes the signature of a thinking block of reply n (or, with a nil
// thinking, the data of a redacted_thinking block) and records it: the
// API's are opaque, and only the server that made one takes it back.
func (s *Server) issue(thinking *string, n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if thinking == nil {
		data := fmt.Sprintf("redacted_anthropictest%06d_%d", n, len(s.redacted))
		s.redacted[data] = true
		return data
	}
	sig := fmt.Sprintf("sig_anthropictest%06d_%d", n, len(s.issued))
	s.issued[sig] = *thinking
	return sig
}

// checkSigned refuses thinking blocks the server did not issue, or whose
// text changed since.
func (s *Server) checkSigned(req *MessagesRequest) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, m := range req.Messages {
		for j, b := range m.Blocks {
			switch {
			case b.Type == "thinking" && (b.Signature == "" || s.issued[b.Signature] != b.Thinking || !hasKey(s.issued, b.Signature)):
				return invalid("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j)
			case b.Type == "redacted_thinking" && !s.redacted[b.Data]:
				return invalid("messages.%d.content.%d: Invalid `data` in `redacted_thinking` block", i, j)
			}
		}
	}
	return nil
}

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}

// stream writes the message as the API's event stream.
func (s *Server) stream(w http.ResponseWriter, m *message) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	send := func(event string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	start := *m
	start.Content = []block{}
	start.StopReason = nil
	start.Usage = usage{InputTokens: m.Usage.InputTokens, OutputTokens: 1}
	send("message_start", map[string]any{"type": "message_start", "message": start})
	send("ping", map[string]string{"type": "ping"})
	for i, b := range m.Content {
		open := b
		switch b.Type {
		case "thinking":
			open.Thinking, open.Signature = ptr(""), ptr("")
		case "redacted_thinking":
			// Sent whole in its start event: it has no deltas.
		case "text":
			open.Text = ptr("")
		case "tool_use":
			open.Input = json.RawMessage(`{}`)
		}
		send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": open})
		delta := func(d map[string]any) {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		switch b.Type {
		case "thinking":
			for _, p := range pieces(*b.Thinking) {
				delta(map[string]any{"type": "thinking_delta", "thinking": p})
			}
			delta(map[string]any{"type": "signature_delta", "signature": *b.Signature})
		case "text":
			for _, p := range pieces(*b.Text) {
				delta(map[string]any{"type": "text_delta", "text": p})
			}
		case "tool_use":
			for _, p := range pieces(string(b.Input)) {
				delta(map[string]any{"type": "input_json_delta", "partial_json": p})
			}
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": m.StopReason, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": m.Usage.OutputTokens}})
	send("message_stop", map[string]string{"type": "message_stop"})
}

// pieces splits s into chunks of up to eight runes, like token deltas.
func pieces(s string) []string {
	var out []string
	for s != "" {
		n, i := 0, 0
		for i < len(s) && n < 8 {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			n++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}
