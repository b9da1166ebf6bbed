package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentd/agentd/internal/chat"
)

// running returns a chat claimed by owner "a" and running.
func running(t *testing.T, s chat.Store, created time.Time) *chat.Chat {
	t.Helper()
	c := mustCreate(t, s, createParams("acme", created))
	cs, err := s.Claim(t.Context(), &chat.ClaimParams{Owner: "a", Now: created, LeaseUntil: created.Add(time.Hour), Limit: 1})
	if err != nil || len(cs) != 1 || cs[0].ID != c.ID {
		t.Fatalf("Claim: %d chats, %v", len(cs), err)
	}
	return advance(t, s, cs[0], chat.ChatUpdate{Status: chat.StatusRunning, UpdatedAt: created})
}

func submitRun(t *testing.T, s chat.Store, c *chat.Chat, ifBusy, key string) (*chat.Chat, int, error) {
	t.Helper()
	return s.SubmitRun(t.Context(), &chat.SubmitRunParams{Tenant: "acme", ChatID: c.ID, IfBusy: ifBusy, Key: key,
		Request: json.RawMessage(`{"task": "again ` + key + `"}`), Now: at(3 * time.Hour)})
}

func mustSubmitRun(t *testing.T, s chat.Store, c *chat.Chat, ifBusy, key string, wantRun int) *chat.Chat {
	t.Helper()
	got, n, err := submitRun(t, s, c, ifBusy, key)
	if err != nil {
		t.Fatalf("SubmitRun(%s): %v", ifBusy, err)
	}
	if n != wantRun {
		t.Fatalf("SubmitRun(%s) = run %d, want %d", ifBusy, n, wantRun)
	}
	return got
}

func mustQueuedRun(t *testing.T, s chat.Store, id string, after int) *chat.QueuedRun {
	t.Helper()
	q, err := s.QueuedRun(t.Context(), id, after)
	if err != nil {
		t.Fatalf("QueuedRun(after %d): %v", after, err)
	}
	return q
}

// startRun appends the run.started of q as the chat's owner would.
func startRun(t *testing.T, s chat.Store, c *chat.Chat, q *chat.QueuedRun) error {
	e := chat.Event{Seq: c.LastSeq + 1, Type: "run.started", Data: json.RawMessage(`{"run": 2}`), CreatedAt: at(4 * time.Hour)}
	return s.Append(t.Context(), &chat.AppendParams{ChatID: c.ID, Epoch: c.Epoch, Events: []chat.Event{e}, StartKey: q.Key,
		Update: chat.ChatUpdate{Status: chat.StatusRunning, UpdatedAt: at(4 * time.Hour), Run: q.Run}})
}

func testSubmitRun(t *testing.T, s chat.Store) {
	c := running(t, s, base)
	k2, k3 := uuid.NewString(), uuid.NewString()

	// A chat whose run is active is busy: reject writes nothing.
	_, _, err := submitRun(t, s, c, chat.IfBusyReject, k2)
	var busy *chat.BusyError
	if !errors.As(err, &busy) || busy.Run != 1 {
		t.Fatalf("SubmitRun(reject) on a running chat: %v, want a BusyError for run 1", err)
	}
	assertChat(t, "chat after a rejected run", mustGet(t, s, c.ID), c)
	if _, err := s.QueuedRun(t.Context(), c.ID, 1); !errors.Is(err, chat.ErrNotFound) {
		t.Fatalf("QueuedRun after a rejected run: %v, want ErrNotFound", err)
	}

	// enqueue queues after the others, in order.
	got := mustSubmitRun(t, s, c, chat.IfBusyEnqueue, k2, 2)
	want := *c
	want.QueuedRuns = 1
	assertChat(t, "chat with one queued run", got, &want)
	got = mustSubmitRun(t, s, c, chat.IfBusyEnqueue, k3, 3)
	want.QueuedRuns = 2
	assertChat(t, "chat with two queued runs", got, &want)
	assertChat(t, "chat with two queued runs, read back", mustGet(t, s, c.ID), &want)
	q := mustQueuedRun(t, s, c.ID, 1)
	if q.Run != 2 || q.Key != k2 || !jsonEqual(q.Request, []byte(`{"task": "again `+k2+`"}`)) || !q.CreatedAt.Equal(at(3*time.Hour)) {
		t.Fatalf("first queued run = %+v", q)
	}
	checkUTC(t, "queued run", &q.CreatedAt)
	if q := mustQueuedRun(t, s, c.ID, 2); q.Run != 3 || q.Key != k3 {
		t.Fatalf("second queued run = %+v", q)
	}
	// Once the active run ended, reject still refuses: run 2 is about to start.
	ended := finish(t, s, mustGet(t, s, c.ID))
	if _, _, err := submitRun(t, s, ended, chat.IfBusyReject, uuid.NewString()); !errors.As(err, &busy) || busy.Run != 2 {
		t.Fatalf("SubmitRun(reject) on an ended chat with queued runs: %v, want a BusyError for run 2", err)
	}

	// The run's start makes it the chat's run.
	cs, err := s.Claim(t.Context(), &chat.ClaimParams{Owner: "b", Now: at(5 * time.Hour), LeaseUntil: at(6 * time.Hour), Limit: 10})
	if err != nil || len(cs) != 1 || cs[0].ID != c.ID {
		t.Fatalf("Claim of an ended chat with a queued run: %d chats, %v", len(cs), err)
	}
	if err := startRun(t, s, cs[0], q); err != nil {
		t.Fatalf("start run 2: %v", err)
	}
	if got := mustGet(t, s, c.ID); got.Run != 2 || got.QueuedRuns != 1 || got.Status != chat.StatusRunning {
		t.Fatalf("after run 2 started: run %d, queued %d, status %s", got.Run, got.QueuedRuns, got.Status)
	}

	// An ended chat without queued runs is not busy.
	idle := finish(t, s, running(t, s, at(time.Second)))
	got = mustSubmitRun(t, s, idle, chat.IfBusyReject, uuid.NewString(), 2)
	want = *idle
	want.QueuedRuns = 1
	assertChat(t, "ended chat with a run posted", got, &want)

	for name, tc := range map[string]struct{ tenant, id string }{
		"other tenant": {"globex", c.ID}, "missing": {"", uuid.NewString()}, "not a UUID": {"", "nope"},
	} {
		_, _, err := s.SubmitRun(t.Context(), &chat.SubmitRunParams{Tenant: tc.tenant, ChatID: tc.id, IfBusy: chat.IfBusyEnqueue,
			Key: uuid.NewString(), Request: json.RawMessage(`{}`), Now: base})
		if !errors.Is(err, chat.ErrNotFound) {
			t.Errorf("SubmitRun %s: err = %v, want ErrNotFound", name, err)
		}
	}
	if _, err := s.QueuedRun(t.Context(), "nope", 0); !errors.Is(err, chat.ErrNotFound) {
		t.Errorf("QueuedRun of no chat: %v, want ErrNotFound", err)
	}
}

func testSubmitRunInterrupt(t *testing.T, s chat.Store) {
	c := running(t, s, base)
	mustSubmitRun(t, s, c, chat.IfBusyEnqueue, uuid.NewString(), 2)
	mustSubmitRun(t, s, c, chat.IfBusyEnqueue, uuid.NewString(), 3)
	k := uuid.NewString()
	// interrupt drops the queued runs, asks the active one to cancel and
	// comes next, under a number of its own.
	got := mustSubmitRun(t, s, c, chat.IfBusyInterrupt, k, 4)
	want := *c
	want.QueuedRuns, want.CancelRequested = 1, true
	assertChat(t, "interrupted chat", got, &want)
	if q := mustQueuedRun(t, s, c.ID, 1); q.Run != 4 || q.Key != k {
		t.Fatalf("queued run after the interrupt = %+v, want run 4 with key %s", q, k)
	}
	// The append that ends the run clears its cancel request.
	ended := finish(t, s, mustGet(t, s, c.ID))
	if ended.CancelRequested || ended.QueuedRuns != 1 {
		t.Fatalf("after the interrupted run ended: cancel %v, queued %d", ended.CancelRequested, ended.QueuedRuns)
	}
	// Between runs, an interrupt replaces the queued run and cancels nothing.
	k = uuid.NewString()
	got = mustSubmitRun(t, s, ended, chat.IfBusyInterrupt, k, 5)
	if got.CancelRequested || got.QueuedRuns != 1 || mustQueuedRun(t, s, c.ID, 1).Key != k {
		t.Fatalf("interrupt between runs: cancel %v, queued %d", got.CancelRequested, got.QueuedRuns)
	}
	// A cancel drops the queued runs of an ended chat.
	got, err := s.RequestCancel(t.Context(), "acme", c.ID)
	if err != nil {
		t.Fatal(err)
	}
	want = *ended
	want.QueuedRuns = 0
	assertChat(t, "ended chat after a cancel dropped its queued run", got, &want)
	if _, err := s.QueuedRun(t.Context(), c.ID, 1); !errors.Is(err, chat.ErrNotFound) {
		t.Fatalf("a queued run survived the cancel: %v", err)
	}
}

func testStartRunFencedWhenDropped(t *testing.T, s chat.Store) {
	c := finish(t, s, running(t, s, base))
	k1 := uuid.NewString()
	mustSubmitRun(t, s, c, chat.IfBusyEnqueue, k1, 2)
	cs, err := s.Claim(t.Context(), &chat.ClaimParams{Owner: "b", Now: at(5 * time.Hour), LeaseUntil: at(6 * time.Hour), Limit: 10})
	if err != nil || len(cs) != 1 {
		t.Fatalf("Claim: %d chats, %v", len(cs), err)
	}
	q1 := mustQueuedRun(t, s, c.ID, 1)
	// While the worker is about to start run 2, an interrupt replaces it
	// with run 3.
	k2 := uuid.NewString()
	mustSubmitRun(t, s, c, chat.IfBusyInterrupt, k2, 3)
	if err := startRun(t, s, cs[0], q1); !errors.Is(err, chat.ErrFenced) {
		t.Fatalf("starting a dropped run: %v, want ErrFenced", err)
	}
	if got := mustGet(t, s, c.ID); got.Run != 1 || got.LastSeq != cs[0].LastSeq {
		t.Fatalf("the dropped run's start was written: run %d, last_seq %d", got.Run, got.LastSeq)
	}
	// A start of the dropped run under the replacing run's key is fenced
	// too: the key names the row, with its number.
	forged := *q1
	forged.Key = k2
	if err := startRun(t, s, cs[0], &forged); !errors.Is(err, chat.ErrFenced) {
		t.Fatalf("starting run 2 under run 3's key: %v, want ErrFenced", err)
	}
	if err := startRun(t, s, cs[0], mustQueuedRun(t, s, c.ID, 1)); err != nil {
		t.Fatalf("starting the run that replaced it: %v", err)
	}
	// A cancel drops a queued run the same way.
	c = finish(t, s, mustGet(t, s, c.ID))
	mustSubmitRun(t, s, c, chat.IfBusyEnqueue, uuid.NewString(), 4)
	q3 := mustQueuedRun(t, s, c.ID, 3)
	if _, err := s.RequestCancel(t.Context(), "", c.ID); err != nil {
		t.Fatal(err)
	}
	c = mustGet(t, s, c.ID)
	if err := startRun(t, s, c, q3); !errors.Is(err, chat.ErrFenced) {
		t.Fatalf("starting a cancelled run: %v, want ErrFenced", err)
	}
}

func testClaimNextRun(t *testing.T, s chat.Store) {
	idle := finish(t, s, running(t, s, base))
	next := finish(t, s, running(t, s, at(time.Second)))
	stopping := running(t, s, at(2*time.Second))
	mustSubmitRun(t, s, next, chat.IfBusyEnqueue, uuid.NewString(), 2)
	stopping = advance(t, s, stopping, chat.ChatUpdate{Status: chat.StatusAwaitingInput, ReleaseLease: true, UpdatedAt: at(2 * time.Second)})
	if _, err := s.RequestStop(t.Context(), "", stopping.ID, nil); err != nil {
		t.Fatal(err)
	}
	now := at(10 * time.Hour)
	cs, err := s.Claim(t.Context(), &chat.ClaimParams{Owner: "b", Now: now, LeaseUntil: now.Add(time.Minute), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	if len(ids) != 2 || ids[0] != next.ID || ids[1] != stopping.ID {
		t.Fatalf("Claim = %v, want the ended chat with a queued run and the waiting chat asked to stop (%s, %s), not the idle %s",
			ids, next.ID, stopping.ID, idle.ID)
	}
	// The worker dies before it starts the run: once its lease runs out,
	// another claims the chat again.
	later := now.Add(2 * time.Minute)
	cs, err = s.Claim(t.Context(), &chat.ClaimParams{Owner: "c", Now: later, LeaseUntil: later.Add(time.Minute), Limit: 10})
	if err != nil || len(cs) != 2 || cs[0].ID != next.ID || cs[0].Owner != "c" {
		for _, c := range cs {
			t.Logf("claimed %s (%s)", c.ID, c.Status)
		}
		t.Fatalf("Claim after the leases ran out: %d chats, %v; want %s and %s", len(cs), err, next.ID, stopping.ID)
	}
}

func testRequestStop(t *testing.T, s chat.Store) {
	c := running(t, s, base)
	for range 2 { // idempotent
		got, err := s.RequestStop(t.Context(), "acme", c.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := *c
		want.StopRequested = true
		assertChat(t, "RequestStop", got, &want)
	}
	states, err := s.RenewLeases(t.Context(), &chat.RenewLeasesParams{Owner: "a", Leases: []chat.Lease{{ChatID: c.ID, Epoch: c.Epoch}},
		LeaseUntil: at(2 * time.Hour)})
	if err != nil || len(states) != 1 || !states[0].Held || !states[0].StopRequested || states[0].CancelRequested {
		t.Fatalf("RenewLeases of a chat asked to stop: %+v, %v", states, err)
	}
	ended := finish(t, s, mustGet(t, s, c.ID))
	if ended.StopRequested {
		t.Fatalf("the append that ended the run left its stop request")
	}
	got, err := s.RequestStop(t.Context(), "", c.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	assertChat(t, "RequestStop of an ended chat", got, ended)
	for name, tc := range map[string]struct{ tenant, id string }{
		"other tenant": {"globex", c.ID}, "missing": {"", uuid.NewString()}, "not a UUID": {"", "nope"},
	} {
		if _, err := s.RequestStop(t.Context(), tc.tenant, tc.id, nil); !errors.Is(err, chat.ErrNotFound) {
			t.Errorf("RequestStop %s: err = %v, want ErrNotFound", name, err)
		}
	}
}

func testCreateFork(t *testing.T, s chat.Store) {
	src := mustCreate(t, s, createParams("acme", base))
	p := createParams("acme", at(time.Minute))
	p.Events = append(p.Events, message(3, "an answer", at(time.Minute)))
	done := at(time.Minute)
	p.State = &chat.ChatUpdate{Status: chat.StatusCompleted, StopReason: chat.StopMaxRound, StopDetail: "Maximum number of turns 1 reached.",
		Turns: 4, MessageCount: 2, PromptTokens: 30, CompletionTokens: 7, CompletedAt: &done, UpdatedAt: done, Run: 3}
	p.ForkedFrom = &chat.ForkRef{ChatID: src.ID, Seq: 3}
	got := mustCreate(t, s, p)
	want := expectedNew(p)
	want.Status, want.StopReason, want.StopDetail, want.CompletedAt = chat.StatusCompleted, chat.StopMaxRound, p.State.StopDetail, &done
	want.Turns, want.PromptTokens, want.CompletionTokens, want.Run, want.ForkedFrom = 4, 30, 7, 3, p.ForkedFrom
	assertChat(t, "CreateChat of a fork", got, want)
	assertChat(t, "fork, read back", mustGet(t, s, p.ID), want)
	assertEvents(t, "fork's events", mustEvents(t, s, p.ID), withChatID(p.ID, p.Events...))
	// Its runs go on from the copied run.
	if _, n, err := submitRun(t, s, got, chat.IfBusyReject, uuid.NewString()); err != nil || n != 4 {
		t.Fatalf("SubmitRun to the fork: run %d, %v; want run 4", n, err)
	}
}
