package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
)

// backendChats is a Chats whose docs/backend.md methods are the funcs a test sets.
type backendChats struct {
	fakeChats
	patch   func(tenant, id string, patch map[string]json.RawMessage) (*chat.Chat, error)
	vars    func(tenant, id string, change json.RawMessage) (*chat.Chat, error)
	erase   func(tenant, id string) error
	putTeam func(tenant, name string, team *spec.Draft) (*chat.Team, bool, error)
}

func (f *backendChats) PatchMetadata(_ context.Context, tenant, id string, p map[string]json.RawMessage) (*chat.Chat, error) {
	return f.patch(tenant, id, p)
}

func (f *backendChats) PatchContext(_ context.Context, tenant, id string, change json.RawMessage) (*chat.Chat, error) {
	return f.vars(tenant, id, change)
}

func (f *backendChats) Erase(_ context.Context, tenant, id string) error { return f.erase(tenant, id) }

func (f *backendChats) PutTeam(_ context.Context, tenant, name string, team *spec.Draft) (*chat.Team, bool, error) {
	return f.putTeam(tenant, name, team)
}

func TestListFilters(t *testing.T) {
	t.Parallel()
	var got *chat.ListChatsParams
	ts := newTestServer(t, Config{}, &fakeChats{list: func(_ context.Context, p *chat.ListChatsParams) ([]*chat.Chat, string, error) {
		got = p
		return nil, "", nil
	}})
	decodeJSON(t, ts.do(t, http.MethodGet, "/v1/chats?metadata.user=u-1&metadata.plan=pro&metadata.plan=free&name=review&team=support&created_after=2026-01-02T03:04:05Z&created_before=2026-02-01T00:00:00.5Z&limit=7", ""), http.StatusOK)
	want := []chat.MetadataMatch{{Key: "plan", Value: "free"}, {Key: "plan", Value: "pro"}, {Key: "user", Value: "u-1"}}
	if !slices.Equal(got.Metadata, want) {
		t.Errorf("metadata filters %v, want %v", got.Metadata, want)
	}
	if got.Name != "review" || got.Team != "support" || got.Limit != 7 || got.Tenant != testTenant {
		t.Errorf("params %+v", got)
	}
	if got.CreatedAfter == nil || !got.CreatedAfter.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) ||
		got.CreatedBefore == nil || got.CreatedBefore.Nanosecond() != 5e8 {
		t.Errorf("created range %v .. %v", got.CreatedAfter, got.CreatedBefore)
	}

	p := decodeProblem(t, ts.do(t, http.MethodGet, "/v1/chats?metadata.=x&created_after=yesterday&team=a@1&metadata."+strings.Repeat("k", 300)+"=v", ""), http.StatusBadRequest)
	var paths []string
	for _, e := range p.Errors {
		paths = append(paths, e.Path)
	}
	for _, want := range []string{"metadata.", "created_after", "team", "metadata." + strings.Repeat("k", 300)} {
		if !slices.Contains(paths, want) {
			t.Errorf("no problem at %q: %v", want, p.Errors)
		}
	}
	var many strings.Builder
	for i := range 17 {
		many.WriteString("&metadata.k" + string(rune('a'+i)) + "=v")
	}
	decodeProblem(t, ts.do(t, http.MethodGet, "/v1/chats?limit=1"+many.String(), ""), http.StatusBadRequest)
}

func TestPatchMetadataRequest(t *testing.T) {
	t.Parallel()
	var got map[string]json.RawMessage
	ts := newTestServer(t, Config{}, &backendChats{patch: func(tenant, id string, p map[string]json.RawMessage) (*chat.Chat, error) {
		got = p
		c := sampleChat(chat.StatusRunning)
		c.Metadata = json.RawMessage(`{"a":1}`)
		return c, nil
	}})
	rec := ts.do(t, http.MethodPatch, "/v1/chats/"+testChatID, `{"metadata": {"a": 1, "b": null}}`)
	decodeJSON(t, rec, http.StatusOK)
	if string(got["a"]) != "1" || string(got["b"]) != "null" || len(got) != 2 {
		t.Errorf("patch %v: want a set to 1 and b removed (null)", got)
	}
	if !strings.Contains(rec.Body.String(), `"metadata":{"a":1}`) {
		t.Errorf("answer %s", rec.Body)
	}
	decodeProblem(t, ts.do(t, http.MethodPatch, "/v1/chats/"+testChatID, `{"status": "completed"}`), http.StatusBadRequest)
	p := decodeProblem(t, ts.do(t, http.MethodPatch, "/v1/chats/"+testChatID, `{}`), http.StatusUnprocessableEntity)
	if len(p.Errors) != 1 || p.Errors[0].Path != "" || !strings.Contains(p.Errors[0].Message, "metadata and/or context_variables") {
		t.Errorf("patch without metadata: %+v", p)
	}
	decodeProblem(t, ts.do(t, http.MethodPatch, "/v1/chats/"+testChatID, `{"metadata": [1]}`), http.StatusBadRequest)
	decodeProblem(t, ts.do(t, http.MethodPatch, "/v1/chats/not-a-chat", `{"metadata": {}}`), http.StatusNotFound)
}

// TestPatchContextRequest: context_variables go to PatchContext as they
// came, before the metadata; a run in progress is a 409 that changes no
// metadata; the answer shows the variables.
func TestPatchContextRequest(t *testing.T) {
	t.Parallel()
	var calls []string
	busy := false
	ts := newTestServer(t, Config{}, &backendChats{
		patch: func(tenant, id string, p map[string]json.RawMessage) (*chat.Chat, error) {
			calls = append(calls, "metadata")
			c := sampleChat(chat.StatusCompleted)
			c.ContextVariables = json.RawMessage(`{"tier":"gold"}`)
			return c, nil
		},
		vars: func(tenant, id string, change json.RawMessage) (*chat.Chat, error) {
			calls = append(calls, "context "+string(change))
			if busy {
				return nil, fmt.Errorf("patch: %w", chat.ErrRunActive)
			}
			c := sampleChat(chat.StatusCompleted)
			c.ContextVariables = json.RawMessage(`{"tier":"gold"}`)
			return c, nil
		}})
	rec := ts.do(t, http.MethodPatch, "/v1/chats/"+testChatID, `{"metadata": {"a": 1}, "context_variables": {"tier": "gold", "x": null}}`)
	decodeJSON(t, rec, http.StatusOK)
	if !slices.Equal(calls, []string{`context {"tier": "gold", "x": null}`, "metadata"}) {
		t.Errorf("calls %q", calls)
	}
	if !strings.Contains(rec.Body.String(), `"context_variables":{"tier":"gold"}`) {
		t.Errorf("answer %s", rec.Body)
	}
	busy, calls = true, nil
	p := decodeProblem(t, ts.do(t, http.MethodPatch, "/v1/chats/"+testChatID, `{"metadata": {"a": 1}, "context_variables": {"x": 1}}`), http.StatusConflict)
	if p.Type != problemTypePrefix+kindRunActive || len(calls) != 1 {
		t.Errorf("during a run: %+v, calls %q", p, calls)
	}
}

func TestEraseAnswers(t *testing.T) {
	t.Parallel()
	var err error
	ts := newTestServer(t, Config{}, &backendChats{erase: func(tenant, id string) error { return err }})
	rec := ts.do(t, http.MethodDelete, "/v1/chats/"+testChatID, "")
	if rec.Code != http.StatusNoContent || rec.Body.Len() != 0 {
		t.Errorf("erase: %d %q", rec.Code, rec.Body)
	}
	err = chat.ErrChatActive
	p := decodeProblem(t, ts.do(t, http.MethodDelete, "/v1/chats/"+testChatID, ""), http.StatusConflict)
	if p.Type != problemTypePrefix+kindChatNotEnded {
		t.Errorf("erase of a running chat: %+v", p)
	}
	err = chat.ErrNotFound
	decodeProblem(t, ts.do(t, http.MethodDelete, "/v1/chats/"+testChatID, ""), http.StatusNotFound)
}

// A team component PUT alone has its problems at paths of the body, not
// under the /team it is wrapped in to be translated.
func TestPutTeamComponentProblemPaths(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Config{}, &backendChats{putTeam: func(string, string, *spec.Draft) (*chat.Team, bool, error) {
		return nil, false, &spec.ValidationError{Problems: []spec.Problem{{Path: "/max_round", Message: "too many"}}}
	}})
	p := decodeProblem(t, ts.do(t, http.MethodPut, "/v1/teams/support",
		`{"provider": "autogen_agentchat.teams.NoSuchTeam", "component_type": "team", "config": {}}`), http.StatusUnprocessableEntity)
	if len(p.Errors) == 0 {
		t.Fatal("no problems")
	}
	for _, e := range p.Errors {
		if strings.HasPrefix(e.Path, "/team") {
			t.Errorf("problem at %q: the body has no /team", e.Path)
		}
	}
	decodeProblem(t, ts.do(t, http.MethodGet, "/v1/teams/bad@name", ""), http.StatusNotFound)
	decodeProblem(t, ts.do(t, http.MethodGet, "/v1/teams/support/versions/0", ""), http.StatusNotFound)
	decodeProblem(t, ts.do(t, http.MethodGet, "/v1/teams/support/versions/01", ""), http.StatusNotFound)
}

// erasableLog is a memLog that can be erased while streamed. gone makes
// every read of the chat answer not found; empty makes only the events
// come back empty, as after another replica erased the chat while this one
// had its tenant verified.
type erasableLog struct {
	*memLog
	mu    sync.Mutex
	gone  bool
	empty bool
}

func (l *erasableLog) state() (gone, empty bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gone, l.empty
}

func (l *erasableLog) Get(ctx context.Context, tenant, id string) (*chat.Chat, error) {
	if gone, _ := l.state(); gone {
		return nil, chat.ErrNotFound
	}
	return l.memLog.Get(ctx, tenant, id)
}

func (l *erasableLog) Progress(ctx context.Context, tenant, id string) (chat.Progress, error) {
	if gone, empty := l.state(); gone || empty {
		return chat.Progress{}, chat.ErrNotFound
	}
	return l.memLog.Progress(ctx, tenant, id)
}

func (l *erasableLog) Events(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Event, error) {
	switch gone, empty := l.state(); {
	case gone:
		return nil, chat.ErrNotFound
	case empty:
		return nil, nil
	}
	return l.memLog.Events(ctx, tenant, id, after, limit)
}

// erase makes the chat gone and wakes its streams.
func (l *erasableLog) erase(onlyEvents bool) {
	l.mu.Lock()
	if onlyEvents {
		l.empty = true
	} else {
		l.gone = true
	}
	l.mu.Unlock()
	l.memLog.add() // wakes every subscriber
}

// A stream of a chat that is erased ends, cleanly, whether its reads fail
// with not found or only come back empty.
func TestSSEEndsWhenTheChatIsErased(t *testing.T) {
	t.Parallel()
	for _, onlyEvents := range []bool{false, true} {
		t.Run(map[bool]string{false: "not found", true: "empty events"}[onlyEvents], func(t *testing.T) {
			t.Parallel()
			log := &erasableLog{memLog: newMemLog(chat.StatusRunning)}
			log.add(chat.Event{Type: chat.EventChatCreated}, chat.Event{Type: chat.EventChatRunning})
			_, srv := startServer(t, Config{}, log)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			resp := openStream(t, ctx, srv.URL+"/v1/chats/"+testChatID+"/events")
			defer resp.Body.Close()
			r := &sseReader{r: bufio.NewReader(resp.Body)}
			for range 2 {
				if _, err := r.next(); err != nil { // chat.created, chat.running
					t.Fatal(err)
				}
			}
			log.waitSubscribed(t)
			log.erase(onlyEvents)
			events := readUntilEOF(t, r) // fails on an aborted stream
			if ctx.Err() != nil {
				t.Fatal("the stream of the erased chat did not end")
			}
			for _, e := range events {
				if e.id != "" && e.id != "2" {
					t.Errorf("unexpected event after the erasure: %+v", e)
				}
			}
		})
	}
}
