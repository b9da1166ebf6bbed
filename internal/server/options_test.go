package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/chat"
)

// A load balancer's default health check (HAProxy: OPTIONS / HTTP/1.0)
// must see a live server, not a 404.
func TestOptionsAnswersForLoadBalancerChecks(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Config{}, &fakeChats{})
	rec := ts.do(t, http.MethodOptions, "/", "")
	if rec.Code != http.StatusNoContent || !strings.Contains(rec.Header().Get("Allow"), "OPTIONS") {
		t.Fatalf("OPTIONS /: %d Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
	rec = ts.do(t, http.MethodOptions, "/v1/chats", "")
	if allow := rec.Header().Get("Allow"); rec.Code != http.StatusNoContent || !strings.Contains(allow, "GET") || !strings.Contains(allow, "POST") {
		t.Fatalf("OPTIONS /v1/chats: %d Allow %q", rec.Code, allow)
	}
	if rec := ts.do(t, http.MethodOptions, "/nowhere", ""); rec.Code != http.StatusNotFound {
		t.Fatalf("OPTIONS /nowhere: %d", rec.Code)
	}
}

// /readyz follows the store: 503 with Retry-After while it is unreachable.
func TestReadyzFollowsTheStore(t *testing.T) {
	t.Parallel()
	var storeErr error
	ts := newTestServer(t, Config{Ready: func() error { return storeErr }}, &fakeChats{})
	if rec := ts.do(t, http.MethodGet, "/readyz", ""); rec.Code != http.StatusOK {
		t.Fatalf("store up: %d", rec.Code)
	}
	storeErr = fmt.Errorf("%w: dial tcp 10.9.8.7:5432: connection refused", chat.ErrUnavailable)
	rec := ts.do(t, http.MethodGet, "/readyz", "")
	p := decodeProblem(t, rec, http.StatusServiceUnavailable)
	if p.Type != problemTypePrefix+kindUnavailable || rec.Header().Get("Retry-After") == "" || strings.Contains(rec.Body.String(), "10.9.8.7") {
		t.Fatalf("store down: %+v, Retry-After %q, body %s", p, rec.Header().Get("Retry-After"), rec.Body)
	}
	storeErr = errors.New("ping: something odd")
	if rec := ts.do(t, http.MethodGet, "/readyz", ""); rec.Code == http.StatusOK {
		t.Fatalf("failing check: %d", rec.Code)
	}
}
