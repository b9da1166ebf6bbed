package server

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/api"
)

// Problem kinds of the browser guard (see components/schemas/Problem).
const (
	kindMisdirected      = "misdirected-request"
	kindUnsupportedMedia = "unsupported-media-type"
	kindOriginRefused    = "origin-refused"
)

// corsMaxAge is how long (seconds) a browser may cache a preflight answer.
const corsMaxAge = 600

// Request and response headers a browser app on an allowed origin may use.
var (
	corsAllowHeaders  = "Authorization, Content-Type, Idempotency-Key, Last-Event-ID, X-Request-Id, A2A-Version, A2A-Extensions, Mcp-Session-Id, Mcp-Protocol-Version"
	corsExposeHeaders = "Location, Retry-After, X-Request-Id, Idempotency-Key, Mcp-Session-Id"
	corsAllowMethods  = "GET, POST, PUT, PATCH, DELETE, OPTIONS"
)

// guard is what keeps a web page the user happens to visit from driving a
// local agentd: a browser will send requests anywhere, and the API has no
// cookies for SameSite to protect, so the server itself must tell a
// request of a browser page from one of a client program.
//
//   - DNS rebinding: a page on evil.example re-resolves its own name to
//     127.0.0.1 and then reads the API "same-origin". The Host header still
//     says evil.example, so only names the server answers to are accepted
//     (421 otherwise).
//   - Cross-origin requests: browsers send Origin with every cross-origin
//     request (and every POST); an origin that is neither the server's own
//     nor listed in CORSOrigins is refused (403) before anything runs, so
//     even a "simple" request that the browser sends without a preflight
//     changes nothing. Listed origins get proper CORS, preflights included.
//   - Content-Type: a page can POST text/plain or a form without a
//     preflight; the API accepts only application/json bodies (415), which
//     a browser never sends cross-origin without asking first.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Health checks are exempt: they reveal nothing a rebinding page
		// could use, and load balancers send them without a Host header
		// (HAProxy's httpchk speaks HTTP/1.0) or with the replica's own
		// address.
		if s.cfg.CheckHost && !healthCheck(r) && !s.hostAllowed(r.Host) {
			s.writeError(w, r, &requestError{status: http.StatusMisdirectedRequest, kind: kindMisdirected,
				detail: fmt.Sprintf("this server does not serve the host %q (set AGENTD_ALLOWED_HOSTS to add a name)", hostOnly(r.Host))})
			return
		}
		origin := r.Header.Get("Origin")
		allowed := false
		switch {
		case origin != "":
			if sameOrigin(origin, r.Host) {
				break
			}
			if !s.corsAllowed(origin) {
				s.writeError(w, r, &requestError{status: http.StatusForbidden, kind: kindOriginRefused,
					detail: fmt.Sprintf("cross-origin requests from %q are not allowed (set AGENTD_CORS_ORIGINS to allow a browser app)", origin)})
				return
			}
			allowed = true
		case crossSiteFetch(r):
			// A browser that sends no Origin (a GET from an <img> or a
			// navigation) still says where the request comes from.
			s.writeError(w, r, &requestError{status: http.StatusForbidden, kind: kindOriginRefused,
				detail: "cross-site browser requests are not allowed"})
			return
		}
		if allowed {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				// A preflight: answered here, it never reaches a handler.
				h.Set("Access-Control-Allow-Methods", corsAllowMethods)
				h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
				h.Set("Access-Control-Max-Age", strconv.Itoa(corsMaxAge))
				w.WriteHeader(http.StatusNoContent)
				return
			}
			h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		}
		if err := checkContentType(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether host (a Host header, maybe with a port) names
// this server: an IP literal (a rebinding page cannot make the browser send
// one for its own name), localhost, or a name listed in AllowedHosts.
func (s *Server) hostAllowed(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(hostOnly(host), "."))
	if h == "" {
		return false
	}
	if net.ParseIP(h) != nil || h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	for _, a := range s.cfg.AllowedHosts {
		a = strings.ToLower(a)
		if a == "*" || a == h || strings.HasPrefix(a, "*.") && strings.HasSuffix(h, a[1:]) {
			return true
		}
	}
	return false
}

// hostOnly strips the port (and IPv6 brackets) from a Host header.
func hostOnly(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}

// corsAllowed reports whether origin is listed in CORSOrigins ("*" allows
// any: the API uses bearer keys, never cookies, so a page gets nothing it
// does not hold a key for).
func (s *Server) corsAllowed(origin string) bool {
	for _, o := range s.cfg.CORSOrigins {
		if o == "*" || strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	return false
}

// sameOrigin reports whether origin is the server's own (the web console):
// its host and port are the request's Host. The scheme is not compared: a
// TLS-terminating proxy in front changes it, and the Host check has already
// made sure the name is ours.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, host) || strings.EqualFold(withDefaultPort(u), host)
}

// withDefaultPort is origin's host without the scheme's default port, as a
// browser writes the Host header.
func withDefaultPort(u *url.URL) string {
	h, p := u.Hostname(), u.Port()
	if p == "" {
		switch u.Scheme {
		case "https":
			p = "443"
		default:
			p = "80"
		}
	}
	return net.JoinHostPort(h, p)
}

// crossSiteFetch reports whether a browser marked the request as coming from
// another site (Fetch Metadata); programs send no Sec-Fetch-Site at all.
func crossSiteFetch(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return true
	}
	return false
}

// checkContentType requires application/json on every request that carries
// a body or a Content-Type with a state-changing method. A POST with neither
// (cancel) is fine: it is not something a page can send cross-origin past
// the Origin check.
func checkContentType(r *http.Request) error {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return nil
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.ContentLength == 0 {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return nil
	}
	return &requestError{status: http.StatusUnsupportedMediaType, kind: kindUnsupportedMedia,
		detail:   fmt.Sprintf("the request body must be application/json, not %q", ct),
		problems: []api.ProblemField{{Path: "Content-Type", Message: "must be application/json"}}}
}

// Defaults of Guard.
const (
	DefaultRateLimit          = 50.0
	DefaultRateBurst          = 100
	DefaultMaxStreams         = 512
	DefaultMaxStreamsPerKey   = 64
	DefaultStreamWriteTimeout = 30 * time.Second
)

// Guard configures the protections against browsers and greedy clients.
// The zero value has defaults for every limit and checks no Host.
type Guard struct {
	// CheckHost makes the server refuse (421) requests whose Host header
	// names neither an IP address, localhost, nor one of AllowedHosts: the
	// defence against DNS rebinding. The command turns it on when no API
	// keys are configured (a rebinding page then has the whole API) or
	// when AllowedHosts is set.
	CheckHost bool
	// AllowedHosts are the host names the server answers to besides IP
	// literals and localhost; "*.example.com" matches subdomains, "*" any.
	AllowedHosts []string
	// CORSOrigins are the browser origins (scheme://host[:port]) allowed to
	// call the API cross-origin; "*" allows any. Empty: none.
	CORSOrigins []string
	// RateLimit is the requests per second each API key (or, without a
	// valid key, each remote address) may make to /v1, with bursts of
	// RateBurst. Negative: no rate limit. Default 50/s, bursts of 100.
	RateLimit float64
	RateBurst int
	// MaxStreams and MaxStreamsPerKey cap the event streams and long polls
	// open at once, in total (503 beyond) and per key (429 beyond).
	// Negative: no cap. Defaults 512 and 64.
	MaxStreams       int
	MaxStreamsPerKey int
	// MetricsToken, when set, is the bearer token GET /metrics requires.
	MetricsToken string
	// StreamWriteTimeout bounds each write of an event stream: a client
	// that stops reading is cut off when a write cannot complete within
	// it (at least nine tenths of it: the deadline is moved on in steps).
	// Default 30 s.
	StreamWriteTimeout time.Duration
}

func (g Guard) withDefaults() Guard {
	g.RateLimit = cmp.Or(g.RateLimit, DefaultRateLimit)
	g.RateBurst = cmp.Or(g.RateBurst, DefaultRateBurst)
	g.MaxStreams = cmp.Or(g.MaxStreams, DefaultMaxStreams)
	g.MaxStreamsPerKey = cmp.Or(g.MaxStreamsPerKey, DefaultMaxStreamsPerKey)
	g.StreamWriteTimeout = cmp.Or(g.StreamWriteTimeout, DefaultStreamWriteTimeout)
	return g
}

func (g Guard) validate() []error {
	var errs []error
	if g.RateLimit > 0 && g.RateBurst < 1 {
		errs = append(errs, fmt.Errorf("rate burst must be at least 1, got %d", g.RateBurst))
	}
	for _, o := range g.CORSOrigins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.TrimSuffix(u.Path, "/") != "" {
			errs = append(errs, fmt.Errorf("CORS origin %q: want scheme://host[:port], like https://app.example.com", o))
		}
	}
	for _, h := range g.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/: ") {
			errs = append(errs, fmt.Errorf("allowed host %q: want a host name without scheme or port, like agentd.example.com", h))
		}
	}
	return errs
}

// metricsAuth puts /metrics behind MetricsToken when one is set: the
// metrics count chats and requests across tenants.
func (s *Server) metricsAuth(next http.Handler) http.Handler {
	if s.cfg.MetricsToken == "" {
		return next
	}
	want := sha256.Sum256([]byte(s.cfg.MetricsToken))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		got := sha256.Sum256([]byte(strings.TrimSpace(token)))
		if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			s.unauthorized(w, r, "GET /metrics requires the metrics bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// healthCheck reports whether r is a liveness or readiness probe.
func healthCheck(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && (r.URL.Path == "/healthz" || r.URL.Path == "/readyz")
}
