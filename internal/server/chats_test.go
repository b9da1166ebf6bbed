package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/api"
	"github.com/agentd/agentd/internal/runtime"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
)

const validSpec = `{"task":"hi","agents":[{"name":"a","type":"assistant","model":{"provider":"replay","responses":["x"]}}]}`

// sampleChat returns a chat record as the runtime might return it.
func sampleChat(status chat.Status) *chat.Chat {
	return &chat.Chat{
		ID: testChatID, Tenant: testTenant, Status: status,
		Spec: json.RawMessage(validSpec), LastSeq: 1,
		CreatedAt: testTime, UpdatedAt: testTime,
		// Internal fields that must never reach a client.
		Owner: "replica-1", Epoch: 3, RequestHash: "abc", IdempotencyKey: "k",
	}
}

func TestCreate(t *testing.T) {
	t.Parallel()
	t.Run("created", func(t *testing.T) {
		t.Parallel()
		var got *chat.CreateParams
		ts := newTestServer(t, Config{}, &fakeChats{create: func(_ context.Context, p *chat.CreateParams) (*chat.Chat, bool, error) {
			got = p
			return sampleChat(chat.StatusQueued), true, nil
		}})
		rec := ts.do(t, http.MethodPost, "/v1/chats", validSpec, "Idempotency-Key", "key-1")
		body := decodeJSON(t, rec, http.StatusCreated)
		if loc := rec.Header().Get("Location"); loc != "/v1/chats/"+testChatID {
			t.Errorf("Location = %q", loc)
		}
		if got.Tenant != DefaultTenant || got.IdempotencyKey != "key-1" || string(got.Body) != validSpec {
			t.Errorf("Create got %+v", got)
		}
		if body["id"] != testChatID || body["status"] != "queued" {
			t.Errorf("body = %v", body)
		}
	})
	t.Run("idempotent repeat", func(t *testing.T) {
		t.Parallel()
		ts := newTestServer(t, Config{}, &fakeChats{create: func(context.Context, *chat.CreateParams) (*chat.Chat, bool, error) {
			return sampleChat(chat.StatusRunning), false, nil
		}})
		rec := ts.do(t, http.MethodPost, "/v1/chats", validSpec, "Idempotency-Key", "key-1")
		decodeJSON(t, rec, http.StatusOK)
		if loc := rec.Header().Get("Location"); loc != "" {
			t.Errorf("Location on a repeat = %q", loc)
		}
	})
	t.Run("idempotency conflict", func(t *testing.T) {
		t.Parallel()
		ts := newTestServer(t, Config{}, &fakeChats{create: func(context.Context, *chat.CreateParams) (*chat.Chat, bool, error) {
			return nil, false, fmt.Errorf("create chat: %w", chat.ErrConflict)
		}})
		p := decodeProblem(t, ts.do(t, http.MethodPost, "/v1/chats", validSpec, "Idempotency-Key", "key-1"), http.StatusConflict)
		if p.Type != problemTypePrefix+kindConflict {
			t.Errorf("type = %q", p.Type)
		}
	})
	t.Run("invalid spec lists every problem", func(t *testing.T) {
		t.Parallel()
		problems := []spec.Problem{{Path: "/agents/0/model", Message: "is required"}, {Path: "/max_round", Message: "must be at least 1"}}
		ts := newTestServer(t, Config{}, &fakeChats{create: func(context.Context, *chat.CreateParams) (*chat.Chat, bool, error) {
			return nil, false, &spec.ValidationError{Problems: problems}
		}})
		p := decodeProblem(t, ts.do(t, http.MethodPost, "/v1/chats", `{"agents":[{}],"max_round":0}`), http.StatusUnprocessableEntity)
		want := []api.ProblemField{{Path: "/agents/0/model", Message: "is required"}, {Path: "/max_round", Message: "must be at least 1"}}
		if !reflect.DeepEqual(p.Errors, want) {
			t.Errorf("errors = %+v, want %+v", p.Errors, want)
		}
	})
	// Bodies the runtime must never see.
	for name, body := range map[string]string{
		"malformed":  `{"task":`,
		"two values": `{} {}`,
		"trailing":   `{"task":"x"}]`,
		"empty":      ``,
		"blank":      "  \n",
	} {
		t.Run("400 "+name, func(t *testing.T) {
			t.Parallel()
			ts := newTestServer(t, Config{}, &fakeChats{})
			decodeProblem(t, ts.do(t, http.MethodPost, "/v1/chats", body), http.StatusBadRequest)
		})
	}
	t.Run("413 declared length", func(t *testing.T) {
		t.Parallel()
		ts := newTestServer(t, Config{MaxBodyBytes: 64}, &fakeChats{})
		p := decodeProblem(t, ts.do(t, http.MethodPost, "/v1/chats", `{"task":"`+strings.Repeat("x", 100)+`"}`), http.StatusRequestEntityTooLarge)
		if !strings.Contains(p.Detail, "64 bytes") {
			t.Errorf("detail = %q", p.Detail)
		}
	})
	t.Run("413 chunked", func(t *testing.T) {
		t.Parallel()
		ts := newTestServer(t, Config{MaxBodyBytes: 64}, &fakeChats{})
		req := httptest.NewRequest(http.MethodPost, "/v1/chats", strings.NewReader(`{"task":"`+strings.Repeat("x", 100)+`"}`))
		req.ContentLength = -1 // unknown length: the limit must hold while reading
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		ts.Handler().ServeHTTP(rec, req)
		decodeProblem(t, rec, http.StatusRequestEntityTooLarge)
	})
	t.Run("idempotency key too long", func(t *testing.T) {
		t.Parallel()
		ts := newTestServer(t, Config{}, &fakeChats{})
		p := decodeProblem(t, ts.do(t, http.MethodPost, "/v1/chats", validSpec, "Idempotency-Key", strings.Repeat("k", 256)), http.StatusBadRequest)
		if len(p.Errors) != 1 || p.Errors[0].Path != "Idempotency-Key" {
			t.Errorf("errors = %+v", p.Errors)
		}
	})
	t.Run("bad wait_s", func(t *testing.T) {
		t.Parallel()
		ts := newTestServer(t, Config{}, &fakeChats{})
		p := decodeProblem(t, ts.do(t, http.MethodPost, "/v1/chats?wait_s=-1", validSpec), http.StatusBadRequest)
		if len(p.Errors) != 1 || p.Errors[0].Path != "wait_s" {
			t.Errorf("errors = %+v", p.Errors)
		}
	})
}

// POST /v1/chats?wait_s=N answers once the chat is terminal, woken by the
// subscription rather than by polling.
func TestCreateWaitsForTerminal(t *testing.T) {
	t.Parallel()
	var status atomic.Value
	status.Store(chat.StatusRunning)
	signal := make(chan runtime.Wake, 1)
	subscribed := make(chan struct{})
	var unsubscribed atomic.Bool
	ts := newTestServer(t, Config{}, &fakeChats{
		create: func(context.Context, *chat.CreateParams) (*chat.Chat, bool, error) {
			return sampleChat(chat.StatusQueued), true, nil
		},
		get: func(context.Context, string, string) (*chat.Chat, error) {
			return sampleChat(status.Load().(chat.Status)), nil
		},
		subscribe: func(string) (<-chan runtime.Wake, func()) {
			close(subscribed)
			return signal, func() { unsubscribed.Store(true) }
		},
	})
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- ts.do(t, http.MethodPost, "/v1/chats?wait_s=30", validSpec) }()
	<-subscribed
	status.Store(chat.StatusCompleted)
	signal <- runtime.Wake{} // from another replica: the progress is read
	select {
	case rec := <-done:
		body := decodeJSON(t, rec, http.StatusCreated)
		if body["status"] != "completed" {
			t.Errorf("status = %v, want completed", body["status"])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("create with wait_s did not return after the chat completed")
	}
	if !unsubscribed.Load() {
		t.Error("the subscription was not ended")
	}
}

// wait_s above the server's cap is clamped, and the chat is returned as it stands.
func TestCreateWaitTimesOut(t *testing.T) {
	t.Parallel()
	log := newMemLog(chat.StatusRunning)
	srv := newTestServer(t, Config{MaxWait: 20 * time.Millisecond}, &createOnLog{memLog: log})
	rec := srv.do(t, http.MethodPost, "/v1/chats?wait_s=3600", validSpec)
	body := decodeJSON(t, rec, http.StatusCreated)
	if body["status"] != "running" {
		t.Errorf("status = %v, want running", body["status"])
	}
}

// createOnLog creates "the" chat of a memLog.
type createOnLog struct{ *memLog }

func (c *createOnLog) Create(ctx context.Context, p *chat.CreateParams) (*chat.Chat, bool, error) {
	ch, err := c.Get(ctx, p.Tenant, testChatID)
	return ch, true, err
}

func TestChatObject(t *testing.T) {
	t.Parallel()
	completed := testTime.Add(time.Minute)
	pending := json.RawMessage(`{"request_id":"r1","kind":"speaker","candidates":["a","b"],"reason":"manual selection"}`)
	tests := []struct {
		name string
		chat *chat.Chat
		want string
	}{
		{"queued, optional fields null", sampleChat(chat.StatusQueued),
			`{"id":"` + testChatID + `","name":null,"status":"queued","stop_reason":null,"stop_detail":null,"error":null,` +
				`"turns":0,"message_count":0,"last_seq":1,"usage":{"prompt_tokens":0,"completion_tokens":0},"pending_input":null,` +
				`"created_at":"2025-01-02T03:04:05Z","updated_at":"2025-01-02T03:04:05Z","completed_at":null,"metadata":null,"run":1,"queued_runs":0,"forked_from":null,"team":null,"spec":` + validSpec + `}`},
		{"completed", func() *chat.Chat {
			c := sampleChat(chat.StatusFailed)
			c.Name, c.StopReason, c.StopDetail, c.Error = "review", chat.StopError, "Model failed.", "replay exhausted"
			c.Turns, c.MessageCount, c.LastSeq, c.PromptTokens, c.CompletionTokens = 3, 4, 9, 100, 20
			c.CompletedAt, c.Metadata = &completed, json.RawMessage(`{"ticket":"ABC-1"}`)
			c.Team = &chat.TeamRef{Name: "support", Version: 3}
			c.PendingInput = pending // stale: the chat no longer waits
			return c
		}(),
			`{"id":"` + testChatID + `","name":"review","status":"failed","stop_reason":"error","stop_detail":"Model failed.","error":"replay exhausted",` +
				`"turns":3,"message_count":4,"last_seq":9,"usage":{"prompt_tokens":100,"completion_tokens":20},"pending_input":null,` +
				`"created_at":"2025-01-02T03:04:05Z","updated_at":"2025-01-02T03:04:05Z","completed_at":"2025-01-02T03:05:05Z","metadata":{"ticket":"ABC-1"},"run":1,"queued_runs":0,"forked_from":null,"team":{"name":"support","version":3},"spec":` + validSpec + `}`},
		{"awaiting input", func() *chat.Chat {
			c := sampleChat(chat.StatusAwaitingInput)
			c.PendingInput = pending
			return c
		}(),
			`{"id":"` + testChatID + `","name":null,"status":"awaiting_input","stop_reason":null,"stop_detail":null,"error":null,` +
				`"turns":0,"message_count":0,"last_seq":1,"usage":{"prompt_tokens":0,"completion_tokens":0},"pending_input":` + string(pending) + `,` +
				`"created_at":"2025-01-02T03:04:05Z","updated_at":"2025-01-02T03:04:05Z","completed_at":null,"metadata":null,"run":1,"queued_runs":0,"forked_from":null,"team":null,"spec":` + validSpec + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts := newTestServer(t, Config{}, &fakeChats{get: func(_ context.Context, tenant, id string) (*chat.Chat, error) {
				return tt.chat, nil
			}})
			rec := ts.do(t, http.MethodGet, "/v1/chats/"+testChatID+"?include=spec", "")
			decodeJSON(t, rec, http.StatusOK)
			if got := strings.TrimSpace(rec.Body.String()); got != tt.want {
				t.Errorf("body\n got %s\nwant %s", got, tt.want)
			}
			// Without ?include=spec, the same object without its spec.
			rec = ts.do(t, http.MethodGet, "/v1/chats/"+testChatID, "")
			decodeJSON(t, rec, http.StatusOK)
			withoutSpec := strings.Replace(tt.want, `,"spec":`+validSpec, "", 1)
			if got := strings.TrimSpace(rec.Body.String()); got != withoutSpec {
				t.Errorf("body without include\n got %s\nwant %s", got, withoutSpec)
			}
		})
	}
}

func TestGet(t *testing.T) {
	t.Parallel()
	var gotID string
	ts := newTestServer(t, Config{}, &fakeChats{get: func(_ context.Context, tenant, id string) (*chat.Chat, error) {
		gotID = id
		if id != testChatID {
			return nil, fmt.Errorf("get chat %s: %w", id, chat.ErrNotFound)
		}
		return sampleChat(chat.StatusRunning), nil
	}})
	decodeJSON(t, ts.do(t, http.MethodGet, "/v1/chats/"+testChatID, ""), http.StatusOK)
	// Upper case is the same uuid: the store sees the canonical form.
	decodeJSON(t, ts.do(t, http.MethodGet, "/v1/chats/"+strings.ToUpper(testChatID), ""), http.StatusOK)
	if gotID != testChatID {
		t.Errorf("Get got id %q, want %q", gotID, testChatID)
	}
	decodeProblem(t, ts.do(t, http.MethodGet, "/v1/chats/6f1b2f0c-0000-4000-8000-000000000000", ""), http.StatusNotFound)

	// Ids that are not canonical uuids never reach the runtime.
	gotID = ""
	for _, id := range []string{"nope", "0b7f3a528a3e4f0e9a526f1b2f0c9d11", "{0b7f3a52-8a3e-4f0e-9a52-6f1b2f0c9d11}", "0b7f3a52-8a3e-4f0e-9a52-6f1b2f0c9d1z"} {
		p := decodeProblem(t, ts.do(t, http.MethodGet, "/v1/chats/"+id, ""), http.StatusNotFound)
		if p.Detail != "chat not found" {
			t.Errorf("%s: detail = %q", id, p.Detail)
		}
	}
	if gotID != "" {
		t.Errorf("Get was called with %q", gotID)
	}
	for _, path := range []string{"/v1/chats/nope/messages", "/v1/chats/nope/events", "/v1/chats/nope/cancel", "/v1/chats/nope/input"} {
		method := http.MethodGet
		if strings.HasSuffix(path, "cancel") || strings.HasSuffix(path, "input") {
			method = http.MethodPost
		}
		decodeProblem(t, ts.do(t, method, path, `{}`), http.StatusNotFound)
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	var got *chat.ListChatsParams
	next := ""
	ts := newTestServer(t, Config{}, &fakeChats{list: func(_ context.Context, p *chat.ListChatsParams) ([]*chat.Chat, string, error) {
		got = p
		if p.Status == chat.StatusFailed {
			return nil, "", nil
		}
		return []*chat.Chat{sampleChat(chat.StatusRunning), sampleChat(chat.StatusRunning)}, next, nil
	}})

	body := decodeJSON(t, ts.do(t, http.MethodGet, "/v1/chats", ""), http.StatusOK)
	if want := (&chat.ListChatsParams{Tenant: DefaultTenant, Limit: 50}); !reflect.DeepEqual(got, want) {
		t.Errorf("List got %+v, want %+v", got, want)
	}
	if len(body["chats"].([]any)) != 2 || body["next_cursor"] != nil {
		t.Errorf("body = %v", body)
	}

	next = "c2"
	body = decodeJSON(t, ts.do(t, http.MethodGet, "/v1/chats?status=running&limit=1000&cursor=c1", ""), http.StatusOK)
	if want := (&chat.ListChatsParams{Tenant: DefaultTenant, Status: chat.StatusRunning, Limit: 1000, Cursor: "c1"}); !reflect.DeepEqual(got, want) {
		t.Errorf("List got %+v, want %+v", got, want)
	}
	if body["next_cursor"] != "c2" {
		t.Errorf("next_cursor = %v", body["next_cursor"])
	}

	// An empty page is an empty array, never null.
	rec := ts.do(t, http.MethodGet, "/v1/chats?status=failed", "")
	decodeJSON(t, rec, http.StatusOK)
	if !strings.Contains(rec.Body.String(), `"chats":[]`) {
		t.Errorf("empty page = %s", rec.Body)
	}

	for query, wantPaths := range map[string][]string{
		"status=done":          {"status"},
		"limit=0":              {"limit"},
		"limit=1001":           {"limit"},
		"limit=ten":            {"limit"},
		"status=x&limit=-1":    {"status", "limit"},
		"status=Running&limit": {"status"},
	} {
		p := decodeProblem(t, ts.do(t, http.MethodGet, "/v1/chats?"+query, ""), http.StatusBadRequest)
		var paths []string
		for _, e := range p.Errors {
			paths = append(paths, e.Path)
		}
		if !reflect.DeepEqual(paths, wantPaths) {
			t.Errorf("%s: problem paths = %v, want %v", query, paths, wantPaths)
		}
	}
}

func TestInput(t *testing.T) {
	t.Parallel()
	var got *chat.Input
	ts := newTestServer(t, Config{MaxBodyBytes: 256}, &fakeChats{
		input: func(_ context.Context, tenant, id, _ string, in *chat.Input) (*chat.Chat, error) {
			got = in
			if in.RequestID != "r1" {
				return nil, chat.ErrNoPendingInput
			}
			return sampleChat(chat.StatusRunning), nil
		},
	})
	path := "/v1/chats/" + testChatID + "/input"

	body := decodeJSON(t, ts.do(t, http.MethodPost, path, `{"request_id":"r1","content":"go on"}`), http.StatusAccepted)
	if body["status"] != "running" || got.RequestID != "r1" || got.Content == nil || *got.Content != "go on" || got.Speaker != nil {
		t.Errorf("body %v, input %+v", body, got)
	}
	// A list is a MultiModalMessage's content: texts and images.
	decodeJSON(t, ts.do(t, http.MethodPost, path, `{"request_id":"r1","content":["look",{"image":{"data":"aGk="}}]}`), http.StatusAccepted)
	if got.Content != nil || len(got.Parts) != 2 || got.Parts[0].Text != "look" || got.Parts[1].Image == nil || string(got.Parts[1].Image.Data) != "hi" {
		t.Errorf("input %+v", got)
	}
	p0 := decodeProblem(t, ts.do(t, http.MethodPost, path, `{"request_id":"r1","content":["look",{"picture":1}]}`), http.StatusUnprocessableEntity)
	if len(p0.Errors) != 1 || p0.Errors[0].Path != "/content/1" {
		t.Errorf("problem %+v", p0)
	}
	decodeJSON(t, ts.do(t, http.MethodPost, path, `{"request_id":"r1","speaker":"coder"}`), http.StatusAccepted)
	if got.Speaker == nil || *got.Speaker != "coder" {
		t.Errorf("input %+v", got)
	}
	// An empty message is an answer (it ends a TERMINATE-mode chat).
	decodeJSON(t, ts.do(t, http.MethodPost, path, `{"request_id":"r1","content":""}`), http.StatusAccepted)

	p := decodeProblem(t, ts.do(t, http.MethodPost, path, `{"request_id":"stale","content":"x"}`), http.StatusConflict)
	if p.Type != problemTypePrefix+kindNoPendingInput {
		t.Errorf("type = %q", p.Type)
	}
	decodeProblem(t, ts.do(t, http.MethodPost, path, `{"request_id":"r1","content":"x","extra":1}`), http.StatusBadRequest)
	decodeProblem(t, ts.do(t, http.MethodPost, path, `{"request_id":"r1","content":5}`), http.StatusBadRequest)
	decodeProblem(t, ts.do(t, http.MethodPost, path, `{"request_id":"r1"} {}`), http.StatusBadRequest)
	decodeProblem(t, ts.do(t, http.MethodPost, path, `{"request_id":"`+strings.Repeat("r", 300)+`"}`), http.StatusRequestEntityTooLarge)

	p = decodeProblem(t, ts.do(t, http.MethodPost, path, `{}`), http.StatusUnprocessableEntity)
	if len(p.Errors) != 2 || p.Errors[0].Path != "/request_id" || p.Errors[1].Path != "/content" {
		t.Errorf("errors = %+v", p.Errors)
	}
	p = decodeProblem(t, ts.do(t, http.MethodPost, path, `{"request_id":"r1","content":"a","speaker":"b"}`), http.StatusUnprocessableEntity)
	if len(p.Errors) != 1 || p.Errors[0].Path != "/speaker" {
		t.Errorf("errors = %+v", p.Errors)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	changed := true
	ts := newTestServer(t, Config{}, &fakeChats{cancel: func(_ context.Context, tenant, id string) (*chat.Chat, bool, error) {
		if changed {
			return sampleChat(chat.StatusRunning), true, nil
		}
		return sampleChat(chat.StatusCompleted), false, nil
	}})
	path := "/v1/chats/" + testChatID + "/cancel"
	decodeJSON(t, ts.do(t, http.MethodPost, path, ""), http.StatusAccepted)
	changed = false
	if body := decodeJSON(t, ts.do(t, http.MethodPost, path, ""), http.StatusOK); body["status"] != "completed" {
		t.Errorf("status = %v", body["status"])
	}
}

func TestCancelNotFound(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Config{}, &fakeChats{cancel: func(context.Context, string, string) (*chat.Chat, bool, error) {
		return nil, false, chat.ErrNotFound
	}})
	decodeProblem(t, ts.do(t, http.MethodPost, "/v1/chats/"+testChatID+"/cancel", ""), http.StatusNotFound)
}

func TestAuth(t *testing.T) {
	t.Parallel()
	var tenant string
	ts := newTestServer(t, Config{APIKeys: map[string]string{"key-a": "tenant-a", "key-b": "tenant-b"}}, &fakeChats{
		get: func(_ context.Context, tn, id string) (*chat.Chat, error) {
			tenant = tn
			return sampleChat(chat.StatusRunning), nil
		},
	})
	path := "/v1/chats/" + testChatID
	for name, header := range map[string]string{
		"missing":      "",
		"wrong key":    "Bearer key-c",
		"basic scheme": "Basic a2V5LWE6",
		"no key":       "Bearer ",
	} {
		var rec *httptest.ResponseRecorder
		if header == "" {
			rec = ts.do(t, http.MethodGet, path, "")
		} else {
			rec = ts.do(t, http.MethodGet, path, "", "Authorization", header)
		}
		decodeProblem(t, rec, http.StatusUnauthorized)
		if rec.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%s: no WWW-Authenticate challenge", name)
		}
	}
	// Unknown /v1 routes do not tell an anonymous client what exists.
	decodeProblem(t, ts.do(t, http.MethodGet, "/v1/secret", ""), http.StatusUnauthorized)
	if tenant != "" {
		t.Fatalf("an unauthenticated request reached the runtime as %q", tenant)
	}

	decodeJSON(t, ts.do(t, http.MethodGet, path, "", "Authorization", "Bearer key-b"), http.StatusOK)
	if tenant != "tenant-b" {
		t.Errorf("tenant = %q, want tenant-b", tenant)
	}
	decodeJSON(t, ts.do(t, http.MethodGet, path, "", "Authorization", "bearer key-a"), http.StatusOK)
	if tenant != "tenant-a" {
		t.Errorf("tenant = %q, want tenant-a", tenant)
	}
	// Operations endpoints stay open.
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/openapi.yaml"} {
		if rec := ts.do(t, http.MethodGet, p, ""); rec.Code != http.StatusOK {
			t.Errorf("%s without a key: %d", p, rec.Code)
		}
	}
}

func TestNoAuthUsesDefaultTenant(t *testing.T) {
	t.Parallel()
	var tenant string
	ts := newTestServer(t, Config{}, &fakeChats{get: func(_ context.Context, tn, id string) (*chat.Chat, error) {
		tenant = tn
		return sampleChat(chat.StatusRunning), nil
	}})
	decodeJSON(t, ts.do(t, http.MethodGet, "/v1/chats/"+testChatID, "", "Authorization", "Bearer whatever"), http.StatusOK)
	if tenant != DefaultTenant {
		t.Errorf("tenant = %q", tenant)
	}
}

func TestUnknownRouteAndMethod(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Config{}, &fakeChats{})
	for _, path := range []string{"/nope", "/v1/nope", "/v1/chats/" + testChatID + "/nope", "/v2/chats"} {
		p := decodeProblem(t, ts.do(t, http.MethodGet, path, ""), http.StatusNotFound)
		if !strings.Contains(p.Detail, "no route") {
			t.Errorf("%s: detail = %q", path, p.Detail)
		}
	}
	for _, tt := range []struct{ method, path, allow string }{
		{http.MethodPut, "/v1/chats/" + testChatID, "DELETE, GET, HEAD, PATCH"},
		{http.MethodPost, "/v1/teams/support", "GET, HEAD, PUT"},
		{http.MethodPut, "/v1/chats", "GET, HEAD, POST"},
		{http.MethodGet, "/v1/chats/" + testChatID + "/cancel", "POST"},
		{http.MethodHead, "/v1/chats/" + testChatID + "/cancel", "POST"},
		{http.MethodPost, "/healthz", "GET, HEAD"},
	} {
		rec := ts.do(t, tt.method, tt.path, "")
		p := decodeProblem(t, rec, http.StatusMethodNotAllowed)
		if p.Type != problemTypePrefix+kindMethodNotAllowed {
			t.Errorf("%s %s: type %q", tt.method, tt.path, p.Type)
		}
		if got := rec.Header().Get("Allow"); got != tt.allow {
			t.Errorf("%s %s: Allow = %q, want %q", tt.method, tt.path, got, tt.allow)
		}
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	var runtimeReady atomic.Bool
	runtimeReady.Store(true)
	ts := newTestServer(t, Config{}, &fakeChats{ready: runtimeReady.Load})

	if body := decodeJSON(t, ts.do(t, http.MethodGet, "/healthz", ""), http.StatusOK); body["status"] != "ok" {
		t.Errorf("healthz = %v", body)
	}
	if body := decodeJSON(t, ts.do(t, http.MethodGet, "/readyz", ""), http.StatusOK); body["status"] != "ready" {
		t.Errorf("readyz = %v", body)
	}
	ts.SetReady(false)
	decodeProblem(t, ts.do(t, http.MethodGet, "/readyz", ""), http.StatusServiceUnavailable)
	// Liveness is not readiness: a draining replica is still alive.
	decodeJSON(t, ts.do(t, http.MethodGet, "/healthz", ""), http.StatusOK)
	ts.SetReady(true)
	decodeJSON(t, ts.do(t, http.MethodGet, "/readyz", ""), http.StatusOK)
	runtimeReady.Store(false)
	decodeProblem(t, ts.do(t, http.MethodGet, "/readyz", ""), http.StatusServiceUnavailable)
	if strings.Contains(ts.log.String(), `"level":"ERROR"`) {
		t.Errorf("not being ready is not an error: %s", ts.log)
	}
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Config{}, &fakeChats{})
	rec := ts.do(t, http.MethodGet, "/healthz", "", "X-Request-Id", "abc-123")
	if got := rec.Header().Get("X-Request-Id"); got != "abc-123" {
		t.Errorf("echoed id = %q", got)
	}
	for _, bad := range []string{"", "has space", strings.Repeat("x", 129), "new\nline"} {
		rec := ts.do(t, http.MethodGet, "/healthz", "", "X-Request-Id", bad)
		got := rec.Header().Get("X-Request-Id")
		if got == "" || got == bad || len(got) != 36 {
			t.Errorf("id for %q = %q, want a generated uuid", bad, got)
		}
	}
	if !strings.Contains(ts.log.String(), `"request_id":"abc-123"`) {
		t.Errorf("access log lacks the request id: %s", ts.log)
	}
}

// A server error answers "internal error" and nothing else; the log has the
// cause and the request id to find it by.
func TestInternalErrorIsLoggedNotLeaked(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Config{}, &fakeChats{get: func(context.Context, string, string) (*chat.Chat, error) {
		return nil, errors.New("dial tcp 10.1.2.3:5432: connection refused")
	}})
	rec := ts.do(t, http.MethodGet, "/v1/chats/"+testChatID, "", "X-Request-Id", "req-500")
	p := decodeProblem(t, rec, http.StatusInternalServerError)
	if p.Detail != "internal error" || strings.Contains(rec.Body.String(), "10.1.2.3") {
		t.Errorf("response leaks the cause: %s", rec.Body)
	}
	logs := ts.log.String()
	if !strings.Contains(logs, "10.1.2.3") || !strings.Contains(logs, `"request_id":"req-500"`) {
		t.Errorf("log lacks the cause or request id: %s", logs)
	}
}

func TestRecoverer(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Config{}, &fakeChats{get: func(context.Context, string, string) (*chat.Chat, error) {
		panic("boom in handler")
	}})
	rec := ts.do(t, http.MethodGet, "/v1/chats/"+testChatID, "", "X-Request-Id", "req-panic")
	if p := decodeProblem(t, rec, http.StatusInternalServerError); p.Detail != "internal error" {
		t.Errorf("detail = %q", p.Detail)
	}
	logs := ts.log.String()
	if !strings.Contains(logs, "boom in handler") || !strings.Contains(logs, `"request_id":"req-panic"`) {
		t.Errorf("log lacks the panic or request id: %s", logs)
	}
	// The access log and metrics see the 500 the panic became.
	if !strings.Contains(logs, `"status":500`) {
		t.Errorf("access log lacks the 500: %s", logs)
	}
}
