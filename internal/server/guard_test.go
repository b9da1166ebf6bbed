package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestGuard(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Config{Guard: Guard{CheckHost: true, AllowedHosts: []string{"agentd.example.com", "*.svc.example"},
		CORSOrigins: []string{"https://app.example.com"}}}, &fakeChats{})
	for _, tc := range []struct {
		name   string
		method string
		host   string
		header []string
		body   string
		want   int
	}{
		{"loopback IP", "GET", "127.0.0.1:8080", nil, "", http.StatusOK},
		{"IPv6 loopback", "GET", "[::1]:8080", nil, "", http.StatusOK},
		{"localhost", "GET", "localhost:8080", nil, "", http.StatusOK},
		{"allowed name", "GET", "agentd.example.com", nil, "", http.StatusOK},
		{"allowed wildcard", "GET", "a.svc.example:443", nil, "", http.StatusOK},
		{"rebinding", "GET", "evil.example:8080", nil, "", http.StatusMisdirectedRequest},
		{"wildcard is not the apex", "GET", "svc.example", nil, "", http.StatusMisdirectedRequest},
		{"empty host", "GET", "", nil, "", http.StatusMisdirectedRequest},
		{"same origin", "GET", "localhost:8080", []string{"Origin", "http://localhost:8080"}, "", http.StatusOK},
		{"foreign origin", "GET", "localhost:8080", []string{"Origin", "https://evil.example"}, "", http.StatusForbidden},
		{"null origin", "POST", "localhost:8080", []string{"Origin", "null"}, "", http.StatusForbidden},
		{"cross-site fetch", "GET", "localhost:8080", []string{"Sec-Fetch-Site", "cross-site"}, "", http.StatusForbidden},
		{"same-origin fetch", "GET", "localhost:8080", []string{"Sec-Fetch-Site", "same-origin"}, "", http.StatusOK},
		{"text/plain", "POST", "localhost:8080", []string{"Content-Type", "text/plain"}, "{}", http.StatusUnsupportedMediaType},
		{"form", "POST", "localhost:8080", []string{"Content-Type", "application/x-www-form-urlencoded"}, "a=b", http.StatusUnsupportedMediaType},
		{"no content type with a body", "POST", "localhost:8080", []string{"Content-Type", ""}, "{}", http.StatusUnsupportedMediaType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := "/openapi.yaml"
			if tc.method == http.MethodPost {
				target = "/v1/chats/x/cancel"
			}
			var req *http.Request
			if tc.body != "" {
				req = httptest.NewRequest(tc.method, target, strings.NewReader(tc.body))
			} else {
				req = httptest.NewRequest(tc.method, target, nil)
			}
			req.Host = tc.host
			for i := 0; i+1 < len(tc.header); i += 2 {
				if tc.header[i+1] == "" {
					req.Header.Del(tc.header[i])
					continue
				}
				req.Header.Set(tc.header[i], tc.header[i+1])
			}
			rec := httptest.NewRecorder()
			ts.Handler().ServeHTTP(rec, req)
			if tc.want == http.StatusOK {
				if rec.Code >= 400 && rec.Code != http.StatusNotFound {
					t.Fatalf("status %d, want it through: %s", rec.Code, rec.Body)
				}
				return
			}
			decodeProblem(t, rec, tc.want)
		})
	}
	t.Run("preflight", func(t *testing.T) {
		req := httptest.NewRequest("OPTIONS", "/v1/chats", nil)
		req.Host = "localhost:8080"
		req.Header.Set("Origin", "https://app.example.com")
		req.Header.Set("Access-Control-Request-Method", "POST")
		rec := httptest.NewRecorder()
		ts.Handler().ServeHTTP(rec, req)
		h := rec.Header()
		if rec.Code != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
			!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Last-Event-ID") || h.Get("Access-Control-Max-Age") == "" {
			t.Fatalf("preflight: %d %v", rec.Code, h)
		}
	})
}

func TestRateLimitAndStreamCaps(t *testing.T) {
	t.Parallel()
	l := newLimits(Config{Guard: Guard{RateLimit: 1, RateBurst: 2, MaxStreams: 3, MaxStreamsPerKey: 2}})
	now := time.Now()
	for i, want := range []bool{true, true, false} {
		if ok, wait := l.allow("a", now); ok != want || (!ok && wait <= 0) {
			t.Fatalf("request %d: allowed %v (wait %s), want %v", i, ok, wait, want)
		}
	}
	if ok, _ := l.allow("b", now); !ok {
		t.Fatal("another key shares the first one's rate")
	}
	r1, _, ok1 := l.acquire("a", now)
	r2, _, ok2 := l.acquire("a", now)
	_, perKey, ok3 := l.acquire("a", now)
	if !ok1 || !ok2 || ok3 || !perKey {
		t.Fatalf("per-key cap: %v %v %v (perKey %v)", ok1, ok2, ok3, perKey)
	}
	r4, _, ok4 := l.acquire("b", now)
	_, perKey, ok5 := l.acquire("c", now)
	if !ok4 || ok5 || perKey {
		t.Fatalf("total cap: %v %v (perKey %v)", ok4, ok5, perKey)
	}
	r1()
	r1() // twice is once
	if _, _, ok := l.acquire("c", now); !ok {
		t.Fatal("a released slot is not free again")
	}
	r2()
	r4()
}

func FuzzResumePoint(f *testing.F) {
	for _, s := range []string{"0", "17", " 42 ", "-1", "1e3", "9223372036854775807", "9223372036854775808", "", "abc"} {
		f.Add(s, "5")
	}
	f.Fuzz(func(t *testing.T, lastEventID, after string) {
		req := httptest.NewRequest("GET", "/v1/chats/x/events", nil)
		req.Header.Set(lastEventIDHeader, lastEventID)
		q := req.URL.Query()
		q.Set("after", after)
		req.URL.RawQuery = q.Encode()
		seq, err := resumePoint(req)
		if err == nil && seq < 0 {
			t.Fatalf("resume point %d from %q / %q", seq, lastEventID, after)
		}
		if err != nil && problemFor(err).Status != http.StatusBadRequest {
			t.Fatalf("error %v is not a 400", err)
		}
	})
}

// Load balancers' health checks pass the Host check: HAProxy's httpchk
// sends HTTP/1.0 without a Host header, others the replica's own address.
func TestGuardLetsHealthChecksThrough(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Config{Guard: Guard{CheckHost: true}}, &fakeChats{})
	for _, path := range []string{"/healthz", "/readyz"} {
		for _, host := range []string{"", "agentd-2.internal:8080"} {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			req.Host = host
			rec := httptest.NewRecorder()
			ts.Handler().ServeHTTP(rec, req)
			if rec.Code == http.StatusMisdirectedRequest {
				t.Errorf("GET %s with Host %q: 421, want the probe answered", path, host)
			}
		}
	}
	req := httptest.NewRequest(http.MethodGet, "/v1/chats", nil)
	req.Host = ""
	rec := httptest.NewRecorder()
	ts.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusMisdirectedRequest {
		t.Errorf("GET /v1/chats without Host: %d, want 421", rec.Code)
	}
}
