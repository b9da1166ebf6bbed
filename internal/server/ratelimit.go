package server

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Problem kinds of the limits (see components/schemas/Problem).
const (
	kindRateLimited    = "rate-limited"
	kindTooManyStreams = "too-many-streams"
)

// streamRetryAfter is the Retry-After of a refused stream or long poll: a
// slot frees when another stream ends, which the server cannot predict.
const streamRetryAfter = 5 * time.Second

// limiterIdle is how long a client's limiter is kept after its last request.
const limiterIdle = 10 * time.Minute

// limits holds the per-client request rate limiters and the counts of open
// streams and long polls, per client and in total. A client is a valid API
// key (by its hash) or, for requests without one, the remote IP: that also
// slows down anyone guessing keys.
type limits struct {
	rate      rate.Limit
	burst     int
	maxTotal  int
	maxPerKey int

	mu       sync.Mutex
	clients  map[string]*client
	total    int
	lastScan time.Time
}

// client is one key's (or address's) limiter and open waits.
type client struct {
	limiter *rate.Limiter
	waits   int
	seen    time.Time
}

func newLimits(cfg Config) *limits {
	return &limits{
		rate: rate.Limit(cfg.RateLimit), burst: cfg.RateBurst,
		maxTotal: cfg.MaxStreams, maxPerKey: cfg.MaxStreamsPerKey,
		clients: make(map[string]*client),
	}
}

// get returns the client for id, creating it; l.mu must be held. Clients
// idle for limiterIdle are dropped on the way, at most once a minute, so
// the map does not grow with every address that ever called.
func (l *limits) get(id string, now time.Time) *client {
	if now.Sub(l.lastScan) > time.Minute {
		l.lastScan = now
		for k, c := range l.clients {
			if c.waits == 0 && now.Sub(c.seen) > limiterIdle {
				delete(l.clients, k)
			}
		}
	}
	c := l.clients[id]
	if c == nil {
		c = &client{limiter: rate.NewLimiter(l.rate, l.burst)}
		l.clients[id] = c
	}
	c.seen = now
	return c
}

// allow takes one request from id's rate; when it has none left, wait is
// how long until it will.
func (l *limits) allow(id string, now time.Time) (ok bool, wait time.Duration) {
	if l.rate <= 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.get(id, now)
	r := c.limiter.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		// Not taken: a refused request must not use up the future rate.
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// acquire takes a stream slot for id; release gives it back. perKey tells
// which limit refused it.
func (l *limits) acquire(id string, now time.Time) (release func(), perKey bool, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.get(id, now)
	if l.maxPerKey > 0 && c.waits >= l.maxPerKey {
		return nil, true, false
	}
	if l.maxTotal > 0 && l.total >= l.maxTotal {
		return nil, false, false
	}
	c.waits++
	l.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			c.waits--
			l.total--
			c.seen = time.Now()
			l.mu.Unlock()
		})
	}, false, true
}

// limit is the /v1 (and agent protocol) middleware applying the request rate and the caps on
// streams (SSE) and long polls (wait_s). It runs before authentication, so
// that a flood of requests with wrong keys is limited too.
func (s *Server) limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := s.clientID(r)
		now := time.Now()
		if ok, wait := s.limits.allow(id, now); !ok {
			retryAfter(w, wait)
			s.writeError(w, r, &requestError{status: http.StatusTooManyRequests, kind: kindRateLimited,
				detail: fmt.Sprintf("too many requests: at most %g per second (burst %d) per API key; retry after %s",
					s.cfg.RateLimit, s.cfg.RateBurst, retryAfterValue(wait))})
			return
		}
		if waits(r) {
			release, perKey, ok := s.limits.acquire(id, now)
			if !ok {
				retryAfter(w, streamRetryAfter)
				// The connection is closed after the answer, so that a
				// client hammering the cap holds no descriptors.
				w.Header().Set("Connection", "close")
				if perKey {
					s.writeError(w, r, &requestError{status: http.StatusTooManyRequests, kind: kindTooManyStreams,
						detail: fmt.Sprintf("this API key has %d event streams and long polls open, the most allowed; close one or retry later", s.cfg.MaxStreamsPerKey)})
				} else {
					s.writeError(w, r, &requestError{status: http.StatusServiceUnavailable, kind: kindTooManyStreams,
						detail: fmt.Sprintf("the server has %d event streams and long polls open, the most it serves; retry later", s.cfg.MaxStreams)})
				}
				return
			}
			defer release()
		}
		next.ServeHTTP(w, r)
	})
}

// waits reports whether a request holds its connection for long: an event
// stream, a create or message read with wait_s, a call of an agent
// protocol (which may wait for a run or stream it), or a run through the
// OpenAI-compatible API (a chat completion or a response).
func waits(r *http.Request) bool {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/events") || agentCall(r) {
		return true
	}
	if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, openAIPrefix) {
		return true
	}
	v := r.URL.Query().Get("wait_s")
	return v != "" && v != "0"
}

// clientID is who a request is limited as: its API key when the key is
// valid (by hash: the key itself is never kept), else its remote address.
func (s *Server) clientID(r *http.Request) string {
	if s.keys != nil {
		if scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
			sum := sha256.Sum256([]byte(strings.TrimSpace(key)))
			if _, found := s.keys[sum]; found {
				return "key:" + hex.EncodeToString(sum[:8])
			}
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "addr:" + host
}

// retryAfter sets the Retry-After header (whole seconds, at least 1).
func retryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", retryAfterValue(d))
}

func retryAfterValue(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}
