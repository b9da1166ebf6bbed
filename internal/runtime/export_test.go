package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/chat/engine"

	"github.com/google/uuid"

	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/spec/spectest"
)

// This file lets the external tests (package chat_test, which may use a
// real store) drive a worker's own code paths: PropertyStep runs the state
// property on a real store.

// FaultyStore is a store whose next Append can be made to fail as fenced
// without writing anything: an append a worker plans and the store throws
// away.
type FaultyStore struct {
	chat.Store
	fenceNext atomic.Bool
}

// Append implements Store.
func (f *FaultyStore) Append(ctx context.Context, p *chat.AppendParams) error {
	if f.fenceNext.CompareAndSwap(true, false) {
		return fmt.Errorf("append to chat %s: %w (injected)", p.ChatID, chat.ErrFenced)
	}
	return f.Store.Append(ctx, p)
}

// RunStateProperty drives one random chat (seed; of the selection method
// given, else of any) through a real worker on
// rt, whose store is db: its decisions (state.next), the world's answers
// (effect), and everything a worker does between them — storable, plans,
// held selections flushed or thrown away, appends the store refuses, runs
// posted and started, stop requests, approvals. After every append it
// checks that the worker's state is, field for field, the fold of the log
// as the store gives it back (what a worker rebuilt on another replica
// sees), that the chat record says what the state says, and that the log
// is well formed.
func RunStateProperty(t *testing.T, rt *Runtime, db *FaultyStore, seed uint64, method string) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 7))
	// The random specs name tools and models no runtime here offers: the
	// chat is written as Create writes one, without its validation.
	body := spectest.RandomSpec(rng)
	if method != "" {
		body = spectest.RandomSpecOf(rng, method)
	}
	sp, compact, probs := spec.DecodeCompact([]byte(body))
	if len(probs) > 0 {
		t.Fatalf("decode %s: %v", body, probs)
	}
	task, probs := engine.SpecTask(sp, spec.Limits{})
	if len(probs) > 0 {
		t.Fatalf("task: %v", probs)
	}
	id := uuid.NewString()
	if _, _, err := rt.store.CreateChat(ctx, &chat.CreateChatParams{ID: id, Tenant: "p", Spec: compact, CreatedAt: t0,
		Events: engine.FirstEvents(sp, task, t0)}); err != nil {
		t.Fatal(err)
	}
	w := claimWorker(t, rt, id)
	runs := 0
	for i := 0; ; i++ {
		if i > 3000 {
			t.Fatalf("no end after %d steps; status %s, turns %d", i, w.st.Status, w.st.Turns)
		}
		if w.st.Status == chat.StatusRunning && rng.IntN(20) == 0 {
			// POST /stop, and the word of it that reaches the worker.
			if _, err := db.RequestStop(ctx, "", w.id, nil); err != nil {
				t.Fatal(err)
			}
			w.flags.stop.Store(true)
		}
		env := w.env()
		st := w.st.Next(env)
		switch {
		case st.Kind == engine.StepWait && w.st.Status.Terminal() && runs < 2 && rng.IntN(2) == 0:
			postRun(t, db, w, rng)
			runs++
			w = claimWorker(t, rt, w.id) // the claim of an ended chat with a run queued
			continue
		case st.Kind == engine.StepWait && w.st.Status == chat.StatusAwaitingInput:
			in := engine.RandomInput(rng, w.st)
			if in == nil {
				return // nobody answers
			}
			if _, err := db.SubmitInput(ctx, &chat.SubmitInputParams{ChatID: w.id, RequestID: w.st.PendingInput.RequestID, Response: in, Now: t0}); err != nil {
				t.Fatal(err)
			}
			w = claimWorker(t, rt, w.id) // the claim of an answered chat
			continue
		case st.Kind == engine.StepWait:
			return
		}
		if rng.IntN(30) == 0 {
			db.fenceNext.Store(true)
		}
		if w.holdable(&st) && rng.IntN(2) == 0 {
			if err := w.hold(ctx, st.Events...); err != nil {
				w = afterFailedAppend(t, rt, db, w, err)
				continue
			}
			if rng.IntN(3) == 0 {
				_ = w.settleHeld() // the worker stops before the selection is durable
				checkAgainstLog(t, db, w)
			}
			continue
		}
		var err error
		switch {
		case st.Kind == engine.StepBranches:
			// The branches' work ends in any order: commit one branch's
			// next step, as runBranches does when its result arrives.
			open := w.st.OpenBranches()
			bs := w.st.BranchStep(env, open[rng.IntN(len(open))])
			for _, a := range open {
				if !asksHuman(bs) {
					break
				}
				bs = w.st.BranchStep(env, a) // one that asks a human waits for the others
			}
			err = w.commit(ctx, engine.Effect(rng, w.st, bs)...)
		case st.Kind == engine.StepStartRun:
			err = w.startQueuedRun(ctx)
		case len(st.Before) > 0:
			if err = w.commit(ctx, st.Before...); err == nil {
				err = w.commit(ctx, engine.Effect(rng, w.st, st)...)
			}
		default:
			err = w.commit(ctx, engine.Effect(rng, w.st, st)...)
		}
		if err != nil {
			w = afterFailedAppend(t, rt, db, w, err)
			continue
		}
		checkAgainstLog(t, db, w)
	}
}

// claimWorker claims the chat and makes its worker from the store, as the
// scheduler does.
func claimWorker(t *testing.T, rt *Runtime, id string) *worker {
	t.Helper()
	now := rt.now()
	cs, err := rt.store.Claim(context.Background(), &chat.ClaimParams{Owner: rt.owner, Now: now, LeaseUntil: now.Add(leaseForever), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.ID == id {
			w := newWorker(rt, c, nil)
			if err := w.rebuild(context.Background()); err != nil {
				t.Fatal(err)
			}
			return w
		}
	}
	t.Fatalf("chat %s is not claimable", id)
	return nil
}

const leaseForever = time.Hour

// afterFailedAppend is what follows an append the store refused: the
// worker's state must be the log's, and the next worker continues from it
// (one that has nothing to do until an answer or a run comes is made
// without a claim).
func afterFailedAppend(t *testing.T, rt *Runtime, db *FaultyStore, w *worker, err error) *worker {
	t.Helper()
	if !errors.Is(err, chat.ErrFenced) {
		t.Fatalf("append failed: %v", err)
	}
	_ = w.settleHeld()
	checkAgainstLog(t, db, w)
	ctx := context.Background()
	if err := rt.store.ReleaseLease(ctx, chat.Lease{ChatID: w.id, Epoch: w.epoch}, rt.owner); err != nil {
		t.Fatal(err)
	}
	c, err := rt.store.GetChat(ctx, "", w.id)
	if err != nil {
		t.Fatal(err)
	}
	if c.Status.Terminal() || c.Status == chat.StatusAwaitingInput {
		next := newWorker(rt, c, nil)
		if err := next.rebuild(ctx); err != nil {
			t.Fatal(err)
		}
		return next
	}
	return claimWorker(t, rt, w.id)
}

// postRun posts a run as POST /runs does.
func postRun(t *testing.T, db *FaultyStore, w *worker, rng *rand.Rand) {
	t.Helper()
	var req engine.QueuedRequest
	switch rng.IntN(3) {
	case 0:
		req.Task = []spec.TaskMessage{{Type: chat.TypeTextMessage, Source: chat.UserName, Content: "again"}}
	case 1:
		req.Task = []spec.TaskMessage{{Type: chat.TypeHandoffMessage, Source: chat.UserName, Content: "back to you", Target: w.st.Spec.Agents[0].Name}}
	}
	if rng.IntN(2) == 0 {
		req.MaxRound = 1 + rng.IntN(3)
	}
	if _, _, err := db.SubmitRun(context.Background(), &chat.SubmitRunParams{ChatID: w.id, Request: chat.MustJSON(req),
		IfBusy: chat.IfBusyEnqueue, Key: uuid.NewString(), Now: t0}); err != nil {
		t.Fatal(err)
	}
}

// checkAgainstLog compares the worker's state with the fold of the log the
// store holds, and the chat record with the state.
func checkAgainstLog(t *testing.T, db chat.Store, w *worker) {
	t.Helper()
	ctx := context.Background()
	evs, err := db.ListEvents(ctx, &chat.ListEventsParams{ChatID: w.id, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	checkLogShape(t, evs)
	rebuilt := engine.NewState(w.st.Spec, w.st.SpecMaxRound)
	for _, e := range evs {
		if err := rebuilt.Apply(e); err != nil {
			t.Fatalf("the stored log does not fold: %v", err)
		}
	}
	compareAllFields(t, w.st, rebuilt)
	c, err := db.GetChat(ctx, "", w.id)
	if err != nil {
		t.Fatal(err)
	}
	u := w.st.Update(c.UpdatedAt)
	if len(c.InputResponse) > 0 && u.Status == chat.StatusAwaitingInput {
		// An answer waits for the chat's next worker: the record says the
		// chat runs again, with no request pending (see Store.SubmitInput).
		u.Status, u.PendingInput = chat.StatusRunning, nil
	}
	if c.Status != u.Status || c.StopReason != u.StopReason || c.StopDetail != u.StopDetail || c.Error != u.Error ||
		c.Turns != u.Turns || c.MessageCount != u.MessageCount || c.PromptTokens != u.PromptTokens ||
		c.CompletionTokens != u.CompletionTokens || c.LastSeq != w.st.LastSeq || c.Run != u.Run ||
		!reflect.DeepEqual(json.RawMessage(c.PendingInput), u.PendingInput) && !(len(c.PendingInput) == 0 && len(u.PendingInput) == 0) {
		t.Fatalf("chat record %+v does not say what the state says: %+v", c, u)
	}
	if w.st.Turns-w.st.RunTurns > w.st.MaxRound+engine.MagenticExtraRound(w.st) {
		t.Fatalf("%d turns in run %d > its max_round %d", w.st.Turns-w.st.RunTurns, w.st.Run, w.st.MaxRound)
	}
}

// checkLogShape: seqs are dense, and only a new run follows a run's end.
func checkLogShape(t *testing.T, log []chat.Event) {
	t.Helper()
	for i := range log {
		if log[i].Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, log[i].Seq)
		}
		if log[i].Type.Terminal() && i != len(log)-1 && log[i+1].Type != chat.EventRunStarted {
			t.Fatalf("seq %d (%s) follows the end of a run", log[i+1].Seq, log[i+1].Type)
		}
	}
}

// compareAllFields fails the test where the live state and the rebuilt
// one differ (state.diff).
func compareAllFields(t *testing.T, live, rebuilt *engine.State) {
	t.Helper()
	if d := live.Diff(rebuilt); d != nil {
		t.Fatalf("the worker's state differs from the fold of the stored log:\n%s", strings.Join(d, "\n"))
	}
}

// t0 is the clock of the chats RunStateProperty makes.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// TurnCycles records the turn cycles of a runtime's workers (see
// cycleRecorder).
type TurnCycles struct{ rec *cycleRecorder }

// RecordTurnCycles makes rt record its workers' turn cycles; call it before
// the first chat is created.
func RecordTurnCycles(rt *Runtime) *TurnCycles {
	rt.cycles = &cycleRecorder{}
	return &TurnCycles{rec: rt.cycles}
}

// Reset forgets the cycles recorded so far (a warm-up's).
func (t *TurnCycles) Reset() {
	t.rec.mu.Lock()
	defer t.rec.mu.Unlock()
	t.rec.stages, t.rec.turns, t.rec.batches, t.rec.paused = [stageCount][]time.Duration{}, nil, nil, false
}

// Pause stops recording: what Report says is about the cycles until now.
func (t *TurnCycles) Pause() {
	t.rec.mu.Lock()
	defer t.rec.mu.Unlock()
	t.rec.paused = true
}

// Turns is the number of turn cycles recorded.
func (t *TurnCycles) Turns() int {
	t.rec.mu.Lock()
	defer t.rec.mu.Unlock()
	return len(t.rec.turns)
}

// Report is the breakdown of the cycles recorded, stage by stage.
func (t *TurnCycles) Report() string { return t.rec.report() }
