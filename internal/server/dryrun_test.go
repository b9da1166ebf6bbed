package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/spec"
)

// dryRunChats is a Chats whose dry runs are funcs a test sets; Create and
// PutTeam are left to the nil interface, so a dry run that created
// something would panic into a 500.
type dryRunChats struct {
	fakeChats
	checkCreate func(tenant string, body []byte) ([]byte, error)
	checkTeam   func(name string, team *spec.Draft) ([]byte, error)
}

func (f *dryRunChats) CheckCreate(_ context.Context, tenant string, body []byte) ([]byte, error) {
	return f.checkCreate(tenant, body)
}

func (f *dryRunChats) CheckTeam(name string, team *spec.Draft) ([]byte, error) {
	return f.checkTeam(name, team)
}

func TestDryRunCreatesNothing(t *testing.T) {
	t.Parallel()
	var gotBody string
	f := &dryRunChats{
		checkCreate: func(tenant string, body []byte) ([]byte, error) {
			gotBody = string(body)
			if strings.Contains(gotBody, "bad") {
				return nil, &spec.ValidationError{Problems: []spec.Problem{{Path: "/agents/0/name", Message: "bad"}}}
			}
			return []byte(`{"task":"t","agents":[]}`), nil
		},
		checkTeam: func(string, *spec.Draft) ([]byte, error) {
			return []byte(`{"agents":[]}`), nil
		},
	}
	ts := newTestServer(t, Config{}, f)

	got := decodeJSON(t, ts.do(t, http.MethodPost, "/v1/chats?dry_run=true", `{"task": "t", "agents": []}`, "Idempotency-Key", "k1"), http.StatusOK)
	if got["spec"].(map[string]any)["task"] != "t" || len(got["warnings"].([]any)) != 0 || len(got) != 2 {
		t.Errorf("dry run answered %v", got)
	}
	p := decodeProblem(t, ts.do(t, http.MethodPost, "/v1/chats?dry_run=true", `{"bad": 1}`), http.StatusUnprocessableEntity)
	if len(p.Errors) != 1 || p.Errors[0].Path != "/agents/0/name" {
		t.Errorf("problem %+v", p)
	}
	// A dry run has nothing to wait for; both problems are listed.
	p = decodeProblem(t, ts.do(t, http.MethodPost, "/v1/chats?dry_run=yes&wait_s=5", `{}`), http.StatusBadRequest)
	if len(p.Errors) != 1 || p.Errors[0].Path != "dry_run" {
		t.Errorf("problem %+v", p)
	}
	p = decodeProblem(t, ts.do(t, http.MethodPost, "/v1/chats?dry_run=true&wait_s=5", `{}`), http.StatusBadRequest)
	if len(p.Errors) != 1 || p.Errors[0].Path != "wait_s" {
		t.Errorf("problem %+v", p)
	}

	got = decodeJSON(t, ts.do(t, http.MethodPut, "/v1/teams/debate?dry_run=true", `{"agents": []}`), http.StatusOK)
	if _, ok := got["spec"].(map[string]any)["agents"]; !ok || len(got) != 2 {
		t.Errorf("team dry run answered %v", got)
	}
	if gotBody != `{"bad": 1}` {
		t.Errorf("the runtime was asked about %q", gotBody)
	}
}

func TestAPIReferenceServed(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Config{APIKeys: map[string]string{"k": "t"}}, &fakeChats{})
	rec := ts.do(t, http.MethodGet, "/docs", "")
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET /docs: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	csp := rec.Header().Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self';", "connect-src 'self';", "img-src 'self' data:;"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	for _, want := range []string{`src="/console/redoc.standalone.js"`, `src="/console/docs.js"`, `data-spec-url="/openapi.yaml"`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("the page has no %s", want)
		}
	}
	if rec := ts.do(t, http.MethodGet, "/console/redoc.standalone.js", ""); rec.Code != http.StatusOK || rec.Body.Len() < 500_000 {
		t.Errorf("the bundle: %d, %d bytes", rec.Code, rec.Body.Len())
	}
	if !strings.Contains(ts.do(t, http.MethodGet, "/", "").Body.String(), `href="/docs"`) {
		t.Error("the console does not link to /docs")
	}
}
