package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
)

// teamsFake serves saved teams and fails a create with a validation error.
type teamsFake struct {
	fakeChats
	teams map[string]*chat.Team
}

func (f *teamsFake) GetTeam(_ context.Context, tenant, name string, _ int) (*chat.Team, error) {
	if t, ok := f.teams[tenant+"/"+name]; ok {
		return t, nil
	}
	return nil, chat.ErrTeamNotFound
}

func (f *teamsFake) ListTeams(_ context.Context, p *chat.ListTeamsParams) ([]*chat.Team, string, error) {
	var out []*chat.Team
	for k, t := range f.teams {
		if strings.HasPrefix(k, p.Tenant+"/") {
			out = append(out, t)
		}
	}
	return out, "", nil
}

func (f *teamsFake) Create(context.Context, *chat.CreateParams) (*chat.Chat, bool, error) {
	return nil, false, &spec.ValidationError{Problems: []spec.Problem{{Path: "/messages/1/content", Message: "must be at most 10 bytes"}}}
}

// openAIErr decodes an error of the OpenAI shape and checks its status.
func openAIErr(t *testing.T, status int, rec interface {
	Result() *http.Response
}, body []byte) (typ, code, param, msg string) {
	t.Helper()
	if got := rec.Result().StatusCode; got != status {
		t.Fatalf("status %d, want %d: %s", got, status, body)
	}
	var e struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error.Code == nil || e.Error.Message == "" {
		t.Fatalf("not an OpenAI error: %s (%v)", body, err)
	}
	if e.Error.Param != nil {
		param = *e.Error.Param
	}
	return e.Error.Type, *e.Error.Code, param, e.Error.Message
}

// TestOpenAIErrorsAreOpenAIShaped: every error under /openai/v1 (the
// middleware's, the runtime's, the handlers') is OpenAI's error object,
// with the status /v1 would answer, but for a validation problem, which
// is the API's 400 naming the parameter.
func TestOpenAIErrorsAreOpenAIShaped(t *testing.T) {
	t.Parallel()
	const key = "sk-openai-shape-0123"
	fake := &teamsFake{teams: map[string]*chat.Team{"acme/writer": {Tenant: "acme", Name: "writer", Version: 1}}}
	ts := newTestServer(t, Config{APIKeys: map[string]string{key: "acme"}, MaxBodyBytes: 512}, fake)
	auth := []string{"Authorization", "Bearer " + key}
	chatReq := `{"model": "team:writer", "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]}`
	for _, c := range []struct {
		name, method, path, body string
		header                   []string
		status                   int
		typ, code, param         string
	}{
		{"no key", "GET", "/openai/v1/models", "", nil, 401, "authentication_error", "unauthorized", ""},
		{"unknown team", "POST", "/openai/v1/chat/completions", `{"model": "team:nope", "messages": [{"role": "user", "content": "hi"}]}`, auth, 404, "invalid_request_error", "model_not_found", "model"},
		{"not a team model", "POST", "/openai/v1/chat/completions", `{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}`, auth, 404, "invalid_request_error", "model_not_found", "model"},
		{"bad Idempotency-Key", "POST", "/openai/v1/responses", `{"model": "team:writer", "input": "hi"}`, []string{"Authorization", "Bearer " + key, "Idempotency-Key", strings.Repeat("k", 300)}, 400, "invalid_request_error", "malformed_request", "Idempotency-Key"},
		{"validation", "POST", "/openai/v1/chat/completions", chatReq, auth, 400, "invalid_request_error", "validation_failed", "messages[1].content"},
		{"too large", "POST", "/openai/v1/chat/completions", `{"model": "team:writer", "messages": [{"role": "user", "content": "` + strings.Repeat("x", 600) + `"}]}`, auth, 413, "invalid_request_error", "body_too_large", ""},
		{"unknown field", "POST", "/openai/v1/responses", `{"model": "team:writer", "input": "hi", "bogus": 1}`, auth, 400, "invalid_request_error", "invalid_json", ""},
		{"continuation with history", "POST", "/openai/v1/responses", `{"model": "team:writer", "previous_response_id": "resp_01a24369-49d2-7d71-99f2-a24a2b82f677_1", "input": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "metadata": {"k": "v"}}`, auth, 400, "invalid_request_error", "invalid_request", "input"},
		{"foreign response id", "GET", "/openai/v1/responses/resp_x_1", "", auth, 404, "invalid_request_error", "response_not_found", "response_id"},
		{"unknown route", "GET", "/openai/v1/embeddings", "", auth, 404, "invalid_request_error", "not_found", ""},
	} {
		rec := ts.do(t, c.method, c.path, c.body, c.header...)
		typ, code, param, msg := openAIErr(t, c.status, rec, rec.Body.Bytes())
		if typ != c.typ || code != c.code || param != c.param {
			t.Errorf("%s: type %q code %q param %q (%s), want %q %q %q", c.name, typ, code, param, msg, c.typ, c.code, c.param)
		}
	}
	// Every problem is in the message, not only the first.
	rec := ts.do(t, "POST", "/openai/v1/chat/completions", `{"model": "team:writer", "n": 3, "tools": [{}], "messages": [{"role": "tool", "content": "x"}]}`, auth...)
	_, _, _, msg := openAIErr(t, 400, rec, rec.Body.Bytes())
	for _, want := range []string{"n: must be 1", "tools: is not supported", "messages[0].role"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	// The models list is the tenant's saved teams.
	rec = ts.do(t, "GET", "/openai/v1/models", "", auth...)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"id":"team:writer"`) || !strings.Contains(rec.Body.String(), `"object":"list"`) {
		t.Errorf("models: %d %s", rec.Code, rec.Body)
	}
}

func TestOpenAIParam(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/messages/3/content": "messages[3].content",
		"/metadata/a~1b":      "metadata.a/b",
		"/team_ref":           "team_ref",
		"Idempotency-Key":     "Idempotency-Key",
		"":                    "",
	} {
		if got := openAIParam(in); got != want {
			t.Errorf("openAIParam(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestOpenAIRunsCountAsStreams: a request that runs a team holds its
// connection while the run lasts, so it counts against the caps on
// streams and long polls; reading models or a response does not.
func TestOpenAIRunsCountAsStreams(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		method, path string
		want         bool
	}{
		{"POST", "/openai/v1/chat/completions", true},
		{"POST", "/openai/v1/responses", true},
		{"GET", "/openai/v1/models", false},
		{"GET", "/openai/v1/responses/resp_x_1", false},
		{"POST", "/v1/chats", false},
	} {
		if got := waits(httptest.NewRequest(c.method, c.path, nil)); got != c.want {
			t.Errorf("%s %s: waits = %v, want %v", c.method, c.path, got, c.want)
		}
	}
}
