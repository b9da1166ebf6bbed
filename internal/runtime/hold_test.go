package runtime_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/runtime/runtimetest"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/llm"
)

// appendLog is the real store, recording what each append carried and
// when it returned.
type appendLog struct {
	chat.Store
	mu      sync.Mutex
	appends []recordedAppend
}

type recordedAppend struct {
	types []chat.EventType
	at    time.Time
}

func (l *appendLog) Append(ctx context.Context, p *chat.AppendParams) error {
	err := l.Store.Append(ctx, p)
	if err == nil {
		r := recordedAppend{at: time.Now()}
		for _, e := range p.Events {
			r.types = append(r.types, e.Type)
		}
		l.mu.Lock()
		l.appends = append(l.appends, r)
		l.mu.Unlock()
	}
	return err
}

func (l *appendLog) recorded() []recordedAppend {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.appends)
}

// throughEnd returns the appends once the one that ended the chat is
// recorded. A chat's end is visible in the store as soon as its append
// commits, a moment before Append returns here and records it, so a test
// that saw the chat end must still wait for that last record.
func (l *appendLog) throughEnd(t *testing.T) []recordedAppend {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		as := l.recorded()
		if slices.ContainsFunc(as, func(a recordedAppend) bool { return slices.ContainsFunc(a.types, chat.EventType.Terminal) }) {
			return as
		}
		if time.Now().After(deadline) {
			t.Fatalf("no append ended the chat within 10s: %v", as)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// selectionsAlone counts the appends that carry speaker selections only,
// and the selections appended with a message.
func selectionsAlone(as []recordedAppend) (alone, withMessage int) {
	for _, a := range as {
		sel := slices.Contains(a.types, chat.EventSpeakerSelected)
		switch {
		case sel && slices.Contains(a.types, chat.EventMessage):
			withMessage++
		case sel:
			alone++
		}
	}
	return alone, withMessage
}

func TestATurnIsOneAppend(t *testing.T) {
	log := &appendLog{Store: runtimetest.OpenSQLite(t)}
	// However slow the machine, no turn waits a minute for its store.
	rt := runtimetest.New(t, log, func(c *runtime.Config) { c.HoldSelection = time.Minute })
	c, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: twoAgentSpec(6, 0, "")})
	if err != nil {
		t.Fatal(err)
	}
	if got := waitTerminal(t, rt, c.ID, 10*time.Second); got.StopReason != chat.StopMaxRound {
		t.Fatalf("chat = %+v", got)
	}
	as := log.throughEnd(t)
	alone, with := selectionsAlone(as)
	if alone != 0 || with != 6 {
		t.Fatalf("%d selections appended alone, %d with their message; want 0 and 6: %v", alone, with, as)
	}
	// The chat's start goes with its first turn: the worker's first append
	// is chat.running, the selection and the first reply.
	if want := []chat.EventType{chat.EventChatRunning, chat.EventSpeakerSelected, chat.EventMessage}; len(as) == 0 || !slices.Equal(as[0].types, want) {
		t.Fatalf("first append = %v, want %v", as, want)
	}
	if want := []string{"go", "a-0", "b-0", "a-1", "b-1", "a-2", "b-2"}; !slices.Equal(contents(messages(t, log, c.ID)), want) {
		t.Fatalf("messages = %v", contents(messages(t, log, c.ID)))
	}
}

func TestASlowTurnPublishesItsSpeakerFirst(t *testing.T) {
	log := &appendLog{Store: runtimetest.OpenSQLite(t)}
	rt := runtimetest.New(t, log, func(c *runtime.Config) { c.HoldSelection = 20 * time.Millisecond })
	// The model takes 1.2 s: a loaded machine may hold up the 20 ms flush
	// by some hundred milliseconds, and the selection must still come out
	// well before the reply.
	c, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: twoAgentSpec(2, 1200, "")})
	if err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, rt, c.ID, 10*time.Second)
	as := log.throughEnd(t)
	if alone, with := selectionsAlone(as); alone != 2 || with != 0 {
		t.Fatalf("%d selections appended alone, %d with their message; want 2 and 0: %v", alone, with, as)
	}
	// Each selection was durable (and so published) well before its
	// turn's message, while the model was still answering.
	for i, a := range as {
		if len(a.types) == 1 && a.types[0] == chat.EventSpeakerSelected {
			if i+1 >= len(as) || as[i+1].at.Sub(a.at) < 600*time.Millisecond {
				t.Fatalf("selection appended at %v, next append at %v: want the selection ≥ 600ms before", a.at, as[i+1].at)
			}
		}
	}
}

func TestSelectionsAppendAtOnceWhenNotHeld(t *testing.T) {
	log := &appendLog{Store: runtimetest.OpenSQLite(t)}
	rt := runtimetest.New(t, log, func(c *runtime.Config) { c.HoldSelection = -1 })
	c, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: twoAgentSpec(3, 0, "")})
	if err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, rt, c.ID, 10*time.Second)
	if alone, with := selectionsAlone(log.throughEnd(t)); alone != 3 || with != 0 {
		t.Fatalf("%d selections appended alone, %d with their message; want 3 and 0", alone, with)
	}
}

// A worker that stops while its selection is held leaves nothing of it:
// the next worker selects again from the same log.
func TestAHeldSelectionIsDroppedWhenTheWorkerStops(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	models, err := llm.New(llm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rt1, err := runtime.New(runtime.Config{Store: db, Models: models, LeaseDuration: time.Minute,
		PollInterval: 50 * time.Millisecond, HoldSelection: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt1.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c, _, err := rt1.Create(context.Background(), &chat.CreateParams{Body: twoAgentSpec(3, 1000, "")})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // in the first model call, its selection held
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rt1.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := db.ListEvents(context.Background(), &chat.ListEventsParams{ChatID: c.ID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == chat.EventSpeakerSelected {
			t.Fatalf("a held selection was written by a stopped worker: %+v", evs)
		}
	}
	rt2 := runtimetest.New(t, db)
	if got := waitTerminal(t, rt2, c.ID, 15*time.Second); got.StopReason != chat.StopMaxRound {
		t.Fatalf("chat = %+v", got)
	}
	if want := []string{"go", "a-0", "b-0", "a-1"}; !slices.Equal(contents(messages(t, db, c.ID)), want) {
		t.Fatalf("messages = %v", contents(messages(t, db, c.ID)))
	}
}
