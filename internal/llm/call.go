package llm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/internal/chat"
)

// tryFunc makes one HTTP attempt of a prepared call under ctx, which holds
// a (the attempt's record, see headerDoer) and the per-attempt timeout.
// onDelta, when set, asks for a streamed reply.
type tryFunc func(ctx context.Context, a *attempt, onDelta func(string)) (*chat.ModelResponse, error)

// wire is what differs between the kinds: how a request is built, sent and
// read back.
type wire interface {
	// prepare builds the request; a failure is the request's fault.
	prepare(req *chat.ModelRequest) (tryFunc, error)
}

// endpoint is a configured Endpoint, ready to call.
type endpoint struct {
	cfg     Endpoint
	baseURL string        // the effective base URL
	policy  OpenAIConfig  // retry policy, with defaults
	timeout time.Duration // per attempt
	http    *http.Client  // closed by Client.Close
	wire    wire
	limit   *limiter
	log     *slog.Logger
	metrics *metrics
	now     func() time.Time
}

// connBuffer is the size of an HTTP/1.1 connection's read and write
// buffers (see newEndpoint).
const connBuffer = 1 << 10

// maxIdleConnsPerEndpoint is how many idle connections an endpoint
// without max_concurrency keeps (each a few tens of kB).
const maxIdleConnsPerEndpoint = 256

func newEndpoint(cfg Endpoint, policy OpenAIConfig, log *slog.Logger, m *metrics, now func() time.Time) (*endpoint, error) {
	hc := policy.HTTPClient
	if hc == nil {
		// A transport of our own, not http.DefaultTransport, so Close can
		// drop its idle connections without touching anyone else's.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		// It keeps as many idle connections to the endpoint as calls may be
		// in flight (net/http keeps two): against a server on HTTP/1.1 (a
		// local vLLM, Ollama), 200 chats calling at once would otherwise
		// open a connection for nearly every call. Idle ones close after
		// the transport's 90 s.
		tr.MaxIdleConnsPerHost = cmp.Or(cfg.MaxConcurrency, maxIdleConnsPerEndpoint)
		tr.MaxIdleConns = tr.MaxIdleConnsPerHost
		// Over HTTP/1.1 each call in flight has a connection of its own,
		// and a chat waiting in a streamed reply keeps its buffers: 4 KB
		// each for reading and writing by default, where a stream's chunks
		// are a few hundred bytes, and a long request body goes past the
		// write buffer to the socket anyway.
		tr.ReadBufferSize, tr.WriteBufferSize = connBuffer, connBuffer
		// The clone keeps ForceAttemptHTTP2: over https the transport
		// offers h2 and a hosted API (OpenAI, Anthropic, Azure) takes it.
		if cfg.H2C {
			// HTTP/2 only: without HTTP1 among the protocols, an http://
			// URL is spoken to in HTTP/2 with prior knowledge.
			var p http.Protocols
			p.SetHTTP2(true)
			p.SetUnencryptedHTTP2(true)
			tr.Protocols = &p
		}
		hc = &http.Client{Transport: tr}
	}
	ep := &endpoint{cfg: cfg, policy: policy, timeout: cmp.Or(cfg.Timeout, policy.Timeout), http: hc,
		limit: newLimiter(&cfg, m.limiterMetrics(cfg.Name), now), log: log, metrics: m, now: now}
	var d doer = headerDoer{client: hc}
	if len(cfg.Headers) > 0 {
		d = headerSetter{next: d, headers: cfg.Headers}
	}
	switch cfg.Kind {
	case KindOpenAI:
		ep.baseURL = cmp.Or(cfg.BaseURL, defaultOpenAIBaseURL)
		ep.wire = newOpenAIWire(&ep.cfg, ep.baseURL, d)
	case KindAzure:
		ep.baseURL = cfg.BaseURL
		ep.wire = newOpenAIWire(&ep.cfg, ep.baseURL, d)
	case KindAnthropic:
		ep.baseURL = cmp.Or(cfg.BaseURL, defaultAnthropicBaseURL)
		ep.wire = newAnthropicWire(&ep.cfg, ep.baseURL, d)
	default:
		return nil, fmt.Errorf("endpoint %q: unknown kind %q", cfg.Name, cfg.Kind)
	}
	return ep, nil
}

// Error is a failed model call, after any retries.
type Error struct {
	// Provider is the endpoint's kind, Endpoint its name.
	Provider string
	Endpoint string
	Model    string
	// StatusCode is the HTTP status of the last attempt (0: no response).
	StatusCode int
	// Message is the API's error message, or what went wrong otherwise.
	Message string
	// Attempts is how many HTTP attempts were made.
	Attempts int
	// RequestID is the server's request id of the last attempt, if any.
	RequestID string
	// Err is the underlying error.
	Err error
}

// Error says what failed, with the status and the API's message.
func (e *Error) Error() string {
	msg := fmt.Sprintf("%s chat completion with model %q failed", e.Provider, e.Model)
	if e.Endpoint != "" && e.Endpoint != e.Provider {
		msg = fmt.Sprintf("%s chat completion on endpoint %q with model %q failed", e.Provider, e.Endpoint, e.Model)
	}
	if e.Attempts > 1 {
		msg += fmt.Sprintf(" after %d attempts", e.Attempts)
	}
	if e.StatusCode != 0 {
		msg += fmt.Sprintf(": status %d", e.StatusCode)
	}
	msg += ": " + e.Message
	if e.RequestID != "" {
		msg += fmt.Sprintf(" (request id %s)", e.RequestID)
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// complete makes the call: each attempt waits its turn in the endpoint's
// queue, runs under the per-attempt timeout, and transient failures are
// retried with backoff (honouring Retry-After).
//
// A chat waiting on its model waits under this frame, and its goroutine's
// stack is as large as the frames it waits under: so what is done when an
// attempt fails (the error, the retry's log line) is done in a frame of its
// own (failed), not here.
func (ep *endpoint) complete(ctx context.Context, req *chat.ModelRequest) (*chat.ModelResponse, error) {
	ep.tagSpan(ctx)
	try, err := ep.wire.prepare(req)
	if err != nil {
		return nil, err
	}
	estimate := ep.tokenEstimate(req)
	streamed := false // deltas of this attempt went out: a retry starts the reply again
	for n := 1; ; n++ {
		if streamed {
			// Streams showed part of a reply that failed: they start over.
			if req.OnReset != nil {
				req.OnReset()
			}
			streamed = false
		}
		var onDelta func(string)
		if req.OnDelta != nil {
			onDelta = func(d string) { streamed = true; req.OnDelta(d) }
		}
		a := &attempt{}
		resp, err := ep.attempt(ctx, a, try, estimate, onDelta)
		if err == nil {
			return resp, nil
		}
		fail, wait := ep.failed(ctx, req, a, err, n)
		if wait < 0 {
			return nil, fail
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, retryCut(fail, err)
		}
	}
}

// tagSpan names the endpoint on the call's span, if it records.
//
//go:noinline
func (ep *endpoint) tagSpan(ctx context.Context) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String("agentd.endpoint", ep.cfg.Name))
	}
}

// failed is the error of the call's nth attempt, a, which failed with err,
// and how long to wait before the next attempt: -1 when there is none (the
// failure is not transient, the attempts are used up, or the wait would run
// into the chat's deadline). A retry is counted and logged.
//
//go:noinline
func (ep *endpoint) failed(ctx context.Context, req *chat.ModelRequest, a *attempt, err error, n int) (*Error, time.Duration) {
	kind, model := ep.cfg.Kind, cmp.Or(req.Config.Model, ep.cfg.Deployment)
	maxAttempts := ep.policy.MaxRetries + 1
	fail := &Error{Provider: kind, Endpoint: ep.cfg.Name, Model: model, StatusCode: a.status,
		Message: errorMessage(err), Attempts: n, RequestID: a.requestID, Err: err}
	if a.timedOut {
		fail.Message = fmt.Sprintf("no response within the per-call timeout of %v", ep.timeout)
	}
	if ctx.Err() != nil {
		// The chat was cancelled or its deadline passed: that, not the
		// attempt's symptom, is why the call ends.
		fail.Err = ctx.Err()
		fail.Message = fmt.Sprintf("%v (last error: %s)", ctx.Err(), fail.Message)
		return fail, -1
	}
	reason, retry := retryReason(a, err)
	if !retry || n >= maxAttempts {
		return fail, -1
	}
	wait := retryWait(a, ep.policy.BackoffBase, ep.policy.BackoffMax, n, ep.now())
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		// Waiting would only run into the chat's deadline.
		return fail, -1
	}
	ep.metrics.retries.WithLabelValues(kind, ep.cfg.Name, reason).Inc()
	ep.log.WarnContext(ctx, "model call failed, retrying",
		"provider", kind, "endpoint", ep.cfg.Name, "model", model, "chat_id", req.ChatID, "caller", req.Caller,
		"attempt", n, "max_attempts", maxAttempts, "reason", reason, "status", a.status,
		"wait", wait, "error", fail.Message)
	return fail, wait
}

// retryCut is the error of a call whose wait before a retry ended with
// err (the chat was cancelled, or its deadline passed); fail is the last
// attempt's.
//
//go:noinline
func retryCut(fail *Error, err error) *Error {
	fail.Err = err
	fail.Message = fmt.Sprintf("%v while waiting to retry (last error: %s)", err, fail.Message)
	return fail
}

// attempt waits for the endpoint's limits, then makes one HTTP attempt
// under the per-attempt timeout (which starts when the call leaves the
// queue: waiting is not the endpoint's slowness).
func (ep *endpoint) attempt(ctx context.Context, a *attempt, try tryFunc, estimate int64, onDelta func(string)) (*chat.ModelResponse, error) {
	p, err := ep.limit.acquire(ctx, estimate)
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, ep.timeout)
	defer cancel()
	resp, err := try(context.WithValue(actx, attemptKey{}, a), a, onDelta)
	a.timedOut = err != nil && errors.Is(actx.Err(), context.DeadlineExceeded)
	used := int64(-1)
	if resp != nil {
		used = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	} else if !a.sent || a.status >= 400 && a.status < 500 && a.status != http.StatusTooManyRequests {
		used = 0 // refused before generating anything
	}
	p.release(used)
	return resp, err
}

// tokenEstimate is the call's estimate for the endpoint's tpm budget, 0
// without one: the estimate counts the characters of the whole history,
// and only the budget reads it.
func (ep *endpoint) tokenEstimate(req *chat.ModelRequest) int64 {
	if ep.limit.tpm <= 0 {
		return 0
	}
	return estimateTokens(req)
}

// estimateTokens is a call's token count before it is made, for the tpm
// budget: a token per four characters of the prompt, plus the reply's
// max_tokens when the model sets one.
func estimateTokens(req *chat.ModelRequest) int64 {
	chars := 0
	for _, m := range req.Messages {
		chars += utf8.RuneCountInString(m.Content)
		for _, tc := range m.ToolCalls {
			chars += len(tc.Function.Name) + len(tc.Function.Arguments)
		}
	}
	for _, t := range req.Tools {
		chars += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	n := int64(chars+3) / 4
	if req.Config.MaxTokens != nil {
		n += int64(*req.Config.MaxTokens)
	}
	return n
}
