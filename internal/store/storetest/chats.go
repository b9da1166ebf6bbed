package storetest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentd/agentd/internal/chat"
)

func testCreateChat(t *testing.T, s chat.Store) {
	p := createParams("acme", base)
	p.IdempotencyKey = "key-1"
	p.Events = append(p.Events, chat.Event{Seq: 3, Type: chat.EventMessage, Role: chat.RoleAssistant, Name: "coder",
		Content: "", ToolCalls: []chat.ToolCall{{ID: "call_1", Type: "function",
			Function: chat.FunctionCall{Name: "search_docs", Arguments: `{"q": "reverse"}`}}},
		CreatedAt: base})
	p.Events = append(p.Events, chat.Event{Seq: 4, Type: chat.EventMessage, Role: chat.RoleTool, Name: "coder",
		ToolResponses: []chat.ToolResponse{{ToolCallID: "call_1", Role: chat.RoleTool, Content: "Error: nope", IsError: true}},
		CreatedAt:     base})
	want := expectedNew(p)

	c := mustCreate(t, s, p)
	assertChat(t, "CreateChat result", c, want)
	assertChat(t, "GetChat", mustGet(t, s, p.ID), want)
	assertEvents(t, "ListEvents", mustEvents(t, s, p.ID), withChatID(p.ID, p.Events...))

	// Without optional fields.
	q := createParams("", at(time.Second))
	q.Name, q.Metadata, q.RequestHash = "", nil, ""
	q.Events = q.Events[:1]
	c = mustCreate(t, s, q)
	assertChat(t, "CreateChat without optional fields", c, expectedNew(q))
}

func testCreateChatRejectsBadParams(t *testing.T, s chat.Store) {
	mutations := map[string]func(p *chat.CreateChatParams){
		"no events":       func(p *chat.CreateChatParams) { p.Events = nil },
		"first seq 2":     func(p *chat.CreateChatParams) { p.Events[0].Seq, p.Events[1].Seq = 2, 3 },
		"seq gap":         func(p *chat.CreateChatParams) { p.Events[1].Seq = 3 },
		"id not a UUID":   func(p *chat.CreateChatParams) { p.ID = "chat-1" },
		"no spec":         func(p *chat.CreateChatParams) { p.Spec = nil },
		"event of other":  func(p *chat.CreateChatParams) { p.Events[1].ChatID = uuid.NewString() },
		"event with type": func(p *chat.CreateChatParams) { p.Events[1].Type = "" },
	}
	for name, mutate := range mutations {
		p := createParams("acme", base)
		mutate(p)
		_, _, err := s.CreateChat(t.Context(), p)
		if err == nil || errors.Is(err, chat.ErrConflict) {
			t.Errorf("%s: CreateChat err = %v, want a validation error", name, err)
		}
	}
	counts, err := s.CountByStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if counts[chat.StatusQueued] != 0 {
		t.Errorf("rejected creates left %d chats", counts[chat.StatusQueued])
	}
}

func testCreateChatDuplicateID(t *testing.T, s chat.Store) {
	p := createParams("acme", base)
	mustCreate(t, s, p)
	q := createParams("acme", at(time.Second))
	q.ID = p.ID
	if _, _, err := s.CreateChat(t.Context(), q); !errors.Is(err, chat.ErrConflict) {
		t.Fatalf("CreateChat with a taken id: err = %v, want ErrConflict", err)
	}
	assertEvents(t, "events of the first chat", mustEvents(t, s, p.ID), withChatID(p.ID, p.Events...))
}

func testCreateChatIdempotency(t *testing.T, s chat.Store) {
	p := createParams("acme", base)
	p.IdempotencyKey = "req-42"
	first := mustCreate(t, s, p)

	// Same key and body: the existing chat, nothing written.
	again := createParams("acme", at(time.Minute))
	again.IdempotencyKey, again.RequestHash = p.IdempotencyKey, p.RequestHash
	c, created, err := s.CreateChat(t.Context(), again)
	if err != nil {
		t.Fatalf("repeat CreateChat: %v", err)
	}
	if created {
		t.Fatal("repeat CreateChat: created = true")
	}
	assertChat(t, "repeat CreateChat", c, first)
	if _, err := s.GetChat(t.Context(), "", again.ID); !errors.Is(err, chat.ErrNotFound) {
		t.Fatalf("repeat CreateChat wrote a second chat: GetChat err = %v", err)
	}
	assertEvents(t, "events after repeat", mustEvents(t, s, p.ID), withChatID(p.ID, p.Events...))

	// Same key, other body.
	other := createParams("acme", at(time.Minute))
	other.IdempotencyKey, other.RequestHash = p.IdempotencyKey, "hash-2"
	if _, _, err := s.CreateChat(t.Context(), other); !errors.Is(err, chat.ErrConflict) {
		t.Fatalf("CreateChat with a reused key and another body: err = %v, want ErrConflict", err)
	}

	// Keys are per tenant.
	elsewhere := createParams("globex", at(time.Minute))
	elsewhere.IdempotencyKey = p.IdempotencyKey
	mustCreate(t, s, elsewhere)

	// No key: never deduplicated.
	mustCreate(t, s, createParams("acme", at(2*time.Minute)))
	mustCreate(t, s, createParams("acme", at(2*time.Minute)))
}

func testCreateChatIdempotencyRace(t *testing.T, s chat.Store) {
	const n = 16
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		ids     = map[string]int{}
		created int
		errs    []error
	)
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := createParams("acme", base)
			p.IdempotencyKey = "race"
			<-start
			c, ok, err := s.CreateChat(context.Background(), p)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			ids[c.ID]++
			if ok {
				created++
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("concurrent CreateChat with one key: %v", errors.Join(errs...))
	}
	if created != 1 || len(ids) != 1 {
		t.Fatalf("concurrent CreateChat with one key: created %d chats, returned ids %v; want exactly one", created, ids)
	}
	counts, err := s.CountByStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if counts[chat.StatusQueued] != 1 {
		t.Fatalf("%d chats stored, want 1", counts[chat.StatusQueued])
	}
}

func testGetChat(t *testing.T, s chat.Store) {
	p := createParams("acme", base)
	want := mustCreate(t, s, p)
	for _, tenant := range []string{"", "acme"} {
		c, err := s.GetChat(t.Context(), tenant, p.ID)
		if err != nil {
			t.Fatalf("GetChat(tenant %q): %v", tenant, err)
		}
		assertChat(t, "GetChat", c, want)
	}
	c, err := s.GetChat(t.Context(), "acme", strings.ToUpper(p.ID))
	if err != nil {
		t.Fatalf("GetChat with an upper-case id: %v", err)
	}
	assertChat(t, "GetChat with an upper-case id", c, want)

	for name, tc := range map[string]struct{ tenant, id string }{
		"other tenant": {"globex", p.ID},
		"missing":      {"", uuid.NewString()},
		"not a UUID":   {"", "nope"},
		"empty":        {"", ""},
	} {
		if _, err := s.GetChat(t.Context(), tc.tenant, tc.id); !errors.Is(err, chat.ErrNotFound) {
			t.Errorf("GetChat %s: err = %v, want ErrNotFound", name, err)
		}
	}
}

func testListChats(t *testing.T, s chat.Store) {
	var all []*chat.Chat
	for i := range 9 {
		created := at(time.Duration(i) * time.Second)
		if i >= 7 {
			created = at(5 * time.Second) // ties on created_at are ordered by id
		}
		c := mustCreate(t, s, createParams("acme", created))
		if i%3 == 0 {
			c = finish(t, s, c)
		}
		all = append(all, c)
	}
	for i := range 3 {
		all = append(all, mustCreate(t, s, createParams("globex", at(time.Duration(i)*time.Second))))
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].CreatedAt.Equal(all[j].CreatedAt) {
			return all[i].CreatedAt.After(all[j].CreatedAt)
		}
		return all[i].ID > all[j].ID
	})
	filter := func(tenant string, status chat.Status) []*chat.Chat {
		var out []*chat.Chat
		for _, c := range all {
			if (tenant == "" || c.Tenant == tenant) && (status == "" || c.Status == status) {
				out = append(out, c)
			}
		}
		return out
	}

	cases := []struct {
		tenant string
		status chat.Status
		limit  int
	}{
		{"acme", "", 2}, {"acme", chat.StatusQueued, 2}, {"acme", chat.StatusCompleted, 2},
		{"", "", 5}, {"", chat.StatusQueued, 4}, {"globex", "", 100}, {"acme", "", 0},
		{"nobody", "", 3}, {"acme", chat.StatusFailed, 3},
	}
	for _, tc := range cases {
		name := fmt.Sprintf("tenant %q status %q limit %d", tc.tenant, tc.status, tc.limit)
		want := filter(tc.tenant, tc.status)
		var got []*chat.Chat
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > len(all)+1 {
				t.Fatalf("%s: cursor does not terminate", name)
			}
			page, next, err := s.ListChats(t.Context(), &chat.ListChatsParams{Tenant: tc.tenant, Status: tc.status, Limit: tc.limit, Cursor: cursor})
			if err != nil {
				t.Fatalf("%s: ListChats: %v", name, err)
			}
			if tc.limit > 0 && len(page) > tc.limit {
				t.Fatalf("%s: page of %d > limit", name, len(page))
			}
			got = append(got, page...)
			if next == "" {
				break
			}
			if len(page) == 0 {
				t.Fatalf("%s: empty page with a next cursor", name)
			}
			cursor = next
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d chats, want %d", name, len(got), len(want))
			continue
		}
		for i := range want {
			assertChat(t, fmt.Sprintf("%s: chat %d", name, i), got[i], want[i])
		}
	}

	// A page that ends exactly at the last chat has no next cursor.
	queued := filter("acme", chat.StatusQueued)
	_, next, err := s.ListChats(t.Context(), &chat.ListChatsParams{Tenant: "acme", Status: chat.StatusQueued, Limit: len(queued)})
	if err != nil || next != "" {
		t.Errorf("full last page: next = %q, err = %v; want no cursor", next, err)
	}

	for _, cursor := range []string{"not a cursor!", "bm9wZQ", base64.RawURLEncoding.EncodeToString([]byte("12_nope"))} {
		_, _, err = s.ListChats(t.Context(), &chat.ListChatsParams{Cursor: cursor})
		if !errors.Is(err, chat.ErrInvalidCursor) {
			t.Errorf("ListChats with cursor %q: err = %v, want ErrInvalidCursor", cursor, err)
		}
	}
}

func testRequestCancel(t *testing.T, s chat.Store) {
	queued := mustCreate(t, s, createParams("acme", base))
	mustCreate(t, s, createParams("acme", at(time.Second)))
	// Claim both (oldest first), then hand the first back: one queued chat
	// without a lease, one running chat with one.
	cs, err := s.Claim(t.Context(), &chat.ClaimParams{Owner: "a", Now: base, LeaseUntil: at(time.Hour), Limit: 2})
	if err != nil || len(cs) != 2 || cs[0].ID != queued.ID {
		t.Fatalf("Claim: %d, %v", len(cs), err)
	}
	if err := s.ReleaseLease(t.Context(), chat.Lease{ChatID: queued.ID, Epoch: cs[0].Epoch}, "a"); err != nil {
		t.Fatal(err)
	}
	running := advance(t, s, cs[1], chat.ChatUpdate{Status: chat.StatusRunning, UpdatedAt: at(2 * time.Second)})
	queued = mustGet(t, s, queued.ID)
	done := finish(t, s, mustCreate(t, s, createParams("acme", at(2*time.Second))))

	for _, c := range []*chat.Chat{queued, running} {
		for range 2 { // idempotent
			got, err := s.RequestCancel(t.Context(), "acme", c.ID)
			if err != nil {
				t.Fatalf("RequestCancel(%s chat): %v", c.Status, err)
			}
			want := *c
			want.CancelRequested = true
			assertChat(t, fmt.Sprintf("RequestCancel(%s chat)", c.Status), got, &want)
			assertChat(t, fmt.Sprintf("%s chat after RequestCancel", c.Status), mustGet(t, s, c.ID), &want)
		}
	}
	got, err := s.RequestCancel(t.Context(), "", done.ID)
	if err != nil {
		t.Fatalf("RequestCancel(terminal chat): %v", err)
	}
	assertChat(t, "RequestCancel(terminal chat)", got, done)
	assertChat(t, "terminal chat after RequestCancel", mustGet(t, s, done.ID), done)

	for name, tc := range map[string]struct{ tenant, id string }{
		"other tenant": {"globex", queued.ID}, "missing": {"", uuid.NewString()}, "not a UUID": {"", "nope"},
	} {
		if _, err := s.RequestCancel(t.Context(), tc.tenant, tc.id); !errors.Is(err, chat.ErrNotFound) {
			t.Errorf("RequestCancel %s: err = %v, want ErrNotFound", name, err)
		}
	}
}

func testCountByStatus(t *testing.T, s chat.Store) {
	counts, err := s.CountByStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range chat.AllStatuses {
		if n, ok := counts[st]; !ok || n != 0 {
			t.Errorf("empty store: count[%s] = %d (present %v), want 0 and present", st, n, ok)
		}
	}
	for i := range 5 {
		c := mustCreate(t, s, createParams("acme", at(time.Duration(i)*time.Second)))
		switch i {
		case 0, 1:
			finish(t, s, c)
		case 2:
			advance(t, s, c, chat.ChatUpdate{Status: chat.StatusAwaitingInput, ReleaseLease: true})
		}
	}
	counts, err = s.CountByStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := map[chat.Status]int64{chat.StatusQueued: 2, chat.StatusRunning: 0, chat.StatusAwaitingInput: 1,
		chat.StatusCompleted: 2, chat.StatusFailed: 0, chat.StatusCancelled: 0}
	if !reflect.DeepEqual(counts, want) {
		t.Fatalf("CountByStatus = %v, want %v", counts, want)
	}
}

// testGetProgress: the progress of a chat follows its appends and input
// answers, per tenant like GetChat.
func testGetProgress(t *testing.T, s chat.Store) {
	c := mustCreate(t, s, createParams("acme", base))
	progress := func(tenant string) chat.Progress {
		t.Helper()
		p, err := s.GetProgress(t.Context(), tenant, c.ID)
		if err != nil {
			t.Fatalf("GetProgress(tenant %q): %v", tenant, err)
		}
		return p
	}
	if got, want := progress("acme"), (chat.Progress{Status: chat.StatusQueued, LastSeq: 2}); got != want {
		t.Fatalf("new chat: %+v, want %+v", got, want)
	}
	for _, bad := range []struct{ tenant, id string }{{"globex", c.ID}, {"", uuid.NewString()}, {"", "not-a-uuid"}} {
		if _, err := s.GetProgress(t.Context(), bad.tenant, bad.id); !errors.Is(err, chat.ErrNotFound) {
			t.Errorf("GetProgress(%q, %q): err = %v, want ErrNotFound", bad.tenant, bad.id, err)
		}
	}
	claimed, err := s.Claim(t.Context(), &chat.ClaimParams{Owner: "a", Now: base, LeaseUntil: at(time.Minute), Limit: 1})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("Claim: %v, %v", claimed, err)
	}
	pending := json.RawMessage(`{"request_id": "r1", "kind": "message"}`)
	advance(t, s, claimed[0], chat.ChatUpdate{Status: chat.StatusAwaitingInput, PendingInput: pending, ReleaseLease: true})
	if got, want := progress(""), (chat.Progress{Status: chat.StatusAwaitingInput, LastSeq: 3}); got != want {
		t.Fatalf("awaiting input: %+v, want %+v", got, want)
	}
	if _, err := s.SubmitInput(t.Context(), &chat.SubmitInputParams{ChatID: c.ID, RequestID: "r1", Response: json.RawMessage(`{"content": "yes"}`), Now: at(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if got, want := progress("acme"), (chat.Progress{Status: chat.StatusRunning, LastSeq: 3, InputAnswered: true}); got != want {
		t.Fatalf("answered: %+v, want %+v", got, want)
	}
}
