package runtime_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/runtime/runtimetest"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/openaitest"
)

// A stream that falls behind gets the fragments of a reply joined, never
// fewer characters; a reset and another agent's reply are not joined.
func TestADeltaQueueJoinsFragmentsAndLosesNone(t *testing.T) {
	q := runtime.NewDeltaQueue()
	for _, d := range []chat.Delta{
		{Name: "a", Content: "Hel", AfterSeq: 4}, {Name: "a", Content: "lo", AfterSeq: 4},
		{Name: "a", Reset: true, AfterSeq: 4}, {Name: "a", Content: "Hi", AfterSeq: 4},
		{Name: "b", Content: "Yo", AfterSeq: 4}, {Name: "a", Content: " there", AfterSeq: 4},
		{Name: "a", Content: "next", AfterSeq: 6},
	} {
		q.Push(d)
	}
	select {
	case <-q.Ready():
	default:
		t.Fatal("a queue with deltas is not ready")
	}
	got := q.Take(nil)
	want := []chat.Delta{
		{Name: "a", Content: "Hello", AfterSeq: 4}, {Name: "a", Reset: true, AfterSeq: 4}, {Name: "a", Content: "Hi", AfterSeq: 4},
		{Name: "b", Content: "Yo", AfterSeq: 4}, {Name: "a", Content: " there", AfterSeq: 4}, {Name: "a", Content: "next", AfterSeq: 6},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("took %+v\nwant %+v", got, want)
	}
	if more := q.Take(nil); len(more) != 0 {
		t.Fatalf("a second take got %+v", more)
	}
}

// streamText follows a chat's deltas on a replica as a client does: a
// reset drops the text so far.
type streamText struct {
	text   strings.Builder
	resets int
	// voided is the text a reset dropped, the last time one came.
	voided string
	after  map[int64]bool // the AfterSeqs seen
}

// follow takes the deltas until the text equals want.
func (s *streamText) follow(t *testing.T, q *runtime.DeltaQueue, want string, within time.Duration) {
	t.Helper()
	s.until(t, q, func(text string) bool { return text == want }, "want "+want, within)
}

// until takes the deltas until done(text), or fails after the timeout.
func (s *streamText) until(t *testing.T, q *runtime.DeltaQueue, done func(string) bool, what string, within time.Duration) {
	t.Helper()
	if s.after == nil {
		s.after = map[int64]bool{}
	}
	deadline := time.After(within)
	for !done(s.text.String()) {
		select {
		case <-q.Ready():
		case <-deadline:
			t.Fatalf("the stream has %q (after %d resets): %s", s.text.String(), s.resets, what)
		}
		for _, d := range q.Take(nil) {
			s.after[d.AfterSeq] = true
			if d.Reset {
				s.resets++
				s.voided = s.text.String()
				s.text.Reset()
			} else {
				s.text.WriteString(d.Content)
			}
		}
	}
}

// streamingRuntimes returns a model server and a way to start runtimes on
// one Postgres whose models are that server's.
func streamingRuntimes(t *testing.T) (*openaitest.Server, func(opts ...func(*runtime.Config)) *runtime.Runtime) {
	fake := openaitest.New()
	t.Cleanup(fake.Close)
	db := runtimetest.OpenPostgres(t)
	models, err := llm.New(llm.Config{OpenAI: llm.OpenAIConfig{BaseURL: fake.URL(), APIKey: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	return fake, func(opts ...func(*runtime.Config)) *runtime.Runtime {
		return runtimetest.New(t, db, append([]func(*runtime.Config){func(c *runtime.Config) {
			c.Models, c.Providers = models, models.Providers()
		}}, opts...)...)
	}
}

const streamingSpec = `{"task": "t", "max_round": 1,
	"agents": [{"name": "writer", "type": "assistant", "model": {"provider": "openai", "model": "gpt-x"}}]}`

// words are the pieces of a streamed reply.
func words(n int, prefix string) []string {
	var ws []string
	for i := range n {
		ws = append(ws, fmt.Sprintf("%s%d ", prefix, i))
	}
	return ws
}

// TestDeltasReachStreamsOnEveryReplica: a stream on a replica that does not
// run the chat sees the reply being typed, from its start although it
// subscribed in the middle of it, before the message holds it whole.
func TestDeltasReachStreamsOnEveryReplica(t *testing.T) {
	fake, start := streamingRuntimes(t)
	rt1 := start()
	rt2 := start(func(c *runtime.Config) { c.PollInterval = time.Hour }) // never claims: it only streams
	pieces := words(40, "w")
	halfway := make(chan struct{})
	var once sync.Once
	fake.Reply(openaitest.Reply{Pieces: pieces, PieceDelay: 20 * time.Millisecond, Sent: func(i int) {
		if i == 10 {
			once.Do(func() { close(halfway) })
		}
	}})
	c := create(t, rt1, streamingSpec)
	select {
	case <-halfway:
	case <-time.After(10 * time.Second):
		c, _ := rt1.Get(t.Context(), "", c.ID)
		t.Fatalf("the model never got a quarter through its reply: chat %+v, requests %d", c, len(fake.Requests()))
	}
	wakes, q, stop := rt2.Stream(c.ID)
	defer stop()
	var s streamText
	s.follow(t, q, strings.Join(pieces, ""), 10*time.Second)
	if s.resets != 0 || len(s.after) != 1 {
		t.Fatalf("%d resets, deltas after seqs %v: want none, and one reply", s.resets, s.after)
	}
	evs := eventsToEnd(t, rt2, c.ID, wakes)
	if last := evs[len(evs)-1]; last.Type != chat.EventChatCompleted {
		t.Fatalf("chat ended with %s", last.Type)
	}
	for seq := range s.after {
		// The deltas follow the reply's speaker.selected, and its message
		// is the event after it.
		if e := evs[seq-1]; e.Type != chat.EventSpeakerSelected || evs[seq].Type != chat.EventMessage {
			t.Fatalf("deltas after seq %d (%s), followed by %s", seq, e.Type, evs[seq].Type)
		}
	}
}

// eventsToEnd reads the chat's events as a stream does, waking on wakes,
// until its terminal event.
func eventsToEnd(t *testing.T, rt *runtime.Runtime, id string, wakes <-chan runtime.Wake) []chat.Event {
	t.Helper()
	var evs []chat.Event
	deadline := time.After(20 * time.Second)
	for {
		more, err := rt.Events(t.Context(), "", id, int64(len(evs)), 100)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, more...)
		if n := len(evs); n > 0 && evs[n-1].Type.Terminal() {
			return evs
		}
		select {
		case <-wakes:
		case <-deadline:
			t.Fatalf("no terminal event after seq %d", len(evs))
		}
	}
}

// TestATakeoverResetsTheReplyOnEveryReplica: the replica that runs a chat
// stops in the middle of a streamed reply; another takes the chat over and
// asks the model again. A stream on a third replica sees the first reply's
// text, then a reset, then the retried reply whole; and one message.
func TestATakeoverResetsTheReplyOnEveryReplica(t *testing.T) {
	fake, start := streamingRuntimes(t)
	rt1 := start()
	viewer := start(func(c *runtime.Config) { c.PollInterval = time.Hour })
	first, retried := words(300, "a"), words(30, "b")
	fake.Reply(
		openaitest.Reply{Pieces: first, PieceDelay: 20 * time.Millisecond},
		openaitest.Reply{Pieces: retried, PieceDelay: 5 * time.Millisecond},
	)
	c := create(t, rt1, streamingSpec)
	wakes, q, stop := viewer.Stream(c.ID)
	defer stop()
	var s streamText
	s.until(t, q, func(text string) bool { return strings.HasPrefix(text, "a0 a1 a2 a3 ") }, "the first reply's start", 10*time.Second)
	go func() {
		// The first replica goes away mid-reply; its chat is handed back
		// and a new replica continues it.
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt1.Stop(stopCtx); err != nil {
			t.Error(err)
		}
		start()
	}()
	s.follow(t, q, strings.Join(retried, ""), 20*time.Second)
	if s.resets != 1 || !strings.HasPrefix(s.voided, "a0 a1 a2 ") {
		t.Fatalf("%d resets, the last dropping %q: want one, after the first reply's start", s.resets, s.voided)
	}
	evs := eventsToEnd(t, viewer, c.ID, wakes)
	var msgs []string
	for _, e := range evs {
		if m, ok := chat.MessageFromEvent(e); ok && m.Name != chat.UserName {
			msgs = append(msgs, m.Content)
		}
	}
	if evs[len(evs)-1].Type != chat.EventChatCompleted || len(msgs) != 1 || msgs[0] != strings.Join(retried, "") {
		t.Fatalf("chat ended with %s, agent messages %q", evs[len(evs)-1].Type, msgs)
	}
}

// TestDeltasReachStreamsOfTheReplicaThatRunsTheChat: one replica, the
// embedded store: a stream sees the reply being typed, then its message.
func TestDeltasReachStreamsOfTheReplicaThatRunsTheChat(t *testing.T) {
	fake := openaitest.New()
	defer fake.Close()
	models, err := llm.New(llm.Config{OpenAI: llm.OpenAIConfig{BaseURL: fake.URL(), APIKey: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	rt := runtimetest.New(t, runtimetest.OpenSQLite(t), func(c *runtime.Config) { c.Models, c.Providers = models, models.Providers() })
	pieces := words(20, "w")
	fake.Reply(openaitest.Reply{Pieces: pieces, PieceDelay: 5 * time.Millisecond, Delay: 200 * time.Millisecond})
	c := create(t, rt, streamingSpec)
	wakes, q, stop := rt.Stream(c.ID)
	defer stop()
	var s streamText
	s.follow(t, q, strings.Join(pieces, ""), 10*time.Second)
	evs := eventsToEnd(t, rt, c.ID, wakes)
	if last := evs[len(evs)-1]; last.Type != chat.EventChatCompleted {
		t.Fatalf("chat ended with %s", last.Type)
	}
}
