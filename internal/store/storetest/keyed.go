package storetest

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentd/agentd/internal/chat"
)

// keyed is a keyed request on c.
func keyed(c *chat.Chat, op, key, hash string) *chat.KeyedRequest {
	return &chat.KeyedRequest{Tenant: "acme", ChatID: c.ID, Op: op, Key: key, RequestHash: hash}
}

// wantAnswered checks that a repeated keyed write wrote nothing and gave
// the first answer: first, without its spec, and run.
func wantAnswered(t *testing.T, what string, err error, first *chat.Chat, run int) {
	t.Helper()
	var ae *chat.AnsweredError
	if !errors.As(err, &ae) {
		t.Fatalf("%s, repeated: %v, want the first answer", what, err)
	}
	want := *first
	want.Spec = nil
	assertChat(t, what+", repeated", ae.Answer.Chat, &want)
	if ae.Answer.Run != run {
		t.Fatalf("%s, repeated: run %d, want %d", what, ae.Answer.Run, run)
	}
}

// testKeyedRuns: a run posted with a key is posted once; its repeats get
// the first answer however the chat moved since, from the store (so from
// any replica); a repeat with another body is a conflict; keys are the
// chat's and the operation's, and the tenant's.
func testKeyedRuns(t *testing.T, s chat.Store) {
	ctx := t.Context()
	c := running(t, s, base)
	k := keyed(c, chat.OpRun, "k1", "h1")
	submit := func(k *chat.KeyedRequest) (*chat.Chat, int, error) {
		return s.SubmitRun(ctx, &chat.SubmitRunParams{Tenant: "acme", ChatID: c.ID, IfBusy: chat.IfBusyEnqueue, Key: uuid.NewString(),
			Request: json.RawMessage(`{"task": "again"}`), Now: at(3 * time.Hour), Keyed: k})
	}
	first, n, err := submit(k)
	if err != nil || n != 2 {
		t.Fatalf("keyed SubmitRun: run %d, %v", n, err)
	}
	mustSubmitRun(t, s, c, chat.IfBusyEnqueue, uuid.NewString(), 3) // the chat moves on
	_, _, err = submit(k)
	wantAnswered(t, "SubmitRun", err, first, 2)
	a, err := s.Answered(ctx, k)
	if err != nil || a.Run != 2 || a.Chat.ID != c.ID || a.Chat.QueuedRuns != first.QueuedRuns {
		t.Fatalf("Answered = %+v, %v; want run 2 as first answered", a, err)
	}
	if got := mustGet(t, s, c.ID); got.QueuedRuns != 2 {
		t.Fatalf("queued runs after the repeat: %d, want 2 (runs 2 and 3)", got.QueuedRuns)
	}
	other := keyed(c, chat.OpRun, "k1", "h2")
	if _, _, err := submit(other); !errors.Is(err, chat.ErrConflict) {
		t.Fatalf("the key with another body: %v, want ErrConflict", err)
	}
	if _, err := s.Answered(ctx, other); !errors.Is(err, chat.ErrConflict) {
		t.Fatalf("Answered with another body: %v, want ErrConflict", err)
	}
	for _, tc := range []struct {
		what string
		k    *chat.KeyedRequest
	}{
		{"another key", keyed(c, chat.OpRun, "k2", "h1")},
		{"another operation", keyed(c, chat.OpStop, "k1", "h1")},
		{"another tenant", &chat.KeyedRequest{Tenant: "globex", ChatID: c.ID, Op: chat.OpRun, Key: "k1", RequestHash: "h1"}},
		{"another chat", keyed(&chat.Chat{ID: uuid.NewString()}, chat.OpRun, "k1", "h1")},
	} {
		if _, err := s.Answered(ctx, tc.k); !errors.Is(err, chat.ErrNotFound) {
			t.Fatalf("Answered for %s: %v, want ErrNotFound", tc.what, err)
		}
	}
	// The same key on another chat is that chat's own.
	c2 := running(t, s, at(time.Minute))
	if _, n, err := s.SubmitRun(ctx, &chat.SubmitRunParams{Tenant: "acme", ChatID: c2.ID, IfBusy: chat.IfBusyEnqueue, Key: uuid.NewString(),
		Request: json.RawMessage(`{}`), Now: at(3 * time.Hour), Keyed: keyed(c2, chat.OpRun, "k1", "h1")}); err != nil || n != 2 {
		t.Fatalf("the key on another chat: run %d, %v", n, err)
	}
}

// testKeyedRunsConcurrent: of requests with one key at once, one posts
// the run and every other gets its answer.
func testKeyedRunsConcurrent(t *testing.T, s chat.Store) {
	c := running(t, s, base)
	const n = 8
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		posted   []*chat.Chat
		answered []*chat.Answer
		errs     []error
	)
	for range n {
		wg.Go(func() {
			got, run, err := s.SubmitRun(t.Context(), &chat.SubmitRunParams{Tenant: "acme", ChatID: c.ID, IfBusy: chat.IfBusyEnqueue,
				Key: uuid.NewString(), Request: json.RawMessage(`{}`), Now: at(3 * time.Hour), Keyed: keyed(c, chat.OpRun, "same", "h")})
			mu.Lock()
			defer mu.Unlock()
			var ae *chat.AnsweredError
			switch {
			case err == nil && run == 2:
				posted = append(posted, got)
			case errors.As(err, &ae):
				answered = append(answered, ae.Answer)
			default:
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if len(posted) != 1 || len(answered) != n-1 || len(errs) > 0 {
		t.Fatalf("%d posted, %d answered, errors %v; want 1 and %d", len(posted), len(answered), errs, n-1)
	}
	for _, a := range answered {
		if a.Run != 2 || a.Chat.QueuedRuns != posted[0].QueuedRuns {
			t.Fatalf("an answer: run %d, %d queued; want the posted run 2", a.Run, a.Chat.QueuedRuns)
		}
	}
	if got := mustGet(t, s, c.ID); got.QueuedRuns != 1 {
		t.Fatalf("%d runs queued, want 1", got.QueuedRuns)
	}
}

// testKeyedStopInputFork: POST /stop, /input and /fork keep their answers
// with their keys too.
func testKeyedStopInputFork(t *testing.T, s chat.Store) {
	ctx := t.Context()
	c := running(t, s, base)
	k := keyed(c, chat.OpStop, "s", "h")
	first, err := s.RequestStop(ctx, "acme", c.ID, k)
	if err != nil || !first.StopRequested {
		t.Fatalf("keyed RequestStop: %+v, %v", first, err)
	}
	finish(t, s, mustGet(t, s, c.ID))
	_, err = s.RequestStop(ctx, "acme", c.ID, k)
	wantAnswered(t, "RequestStop", err, first, 0)
	if _, err := s.RequestStop(ctx, "acme", c.ID, keyed(c, chat.OpStop, "s", "other")); !errors.Is(err, chat.ErrConflict) {
		t.Fatalf("RequestStop, the key with another body: %v", err)
	}

	waiting := awaitInput(t, s, mustCreate(t, s, createParams("acme", at(time.Minute))), "r1", nil)
	ki := keyed(waiting, chat.OpInput, "i", "h")
	submit := func(k *chat.KeyedRequest) (*chat.Chat, error) {
		return s.SubmitInput(ctx, &chat.SubmitInputParams{Tenant: "acme", ChatID: waiting.ID, RequestID: "r1",
			Response: json.RawMessage(`{"request_id": "r1", "content": "yes"}`), Now: at(time.Hour), Keyed: k})
	}
	answer, err := submit(ki)
	if err != nil {
		t.Fatal(err)
	}
	_, err = submit(ki) // answered, not ErrNoPendingInput
	wantAnswered(t, "SubmitInput", err, answer, 0)
	if _, err := submit(keyed(waiting, chat.OpInput, "i2", "h")); !errors.Is(err, chat.ErrNoPendingInput) {
		t.Fatalf("SubmitInput under a fresh key after the answer: %v, want ErrNoPendingInput", err)
	}

	src := mustCreate(t, s, createParams("acme", at(2*time.Minute)))
	fork := func() (*chat.CreateChatParams, *chat.Chat, error) {
		p := createParams("acme", at(3*time.Minute))
		p.State = &chat.ChatUpdate{Status: chat.StatusQueued, UpdatedAt: at(3 * time.Minute), Run: 1}
		p.ForkedFrom = &chat.ForkRef{ChatID: src.ID, Seq: 2}
		p.Keyed = keyed(src, chat.OpFork, "f", "h")
		got, _, err := s.CreateChat(ctx, p)
		return p, got, err
	}
	_, f, err := fork()
	if err != nil {
		t.Fatal(err)
	}
	p2, _, err := fork()
	wantAnswered(t, "fork", err, f, 0)
	if _, err := s.GetChat(ctx, "", p2.ID); !errors.Is(err, chat.ErrNotFound) {
		t.Fatalf("the repeated fork was created: %v", err)
	}
	bad := createParams("acme", at(4*time.Minute))
	bad.Keyed = keyed(src, chat.OpFork, "g", "h")
	if _, _, err := s.CreateChat(ctx, bad); err == nil {
		t.Fatal("a keyed CreateChat that is no fork was taken")
	}
}
