package llm

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	openai "github.com/sashabaranov/go-openai"
	"go.opentelemetry.io/otel/propagation"

	"github.com/agentd/agentd/internal/metric"
)

// Retry reasons, the values of the reason label of agentd_model_retries_total.
const (
	reasonRateLimit   = "rate_limit"   // HTTP 429
	reasonServerError = "server_error" // HTTP 5xx
	reasonTimeout     = "timeout"      // the per-attempt timeout expired
	reasonConnection  = "connection"   // no complete HTTP exchange
)

// metrics are the client's Prometheus collectors.
type metrics struct {
	retries  *prometheus.CounterVec
	wait     *prometheus.HistogramVec
	inFlight *prometheus.GaugeVec
	queued   *prometheus.GaugeVec
}

// newMetrics registers the collectors on reg (if any). A collector that is
// already registered (a second Client on the same registry) is shared.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentd_model_retries_total",
			Help: "Model calls retried after a transient failure, by provider, endpoint and reason (rate_limit, server_error, timeout, connection).",
		}, []string{"provider", "endpoint", "reason"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentd_model_queue_wait_seconds",
			Help:    "Time a model call waited in its endpoint's queue for the endpoint's limits (max_concurrency, rpm, tpm) on this replica.",
			Buckets: []float64{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"endpoint"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "agentd_model_calls_in_flight",
			Help: "Model HTTP calls in flight to each endpoint from this replica.",
		}, []string{"endpoint"}),
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "agentd_model_calls_queued",
			Help: "Model calls waiting in each endpoint's queue on this replica.",
		}, []string{"endpoint"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.retries, err = metric.Register(reg, m.retries); err != nil {
		return nil, err
	}
	if m.wait, err = metric.Register(reg, m.wait); err != nil {
		return nil, err
	}
	if m.inFlight, err = metric.Register(reg, m.inFlight); err != nil {
		return nil, err
	}
	if m.queued, err = metric.Register(reg, m.queued); err != nil {
		return nil, err
	}
	return m, nil
}

// limiterMetrics are the children of the limit collectors for one endpoint.
func (m *metrics) limiterMetrics(endpoint string) limiterMetrics {
	return limiterMetrics{wait: m.wait.WithLabelValues(endpoint), inFlight: m.inFlight.WithLabelValues(endpoint),
		queued: m.queued.WithLabelValues(endpoint)}
}

// attempt is what the HTTP layer saw of one try. go-openai returns only the
// decoded body or an error, not the response headers of a failure, so
// headerDoer records them here; the attempt travels in the request context,
// which keeps concurrent calls apart without any shared state.
type attempt struct {
	sent         bool   // the request reached the HTTP client
	timedOut     bool   // the per-attempt timeout expired
	status       int    // 0 when no response arrived
	retryAfter   string // Retry-After
	retryAfterMS string // retry-after-ms (OpenAI's millisecond variant)
	requestID    string // x-request-id, for support tickets
	transportErr error  // the HTTP client's error, if any
	// body is the response's body, for a stream to read to its end (see
	// drainBody).
	body io.ReadCloser
	// rewrite, when set, makes the request body that goes out of the one
	// go-openai encoded (see swarmRewrite).
	rewrite func([]byte) ([]byte, error)
}

// Reading a stream's body to its end once its last event came: net/http
// reuses a connection only when its response body was read to EOF, and the
// chunked encoding's terminator often arrives just after the event a
// stream ends at ([DONE], message_stop). Closed a moment too early, the
// body costs its connection and the next call a new one (a TLS handshake,
// against a hosted API). The wait is bounded: a server that keeps the
// response open after its last event loses the connection, as before.
const (
	drainWait  = 100 * time.Millisecond
	drainBytes = 4 << 10
)

// drainBody reads what is left of a streamed response whose last event
// the caller has seen, within drainWait and drainBytes.
func (a *attempt) drainBody() {
	body := a.body
	if body == nil {
		return
	}
	// Closing the body ends a read that waits (net/http's response bodies
	// allow it).
	t := time.AfterFunc(drainWait, func() { _ = body.Close() })
	defer t.Stop()
	_, _ = io.CopyN(io.Discard, body, drainBytes)
}

type attemptKey struct{}

// headerDoer is the openai.HTTPDoer that wraps the real client and records
// each response's status and retry headers in the request's attempt.
type headerDoer struct{ client *http.Client }

// Do sends r and notes what came back. The W3C traceparent of the model
// call's span goes with it, so a traced model server joins the chat's trace.
func (d headerDoer) Do(r *http.Request) (*http.Response, error) {
	propagation.TraceContext{}.Inject(r.Context(), propagation.HeaderCarrier(r.Header))
	a, _ := r.Context().Value(attemptKey{}).(*attempt)
	if a != nil && a.rewrite != nil && r.Body != nil {
		if err := rewriteBody(r, a.rewrite); err != nil {
			return nil, err
		}
	}
	resp, err := d.client.Do(r)
	if a != nil {
		a.sent = true
		a.transportErr = err
		if resp != nil {
			a.status = resp.StatusCode
			a.retryAfter = resp.Header.Get("Retry-After")
			a.retryAfterMS = resp.Header.Get("Retry-After-Ms")
			a.requestID = resp.Header.Get("X-Request-Id")
			a.body = resp.Body
		}
	}
	return resp, err
}

// rewriteBody replaces r's body with what rewrite makes of it.
func rewriteBody(r *http.Request, rewrite func([]byte) ([]byte, error)) error {
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return fmt.Errorf("read the request body: %w", err)
	}
	if body, err = rewrite(body); err != nil {
		return fmt.Errorf("rewrite the request body: %w", err)
	}
	r.Body, r.ContentLength = newReleasingBody(body), int64(len(body))
	// A body sent again is the one sent first, rewritten again: the
	// request keeps no copy of it (see releasingBody).
	if orig := r.GetBody; orig != nil {
		r.GetBody = func() (io.ReadCloser, error) {
			rc, err := orig()
			if err != nil {
				return nil, err
			}
			body, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				return nil, err
			}
			if body, err = rewrite(body); err != nil {
				return nil, err
			}
			return newReleasingBody(body), nil
		}
	}
	return nil
}

// releasingBody is a request body that lets go of its bytes once they have
// been read, or it is closed. net/http keeps a request, and so its body,
// for as long as its response is read: a chat waiting in a streamed reply
// would otherwise keep its encoded history, often the largest thing it
// holds, until the reply ends. Close may come from another goroutine
// while a read is under way (http.RoundTripper), hence the lock.
type releasingBody struct {
	mu   sync.Mutex
	data []byte
}

func newReleasingBody(data []byte) *releasingBody { return &releasingBody{data: data} }

func (b *releasingBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.data) == 0 {
		b.data = nil
		return 0, io.EOF
	}
	n := copy(p, b.data)
	if b.data = b.data[n:]; len(b.data) == 0 {
		b.data = nil
	}
	return n, nil
}

func (b *releasingBody) Close() error {
	b.mu.Lock()
	b.data = nil
	b.mu.Unlock()
	return nil
}

// retryReason says whether a failed attempt is worth another try, and why.
// The caller has already checked that the chat's context is still live. Only
// transient failures are retried: 429, 5xx, timeouts and broken connections.
// Any other 4xx is the request's fault and would fail again.
func retryReason(a *attempt, err error) (string, bool) {
	if a.timedOut {
		return reasonTimeout, true
	}
	status := a.status
	if status == 0 {
		status = errorStatus(err)
	}
	switch {
	case status == http.StatusTooManyRequests:
		return reasonRateLimit, true
	case status >= 500:
		return reasonServerError, true
	case status >= 300 || status > 0 && status < 200:
		return "", false
	}
	if !a.sent {
		// go-openai refused the request before sending it (e.g. a parameter
		// its reasoning-model checks reject): trying again changes nothing.
		return "", false
	}
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return "", false
	}
	if a.transportErr != nil || isConnectionError(err) {
		return reasonConnection, true
	}
	// A 2xx whose body did not decode as a chat completion.
	return "", false
}

// isConnectionError reports errors of a connection that broke mid-response.
func isConnectionError(err error) bool {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	_, ok := errors.AsType[net.Error](err)
	return ok
}

// errorStatus is the HTTP status go-openai put into its error, if any.
func errorStatus(err error) int {
	if s := anthropicErrorStatus(err); s != 0 {
		return s
	}
	if e, ok := errors.AsType[*openai.APIError](err); ok {
		return e.HTTPStatusCode
	}
	if e, ok := errors.AsType[*openai.RequestError](err); ok {
		return e.HTTPStatusCode
	}
	return 0
}

// backoff is the wait before retry number n (1-based): exponential from base,
// capped at max, with "equal jitter" (half fixed, half random) so that waits
// still grow while replicas that failed together spread out. rnd returns a
// value in [0, 1).
func backoff(base, maxWait time.Duration, n int, rnd func() float64) time.Duration {
	d := base
	for i := 1; i < n && d < maxWait; i++ {
		d *= 2
	}
	d = min(d, maxWait)
	return d/2 + time.Duration(rnd()*float64(d-d/2))
}

// retryWait is the wait before retry n: the server's Retry-After when it sent
// one, else the backoff. Both are capped at maxWait.
func retryWait(a *attempt, base, maxWait time.Duration, n int, now time.Time) time.Duration {
	if d, ok := parseRetryAfter(a.retryAfterMS, a.retryAfter, now); ok {
		return min(d, maxWait)
	}
	return backoff(base, maxWait, n, rand.Float64)
}

// parseRetryAfter reads OpenAI's retry-after-ms (milliseconds, may be
// fractional) or else the standard Retry-After: delay-seconds or an HTTP
// date (RFC 9110 §10.2.3). A date in the past means no wait; anything above
// a day is clamped to a day (the caller caps far lower anyway). ok is false
// when neither header holds a usable value.
func parseRetryAfter(ms, header string, now time.Time) (time.Duration, bool) {
	if ms = strings.TrimSpace(ms); ms != "" {
		if v, err := strconv.ParseFloat(ms, 64); err == nil && v >= 0 && v < float64(24*time.Hour/time.Millisecond) {
			return time.Duration(v * float64(time.Millisecond)), true
		}
	}
	header = strings.TrimSpace(header)
	if header == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(header, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		// Clamp before multiplying: a huge value must not overflow into a
		// negative duration.
		return time.Duration(min(secs, int64(24*time.Hour/time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(header); err == nil {
		return min(max(t.Sub(now), 0), 24*time.Hour), true
	}
	return 0, false
}
