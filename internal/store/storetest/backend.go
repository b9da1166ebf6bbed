package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentd/agentd/internal/chat"
)

// The conformance tests of chat.AppStore (docs/backend.md).

// listIDs lists every chat p selects, page by page, and returns their ids.
func listIDs(t *testing.T, s chat.Store, p chat.ListChatsParams) []string {
	t.Helper()
	var ids []string
	for page := 0; ; page++ {
		cs, next, err := s.ListChats(t.Context(), &p)
		if err != nil {
			t.Fatalf("ListChats(%+v): %v", p, err)
		}
		for _, c := range cs {
			ids = append(ids, c.ID)
		}
		if next == "" {
			return ids
		}
		if page > 100 {
			t.Fatal("ListChats pages without end")
		}
		p.Cursor = next
	}
}

func testListChatsFilters(t *testing.T, s chat.Store) {
	type fixture struct {
		name, meta string
		team       *chat.TeamRef
	}
	fixtures := []fixture{
		{"a", `{"ticket": "T-1", "plan": "pro", "n": 3}`, &chat.TeamRef{Name: "support", Version: 1}},
		{"b", `{"ticket": "T-2", "plan": "pro", "vip": true}`, &chat.TeamRef{Name: "support", Version: 2}},
		{"a", `{"ticket": "T-3", "plan": "free", "n": 3.0}`, nil},
		{"c", `{"plan": "pro", "note": null, "nested": {"plan": "free"}}`, &chat.TeamRef{Name: "triage", Version: 1}},
		{"c", ``, nil},
	}
	ids := make([]string, len(fixtures))
	for i, f := range fixtures {
		p := createParams("acme", at(time.Duration(i)*time.Minute))
		p.Name, p.Team = f.name, f.team
		p.Metadata = nil
		if f.meta != "" {
			p.Metadata = json.RawMessage(f.meta)
		}
		ids[i] = mustCreate(t, s, p).ID
	}
	other := createParams("globex", at(10*time.Minute))
	other.Metadata = json.RawMessage(`{"plan": "pro", "ticket": "T-1"}`)
	other.Team = &chat.TeamRef{Name: "support", Version: 1}
	mustCreate(t, s, other)

	pick := func(is ...int) []string {
		out := []string{}
		for _, i := range is {
			out = append(out, ids[i])
		}
		return out
	}
	after, before := at(time.Minute), at(4*time.Minute)
	for _, tt := range []struct {
		name string
		p    chat.ListChatsParams
		want []string // newest first
	}{
		{"metadata string", chat.ListChatsParams{Metadata: []chat.MetadataMatch{{Key: "plan", Value: "pro"}}}, pick(3, 1, 0)},
		{"metadata AND", chat.ListChatsParams{Metadata: []chat.MetadataMatch{{Key: "plan", Value: "pro"}, {Key: "ticket", Value: "T-2"}}}, pick(1)},
		{"metadata number", chat.ListChatsParams{Metadata: []chat.MetadataMatch{{Key: "n", Value: "3"}}}, pick(2, 0)},
		{"metadata true", chat.ListChatsParams{Metadata: []chat.MetadataMatch{{Key: "vip", Value: "true"}}}, pick(1)},
		{"metadata null", chat.ListChatsParams{Metadata: []chat.MetadataMatch{{Key: "note", Value: "null"}}}, pick(3)},
		{"metadata not nested", chat.ListChatsParams{Metadata: []chat.MetadataMatch{{Key: "plan", Value: "free"}}}, pick(2)},
		{"metadata no match", chat.ListChatsParams{Metadata: []chat.MetadataMatch{{Key: "plan", Value: "Pro"}}}, pick()},
		{"metadata string is not a number", chat.ListChatsParams{Metadata: []chat.MetadataMatch{{Key: "ticket", Value: "3"}}}, pick()},
		{"name", chat.ListChatsParams{Name: "a"}, pick(2, 0)},
		{"team", chat.ListChatsParams{Team: "support"}, pick(1, 0)},
		{"created range", chat.ListChatsParams{CreatedAfter: &after, CreatedBefore: &before}, pick(3, 2)},
		{"all together", chat.ListChatsParams{Name: "a", Metadata: []chat.MetadataMatch{{Key: "plan", Value: "pro"}}, Team: "support"}, pick(0)},
		{"paged", chat.ListChatsParams{Metadata: []chat.MetadataMatch{{Key: "plan", Value: "pro"}}, Limit: 1}, pick(3, 1, 0)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.p.Tenant = "acme"
			got := listIDs(t, s, tt.p)
			if !slices.Equal(got, tt.want) {
				t.Errorf("ListChats(%+v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
	c := mustGet(t, s, ids[1])
	if c.Team == nil || *c.Team != (chat.TeamRef{Name: "support", Version: 2}) {
		t.Errorf("chat's team = %+v, want support version 2", c.Team)
	}
}

// testListChatsMetadataTenants checks that a metadata filter never reaches
// another tenant's chats, and PatchMetadata never another tenant's chat.
func testListChatsMetadataTenants(t *testing.T, s chat.Store) {
	mine := createParams("acme", base)
	mine.Metadata = json.RawMessage(`{"user": "u-1"}`)
	theirs := createParams("globex", at(time.Minute))
	theirs.Metadata = json.RawMessage(`{"user": "u-1"}`)
	a, g := mustCreate(t, s, mine), mustCreate(t, s, theirs)
	f := []chat.MetadataMatch{{Key: "user", Value: "u-1"}}
	if got := listIDs(t, s, chat.ListChatsParams{Tenant: "acme", Metadata: f}); !slices.Equal(got, []string{a.ID}) {
		t.Errorf("acme's list = %v, want only %s", got, a.ID)
	}
	if got := listIDs(t, s, chat.ListChatsParams{Tenant: "globex", Metadata: f}); !slices.Equal(got, []string{g.ID}) {
		t.Errorf("globex's list = %v, want only %s", got, g.ID)
	}
	_, err := s.PatchMetadata(t.Context(), &chat.PatchMetadataParams{Tenant: "acme", ChatID: g.ID,
		Patch: map[string]json.RawMessage{"user": json.RawMessage(`"stolen"`)}, MaxBytes: 1000})
	if !errors.Is(err, chat.ErrNotFound) {
		t.Errorf("PatchMetadata of another tenant's chat: %v, want ErrNotFound", err)
	}
	if m := string(mustGet(t, s, g.ID).Metadata); !jsonEqual([]byte(m), []byte(`{"user": "u-1"}`)) {
		t.Errorf("the other tenant's metadata became %s", m)
	}
}

func testPatchMetadata(t *testing.T, s chat.Store) {
	c := mustCreate(t, s, createParams("acme", base))
	patch := func(p map[string]string, max int) (*chat.Chat, error) {
		m := map[string]json.RawMessage{}
		for k, v := range p {
			m[k] = json.RawMessage(v)
		}
		return s.PatchMetadata(t.Context(), &chat.PatchMetadataParams{Tenant: "acme", ChatID: c.ID, Patch: m, MaxBytes: max})
	}
	got, err := patch(map[string]string{"state": `"open"`, "ticket": "null", "n": "7"}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(got.Metadata, []byte(`{"state": "open", "n": 7}`)) {
		t.Errorf("metadata after patch = %s, want ticket removed, state and n set", got.Metadata)
	}
	if !jsonEqual(mustGet(t, s, c.ID).Metadata, got.Metadata) {
		t.Errorf("GetChat's metadata %s differs from PatchMetadata's %s", mustGet(t, s, c.ID).Metadata, got.Metadata)
	}
	if ids := listIDs(t, s, chat.ListChatsParams{Tenant: "acme", Metadata: []chat.MetadataMatch{{Key: "state", Value: "open"}}}); !slices.Equal(ids, []string{c.ID}) {
		t.Errorf("list by the patched key = %v", ids)
	}
	if _, err := patch(map[string]string{"big": `"` + strings.Repeat("x", 100) + `"`}, 64); !errors.Is(err, chat.ErrMetadataTooLarge) {
		t.Errorf("patch past the size limit: %v, want ErrMetadataTooLarge", err)
	}
	if !jsonEqual(mustGet(t, s, c.ID).Metadata, got.Metadata) {
		t.Errorf("a refused patch changed the metadata to %s", mustGet(t, s, c.ID).Metadata)
	}
	got, err = patch(map[string]string{"state": "null", "n": "null"}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Metadata) != 0 && string(got.Metadata) != "null" && string(got.Metadata) != "{}" {
		t.Errorf("metadata with every key removed = %s, want none", got.Metadata)
	}
	if _, err := s.PatchMetadata(t.Context(), &chat.PatchMetadataParams{Tenant: "acme", ChatID: uuid.NewString(),
		Patch: map[string]json.RawMessage{"a": json.RawMessage(`1`)}}); !errors.Is(err, chat.ErrNotFound) {
		t.Errorf("patch of an unknown chat: %v, want ErrNotFound", err)
	}
}

// deliveries returns the deliveries of events to one URL.
func deliveries(url string, events ...chat.Event) []chat.Delivery {
	out := make([]chat.Delivery, len(events))
	for i, e := range events {
		out[i] = chat.Delivery{Seq: e.Seq, Event: e.Type, URL: url, Source: chat.DeliverySpec}
	}
	return out
}

func testEraseChat(t *testing.T, s chat.Store, o *options) {
	p := createParams("acme", base)
	p.Deliveries = deliveries("https://hooks.example.com/a", p.Events[0])
	c := mustCreate(t, s, p)
	keep := mustCreate(t, s, createParams("acme", at(time.Minute)))
	if err := s.EraseChat(t.Context(), &chat.EraseChatParams{Tenant: "acme", ChatID: c.ID}); !errors.Is(err, chat.ErrChatActive) {
		t.Fatalf("EraseChat of a queued chat: %v, want ErrChatActive", err)
	}
	// An ended chat with a run posted that has not started is not ended.
	rerun := finish(t, s, mustCreate(t, s, createParams("acme", at(2*time.Minute))))
	if _, _, err := s.SubmitRun(t.Context(), &chat.SubmitRunParams{Tenant: "acme", ChatID: rerun.ID, Request: json.RawMessage(`{}`),
		IfBusy: chat.IfBusyReject, Key: uuid.NewString(), Now: at(3 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.EraseChat(t.Context(), &chat.EraseChatParams{Tenant: "acme", ChatID: rerun.ID}); !errors.Is(err, chat.ErrChatActive) {
		t.Errorf("EraseChat of an ended chat with a queued run: %v, want ErrChatActive", err)
	}
	if ids, err := s.EraseEnded(t.Context(), &chat.EraseEndedParams{EndedBefore: at(100 * time.Hour), Limit: 10}); err != nil || len(ids) != 0 {
		t.Errorf("EraseEnded took %v, %v; a chat with a queued run has not ended", ids, err)
	}
	finish(t, s, c)
	if err := s.EraseChat(t.Context(), &chat.EraseChatParams{Tenant: "globex", ChatID: c.ID}); !errors.Is(err, chat.ErrNotFound) {
		t.Fatalf("EraseChat by another tenant: %v, want ErrNotFound", err)
	}
	if err := s.EraseChat(t.Context(), &chat.EraseChatParams{Tenant: "acme", ChatID: c.ID, Now: at(3 * time.Hour)}); err != nil {
		t.Fatalf("EraseChat of an ended chat: %v", err)
	}
	if _, err := s.GetChat(t.Context(), "", c.ID); !errors.Is(err, chat.ErrNotFound) {
		t.Errorf("GetChat after erasure: %v, want ErrNotFound", err)
	}
	if _, err := s.GetProgress(t.Context(), "", c.ID); !errors.Is(err, chat.ErrNotFound) {
		t.Errorf("GetProgress after erasure: %v, want ErrNotFound", err)
	}
	if es := mustEvents(t, s, c.ID); len(es) != 0 {
		t.Errorf("%d events left after erasure", len(es))
	}
	if ds, err := s.ListDeliveries(t.Context(), &chat.ListDeliveriesParams{ChatID: c.ID}); err != nil || len(ds) != 0 {
		t.Errorf("deliveries after erasure: %v, %v", ds, err)
	}
	if ids := listIDs(t, s, chat.ListChatsParams{Tenant: "acme"}); !slices.Equal(ids, []string{rerun.ID, keep.ID}) {
		t.Errorf("list after erasure = %v, want only the others", ids)
	}
	if err := s.EraseChat(t.Context(), &chat.EraseChatParams{ChatID: c.ID}); !errors.Is(err, chat.ErrNotFound) {
		t.Errorf("second EraseChat: %v, want ErrNotFound", err)
	}
	// The tombstone keeps the id from being used again.
	again := createParams("acme", at(4*time.Hour))
	again.ID = c.ID
	if _, _, err := s.CreateChat(t.Context(), again); !errors.Is(err, chat.ErrConflict) {
		t.Errorf("CreateChat with an erased chat's id: %v, want ErrConflict", err)
	}
	assertEvents(t, "the other chat's events", mustEvents(t, s, keep.ID), withChatID(keep.ID, createParams("acme", at(time.Minute)).Events...))

	if o.count != nil {
		for _, tc := range o.chatTables {
			table, column, _ := cut(tc)
			n, err := o.count(t, s, fmt.Sprintf("SELECT count(*) FROM %s WHERE %s = '%s'", table, column, c.ID))
			if err != nil {
				t.Errorf("count rows of %s: %v", tc, err)
			} else if n != 0 {
				t.Errorf("%d rows of the erased chat left in %s", n, table)
			}
		}
		n, err := o.count(t, s, fmt.Sprintf("SELECT count(*) FROM chat_tombstones WHERE id = '%s' AND tenant = 'acme'", c.ID))
		if err != nil || n != 1 {
			t.Errorf("tombstones of the erased chat: %d, %v; want 1", n, err)
		}
	}
	if o.exec != nil {
		// The log is still append-only for everything else.
		finish(t, s, keep)
		for _, stmt := range []string{
			"DELETE FROM events",
			fmt.Sprintf("DELETE FROM events WHERE chat_id = '%s'", keep.ID),
			fmt.Sprintf("UPDATE events SET content = 'x' WHERE chat_id = '%s'", keep.ID),
			fmt.Sprintf("DELETE FROM chats WHERE id = '%s'", keep.ID),
		} {
			if err := o.exec(t, s, stmt); err == nil {
				t.Errorf("%q succeeded after an erasure; only the erasure of a whole ended chat may delete", stmt)
			}
		}
		if es := mustEvents(t, s, keep.ID); len(es) != 3 {
			t.Errorf("the other chat has %d events, want 3", len(es))
		}
	}
}

func cut(s string) (string, string, bool) {
	for i := range s {
		if s[i] == '.' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func testEraseEnded(t *testing.T, s chat.Store) {
	ended := func(created, done time.Duration) *chat.Chat {
		c := mustCreate(t, s, createParams("acme", at(created)))
		d := at(done)
		return advance(t, s, c, chat.ChatUpdate{Status: chat.StatusCompleted, StopReason: chat.StopMaxRound,
			CompletedAt: &d, UpdatedAt: d, ReleaseLease: true})
	}
	old1, old2 := ended(0, time.Hour), ended(time.Minute, 2*time.Hour)
	recent := ended(2*time.Minute, 10*time.Hour)
	running := advance(t, s, mustCreate(t, s, createParams("acme", at(3*time.Minute))),
		chat.ChatUpdate{Status: chat.StatusRunning, UpdatedAt: at(time.Hour)})
	waiting := advance(t, s, mustCreate(t, s, createParams("acme", at(4*time.Minute))),
		chat.ChatUpdate{Status: chat.StatusAwaitingInput, PendingInput: json.RawMessage(`{"request_id": "r"}`), UpdatedAt: at(time.Hour)})

	cutoff := at(5 * time.Hour)
	first, err := s.EraseEnded(t.Context(), &chat.EraseEndedParams{EndedBefore: cutoff, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(first, []string{old1.ID}) {
		t.Errorf("first batch erased %v, want the oldest ended chat %s", first, old1.ID)
	}
	rest, err := s.EraseEnded(t.Context(), &chat.EraseEndedParams{EndedBefore: cutoff, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rest, []string{old2.ID}) {
		t.Errorf("second batch erased %v, want %s", rest, old2.ID)
	}
	for _, c := range []*chat.Chat{recent, running, waiting} {
		if _, err := s.GetChat(t.Context(), "", c.ID); err != nil {
			t.Errorf("chat %s (%s) is gone: %v", c.ID, c.Status, err)
		}
	}
	for _, c := range []*chat.Chat{old1, old2} {
		if _, err := s.GetChat(t.Context(), "", c.ID); !errors.Is(err, chat.ErrNotFound) {
			t.Errorf("expired chat %s: %v, want ErrNotFound", c.ID, err)
		}
	}
	none, err := s.EraseEnded(t.Context(), &chat.EraseEndedParams{EndedBefore: cutoff, Limit: 10})
	if err != nil || len(none) != 0 {
		t.Errorf("third batch: %v, %v; want nothing", none, err)
	}
}

func testTeams(t *testing.T, s chat.Store) {
	put := func(tenant, name, spec string) (*chat.Team, bool) {
		t.Helper()
		tm, created, err := s.PutTeam(t.Context(), &chat.PutTeamParams{Tenant: tenant, Name: name, Spec: json.RawMessage(spec), Now: base})
		if err != nil {
			t.Fatalf("PutTeam(%s, %s): %v", tenant, name, err)
		}
		return tm, created
	}
	v1, created := put("acme", "support", `{"agents": [{"name": "a", "type": "assistant"}]}`)
	if !created || v1.Version != 1 || v1.Name != "support" || v1.Tenant != "acme" || !v1.CreatedAt.Equal(base) {
		t.Errorf("first put = %+v, created %v; want version 1", v1, created)
	}
	same, created := put("acme", "support", `{"agents": [{"name": "a", "type": "assistant"}]}`)
	if created || same.Version != 1 {
		t.Errorf("putting the latest spec again = version %d, created %v; want version 1 unchanged", same.Version, created)
	}
	v2, created := put("acme", "support", `{"agents": [{"name": "b", "type": "assistant"}]}`)
	if !created || v2.Version != 2 {
		t.Errorf("second spec = version %d, created %v; want 2", v2.Version, created)
	}
	put("acme", "billing", `{"agents": [{"name": "c", "type": "assistant"}]}`)
	put("globex", "support", `{"agents": [{"name": "x", "type": "assistant"}]}`)

	get := func(tenant, name string, version int) (*chat.Team, error) {
		return s.GetTeam(t.Context(), tenant, name, version)
	}
	if tm, err := get("acme", "support", 0); err != nil || tm.Version != 2 || !jsonEqual(tm.Spec, v2.Spec) {
		t.Errorf("latest = %+v, %v; want version 2", tm, err)
	}
	if tm, err := get("acme", "support", 1); err != nil || tm.Version != 1 || !jsonEqual(tm.Spec, []byte(`{"agents": [{"name": "a", "type": "assistant"}]}`)) {
		t.Errorf("version 1 = %+v, %v", tm, err)
	}
	for _, miss := range []struct {
		tenant, name string
		version      int
	}{{"acme", "support", 3}, {"acme", "nope", 0}, {"initech", "support", 0}, {"globex", "support", 2}} {
		if _, err := get(miss.tenant, miss.name, miss.version); !errors.Is(err, chat.ErrTeamNotFound) {
			t.Errorf("GetTeam(%+v): %v, want ErrTeamNotFound", miss, err)
		}
	}
	var names []string
	p := chat.ListTeamsParams{Tenant: "acme", Limit: 1}
	for range 5 {
		ts, next, err := s.ListTeams(t.Context(), &p)
		if err != nil {
			t.Fatal(err)
		}
		for _, tm := range ts {
			names = append(names, fmt.Sprintf("%s@%d", tm.Name, tm.Version))
		}
		if next == "" {
			break
		}
		p.Cursor = next
	}
	if want := []string{"billing@1", "support@2"}; !slices.Equal(names, want) {
		t.Errorf("acme's teams = %v, want %v", names, want)
	}
	if ts, _, err := s.ListTeams(t.Context(), &chat.ListTeamsParams{Tenant: "initech"}); err != nil || len(ts) != 0 {
		t.Errorf("a tenant without teams lists %v, %v", ts, err)
	}
	if _, _, err := s.ListTeams(t.Context(), &chat.ListTeamsParams{Tenant: "acme", Cursor: "!!"}); !errors.Is(err, chat.ErrInvalidCursor) {
		t.Errorf("bad cursor: %v, want ErrInvalidCursor", err)
	}
}

// testTeamsConcurrentPut checks that concurrent puts of different specs get
// distinct, dense versions: first of a new team, then of one that has
// versions already.
func testTeamsConcurrentPut(t *testing.T, s chat.Store) {
	putConcurrently(t, s, "race", 0)
	putConcurrently(t, s, "race", 16)
}

// putConcurrently puts 16 different specs of team name at once, which has
// versions 1..had, and checks that they got versions had+1..had+16.
func putConcurrently(t *testing.T, s chat.Store, name string, had int) {
	t.Helper()
	const n = 16
	var wg sync.WaitGroup
	versions := make([]int, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tm, _, err := s.PutTeam(t.Context(), &chat.PutTeamParams{Tenant: "acme", Name: name,
				Spec: json.RawMessage(fmt.Sprintf(`{"agents": [{"name": "a%d_%d", "type": "assistant"}]}`, had, i))})
			errs[i] = err
			if err == nil {
				versions[i] = tm.Version
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	slices.Sort(versions)
	for i, v := range versions {
		if v != had+i+1 {
			t.Fatalf("versions %v, want %d..%d", versions, had+1, had+n)
		}
	}
}

func testCreateChatFromTeam(t *testing.T, s chat.Store) {
	p := createParams("acme", base)
	p.Team = &chat.TeamRef{Name: "support", Version: 3}
	c := mustCreate(t, s, p)
	assertChat(t, "created from a team", c, expectedNew(p))
	assertChat(t, "read back", mustGet(t, s, c.ID), expectedNew(p))
}

func testDeliveries(t *testing.T, s chat.Store) {
	const url = "https://hooks.example.com/a"
	p := createParams("acme", base)
	p.Deliveries = deliveries(url, p.Events[0])
	c := mustCreate(t, s, p)
	e3 := chat.Event{Seq: 3, Type: chat.EventChatCompleted, Data: json.RawMessage(`{"status": "completed"}`), CreatedAt: at(time.Minute)}
	done := at(time.Minute)
	err := s.Append(t.Context(), &chat.AppendParams{ChatID: c.ID, Epoch: c.Epoch, Events: []chat.Event{e3},
		Update:     chat.ChatUpdate{Status: chat.StatusCompleted, MessageCount: 1, CompletedAt: &done, UpdatedAt: done},
		Deliveries: append(deliveries(url, e3), chat.Delivery{Seq: 3, Event: e3.Type, URL: "https://b.example.com/", Source: chat.DeliveryTenant})})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := s.ListDeliveries(t.Context(), &chat.ListDeliveriesParams{ChatID: c.ID})
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		seq         int64
		url, source string
		event       chat.EventType
	}
	var got []key
	for _, d := range ds {
		got = append(got, key{d.Seq, d.URL, d.Source, d.Event})
		if d.Status != chat.DeliveryPending || d.Attempts != 0 || d.Tenant != "acme" || d.ChatID != c.ID {
			t.Errorf("new delivery %+v: want pending, no attempts, tenant acme", d)
		}
	}
	want := []key{{1, url, "spec", chat.EventChatCreated}, {3, "https://b.example.com/", "tenant", chat.EventChatCompleted}, {3, url, "spec", chat.EventChatCompleted}}
	if !slices.Equal(got, want) {
		t.Fatalf("deliveries = %+v, want %+v", got, want)
	}
	if ds, _ := s.ListDeliveries(t.Context(), &chat.ListDeliveriesParams{ChatID: c.ID, After: 1, Limit: 1}); len(ds) != 1 || ds[0].Seq != 3 {
		t.Errorf("deliveries after seq 1, limit 1 = %+v", ds)
	}

	// Claim: all three are due from their events' times on.
	claimed, err := s.ClaimDeliveries(t.Context(), &chat.ClaimDeliveriesParams{Now: at(2 * time.Minute), LeaseUntil: at(3 * time.Minute), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 3 {
		t.Fatalf("claimed %d deliveries, want 3", len(claimed))
	}
	for _, cd := range claimed {
		if cd.Attempts != 1 || cd.Disabled || cd.Event.Seq != cd.Seq || cd.Event.Type != cd.DeliveryRecord.Event || cd.Event.ChatID != c.ID {
			t.Errorf("claimed %+v: want attempt 1 with its event", cd)
		}
		if cd.Seq == 3 && !jsonEqual(cd.Event.Data, e3.Data) {
			t.Errorf("claimed event data %s, want %s", cd.Event.Data, e3.Data)
		}
	}
	if again, _ := s.ClaimDeliveries(t.Context(), &chat.ClaimDeliveriesParams{Now: at(2 * time.Minute), LeaseUntil: at(3 * time.Minute), Limit: 10}); len(again) != 0 {
		t.Errorf("claimed %d deliveries again during their lease", len(again))
	}
	// Record: one delivered, one from a stale attempt (ignored).
	first := claimed[0]
	if err := s.FinishDelivery(t.Context(), &chat.FinishDeliveryParams{ChatID: c.ID, Seq: first.Seq, URL: first.URL, Attempts: 1,
		Status: chat.DeliveryDelivered, LastStatusCode: 204, NextAttemptAt: at(2 * time.Minute), Now: at(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	second := claimed[1]
	if err := s.FinishDelivery(t.Context(), &chat.FinishDeliveryParams{ChatID: c.ID, Seq: second.Seq, URL: second.URL, Attempts: 7,
		Status: chat.DeliveryDelivered, LastStatusCode: 200, NextAttemptAt: at(2 * time.Minute), Now: at(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	// After the lease, the two unrecorded ones are due again.
	later, err := s.ClaimDeliveries(t.Context(), &chat.ClaimDeliveriesParams{Now: at(4 * time.Minute), LeaseUntil: at(5 * time.Minute), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(later) != 2 {
		t.Fatalf("after the lease, claimed %d, want the 2 unrecorded", len(later))
	}
	for _, cd := range later {
		if cd.Attempts != 2 {
			t.Errorf("retaken delivery has %d attempts, want 2", cd.Attempts)
		}
		if cd.Seq == first.Seq && cd.URL == first.URL {
			t.Errorf("a delivered delivery was claimed again")
		}
	}
	ds, _ = s.ListDeliveries(t.Context(), &chat.ListDeliveriesParams{ChatID: c.ID})
	for _, d := range ds {
		if d.Seq == first.Seq && d.URL == first.URL {
			if d.Status != chat.DeliveryDelivered || d.LastStatusCode != 204 || d.DeliveredAt == nil || !d.DeliveredAt.Equal(at(2*time.Minute)) {
				t.Errorf("delivered delivery = %+v", d)
			}
		}
	}
}

// testDeliveriesCountWhatWasSent: a claim whose dispatcher dies before
// sending counts no request; the request of a later claim counts one and
// names its replica; a dispatcher whose claim was taken over may not mark
// its request sent (ErrFenced), nor may one of a finished delivery.
func testDeliveriesCountWhatWasSent(t *testing.T, s chat.Store) {
	const url = "https://hooks.example.com/sent"
	p := createParams("acme", base)
	p.Deliveries = deliveries(url, p.Events[0])
	c := mustCreate(t, s, p)
	claim := func(now time.Duration) chat.ClaimedDelivery {
		t.Helper()
		cs, err := s.ClaimDeliveries(t.Context(), &chat.ClaimDeliveriesParams{Now: at(now), LeaseUntil: at(now + time.Minute), Limit: 10})
		if err != nil || len(cs) != 1 {
			t.Fatalf("claim at %v: %+v, %v", now, cs, err)
		}
		return cs[0]
	}
	mark := func(cd chat.ClaimedDelivery, attempts int, owner string) error {
		return s.MarkDeliverySent(t.Context(), &chat.MarkDeliverySentParams{ChatID: c.ID, Seq: cd.Seq, URL: cd.URL,
			Attempts: attempts, Owner: owner, Now: at(10 * time.Minute)})
	}
	list := func() chat.DeliveryRecord {
		t.Helper()
		ds, err := s.ListDeliveries(t.Context(), &chat.ListDeliveriesParams{ChatID: c.ID})
		if err != nil || len(ds) != 1 {
			t.Fatalf("deliveries: %+v, %v", ds, err)
		}
		return ds[0]
	}
	// Replica a claims it and dies before sending.
	dead := claim(time.Minute)
	if d := list(); d.Attempts != 1 || d.Sent != 0 || d.SentBy != "" {
		t.Errorf("after a claim alone: attempts %d, sent %d by %q; want 1, 0, nobody", d.Attempts, d.Sent, d.SentBy)
	}
	// After its lease, replica b claims it, sends and records the outcome.
	cd := claim(3 * time.Minute)
	if cd.Attempts != 2 || cd.Sent != 0 {
		t.Errorf("retaken claim: attempts %d, sent %d; want 2, 0", cd.Attempts, cd.Sent)
	}
	if err := mark(dead, dead.Attempts, "replica-a"); !errors.Is(err, chat.ErrFenced) {
		t.Errorf("replica a marks its taken-over claim sent: %v, want ErrFenced", err)
	}
	if err := mark(cd, cd.Attempts, "replica-b"); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishDelivery(t.Context(), &chat.FinishDeliveryParams{ChatID: c.ID, Seq: cd.Seq, URL: cd.URL, Attempts: cd.Attempts,
		Status: chat.DeliveryDelivered, LastStatusCode: 204, NextAttemptAt: at(3 * time.Minute), Now: at(3 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if d := list(); d.Attempts != 2 || d.Sent != 1 || d.SentBy != "replica-b" || d.Status != chat.DeliveryDelivered {
		t.Errorf("delivered: attempts %d, sent %d by %q, %s; want 2 claims, 1 sent by replica-b, delivered", d.Attempts, d.Sent, d.SentBy, d.Status)
	}
	if err := mark(cd, cd.Attempts, "replica-b"); !errors.Is(err, chat.ErrFenced) {
		t.Errorf("a delivered delivery marked sent again: %v, want ErrFenced", err)
	}
	if d := list(); d.Sent != 1 {
		t.Errorf("sent %d after the refused marks, want 1", d.Sent)
	}
}

// testDeliveriesOfFencedAppend checks that an append that does not take
// writes no deliveries, and its batch-mates' deliveries are written.
func testDeliveriesOfFencedAppend(t *testing.T, s chat.Store) {
	a := mustCreate(t, s, createParams("acme", base))
	b := mustCreate(t, s, createParams("acme", base))
	ea := chat.Event{Seq: a.LastSeq + 1, Type: chat.EventChatCompleted, CreatedAt: base}
	eb := chat.Event{Seq: b.LastSeq + 1, Type: chat.EventChatCompleted, CreatedAt: base}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		errs[0] = s.Append(t.Context(), &chat.AppendParams{ChatID: a.ID, Epoch: a.Epoch + 5, Events: []chat.Event{ea},
			Update: chat.ChatUpdate{Status: chat.StatusCompleted, UpdatedAt: base}, Deliveries: deliveries("https://a.example.com/", ea)})
	}()
	go func() {
		defer wg.Done()
		errs[1] = s.Append(t.Context(), &chat.AppendParams{ChatID: b.ID, Epoch: b.Epoch, Events: []chat.Event{eb},
			Update: chat.ChatUpdate{Status: chat.StatusCompleted, UpdatedAt: base}, Deliveries: deliveries("https://b.example.com/", eb)})
	}()
	wg.Wait()
	if !errors.Is(errs[0], chat.ErrFenced) || errs[1] != nil {
		t.Fatalf("appends: %v, %v; want fenced and ok", errs[0], errs[1])
	}
	if ds, _ := s.ListDeliveries(t.Context(), &chat.ListDeliveriesParams{ChatID: a.ID}); len(ds) != 0 {
		t.Errorf("the fenced append wrote deliveries: %+v", ds)
	}
	if ds, _ := s.ListDeliveries(t.Context(), &chat.ListDeliveriesParams{ChatID: b.ID}); len(ds) != 1 {
		t.Errorf("the append that took wrote %d deliveries, want 1", len(ds))
	}
	bad := chat.Event{Seq: b.LastSeq + 2, Type: chat.EventMessage, CreatedAt: base}
	err := s.Append(t.Context(), &chat.AppendParams{ChatID: b.ID, Epoch: b.Epoch, Events: []chat.Event{bad},
		Update: chat.ChatUpdate{Status: chat.StatusCompleted, UpdatedAt: base}, Deliveries: []chat.Delivery{{Seq: 99, Event: chat.EventMessage, URL: "https://x/", Source: "spec"}}})
	if err == nil {
		t.Error("an append with a delivery of an event it does not hold succeeded")
	}
}

func testDeliveriesRetryAndDisable(t *testing.T, s chat.Store) {
	const url, other = "https://hooks.example.com/gone", "https://other.example.com/"
	p := createParams("acme", base)
	p.Deliveries = append(deliveries(url, p.Events...), deliveries(other, p.Events[0])...)
	c := mustCreate(t, s, p)
	claim := func(now time.Duration) map[string]chat.ClaimedDelivery {
		t.Helper()
		cs, err := s.ClaimDeliveries(t.Context(), &chat.ClaimDeliveriesParams{Now: at(now), LeaseUntil: at(now + time.Minute), Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]chat.ClaimedDelivery{}
		for _, cd := range cs {
			m[fmt.Sprintf("%s#%d", cd.URL, cd.Seq)] = cd
		}
		return m
	}
	finish := func(cd chat.ClaimedDelivery, st chat.DeliveryStatus, code int, next, now time.Duration, disable bool) {
		t.Helper()
		if err := s.FinishDelivery(t.Context(), &chat.FinishDeliveryParams{ChatID: c.ID, Seq: cd.Seq, URL: cd.URL, Attempts: cd.Attempts,
			Status: st, LastStatusCode: code, LastError: fmt.Sprintf("HTTP %d", code), NextAttemptAt: at(next), Now: at(now), DisableURL: disable}); err != nil {
			t.Fatal(err)
		}
	}
	first := claim(time.Second)
	if len(first) != 3 {
		t.Fatalf("claimed %v, want 3", first)
	}
	// Retries: due in an hour and in ten minutes; url#2's attempt is lost.
	finish(first[url+"#1"], chat.DeliveryPending, 500, time.Hour, time.Second, false)
	finish(first[other+"#1"], chat.DeliveryPending, 503, 10*time.Minute, time.Second, false)
	second := claim(5 * time.Minute)
	if len(second) != 1 || second[url+"#2"].Attempts != 2 {
		t.Fatalf("after the lease claimed %v, want only the lost attempt's delivery, attempt 2", second)
	}
	// 410: the endpoint is disabled for the chat, its pending delivery fails.
	finish(second[url+"#2"], chat.DeliveryFailed, 410, 5*time.Minute, 5*time.Minute, true)
	third := claim(20 * time.Minute)
	if len(third) != 1 || third[other+"#1"].Attempts != 2 {
		t.Fatalf("at 20 minutes claimed %v, want only the other endpoint's retry", third)
	}
	ds, _ := s.ListDeliveries(t.Context(), &chat.ListDeliveriesParams{ChatID: c.ID})
	for _, x := range ds {
		switch {
		case x.URL == url && x.Seq == 2:
			if x.Status != chat.DeliveryFailed || x.LastStatusCode != 410 || x.Attempts != 2 {
				t.Errorf("the 410 delivery = %+v", x)
			}
		case x.URL == url:
			if x.Status != chat.DeliveryFailed || x.LastError == "" || x.Attempts != 1 || x.LastStatusCode != 500 {
				t.Errorf("the pending delivery to the disabled URL = %+v, want failed with the reason", x)
			}
		default:
			if x.Status != chat.DeliveryPending {
				t.Errorf("the other endpoint's delivery = %+v, want pending", x)
			}
		}
	}
	// A later event's delivery to the disabled URL is claimed flagged.
	e := chat.Event{Seq: c.LastSeq + 1, Type: chat.EventChatCompleted, CreatedAt: at(30 * time.Minute)}
	if err := s.Append(t.Context(), &chat.AppendParams{ChatID: c.ID, Events: []chat.Event{e},
		Update: chat.ChatUpdate{Status: chat.StatusCompleted, UpdatedAt: at(30 * time.Minute)}, Deliveries: deliveries(url, e)}); err != nil {
		t.Fatal(err)
	}
	last := claim(31 * time.Minute)
	if cd, ok := last[fmt.Sprintf("%s#%d", url, e.Seq)]; !ok || !cd.Disabled {
		t.Errorf("claim of a delivery to a disabled URL = %+v, want it Disabled", last)
	}
}

func testClaimDeliveriesConcurrent(t *testing.T, s chat.Store) {
	const chats, per = 10, 3
	for range chats {
		p := createParams("acme", base)
		for i := range per {
			p.Deliveries = append(p.Deliveries, chat.Delivery{Seq: 1, Event: chat.EventChatCreated, URL: fmt.Sprintf("https://h%d.example.com/", i), Source: chat.DeliverySpec})
		}
		mustCreate(t, s, p)
	}
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		wg   sync.WaitGroup
	)
	errs := make([]error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				cs, err := s.ClaimDeliveries(t.Context(), &chat.ClaimDeliveriesParams{Now: at(time.Minute), LeaseUntil: at(time.Hour), Limit: 3})
				if err != nil {
					errs[w] = err
					return
				}
				if len(cs) == 0 {
					return
				}
				mu.Lock()
				for _, c := range cs {
					seen[c.ChatID+" "+c.URL]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if len(seen) != chats*per {
		t.Errorf("claimed %d distinct deliveries, want %d", len(seen), chats*per)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("delivery %s claimed %d times", k, n)
		}
	}
}
