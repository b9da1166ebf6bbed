package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentd/agentd/internal/chat"
)

func testClaim(t *testing.T, s chat.Store) {
	oldest := mustCreate(t, s, createParams("acme", at(1*time.Second)))
	second := mustCreate(t, s, createParams("globex", at(2*time.Second)))
	third := mustCreate(t, s, createParams("acme", at(3*time.Second)))
	done := finish(t, s, mustCreate(t, s, createParams("acme", at(0))))
	waiting := advance(t, s, mustCreate(t, s, createParams("acme", at(0))), chat.ChatUpdate{Status: chat.StatusAwaitingInput, ReleaseLease: true})
	cancelling := advance(t, s, mustCreate(t, s, createParams("acme", at(4*time.Second))), chat.ChatUpdate{Status: chat.StatusAwaitingInput, ReleaseLease: true})
	if _, err := s.RequestCancel(t.Context(), "", cancelling.ID); err != nil {
		t.Fatal(err)
	}
	now, lease := at(time.Hour), at(time.Hour+time.Minute)
	claim := func(owner string, limit int) []*chat.Chat {
		t.Helper()
		cs, err := s.Claim(t.Context(), &chat.ClaimParams{Owner: owner, Now: now, LeaseUntil: lease, Limit: limit})
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		return cs
	}
	ids := func(cs []*chat.Chat) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}

	got := claim("a", 2)
	if want := []string{oldest.ID, second.ID}; !slices.Equal(ids(got), want) {
		t.Fatalf("first Claim: %v, want the two oldest %v", ids(got), want)
	}
	for i, prev := range []*chat.Chat{oldest, second} {
		want := *prev
		want.Owner, want.Epoch, want.LeaseExpiresAt = "a", prev.Epoch+1, &lease
		assertChat(t, "claimed chat", got[i], &want)
		assertChat(t, "claimed chat, read back", mustGet(t, s, prev.ID), &want)
	}

	got = claim("b", 10)
	if want := []string{third.ID, cancelling.ID}; !slices.Equal(ids(got), want) {
		t.Fatalf("second Claim: %v, want %v (not terminal, not awaiting input without a cancel)", ids(got), want)
	}
	if !got[1].CancelRequested || got[1].Status != chat.StatusAwaitingInput {
		t.Errorf("claimed cancelling chat: %+v", got[1])
	}
	if got := claim("c", 10); len(got) != 0 {
		t.Fatalf("third Claim took chats with live leases: %v", ids(got))
	}
	assertChat(t, "terminal chat", mustGet(t, s, done.ID), done)
	assertChat(t, "waiting chat", mustGet(t, s, waiting.ID), waiting)
}

func testClaimConcurrent(t *testing.T, s chat.Store) {
	const chats = 40
	for i := range chats {
		mustCreate(t, s, createParams("acme", at(time.Duration(i)*time.Millisecond)))
	}
	var (
		mu     sync.Mutex
		owners = map[string]string{}
		dups   []string
		errs   []error
		wg     sync.WaitGroup
	)
	start := make(chan struct{})
	for w := range 4 {
		owner := fmt.Sprint("replica-", w%2) // two owners, two claimers each
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for {
				cs, err := s.Claim(context.Background(), &chat.ClaimParams{Owner: owner, Now: base, LeaseUntil: at(time.Minute), Limit: 3})
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				for _, c := range cs {
					if prev, ok := owners[c.ID]; ok {
						dups = append(dups, fmt.Sprintf("%s by %s and %s", c.ID, prev, owner))
					}
					owners[c.ID] = owner
				}
				mu.Unlock()
				if err != nil || len(cs) == 0 {
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	if len(dups) > 0 {
		t.Fatalf("chats claimed twice: %v", dups)
	}
	if len(owners) != chats {
		t.Fatalf("%d chats claimed, want %d", len(owners), chats)
	}
	for id, owner := range owners {
		c := mustGet(t, s, id)
		if c.Owner != owner || c.Epoch != 1 {
			t.Fatalf("chat %s: owner %q epoch %d, want %q and 1", id, c.Owner, c.Epoch, owner)
		}
	}
}

func testClaimExpiredLease(t *testing.T, s chat.Store) {
	mustCreate(t, s, createParams("acme", base))
	a, err := s.Claim(t.Context(), &chat.ClaimParams{Owner: "a", Now: at(time.Second), LeaseUntil: at(time.Minute), Limit: 1})
	if err != nil || len(a) != 1 {
		t.Fatalf("Claim by a: %d, %v", len(a), err)
	}
	ca := advance(t, s, a[0], chat.ChatUpdate{Status: chat.StatusRunning, UpdatedAt: at(2 * time.Second)})

	// Not yet expired; at the expiry instant still held (strictly before).
	for _, now := range []time.Time{at(30 * time.Second), at(time.Minute)} {
		got, err := s.Claim(t.Context(), &chat.ClaimParams{Owner: "b", Now: now, LeaseUntil: at(2 * time.Minute), Limit: 1})
		if err != nil || len(got) != 0 {
			t.Fatalf("Claim at %v of a live lease: %d chats, %v", now, len(got), err)
		}
	}

	b, err := s.Claim(t.Context(), &chat.ClaimParams{Owner: "b", Now: at(time.Minute + time.Microsecond), LeaseUntil: at(3 * time.Minute), Limit: 1})
	if err != nil || len(b) != 1 {
		t.Fatalf("Claim by b after expiry: %d, %v", len(b), err)
	}
	cb := b[0]
	if cb.Epoch != ca.Epoch+1 || cb.Owner != "b" || cb.LastSeq != ca.LastSeq || cb.Status != chat.StatusRunning {
		t.Fatalf("reclaimed chat: epoch %d owner %q last_seq %d status %s; want epoch %d, b, %d, running",
			cb.Epoch, cb.Owner, cb.LastSeq, cb.Status, ca.Epoch+1, ca.LastSeq)
	}

	// The old owner is fenced off in every way.
	err = s.Append(t.Context(), &chat.AppendParams{ChatID: ca.ID, Epoch: ca.Epoch, Events: []chat.Event{message(ca.LastSeq+1, "late", base)},
		Update: chat.ChatUpdate{Status: chat.StatusCompleted, UpdatedAt: base}})
	if !errors.Is(err, chat.ErrFenced) {
		t.Fatalf("Append by the old owner: err = %v, want ErrFenced", err)
	}
	states, err := s.RenewLeases(t.Context(), &chat.RenewLeasesParams{Owner: "a", Leases: []chat.Lease{{ChatID: ca.ID, Epoch: ca.Epoch}}, LeaseUntil: at(time.Hour)})
	if err != nil || len(states) != 1 || states[0].Held {
		t.Fatalf("RenewLeases by the old owner: %+v, %v; want not held", states, err)
	}
	if err := s.ReleaseLease(t.Context(), chat.Lease{ChatID: ca.ID, Epoch: ca.Epoch}, "a"); err != nil {
		t.Fatalf("ReleaseLease by the old owner: %v", err)
	}
	assertChat(t, "after the old owner's attempts", mustGet(t, s, ca.ID), cb)

	// The new owner writes on.
	advance(t, s, cb, chat.ChatUpdate{Status: chat.StatusRunning, UpdatedAt: at(3 * time.Second)})
}

func testRenewLeases(t *testing.T, s chat.Store) {
	for i := range 3 {
		mustCreate(t, s, createParams("acme", at(time.Duration(i)*time.Second)))
	}
	mine, err := s.Claim(t.Context(), &chat.ClaimParams{Owner: "a", Now: base, LeaseUntil: at(time.Minute), Limit: 2})
	if err != nil || len(mine) != 2 {
		t.Fatalf("Claim: %d, %v", len(mine), err)
	}
	theirs, err := s.Claim(t.Context(), &chat.ClaimParams{Owner: "b", Now: base, LeaseUntil: at(time.Minute), Limit: 1})
	if err != nil || len(theirs) != 1 {
		t.Fatalf("Claim: %d, %v", len(theirs), err)
	}
	if _, err := s.RequestCancel(t.Context(), "acme", mine[1].ID); err != nil {
		t.Fatal(err)
	}
	until := at(2 * time.Minute)
	leases := []chat.Lease{
		{ChatID: mine[0].ID, Epoch: mine[0].Epoch},
		{ChatID: mine[1].ID, Epoch: mine[1].Epoch},
		{ChatID: theirs[0].ID, Epoch: theirs[0].Epoch}, // another owner's
		{ChatID: mine[0].ID, Epoch: mine[0].Epoch + 1}, // a newer epoch than held
		{ChatID: uuid.NewString(), Epoch: 1},           // no such chat
		{ChatID: "nope", Epoch: 1},                     // not even a UUID
	}
	states, err := s.RenewLeases(t.Context(), &chat.RenewLeasesParams{Owner: "a", Leases: leases, LeaseUntil: until})
	if err != nil {
		t.Fatal(err)
	}
	want := []chat.LeaseState{
		{ChatID: mine[0].ID, Epoch: mine[0].Epoch, Held: true},
		{ChatID: mine[1].ID, Epoch: mine[1].Epoch, Held: true, CancelRequested: true},
		{ChatID: theirs[0].ID, Epoch: theirs[0].Epoch},
		{ChatID: mine[0].ID, Epoch: mine[0].Epoch + 1},
		{ChatID: leases[4].ChatID, Epoch: 1},
		{ChatID: "nope", Epoch: 1},
	}
	if !reflect.DeepEqual(states, want) {
		t.Fatalf("RenewLeases:\n  got  %+v\n  want %+v", states, want)
	}
	for _, c := range mine {
		if got := mustGet(t, s, c.ID); got.LeaseExpiresAt == nil || !got.LeaseExpiresAt.Equal(until) || got.Epoch != c.Epoch {
			t.Errorf("renewed chat: lease %v epoch %d, want %v and %d", got.LeaseExpiresAt, got.Epoch, until, c.Epoch)
		}
	}
	if got := mustGet(t, s, theirs[0].ID); !got.LeaseExpiresAt.Equal(at(time.Minute)) || got.Owner != "b" {
		t.Errorf("another owner's lease changed: %v %q", got.LeaseExpiresAt, got.Owner)
	}
	// Renewing nothing is fine.
	if states, err := s.RenewLeases(t.Context(), &chat.RenewLeasesParams{Owner: "a", LeaseUntil: until}); err != nil || len(states) != 0 {
		t.Fatalf("RenewLeases of no leases: %v, %v", states, err)
	}
}

func testReleaseLease(t *testing.T, s chat.Store) {
	mustCreate(t, s, createParams("acme", base))
	got, err := s.Claim(t.Context(), &chat.ClaimParams{Owner: "a", Now: base, LeaseUntil: at(time.Hour), Limit: 1})
	if err != nil || len(got) != 1 {
		t.Fatalf("Claim: %d, %v", len(got), err)
	}
	c := got[0]
	// Not the holder: no-ops, no errors.
	for _, tc := range []struct {
		l     chat.Lease
		owner string
	}{
		{chat.Lease{ChatID: c.ID, Epoch: c.Epoch}, "b"},
		{chat.Lease{ChatID: c.ID, Epoch: c.Epoch - 1}, "a"},
		{chat.Lease{ChatID: uuid.NewString(), Epoch: 1}, "a"},
		{chat.Lease{ChatID: "nope", Epoch: 1}, "a"},
	} {
		if err := s.ReleaseLease(t.Context(), tc.l, tc.owner); err != nil {
			t.Errorf("ReleaseLease(%+v, %q): %v, want no error", tc.l, tc.owner, err)
		}
	}
	assertChat(t, "after foreign releases", mustGet(t, s, c.ID), c)

	if err := s.ReleaseLease(t.Context(), chat.Lease{ChatID: c.ID, Epoch: c.Epoch}, "a"); err != nil {
		t.Fatal(err)
	}
	want := *c
	want.Owner, want.LeaseExpiresAt = "", nil
	assertChat(t, "after release", mustGet(t, s, c.ID), &want)

	// Claimable at once, long before the old lease would have expired.
	again, err := s.Claim(t.Context(), &chat.ClaimParams{Owner: "b", Now: at(time.Second), LeaseUntil: at(time.Minute), Limit: 1})
	if err != nil || len(again) != 1 || again[0].Epoch != c.Epoch+1 || again[0].Owner != "b" {
		t.Fatalf("Claim after release: %+v, %v", again, err)
	}
}

// awaitInput moves c to awaiting_input with a pending request, as a worker
// that pauses for a human does.
func awaitInput(t *testing.T, s chat.Store, c *chat.Chat, requestID string, expires *time.Time) *chat.Chat {
	t.Helper()
	pending := json.RawMessage(fmt.Sprintf(`{"request_id": %q, "kind": "message", "agent": "coder", "reason": "ALWAYS"}`, requestID))
	return advance(t, s, c, chat.ChatUpdate{Status: chat.StatusAwaitingInput, PendingInput: pending, InputExpiresAt: expires, ReleaseLease: true})
}

func testSubmitInput(t *testing.T, s chat.Store) {
	ctx := t.Context()
	later := at(3 * time.Hour)
	waiting := awaitInput(t, s, mustCreate(t, s, createParams("acme", at(0))), "r1", &later)
	if !timeEqual(waiting.InputExpiresAt, &later) || waiting.Owner != "" {
		t.Fatalf("awaiting chat: expires %v owner %q", waiting.InputExpiresAt, waiting.Owner)
	}
	submit := func(tenant, id, req string) (*chat.Chat, error) {
		return s.SubmitInput(ctx, &chat.SubmitInputParams{Tenant: tenant, ChatID: id, RequestID: req,
			Response: json.RawMessage(`{"request_id": "` + req + `", "content": "looks good"}`), Now: at(time.Hour)})
	}
	if _, err := submit("acme", waiting.ID, "stale"); !errors.Is(err, chat.ErrNoPendingInput) {
		t.Fatalf("stale request_id: %v", err)
	}
	if _, err := submit("globex", waiting.ID, "r1"); !errors.Is(err, chat.ErrNotFound) {
		t.Fatalf("other tenant: %v", err)
	}
	if _, err := submit("acme", uuid.NewString(), "r1"); !errors.Is(err, chat.ErrNotFound) {
		t.Fatalf("unknown chat: %v", err)
	}
	got, err := submit("acme", waiting.ID, "r1")
	if err != nil {
		t.Fatal(err)
	}
	// The answer makes the chat running with no request, in the same write:
	// a client that reads the chat after its answer was accepted never sees
	// the answered request again, whichever replica it asks.
	if got.Status != chat.StatusRunning || got.PendingInput != nil || !strings.Contains(string(got.InputResponse), "looks good") {
		t.Fatalf("after submit: status %s, pending %s, response %s", got.Status, got.PendingInput, got.InputResponse)
	}
	if read := mustGet(t, s, waiting.ID); read.Status != chat.StatusRunning || read.PendingInput != nil {
		t.Fatalf("read after submit: status %s, pending %s", read.Status, read.PendingInput)
	}
	for _, st := range []chat.Status{chat.StatusAwaitingInput, chat.StatusRunning} {
		listed, _, err := s.ListChats(ctx, &chat.ListChatsParams{Tenant: "acme", Status: st, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		found := slices.ContainsFunc(listed, func(c *chat.Chat) bool { return c.ID == waiting.ID })
		if found != (st == chat.StatusRunning) {
			t.Fatalf("list with status %s: answered chat listed = %v", st, found)
		}
	}
	if _, err := submit("acme", waiting.ID, "r1"); !errors.Is(err, chat.ErrNoPendingInput) {
		t.Fatalf("the same request_id twice: %v", err)
	}

	expired := awaitInput(t, s, mustCreate(t, s, createParams("acme", at(time.Second))), "r2", ptr(at(30*time.Minute)))
	notYet := awaitInput(t, s, mustCreate(t, s, createParams("acme", at(2*time.Second))), "r3", &later)
	claimed, err := s.Claim(ctx, &chat.ClaimParams{Owner: "w", Now: at(time.Hour), LeaseUntil: at(time.Hour + time.Minute), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range claimed {
		ids = append(ids, c.ID)
	}
	if want := []string{waiting.ID, expired.ID}; !slices.Equal(ids, want) {
		t.Fatalf("Claim took %v, want the answered and the expired chat %v (not %s)", ids, want, notYet.ID)
	}
	if !strings.Contains(string(claimed[0].InputResponse), "looks good") {
		t.Fatalf("claimed chat lost its input response: %s", claimed[0].InputResponse)
	}
	// A worker holds the expired chat: no answer may slip in now.
	if _, err := submit("acme", expired.ID, "r2"); !errors.Is(err, chat.ErrNoPendingInput) {
		t.Fatalf("input to a claimed chat: %v", err)
	}
	// The worker's next append consumes the response and clears the request.
	after := advance(t, s, claimed[0], chat.ChatUpdate{Status: chat.StatusRunning})
	if after.InputResponse != nil || after.InputExpiresAt != nil || after.PendingInput != nil {
		t.Fatalf("after the worker's append: response %s, expires %v, pending %s", after.InputResponse, after.InputExpiresAt, after.PendingInput)
	}
}

func ptr[T any](v T) *T { return &v }

// testCreateChatClaimed: a chat created with an owner is leased to it from
// the start (epoch 1), so its creator appends at once, no one else claims
// it while the lease lives, and it is claimed like any chat after the lease
// expires.
func testCreateChatClaimed(t *testing.T, s chat.Store) {
	p := createParams("acme", base)
	p.Owner, p.LeaseUntil = "a", at(time.Minute)
	want := expectedNew(p)
	lease := at(time.Minute)
	want.Owner, want.Epoch, want.LeaseExpiresAt = "a", 1, &lease
	c := mustCreate(t, s, p)
	assertChat(t, "CreateChat with an owner", c, want)
	assertChat(t, "GetChat", mustGet(t, s, p.ID), want)

	if got, err := s.Claim(t.Context(), &chat.ClaimParams{Owner: "b", Now: at(30 * time.Second), LeaseUntil: at(2 * time.Minute), Limit: 10}); err != nil || len(got) != 0 {
		t.Fatalf("Claim during the creator's lease: %d chats, %v", len(got), err)
	}
	states, err := s.RenewLeases(t.Context(), &chat.RenewLeasesParams{Owner: "a", Leases: []chat.Lease{{ChatID: c.ID, Epoch: 1}}, LeaseUntil: at(2 * time.Minute)})
	if err != nil || len(states) != 1 || !states[0].Held {
		t.Fatalf("RenewLeases by the creator: %+v, %v", states, err)
	}
	c = advance(t, s, c, chat.ChatUpdate{Status: chat.StatusRunning, UpdatedAt: at(time.Second)})
	if c.LastSeq != 3 || c.Status != chat.StatusRunning || c.Owner != "a" {
		t.Fatalf("after the creator's append: %+v", c)
	}

	got, err := s.Claim(t.Context(), &chat.ClaimParams{Owner: "b", Now: at(3 * time.Minute), LeaseUntil: at(4 * time.Minute), Limit: 10})
	if err != nil || len(got) != 1 || got[0].ID != c.ID || got[0].Epoch != 2 || got[0].Owner != "b" {
		t.Fatalf("Claim after the creator's lease expired: %v, %v", got, err)
	}
}

// testCreateChatClaimedIdempotency: a repeated create answers with the
// existing chat and leases nothing to the second caller.
func testCreateChatClaimedIdempotency(t *testing.T, s chat.Store) {
	p := createParams("acme", base)
	p.IdempotencyKey, p.Owner, p.LeaseUntil = "k", "a", at(time.Minute)
	first := mustCreate(t, s, p)
	again := createParams("acme", at(time.Second))
	again.IdempotencyKey, again.RequestHash, again.Owner, again.LeaseUntil = "k", p.RequestHash, "b", at(time.Hour)
	c, created, err := s.CreateChat(t.Context(), again)
	if err != nil || created {
		t.Fatalf("repeat CreateChat: created %v, %v", created, err)
	}
	assertChat(t, "repeat CreateChat", c, first)
	assertChat(t, "chat after the repeat", mustGet(t, s, p.ID), first)
}

// testClaimOldestFirstAcrossOwnership: the oldest runnable chat is claimed
// first whether no one owns it or its owner's lease expired.
func testClaimOldestFirstAcrossOwnership(t *testing.T, s chat.Store) {
	abandoned := createParams("acme", at(0))
	abandoned.Owner, abandoned.LeaseUntil = "crashed", at(time.Minute)
	old := mustCreate(t, s, abandoned)
	fresh := mustCreate(t, s, createParams("acme", at(time.Second)))
	live := createParams("acme", at(-time.Second))
	live.Owner, live.LeaseUntil = "alive", at(time.Hour)
	mustCreate(t, s, live)

	claim := func() []*chat.Chat {
		t.Helper()
		cs, err := s.Claim(t.Context(), &chat.ClaimParams{Owner: "b", Now: at(2 * time.Minute), LeaseUntil: at(3 * time.Minute), Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	if got := claim(); len(got) != 1 || got[0].ID != old.ID || got[0].Epoch != 2 {
		t.Fatalf("first Claim: %v, want the chat whose lease expired (older)", got)
	}
	if got := claim(); len(got) != 1 || got[0].ID != fresh.ID || got[0].Epoch != 1 {
		t.Fatalf("second Claim: %v, want the unowned chat", got)
	}
	if got := claim(); len(got) != 0 {
		t.Fatalf("third Claim took a chat with a live lease: %v", got)
	}
}
