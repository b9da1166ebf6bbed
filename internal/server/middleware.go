package server

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
)

// requestIDHeader carries the request id both ways.
const requestIDHeader = "X-Request-Id"

// maxRequestIDLen bounds a client-supplied request id, which ends up in every
// log line of the request.
const maxRequestIDLen = 128

// requestID takes the client's X-Request-Id when it is sane, else makes one,
// and echoes it in the response so clients can quote it.
func (s *Server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(requestIDHeader)
		if !validRequestID(id) {
			id = uuid.NewString()
		}
		w.Header().Set(requestIDHeader, id)
		next.ServeHTTP(w, r.WithContext(withRequestID(r.Context(), id)))
	})
}

// validRequestID accepts short ids of visible ASCII. Anything else is
// replaced rather than rejected: a request id is a debugging aid, and a
// client's odd one must not break its request or forge log lines.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := range len(id) {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// observe writes one access log line and the HTTP metrics per request.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info := &requestInfo{}
		rec := &responseRecorder{ResponseWriter: w}
		r = r.WithContext(context.WithValue(r.Context(), requestInfoKey, info))
		defer func() {
			// Read the pattern after the handler ran: chi fills the route
			// context in while routing, including inside mounted routers.
			// A request refused by authentication before the /v1 router
			// routed it is labelled with the mount pattern, "/v1/*".
			route := chi.RouteContext(r.Context()).RoutePattern()
			if info.unmatched || route == "" {
				route = "unmatched"
			}
			status := rec.statusCode()
			elapsed := time.Since(start)
			s.metrics.requests.WithLabelValues(r.Method, route, strconv.Itoa(status)).Inc()
			if !info.longLived {
				s.metrics.duration.WithLabelValues(r.Method, route).Observe(elapsed.Seconds())
			}
			attrs := []slog.Attr{
				slog.String("request_id", RequestID(r.Context())),
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.String("route", route),
				slog.Int("status", status),
				slog.Int64("bytes", rec.bytes),
				slog.Duration("duration", elapsed),
				slog.String("tenant", info.tenant),
				slog.String("remote", r.RemoteAddr),
			}
			if id := cmp.Or(info.chatID, chatIDOf(r)); id != "" {
				attrs = append(attrs, slog.String("chat_id", id))
			}
			if info.traceID != "" {
				attrs = append(attrs, slog.String("trace_id", info.traceID))
			}
			s.logger.LogAttrs(r.Context(), accessLevel(r.Method, route, status, info.longLived), "http request", attrs...)
		}()
		next.ServeHTTP(rec, r)
	})
}

// accessLevel is the level of a request's access line. At INFO are the
// requests an operator looks for: every write, every refusal or failure
// (status 400 and up), and every event stream (one line when it ends).
// Reads that succeed are DEBUG: probes and scrapes arrive every few seconds
// from machines, and clients poll (an open console tab reads the chat list
// every 2 s), which would drown the rest at INFO; the request metrics still
// count every one of them.
func accessLevel(method, route string, status int, stream bool) slog.Level {
	switch {
	case route == "/healthz" || route == "/readyz" || route == "/metrics":
		return slog.LevelDebug
	case stream || status >= 400:
		return slog.LevelInfo
	case method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions:
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// chatIDOf is the chat a request's path names ({id} of the /v1/chats
// routes), or "". Read after routing, when chi has filled the parameters in.
func chatIDOf(r *http.Request) string {
	rctx := chi.RouteContext(r.Context())
	if rctx == nil {
		return ""
	}
	return rctx.URLParam("id")
}

// chatAttr is the chat_id attribute of a log line about a request for a
// chat; an empty Attr, which slog leaves out, for other requests.
func chatAttr(r *http.Request) slog.Attr {
	if id := chatIDOf(r); id != "" {
		return slog.String("chat_id", id)
	}
	return slog.Attr{}
}

// recoverer turns a panicking handler into a 500 problem and a log line with
// the stack, so that one bad request neither kills the connection silently
// nor goes unnoticed.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				// The documented way to abort a response: let net/http handle it.
				panic(v)
			}
			err := fmt.Errorf("panic: %v\n%s", v, debug.Stack())
			if rec, ok := w.(*responseRecorder); ok && rec.wroteHeader {
				// Too late for a problem: the status line is out.
				s.logger.Error("handler panicked after writing its response", "request_id", RequestID(r.Context()), chatAttr(r), "error", err)
				return
			}
			s.writeError(w, r, err)
		}()
		next.ServeHTTP(w, r)
	})
}

// authenticate resolves the tenant of a /v1 request from its bearer key.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.keys == nil {
			next.ServeHTTP(w, r.WithContext(withTenant(r.Context(), DefaultTenant)))
			return
		}
		scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) == "" {
			s.unauthorized(w, r, "an Authorization: Bearer <key> header is required")
			return
		}
		// Keys are looked up by their SHA-256: the map lookup then compares
		// hashes, so its timing tells an attacker nothing about how much of
		// a guessed key matched a real one.
		tenant, found := s.keys[sha256.Sum256([]byte(strings.TrimSpace(key)))]
		if !found {
			s.unauthorized(w, r, "the bearer key is not valid")
			return
		}
		next.ServeHTTP(w, r.WithContext(withTenant(r.Context(), tenant)))
	})
}

// unauthorized answers 401 with the challenge RFC 9110 requires.
func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request, detail string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="agentd"`)
	s.writeError(w, r, &requestError{status: http.StatusUnauthorized, kind: kindUnauthorized, detail: detail})
}

// responseRecorder remembers the status and size of a response for the
// access log and metrics. It unwraps, so http.ResponseController reaches the
// underlying writer's Flush and SetWriteDeadline (SSE needs both).
type responseRecorder struct {
	http.ResponseWriter
	status      int
	bytes       int64
	wroteHeader bool
}

// WriteHeader records the status before passing it on.
func (rec *responseRecorder) WriteHeader(status int) {
	if !rec.wroteHeader && status >= 200 {
		rec.status, rec.wroteHeader = status, true
	}
	rec.ResponseWriter.WriteHeader(status)
}

// Write records an implicit 200 and counts the bytes.
func (rec *responseRecorder) Write(b []byte) (int, error) {
	if !rec.wroteHeader {
		rec.status, rec.wroteHeader = http.StatusOK, true
	}
	n, err := rec.ResponseWriter.Write(b)
	rec.bytes += int64(n)
	return n, err
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (rec *responseRecorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// statusCode is the status the client got; a handler that wrote nothing
// produced an implicit 200.
func (rec *responseRecorder) statusCode() int {
	if !rec.wroteHeader {
		return http.StatusOK
	}
	return rec.status
}

// httpMetrics are the server's Prometheus metrics.
type httpMetrics struct {
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	sseOpen   prometheus.Gauge
	pollsOpen prometheus.Gauge
}

// newHTTPMetrics registers the HTTP metrics on reg. Labels use the route
// pattern, never the raw path, which would create a series per chat id.
func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentd_http_requests_total",
			Help: "HTTP requests served, by method, route pattern and status code.",
		}, []string{"method", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentd_http_request_duration_seconds",
			Help:    "Time to serve an HTTP request, by method and route pattern; SSE streams and long polls (wait_s) are not included, see agentd_sse_streams_open and agentd_long_polls_open.",
			Buckets: prometheus.DefBuckets,
		}, []string{"method", "route"}),
		sseOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentd_sse_streams_open",
			Help: "SSE event streams open now.",
		}),
		pollsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentd_long_polls_open",
			Help: "Requests waiting now with wait_s (long polls of messages, creates waiting for the end).",
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.sseOpen, m.pollsOpen} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register http metrics: %w", err)
		}
	}
	return m, nil
}
