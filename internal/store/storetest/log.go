package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentd/agentd/internal/chat"
)

func testListEvents(t *testing.T, s chat.Store) {
	p := createParams("acme", base)
	c := mustCreate(t, s, p)
	want := withChatID(c.ID, p.Events...)
	for i := range 5 {
		e := message(c.LastSeq+1, fmt.Sprint("reply ", i), at(time.Duration(i)*time.Second))
		if err := s.Append(t.Context(), &chat.AppendParams{ChatID: c.ID, Epoch: 0, Events: []chat.Event{e},
			Update: chat.ChatUpdate{Status: chat.StatusRunning, MessageCount: 2 + i, UpdatedAt: e.CreatedAt}}); err != nil {
			t.Fatal(err)
		}
		c.LastSeq++
		want = append(want, withChatID(c.ID, e)...)
	}
	for _, tc := range []struct {
		after    int64
		limit    int
		from, to int // want[from:to]
	}{
		{0, 100, 0, 7}, {0, 3, 0, 3}, {3, 2, 3, 5}, {5, 10, 5, 7}, {7, 10, 7, 7}, {100, 10, 7, 7}, {0, 0, 0, 7},
	} {
		got, err := s.ListEvents(t.Context(), &chat.ListEventsParams{ChatID: c.ID, After: tc.after, Limit: tc.limit})
		if err != nil {
			t.Fatal(err)
		}
		assertEvents(t, fmt.Sprintf("after %d limit %d", tc.after, tc.limit), got, want[tc.from:tc.to])
	}
	// Of one type only: the messages, after and up to a limit as above.
	got, err := s.ListEvents(t.Context(), &chat.ListEventsParams{ChatID: c.ID, After: 3, Limit: 2, Type: chat.EventMessage})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []chat.Event
	for _, e := range want {
		if e.Type == chat.EventMessage && e.Seq > 3 {
			msgs = append(msgs, e)
		}
	}
	assertEvents(t, "messages after 3 limit 2", got, msgs[:2])
	if got, err := s.ListEvents(t.Context(), &chat.ListEventsParams{ChatID: c.ID, Limit: 10, Type: chat.EventContextUpdated}); err != nil || len(got) != 0 {
		t.Errorf("context.updated events: %d, err %v; want none", len(got), err)
	}
	for _, id := range []string{uuid.NewString(), "nope"} {
		got, err := s.ListEvents(t.Context(), &chat.ListEventsParams{ChatID: id, Limit: 10})
		if err != nil || len(got) != 0 {
			t.Errorf("ListEvents of unknown chat %q: %d events, err %v; want none and no error", id, len(got), err)
		}
	}
}

func testAppendDenseSeq(t *testing.T, s chat.Store) {
	p := createParams("acme", base)
	c := mustCreate(t, s, p)
	want := *c
	events := withChatID(c.ID, p.Events...)

	pending := json.RawMessage(`{"request_id": "r1", "kind": "message", "agent": "executor", "reason": "human_input_mode ALWAYS"}`)
	steps := []struct {
		events []chat.Event
		update chat.ChatUpdate
	}{
		{[]chat.Event{{Type: chat.EventChatRunning}}, chat.ChatUpdate{Status: chat.StatusRunning, MessageCount: 1}},
		{[]chat.Event{{Type: chat.EventSpeakerSelected, Data: json.RawMessage(`{"agent": "coder"}`)}, {Type: chat.EventMessage,
			Role: chat.RoleAssistant, Name: "coder", Content: "```python\nprint('olleh')\n```"}},
			chat.ChatUpdate{Status: chat.StatusRunning, Turns: 1, MessageCount: 2, PromptTokens: 120, CompletionTokens: 30}},
		{[]chat.Event{{Type: chat.EventInputRequested, Data: pending}},
			chat.ChatUpdate{Status: chat.StatusAwaitingInput, Turns: 1, MessageCount: 2, PromptTokens: 120, CompletionTokens: 30,
				PendingInput: pending, ReleaseLease: true}},
		{[]chat.Event{{Type: chat.EventMessage, Role: chat.RoleUser, Name: chat.UserName, Content: "go on"}},
			chat.ChatUpdate{Status: chat.StatusRunning, Turns: 1, MessageCount: 3, PromptTokens: 120, CompletionTokens: 30}},
		{[]chat.Event{{Type: chat.EventChatFailed, Data: json.RawMessage(`{"status": "failed"}`)}},
			chat.ChatUpdate{Status: chat.StatusFailed, StopReason: chat.StopError, StopDetail: "model failed",
				Error: "replay: responses exhausted", Turns: 2, MessageCount: 3, PromptTokens: 150, CompletionTokens: 31}},
	}
	for i, st := range steps {
		when := at(time.Duration(i+1) * time.Minute)
		for j := range st.events {
			st.events[j].Seq = want.LastSeq + 1 + int64(j)
			st.events[j].CreatedAt = when
		}
		st.update.UpdatedAt = when
		if st.update.Status.Terminal() {
			st.update.CompletedAt = &when
		}
		// ChatID of the events may be left empty: the store sets it.
		if err := s.Append(t.Context(), &chat.AppendParams{ChatID: c.ID, Epoch: 0, Events: st.events, Update: st.update}); err != nil {
			t.Fatalf("step %d: Append: %v", i, err)
		}
		events = append(events, withChatID(c.ID, st.events...)...)
		u := st.update
		want.LastSeq += int64(len(st.events))
		want.Status, want.StopReason, want.StopDetail, want.Error = u.Status, u.StopReason, u.StopDetail, u.Error
		want.Turns, want.MessageCount, want.PromptTokens, want.CompletionTokens = u.Turns, u.MessageCount, u.PromptTokens, u.CompletionTokens
		want.PendingInput, want.CompletedAt, want.UpdatedAt = u.PendingInput, u.CompletedAt, u.UpdatedAt
		assertChat(t, fmt.Sprintf("after step %d", i), mustGet(t, s, c.ID), &want)
	}
	got := mustEvents(t, s, c.ID)
	assertEvents(t, "log", got, events)
	for i, e := range got {
		if e.Seq != int64(i+1) {
			t.Fatalf("seqs %v are not dense from 1", seqs(got))
		}
	}
}

func testAppendFencedStaleEpoch(t *testing.T, s chat.Store) {
	c := mustCreate(t, s, createParams("acme", base))
	claimed, err := s.Claim(t.Context(), &chat.ClaimParams{Owner: "a", Now: at(time.Second), LeaseUntil: at(time.Minute), Limit: 1})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("Claim: %d chats, %v", len(claimed), err)
	}
	before := mustGet(t, s, c.ID)
	err = s.Append(t.Context(), &chat.AppendParams{ChatID: c.ID, Epoch: c.Epoch, // 0, but the claim made it 1
		Events: []chat.Event{message(c.LastSeq+1, "stale", at(time.Second))},
		Update: chat.ChatUpdate{Status: chat.StatusCompleted, Turns: 9, UpdatedAt: at(time.Second), ReleaseLease: true}})
	if !errors.Is(err, chat.ErrFenced) {
		t.Fatalf("Append with a stale epoch: err = %v, want ErrFenced", err)
	}
	assertChat(t, "chat after fenced append", mustGet(t, s, c.ID), before)
	if got := mustEvents(t, s, c.ID); len(got) != int(c.LastSeq) {
		t.Fatalf("fenced append wrote events: seqs %v", seqs(got))
	}
}

// testAppendRejectsOversizeEvent: an event over the size limit is refused
// for its data (the same call would fail again), the error does not hold
// the data, and nothing is written.
func testAppendRejectsOversizeEvent(t *testing.T, s chat.Store) {
	c := mustCreate(t, s, createParams("acme", base))
	before := mustGet(t, s, c.ID)
	huge := strings.Repeat("x", 8<<20+1)
	err := s.Append(t.Context(), &chat.AppendParams{ChatID: c.ID, Epoch: c.Epoch,
		Events: []chat.Event{message(c.LastSeq+1, huge, at(time.Second))},
		Update: chat.ChatUpdate{Status: chat.StatusRunning, UpdatedAt: at(time.Second)}})
	if !errors.Is(err, chat.ErrDataRejected) || strings.Contains(err.Error(), "xxxx") {
		t.Fatalf("Append of an oversize event: err = %.200v, want ErrDataRejected without the data", err)
	}
	assertChat(t, "chat after refused append", mustGet(t, s, c.ID), before)
	if got := mustEvents(t, s, c.ID); len(got) != int(c.LastSeq) {
		t.Fatalf("refused append wrote events: seqs %v", seqs(got))
	}
}

func testAppendFencedWrongFirstSeq(t *testing.T, s chat.Store) {
	c := mustCreate(t, s, createParams("acme", base))
	for _, first := range []int64{c.LastSeq, c.LastSeq + 2, 1} {
		err := s.Append(t.Context(), &chat.AppendParams{ChatID: c.ID, Epoch: c.Epoch,
			Events: []chat.Event{message(first, "x", base), message(first+1, "y", base)},
			Update: chat.ChatUpdate{Status: chat.StatusRunning, UpdatedAt: at(time.Second)}})
		if !errors.Is(err, chat.ErrFenced) {
			t.Errorf("Append starting at seq %d (last_seq %d): err = %v, want ErrFenced", first, c.LastSeq, err)
		}
	}
	assertChat(t, "chat after fenced appends", mustGet(t, s, c.ID), c)
	if got := mustEvents(t, s, c.ID); len(got) != int(c.LastSeq) {
		t.Fatalf("fenced appends wrote events: seqs %v", seqs(got))
	}
}

func testAppendRejectsBadParams(t *testing.T, s chat.Store) {
	c := mustCreate(t, s, createParams("acme", base))
	next := c.LastSeq + 1
	ok := chat.ChatUpdate{Status: chat.StatusRunning, UpdatedAt: at(time.Second)}
	for name, p := range map[string]*chat.AppendParams{
		"no events":       {ChatID: c.ID, Update: ok},
		"seq gap":         {ChatID: c.ID, Events: []chat.Event{message(next, "a", base), message(next+2, "b", base)}, Update: ok},
		"seq repeated":    {ChatID: c.ID, Events: []chat.Event{message(next, "a", base), message(next, "b", base)}, Update: ok},
		"no status":       {ChatID: c.ID, Events: []chat.Event{message(next, "a", base)}},
		"unknown status":  {ChatID: c.ID, Events: []chat.Event{message(next, "a", base)}, Update: chat.ChatUpdate{Status: "paused"}},
		"other chat's ev": {ChatID: c.ID, Events: withChatID(uuid.NewString(), message(next, "a", base)), Update: ok},
		"id not a UUID":   {ChatID: "nope", Events: []chat.Event{message(1, "a", base)}, Update: ok},
		"event type":      {ChatID: c.ID, Events: []chat.Event{{Seq: next}}, Update: ok},
	} {
		if err := s.Append(t.Context(), p); err == nil || errors.Is(err, chat.ErrFenced) {
			t.Errorf("Append %s: err = %v, want a validation error", name, err)
		}
	}
	assertChat(t, "chat after rejected appends", mustGet(t, s, c.ID), c)
	if got := mustEvents(t, s, c.ID); len(got) != int(c.LastSeq) {
		t.Fatalf("rejected appends wrote events: seqs %v", seqs(got))
	}
}

func testAppendUnknownChat(t *testing.T, s chat.Store) {
	err := s.Append(t.Context(), &chat.AppendParams{ChatID: uuid.NewString(), Events: []chat.Event{message(1, "a", base)},
		Update: chat.ChatUpdate{Status: chat.StatusRunning, UpdatedAt: base}})
	if !errors.Is(err, chat.ErrFenced) && !errors.Is(err, chat.ErrNotFound) {
		t.Fatalf("Append to an unknown chat: err = %v, want ErrFenced or ErrNotFound", err)
	}
}

func testAppendCancelledContext(t *testing.T, s chat.Store) {
	c := mustCreate(t, s, createParams("acme", base))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := s.Append(ctx, &chat.AppendParams{ChatID: c.ID, Events: []chat.Event{message(c.LastSeq+1, "a", base)},
		Update: chat.ChatUpdate{Status: chat.StatusRunning, UpdatedAt: base}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Append with a cancelled context: err = %v, want context.Canceled", err)
	}
	assertChat(t, "chat after cancelled append", mustGet(t, s, c.ID), c)
}

func testAppendAfterClaim(t *testing.T, s chat.Store) {
	c := mustCreate(t, s, createParams("acme", base))
	lease := at(time.Minute)
	claimed, err := s.Claim(t.Context(), &chat.ClaimParams{Owner: "replica-a", Now: base, LeaseUntil: lease, Limit: 10})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("Claim: %d chats, %v", len(claimed), err)
	}
	want := *c
	want.Epoch, want.Owner, want.LeaseExpiresAt = 1, "replica-a", &lease
	assertChat(t, "claimed chat", claimed[0], &want)

	got := advance(t, s, claimed[0], chat.ChatUpdate{Status: chat.StatusRunning, MessageCount: 1, UpdatedAt: at(time.Second)})
	want.LastSeq, want.Status, want.UpdatedAt = c.LastSeq+1, chat.StatusRunning, at(time.Second)
	assertChat(t, "after append by the owner (lease kept)", got, &want)

	got = advance(t, s, got, chat.ChatUpdate{Status: chat.StatusRunning, MessageCount: 1, UpdatedAt: at(2 * time.Second), ReleaseLease: true})
	want.LastSeq, want.UpdatedAt, want.Owner, want.LeaseExpiresAt = c.LastSeq+2, at(2*time.Second), "", nil
	assertChat(t, "after append with ReleaseLease", got, &want)
}

// testGroupCommitManyChats appends to 50 chats at once, each from its own
// goroutine, so that appends share transactions.
func testGroupCommitManyChats(t *testing.T, s chat.Store) {
	const chats, appends = 50, 8
	ids := make([]string, chats)
	for i := range ids {
		ids[i] = mustCreate(t, s, createParams("acme", at(time.Duration(i)*time.Millisecond))).ID
	}
	var wg sync.WaitGroup
	errs := make(chan error, chats)
	start := make(chan struct{})
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			seq := int64(3)
			for j := range appends {
				// Alternate one- and two-event appends.
				evs := []chat.Event{message(seq, fmt.Sprintf("chat %d append %d", i, j), base)}
				if j%2 == 1 {
					evs = append(evs, message(seq+1, fmt.Sprintf("chat %d append %d b", i, j), base))
				}
				seq += int64(len(evs))
				err := s.Append(context.Background(), &chat.AppendParams{ChatID: id, Events: evs,
					Update: chat.ChatUpdate{Status: chat.StatusRunning, Turns: j + 1, MessageCount: int(seq) - 2, UpdatedAt: base}})
				if err != nil {
					errs <- fmt.Errorf("chat %d append %d: %w", i, j, err)
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, id := range ids {
		es := mustEvents(t, s, id)
		var want []string
		for j := range appends {
			want = append(want, fmt.Sprintf("chat %d append %d", i, j))
			if j%2 == 1 {
				want = append(want, fmt.Sprintf("chat %d append %d b", i, j))
			}
		}
		if len(es) != 2+len(want) {
			t.Fatalf("chat %d: %d events, want %d", i, len(es), 2+len(want))
		}
		for k, e := range es {
			if e.Seq != int64(k+1) {
				t.Fatalf("chat %d: seqs %v not dense", i, seqs(es))
			}
			if k >= 2 && e.Content != want[k-2] {
				t.Fatalf("chat %d: event %d is %q, want %q", i, e.Seq, e.Content, want[k-2])
			}
		}
		c := mustGet(t, s, id)
		if c.LastSeq != int64(len(es)) || c.Turns != appends {
			t.Fatalf("chat %d: last_seq %d turns %d, want %d and %d", i, c.LastSeq, c.Turns, len(es), appends)
		}
	}
}

// testGroupCommitIsolatesFailures mixes good appends with fenced ones and one
// the database rejects (invalid JSON data): only the bad ones fail, whatever
// batch they land in.
func testGroupCommitIsolatesFailures(t *testing.T, s chat.Store) {
	const chats = 30
	cs := make([]*chat.Chat, chats)
	for i := range cs {
		cs[i] = mustCreate(t, s, createParams("acme", at(time.Duration(i)*time.Millisecond)))
	}
	const (
		good = iota
		stale
		invalid
	)
	kind := func(i int) int {
		switch {
		case i == 7:
			return invalid
		case i%5 == 0:
			return stale
		}
		return good
	}
	results := make([]error, chats)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := message(c.LastSeq+1, "hello", base)
			epoch := c.Epoch
			switch kind(i) {
			case stale:
				epoch = c.Epoch + 7
			case invalid:
				e.Data = json.RawMessage(`{"kind": `) // not JSON: the database refuses it
			}
			<-start
			results[i] = s.Append(context.Background(), &chat.AppendParams{ChatID: c.ID, Epoch: epoch, Events: []chat.Event{e},
				Update: chat.ChatUpdate{Status: chat.StatusRunning, MessageCount: 2, UpdatedAt: base}})
		}()
	}
	close(start)
	wg.Wait()
	for i, c := range cs {
		err := results[i]
		n := len(mustEvents(t, s, c.ID))
		switch kind(i) {
		case good:
			if err != nil || n != 3 {
				t.Errorf("chat %d (good): err %v, %d events; want nil, 3", i, err, n)
			}
		case stale:
			if !errors.Is(err, chat.ErrFenced) || n != 2 {
				t.Errorf("chat %d (stale epoch): err %v, %d events; want ErrFenced, 2", i, err, n)
			}
		case invalid:
			if err == nil || errors.Is(err, chat.ErrFenced) || n != 2 {
				t.Errorf("chat %d (invalid data): err %v, %d events; want a non-fencing error, 2", i, err, n)
			}
		}
	}
}

func testEventsAppendOnly(t *testing.T, s chat.Store, exec func(t *testing.T, s chat.Store, sql string) error) {
	if exec == nil {
		t.Skip("the driver's test gave no raw SQL hook (storetest.WithExec)")
	}
	p := createParams("acme", base)
	c := mustCreate(t, s, p)
	for _, stmt := range []string{
		"UPDATE events SET content = 'rewritten'",
		"UPDATE events SET seq = seq + 100",
		"DELETE FROM events",
		"DELETE FROM events WHERE seq = 2",
		// Events rely on their chat staying (Postgres has no foreign key
		// from events to chats: see its migration 0003).
		"DELETE FROM chats",
	} {
		if err := exec(t, s, stmt); err == nil {
			t.Errorf("%q succeeded; the events table must be append-only", stmt)
		}
	}
	assertEvents(t, "events after attempts to rewrite them", mustEvents(t, s, c.ID), withChatID(c.ID, p.Events...))
	assertChat(t, "chat after attempts to delete it", mustGet(t, s, c.ID), c)
}

// testText checks that text Postgres cannot hold (NUL bytes, invalid UTF-8),
// as a sandbox's output may contain, is stored with U+FFFD in its place by
// every store, rather than failing the append.
func testText(t *testing.T, s chat.Store) {
	p := createParams("acme", base)
	p.Name = "bad\x00name"
	c := mustCreate(t, s, p)
	if c.Name != "bad\uFFFDname" {
		t.Errorf("chat name %q, want %q", c.Name, "bad\uFFFDname")
	}
	e := message(c.LastSeq+1, "exit\x00code \xff\xfe!", base)
	e.ToolCalls = []chat.ToolCall{{ID: "call_1", Type: "function", Function: chat.FunctionCall{Name: "run", Arguments: `{"s": "a` + "\x00" + `"}`}}}
	e.ToolResponses = []chat.ToolResponse{{ToolCallID: "call_1", Role: chat.RoleTool, Content: "\xc3(", IsError: true}}
	err := s.Append(t.Context(), &chat.AppendParams{ChatID: c.ID, Events: []chat.Event{e},
		Update: chat.ChatUpdate{Status: chat.StatusFailed, StopReason: chat.StopError, StopDetail: "d\x00", Error: "e\xff",
			MessageCount: 2, UpdatedAt: base, CompletedAt: &base}})
	if err != nil {
		t.Fatalf("Append of text with NUL and invalid UTF-8: %v", err)
	}
	got := mustEvents(t, s, c.ID)[2]
	want := e
	want.ChatID = c.ID
	want.Content = "exit\uFFFDcode \uFFFD!"
	want.ToolCalls = []chat.ToolCall{{ID: "call_1", Type: "function", Function: chat.FunctionCall{Name: "run", Arguments: `{"s": "a` + "\uFFFD" + `"}`}}}
	want.ToolResponses = []chat.ToolResponse{{ToolCallID: "call_1", Role: chat.RoleTool, Content: "\uFFFD(", IsError: true}}
	assertEvents(t, "sanitized event", []chat.Event{got}, []chat.Event{want})
	if c := mustGet(t, s, c.ID); c.StopDetail != "d\uFFFD" || c.Error != "e\uFFFD" {
		t.Errorf("stop_detail %q, error %q; want %q, %q", c.StopDetail, c.Error, "d\uFFFD", "e\uFFFD")
	}
}

// testGroupCommitMixesCreatesAndAppends creates chats, some under an
// idempotency key already taken, while appends to other chats, some of
// them fenced, are in flight: a batch of creates and appends reads each
// one's result as its own, as does a batch of appends alone.
func testGroupCommitMixesCreatesAndAppends(t *testing.T, s chat.Store) {
	const n, rounds = 12, 4
	taken := createParams("acme", base)
	taken.IdempotencyKey = "mixed-batch"
	first := mustCreate(t, s, taken)
	for round := range rounds {
		cs := make([]*chat.Chat, n)
		for i := range cs {
			cs[i] = mustCreate(t, s, createParams("acme", at(time.Duration(i)*time.Millisecond)))
		}
		appendErrs := make([]error, n)
		created := make([]*chat.Chat, n)
		isNew := make([]bool, n)
		createErrs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(2)
			go func() {
				defer wg.Done()
				c := cs[i]
				epoch := c.Epoch
				if i%3 == 0 {
					epoch += 5 // fenced
				}
				<-start
				appendErrs[i] = s.Append(context.Background(), &chat.AppendParams{ChatID: c.ID, Epoch: epoch,
					Events: []chat.Event{message(c.LastSeq+1, fmt.Sprintf("round %d chat %d", round, i), base)},
					Update: chat.ChatUpdate{Status: chat.StatusRunning, MessageCount: 2, UpdatedAt: base}})
			}()
			go func() {
				defer wg.Done()
				p := createParams("acme", at(time.Duration(i)*time.Millisecond))
				if i%4 == 1 {
					p.IdempotencyKey, p.RequestHash = taken.IdempotencyKey, taken.RequestHash
				}
				<-start
				created[i], isNew[i], createErrs[i] = s.CreateChat(context.Background(), p)
			}()
		}
		close(start)
		wg.Wait()
		for i, c := range cs {
			n := len(mustEvents(t, s, c.ID))
			if i%3 == 0 {
				if !errors.Is(appendErrs[i], chat.ErrFenced) || n != 2 {
					t.Errorf("round %d, append %d (stale epoch): err %v, %d events; want ErrFenced, 2", round, i, appendErrs[i], n)
				}
			} else if appendErrs[i] != nil || n != 3 {
				t.Errorf("round %d, append %d: err %v, %d events; want nil, 3", round, i, appendErrs[i], n)
			}
			switch {
			case createErrs[i] != nil:
				t.Errorf("round %d, create %d: %v", round, i, createErrs[i])
			case i%4 == 1:
				if isNew[i] || created[i].ID != first.ID {
					t.Errorf("round %d, create %d under a taken key: created %v, chat %s; want false, %s", round, i, isNew[i], created[i].ID, first.ID)
				}
			case !isNew[i] || len(mustEvents(t, s, created[i].ID)) != 2:
				t.Errorf("round %d, create %d: created %v, want a new chat with its 2 events", round, i, isNew[i])
			}
		}
	}
}
