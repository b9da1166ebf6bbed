package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/chat"
)

func TestConsoleServed(t *testing.T) {
	t.Parallel()
	// With API keys: the console's files are public, the API is not.
	ts := newTestServer(t, Config{APIKeys: map[string]string{"k": "t"}}, &fakeChats{})
	rec := ts.do(t, http.MethodGet, "/", "")
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	csp := rec.Header().Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
	if !strings.Contains(rec.Body.String(), `src="/console/app.js"`) {
		t.Errorf("index does not load the app:\n%s", rec.Body)
	}
	for file, ct := range map[string]string{"app.js": "text/javascript", "api.js": "text/javascript",
		"style.css": "text/css", "examples.json": "application/json"} {
		rec := ts.do(t, http.MethodGet, "/console/"+file, "")
		if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), ct) {
			t.Errorf("%s: %d %q", file, rec.Code, rec.Header().Get("Content-Type"))
		}
		etag := rec.Header().Get("ETag")
		if again := ts.do(t, http.MethodGet, "/console/"+file, "", "If-None-Match", etag); again.Code != http.StatusNotModified {
			t.Errorf("%s with its ETag: %d, want 304", file, again.Code)
		}
	}
	var ex map[string]json.RawMessage
	if err := json.Unmarshal(ts.do(t, http.MethodGet, "/console/examples.json", "").Body.Bytes(), &ex); err != nil || ex["debate.json"] == nil {
		t.Errorf("examples.json: %v, has %d examples", err, len(ex))
	}
	decodeProblem(t, ts.do(t, http.MethodGet, "/console/nope.js", ""), http.StatusNotFound)
	decodeProblem(t, ts.do(t, http.MethodGet, "/console/..%2fconsole.go", ""), http.StatusNotFound)
	decodeProblem(t, ts.do(t, http.MethodGet, "/v1/chats", ""), http.StatusUnauthorized)
}

// HEAD is answered wherever GET is, with GET's status and headers and no body.
func TestHeadWhereverGet(t *testing.T) {
	t.Parallel()
	done := sampleChat(chat.StatusCompleted)
	done.LastSeq = 0 // the event stream answers 204 at once
	ts := newTestServer(t, Config{}, &fakeChats{
		get:    func(context.Context, string, string) (*chat.Chat, error) { return done, nil },
		events: func(context.Context, string, string, int64, int) ([]chat.Event, error) { return nil, nil },
	})
	for _, path := range []string{"/", "/console/app.js", "/healthz", "/openapi.yaml", "/metrics",
		"/v1/chats/" + testChatID, "/v1/chats/" + testChatID + "/messages", "/v1/chats/" + testChatID + "/events"} {
		get := ts.do(t, http.MethodGet, path, "")
		head := ts.do(t, http.MethodHead, path, "")
		if head.Code != get.Code || head.Header().Get("Content-Type") != get.Header().Get("Content-Type") {
			t.Errorf("HEAD %s: %d %q, GET: %d %q", path, head.Code, head.Header().Get("Content-Type"), get.Code, get.Header().Get("Content-Type"))
		}
	}
}

func TestIncludeParameter(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Config{}, &fakeChats{})
	p := decodeProblem(t, ts.do(t, http.MethodGet, "/v1/chats/"+testChatID+"?include=everything", ""), http.StatusBadRequest)
	if len(p.Errors) != 1 || p.Errors[0].Path != "include" {
		t.Errorf("problem = %+v", p)
	}
}
