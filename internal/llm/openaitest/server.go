// Package openaitest is a fake OpenAI chat-completions server for tests: of
// internal/llm, and of anything that drives agentd against the openai
// provider (end-to-end tests point the real binary at URL()).
//
// It answers POST …/chat/completions from a script of replies, can inject
// failures (status codes with Retry-After, hangs, dropped connections),
// records every request, and validates each request the way the real API
// does, answering 400 with an OpenAI-style error body when, for example, a
// tool message does not answer a tool call of the assistant message before it.
// A client that passes against this server sends requests the API accepts.
//
// Both plain JSON responses and "stream": true (server-sent chunks ending in
// "data: [DONE]") are supported.
package openaitest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// maxBody bounds a request body; the fake is for tests, not for load.
const maxBody = 32 << 20

// Server is a fake chat-completions API on a loopback listener. It is safe for
// concurrent use; replies and failures are consumed in the order requests
// arrive.
type Server struct {
	srv    *httptest.Server
	apiKey string
	azure  *azureMode // nil: the OpenAI API's paths and bearer keys
	now    func() time.Time
	// done is closed by Close so that delayed and hanging responses end and
	// httptest.Server.Close, which waits for handlers, cannot block on them.
	done      chan struct{}
	closeOnce sync.Once

	mu        sync.Mutex
	replies   []Reply
	failures  []Failure
	responder func(Request) Reply
	requests  []*Request
	served    int // completions answered, for ids
	inFlight  int // requests being answered now
	maxFlight int // the most requests ever answered at once
}

// Option configures a Server.
type Option func(*Server)

// WithAPIKey makes the server require "Authorization: Bearer <key>" and answer
// 401 otherwise, like the API does for a wrong key.
func WithAPIKey(key string) Option { return func(s *Server) { s.apiKey = key } }

// Azure makes the server an Azure OpenAI resource instead: it serves only
// POST /openai/deployments/{deployment}/chat/completions?api-version=V for
// the given deployment and api-versions (any api-version when none are
// given), and the key WithAPIKey sets must come in the api-key header, as
// Azure's REST API wants; a bearer key is refused with 401, like an
// invalid Entra ID token.
func Azure(deployment string, apiVersions ...string) Option {
	return func(s *Server) { s.azure = &azureMode{deployment: deployment, versions: apiVersions} }
}

// azureMode is what Azure asks of a request beyond the OpenAI wire format.
type azureMode struct {
	deployment string
	versions   []string
}

// WithClock sets the clock used for the "created" field (default time.Now).
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// New starts a Server. Close it when done.
func New(opts ...Option) *Server {
	s := &Server{now: time.Now, done: make(chan struct{})}
	for _, o := range opts {
		o(s)
	}
	s.srv = httptest.NewServer(s.Handler())
	return s
}

// URL is the API base URL, ending in /v1, as OPENAI_BASE_URL takes it; for
// an Azure server, the resource URL (no path), as azure_endpoint takes it.
func (s *Server) URL() string {
	if s.azure != nil {
		return s.srv.URL
	}
	return s.srv.URL + "/v1"
}

// Handler is the server's HTTP handler, for mounting it elsewhere. It serves
// any path ending in /chat/completions and shares the Server's script and
// recordings.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// Close ends delayed responses and shuts the listener down. It is safe to
// call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.srv.Close()
	})
}

// Reply is one scripted answer.
type Reply struct {
	Content   string
	ToolCalls []ToolCall // ids default to "call_<n>_<i>", arguments to "{}"
	// Refusal, when set, is sent as the message's refusal.
	Refusal string
	// Reasoning, when set, is sent as the message's reasoning_content (as
	// DeepSeek, vLLM and LiteLLM send a reasoning model's thinking), and
	// streamed before the content.
	Reasoning string
	// Usage defaults to an estimate: a token per four characters, rounded up,
	// of the request's message texts (prompt) and of the reply (completion).
	Usage *Usage
	// FinishReason defaults to "tool_calls" with tool calls, else "stop".
	FinishReason string
	// Delay holds the answer back; it ends early when the client goes away or
	// the server closes. A long Delay is a hanging server.
	Delay time.Duration
	// CutAfter, when > 0 and the reply is streamed, drops the connection
	// after that many content pieces: a connection reset mid-reply.
	CutAfter int
	// Pieces, when set, are the content pieces a stream sends (by default
	// Content is cut into pieces of up to eight runes); Content defaults to
	// their concatenation.
	Pieces []string
	// PieceDelay holds each streamed content piece back this long: a model
	// that types. It ends early, like Delay.
	PieceDelay time.Duration
	// Sent, when set, is called as each content piece of a stream has been
	// written and flushed, with its index: when it left the model.
	Sent func(i int)
	// Hold, when set, holds the answer back until it is closed (after
	// Delay): a test lets the model answer once it is ready to watch.
	Hold <-chan struct{}
}

// Text is a reply with only content.
func Text(content string) Reply { return Reply{Content: content} }

// Failure is an injected error response, consumed by the next valid request.
type Failure struct {
	Status int
	// RetryAfter is sent as the Retry-After header when set.
	RetryAfter string
	// Message, Type and Code fill the error body; they default to what the
	// API sends for Status.
	Message, Type, Code string
	// Body, when set, replaces the JSON error body (e.g. a proxy's HTML page).
	Body string
	// Delay holds the response back, like Reply.Delay.
	Delay time.Duration
	// Disconnect drops the connection without any response.
	Disconnect bool
}

// Reply appends replies to the script.
func (s *Server) Reply(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, replies...)
}

// Respond sets the function that answers once the script is used up (nil:
// such requests get a 400 saying the script is exhausted).
func (s *Server) Respond(f func(Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.responder = f
}

// FailNext makes the next valid request fail with status, sending Retry-After
// when retryAfter is not empty.
func (s *Server) FailNext(status int, retryAfter string) {
	s.Fail(Failure{Status: status, RetryAfter: retryAfter})
}

// Fail queues failures; each is consumed by one valid request, before any
// reply.
func (s *Server) Fail(fs ...Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, fs...)
}

// Request is one recorded request.
type Request struct {
	Method string
	Path   string
	Query  string // the raw query (Azure's api-version)
	Header http.Header
	Body   []byte
	// Chat is the decoded body; nil when it did not decode.
	Chat *ChatRequest
	// Status is what the server answered (0 while pending or when the
	// connection was dropped).
	Status int
	// Error is the error message sent back, if any.
	Error string
	// Received is when the request arrived, Done when its answer was
	// written (zero while pending or when the connection was dropped).
	Received, Done time.Time
}

// MaxInFlight is the most requests the server was answering at once.
func (s *Server) MaxInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxFlight
}

// Requests returns copies of the requests received so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		out[i] = *r
	}
	return out
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	received := s.now()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	rec := &Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body, Received: received}
	s.mu.Lock()
	s.requests = append(s.requests, rec)
	seq := len(s.requests)
	s.inFlight++
	s.maxFlight = max(s.maxFlight, s.inFlight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		if rec.Status != 0 {
			rec.Done = s.now()
		}
		s.mu.Unlock()
	}()
	// The API names every response, errors included, for support requests;
	// clients put it into their error messages.
	w.Header().Set("X-Request-Id", fmt.Sprintf("req_openaitest%06d", seq))

	switch {
	case err != nil:
		s.writeError(w, rec, &apiError{status: http.StatusRequestEntityTooLarge, Message: "request body too large", Type: "invalid_request_error"})
		return
	case s.azure != nil:
		if e := s.azure.check(r); e != nil {
			s.writeError(w, rec, e)
			return
		}
	case !strings.HasSuffix(r.URL.Path, "/chat/completions"):
		s.writeError(w, rec, &apiError{status: http.StatusNotFound, Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path), Type: "invalid_request_error"})
		return
	case r.Method != http.MethodPost:
		s.writeError(w, rec, &apiError{status: http.StatusMethodNotAllowed, Message: fmt.Sprintf("Invalid method for URL (%s %s)", r.Method, r.URL.Path), Type: "invalid_request_error"})
		return
	}
	if e := s.checkAuth(r); e != nil {
		s.writeError(w, rec, e)
		return
	}
	req, e := parseRequest(body)
	s.mu.Lock()
	rec.Chat = req
	s.mu.Unlock()
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
		fail = &f
		s.failures = s.failures[1:]
	} else if len(s.replies) > 0 {
		reply, have = s.replies[0], true
		s.replies = s.replies[1:]
	}
	responder := s.responder
	s.mu.Unlock()

	if fail != nil {
		s.fail(w, r, rec, fail)
		return
	}
	if !have && responder != nil {
		reply, have = responder(*rec), true
	}
	if !have {
		s.writeError(w, rec, invalid("", "openaitest_script_exhausted", "openaitest: no scripted reply left for this request"))
		return
	}
	if !s.wait(r.Context(), reply.Delay) {
		return
	}
	if reply.Hold != nil {
		select {
		case <-reply.Hold:
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		}
	}
	if reply.Content == "" && len(reply.Pieces) > 0 {
		reply.Content = strings.Join(reply.Pieces, "")
	}
	s.mu.Lock()
	s.served++
	n := s.served
	s.mu.Unlock()
	s.answer(r.Context(), w, rec, req, reply, n)
}

func (s *Server) checkAuth(r *http.Request) *apiError {
	if s.apiKey == "" {
		return nil
	}
	if s.azure != nil {
		got := r.Header.Get("Api-Key")
		switch {
		case got == "" && r.Header.Get("Authorization") != "":
			return &apiError{status: http.StatusUnauthorized, Code: strOrNil("401"),
				Message: "Unauthorized. Access token is missing, invalid, audience is incorrect (https://cognitiveservices.azure.com), or have expired."}
		case got != s.apiKey:
			return &apiError{status: http.StatusUnauthorized, Code: strOrNil("401"),
				Message: "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."}
		}
		return nil
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch {
	case !ok || got == "":
		return &apiError{status: http.StatusUnauthorized, Type: "invalid_request_error",
			Message: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."}
	case got != s.apiKey:
		return &apiError{status: http.StatusUnauthorized, Type: "invalid_request_error", Code: strOrNil("invalid_api_key"),
			Message: fmt.Sprintf("Incorrect API key provided: %s.", redact(got))}
	}
	return nil
}

// redact shows only the end of a key, as the API does.
func redact(key string) string {
	if len(key) <= 4 {
		return "****"
	}
	return "****" + key[len(key)-4:]
}

// wait sleeps for d unless the client leaves or the server closes first; it
// reports whether to go on answering.
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

func (s *Server) fail(w http.ResponseWriter, r *http.Request, rec *Request, f *Failure) {
	if !s.wait(r.Context(), f.Delay) {
		return
	}
	if f.Disconnect {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler) // drops the connection where hijacking is not possible
	}
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	if f.Body != "" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(f.Status)
		_, _ = io.WriteString(w, f.Body)
		s.mu.Lock()
		rec.Status, rec.Error = f.Status, f.Body
		s.mu.Unlock()
		return
	}
	e := &apiError{status: f.Status, Message: f.Message, Type: f.Type, Code: strOrNil(f.Code)}
	switch {
	case f.Status == http.StatusTooManyRequests:
		e.Message = cmp.Or(e.Message, "Rate limit reached for requests. Please try again later. (openaitest)")
		e.Type = cmp.Or(e.Type, "requests")
		e.Code = cmp.Or(e.Code, strOrNil("rate_limit_exceeded"))
	case f.Status >= 500:
		e.Message = cmp.Or(e.Message, "The server had an error while processing your request. Sorry about that! (openaitest)")
		e.Type = cmp.Or(e.Type, "server_error")
	case f.Status == http.StatusUnauthorized:
		e.Message = cmp.Or(e.Message, "Incorrect API key provided. (openaitest)")
		e.Type = cmp.Or(e.Type, "invalid_request_error")
		e.Code = cmp.Or(e.Code, strOrNil("invalid_api_key"))
	default:
		e.Message = cmp.Or(e.Message, fmt.Sprintf("Injected failure with status %d. (openaitest)", f.Status))
		e.Type = cmp.Or(e.Type, "invalid_request_error")
	}
	s.writeError(w, rec, e)
}

func (s *Server) writeError(w http.ResponseWriter, rec *Request, e *apiError) {
	s.mu.Lock()
	rec.Status, rec.Error = e.status, e.Message
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(map[string]*apiError{"error": e})
}

// answer writes reply as completion number n of the server.
func (s *Server) answer(ctx context.Context, w http.ResponseWriter, rec *Request, req *ChatRequest, reply Reply, n int) {
	calls := make([]ToolCall, len(reply.ToolCalls))
	for i, tc := range reply.ToolCalls {
		tc.ID = cmp.Or(tc.ID, fmt.Sprintf("call_%d_%d", n, i))
		tc.Type = cmp.Or(tc.Type, "function")
		if tc.Function.Arguments == nil || *tc.Function.Arguments == "" {
			args := "{}"
			tc.Function.Arguments = &args
		}
		calls[i] = tc
	}
	usage := estimateUsage(req, reply.Content, calls)
	if reply.Usage != nil {
		usage = *reply.Usage
	}
	usage.TotalTokens = cmp.Or(usage.TotalTokens, usage.PromptTokens+usage.CompletionTokens)
	finish := reply.FinishReason
	if finish == "" {
		finish = "stop"
		if len(calls) > 0 {
			finish = "tool_calls"
		}
	}
	id := fmt.Sprintf("chatcmpl-openaitest%06d", n)
	created := s.now().Unix()
	s.mu.Lock()
	rec.Status = http.StatusOK
	s.mu.Unlock()
	if req.Stream {
		s.stream(ctx, w, req, id, created, reply, calls, finish, usage)
		return
	}
	msg := responseMessage{Role: "assistant"}
	if reply.Reasoning != "" {
		msg.ReasoningContent = &reply.Reasoning
	}
	// Like the API: content is null when the model only calls tools or refuses.
	if reply.Content != "" || len(calls) == 0 && reply.Refusal == "" {
		msg.Content = &reply.Content
	}
	if reply.Refusal != "" {
		msg.Refusal = &reply.Refusal
	}
	if len(calls) > 0 {
		msg.ToolCalls = calls
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(completion{
		ID: id, Object: "chat.completion", Created: created, Model: req.Model, SystemFingerprint: "fp_openaitest",
		Choices: []choice{{Index: 0, Message: msg, FinishReason: finish}},
		Usage:   usage,
	})
}

// stream writes the reply as server-sent chat.completion.chunk events: the
// role, the content in pieces, each tool call's id and name and then its
// arguments, the finish reason, the usage if asked for, then [DONE].
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, req *ChatRequest, id string, created int64, reply Reply, calls []ToolCall, finish string, usage Usage) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	send := func(c chunk) {
		c.ID, c.Object, c.Created, c.Model, c.SystemFingerprint = id, "chat.completion.chunk", created, req.Model, "fp_openaitest"
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	one := func(d delta, finish *string) chunk {
		return chunk{Choices: []chunkChoice{{Delta: d, FinishReason: finish}}}
	}
	empty := ""
	send(one(delta{Role: "assistant", Content: &empty}, nil))
	for _, piece := range pieces(reply.Reasoning) {
		send(one(delta{ReasoningContent: &piece}, nil))
	}
	content := reply.Pieces
	if len(content) == 0 {
		content = pieces(reply.Content)
	}
	for i, piece := range content {
		if reply.CutAfter > 0 && i == reply.CutAfter {
			panic(http.ErrAbortHandler) // the connection drops mid-stream
		}
		if i > 0 && !s.wait(ctx, reply.PieceDelay) {
			return
		}
		send(one(delta{Content: &piece}, nil))
		if reply.Sent != nil {
			reply.Sent(i)
		}
	}
	for i, tc := range calls {
		send(one(delta{ToolCalls: []chunkToolCall{{Index: i, ID: tc.ID, Type: tc.Type, Function: chunkFunctionCall{Name: tc.Function.Name}}}}, nil))
		for _, piece := range pieces(*tc.Function.Arguments) {
			send(one(delta{ToolCalls: []chunkToolCall{{Index: i, Function: chunkFunctionCall{Arguments: piece}}}}, nil))
		}
	}
	send(one(delta{}, &finish))
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		send(chunk{Choices: []chunkChoice{}, Usage: &usage})
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
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

// estimateUsage counts a token per four characters, rounded up.
func estimateUsage(req *ChatRequest, content string, calls []ToolCall) Usage {
	var prompt, completion bytes.Buffer
	for _, m := range req.Messages {
		prompt.WriteString(m.Text())
	}
	completion.WriteString(content)
	for _, tc := range calls {
		completion.WriteString(tc.Function.Name)
		completion.WriteString(*tc.Function.Arguments)
	}
	tokens := func(b *bytes.Buffer) int { return (utf8.RuneCount(b.Bytes()) + 3) / 4 }
	return Usage{PromptTokens: tokens(&prompt), CompletionTokens: tokens(&completion)}
}

// check answers what Azure answers to a request that is not a chat
// completion of the deployment: 404 for another path or deployment, 400 for
// a missing or unsupported api-version.
func (a *azureMode) check(r *http.Request) *apiError {
	want := "/openai/deployments/" + a.deployment + "/chat/completions"
	if r.URL.Path != want {
		if strings.HasPrefix(r.URL.Path, "/openai/deployments/") && strings.HasSuffix(r.URL.Path, "/chat/completions") {
			return &apiError{status: http.StatusNotFound, Code: strOrNil("DeploymentNotFound"),
				Message: "The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again."}
		}
		return &apiError{status: http.StatusNotFound, Code: strOrNil("404"), Message: "Resource not found"}
	}
	if r.Method != http.MethodPost {
		return &apiError{status: http.StatusMethodNotAllowed, Code: strOrNil("405"), Message: "Method not allowed"}
	}
	v := r.URL.Query().Get("api-version")
	switch {
	case v == "":
		return &apiError{status: http.StatusNotFound, Code: strOrNil("404"), Message: "Resource not found"}
	case len(a.versions) > 0 && !slices.Contains(a.versions, v):
		return &apiError{status: http.StatusBadRequest, Code: strOrNil("BadRequest"), Message: "API version not supported"}
	}
	return nil
}
