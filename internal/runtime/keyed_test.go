package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/runtime/runtimetest"
)

// TestKeyedInputAndStop: an answer to an input request and a stop, sent
// with an Idempotency-Key, are done once; a repeat gets the first answer
// though the chat moved on (the request is no longer pending, the run
// ended), and the key with another body is a conflict.
func TestKeyedInputAndStop(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	ctx := context.Background()
	c := create(t, rt, fmt.Sprintf(reviewSpec, ""))
	c = waitFor(t, rt, c.ID, 5*time.Second, chat.StatusAwaitingInput)
	p := pending(t, c)
	content := "make it shorter"
	in := &chat.Input{RequestID: p.RequestID, Content: &content}
	first, err := rt.Input(ctx, "", c.ID, "answer-1", in)
	if err != nil || first.Status != chat.StatusRunning {
		t.Fatalf("keyed input: %+v, %v", first, err)
	}
	c = nextPause(t, rt, c)
	again, err := rt.Input(ctx, "", c.ID, "answer-1", in)
	if err != nil {
		t.Fatalf("repeat of the keyed input after the chat went on: %v, want the first answer", err)
	}
	if again.Status != chat.StatusRunning || again.LastSeq != first.LastSeq || !again.UpdatedAt.Equal(first.UpdatedAt) || string(again.Spec) != string(c.Spec) {
		t.Fatalf("repeat answered %s at seq %d, want the first answer: %s at seq %d", again.Status, again.LastSeq, first.Status, first.LastSeq)
	}
	other := "something else"
	if _, err := rt.Input(ctx, "", c.ID, "answer-1", &chat.Input{RequestID: p.RequestID, Content: &other}); !errors.Is(err, chat.ErrConflict) {
		t.Fatalf("the key with another answer: %v, want ErrConflict", err)
	}
	if _, err := rt.Input(ctx, "", c.ID, "", in); !errors.Is(err, chat.ErrNoPendingInput) {
		t.Fatalf("the answer again without its key: %v, want ErrNoPendingInput", err)
	}
	if got := messagesOf(t, db, c.ID, "human"); len(got) != 1 {
		t.Fatalf("human messages %v, want the one answer", got)
	}

	stopped, changed, err := rt.StopRun(ctx, "", c.ID, "stop-1")
	if err != nil || !changed || !stopped.StopRequested {
		t.Fatalf("keyed stop: changed %v, %+v, %v", changed, stopped, err)
	}
	waitFor(t, rt, c.ID, 5*time.Second, chat.StatusCompleted)
	again, changed, err = rt.StopRun(ctx, "", c.ID, "stop-1")
	if err != nil || !changed || again.Status != stopped.Status || !again.StopRequested {
		t.Fatalf("repeat of the keyed stop after the run ended: changed %v, %s, %v; want the first answer", changed, again.Status, err)
	}
	if _, changed, err := rt.StopRun(ctx, "", c.ID, ""); err != nil || changed {
		t.Fatalf("a stop without a key after the run ended: changed %v, %v", changed, err)
	}
}

// messagesOf returns the contents of the messages of one agent.
func messagesOf(t *testing.T, db chat.Store, id, name string) []string {
	t.Helper()
	evs, err := db.ListEvents(context.Background(), &chat.ListEventsParams{ChatID: id, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Type == chat.EventMessage && e.Name == name {
			out = append(out, e.Content)
		}
	}
	return out
}
