package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/store/pgtest"
)

// chatStateVersion is the migration that moved the per-append columns of
// chats into chat_state and dropped the events foreign key.
const chatStateVersion = 3

// oldChat is a chat as a release before chatStateVersion stored it: one
// chats row with every column, and its events.
type oldChat struct {
	chat   chat.Chat
	events []chat.Event
}

// insertOld writes c in the schema before chatStateVersion, column by
// column, as that release's store did (NULL for "" and absent JSON).
func insertOld(t *testing.T, s *Store, c *oldChat) {
	t.Helper()
	r := &c.chat
	if _, err := s.pool.Exec(t.Context(), `INSERT INTO chats (id, tenant, name, spec, metadata, status,
			stop_reason, stop_detail, error, last_seq, turns, message_count, prompt_tokens, completion_tokens,
			pending_input, idempotency_key, request_hash, cancel_requested, owner, lease_expires_at, epoch,
			created_at, updated_at, completed_at, input_response, input_expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20,
			$21, $22, $23, $24, $25, $26)`,
		r.ID, r.Tenant, nullString(r.Name), []byte(r.Spec), nullJSON(r.Metadata), string(r.Status),
		nullString(string(r.StopReason)), nullString(r.StopDetail), nullString(r.Error), r.LastSeq, r.Turns,
		r.MessageCount, r.PromptTokens, r.CompletionTokens, nullJSON(r.PendingInput),
		nullString(r.IdempotencyKey), nullString(r.RequestHash), r.CancelRequested, nullString(r.Owner),
		r.LeaseExpiresAt, r.Epoch, r.CreatedAt, r.UpdatedAt, r.CompletedAt, nullJSON(r.InputResponse),
		r.InputExpiresAt); err != nil {
		t.Fatalf("insert chat %s in the old schema: %v", r.ID, err)
	}
	for _, e := range c.events {
		var calls, resps []byte
		if len(e.ToolCalls) > 0 {
			calls, _ = json.Marshal(e.ToolCalls)
		}
		if len(e.ToolResponses) > 0 {
			resps, _ = json.Marshal(e.ToolResponses)
		}
		if _, err := s.pool.Exec(t.Context(), `INSERT INTO events (chat_id, seq, type, role, name, content,
				tool_calls, tool_responses, data, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			r.ID, e.Seq, string(e.Type), nullString(e.Role), nullString(e.Name), nullString(e.Content),
			nullJSON(calls), nullJSON(resps), nullJSON(e.Data), e.CreatedAt); err != nil {
			t.Fatalf("insert event %d of chat %s in the old schema: %v", e.Seq, r.ID, err)
		}
	}
}

// normalized returns c with its JSON in one spelling (jsonb re-spaces it)
// and its times in UTC, so that reflect.DeepEqual compares what matters.
func normalized(t *testing.T, c chat.Chat) chat.Chat {
	t.Helper()
	for _, j := range []*json.RawMessage{&c.Spec, &c.Metadata, &c.PendingInput, &c.InputResponse} {
		*j = canonicalJSON(t, *j)
	}
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	c.LeaseExpiresAt, c.CompletedAt, c.InputExpiresAt = utcPtr(c.LeaseExpiresAt), utcPtr(c.CompletedAt), utcPtr(c.InputExpiresAt)
	return c
}

func canonicalJSON(t *testing.T, b json.RawMessage) json.RawMessage {
	t.Helper()
	if len(b) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("JSON %s: %v", b, err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func assertChatIs(t *testing.T, what string, got *chat.Chat, want chat.Chat) {
	t.Helper()
	if g, w := normalized(t, *got), normalized(t, want); !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n  got  %+v\n  want %+v", what, g, w)
	}
}

func assertEventsAre(t *testing.T, s *Store, id string, want []chat.Event) {
	t.Helper()
	got, err := s.ListEvents(t.Context(), &chat.ListEventsParams{ChatID: id, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	norm := func(es []chat.Event) []chat.Event {
		out := make([]chat.Event, len(es))
		for i, e := range es {
			e.ChatID, e.Data, e.CreatedAt = id, canonicalJSON(t, e.Data), e.CreatedAt.UTC()
			out[i] = e
		}
		return out
	}
	if g, w := norm(got), norm(want); !reflect.DeepEqual(g, w) {
		t.Errorf("events of chat %s:\n  got  %+v\n  want %+v", id, g, w)
	}
}

func assertProgress(t *testing.T, s *Store, id string, want chat.Progress) {
	t.Helper()
	got, err := s.GetProgress(t.Context(), "", id)
	if err != nil || got != want {
		t.Errorf("progress of chat %s = %+v, %v; want %+v", id, got, err, want)
	}
}

// TestMigrateChatStateKeepsChats: a database written before the chat_state
// migration, with chats in every stage (queued; running under a live lease;
// awaiting input; completed with usage), is migrated; every chat reads back
// as it was, and each goes on: the running chat's worker appends under the
// lease it held before the upgrade and is fenced as before, the queued chat
// and, once its lease expires, the running one are claimed, the pending
// input is answered and the chat claimed to consume it.
func TestMigrateChatStateKeepsChats(t *testing.T) {
	t.Parallel()
	s := openStore(t, pgtest.URL(t))
	if err := s.migrateTo(t.Context(), chatStateVersion-1); err != nil {
		t.Fatal(err)
	}
	// Microseconds, which Postgres keeps; a zone other than UTC, which the
	// store must not hand back.
	base := time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.FixedZone("UTC+2", 2*3600))
	at := func(d time.Duration) time.Time { return base.Add(d) }
	ptr := func(t time.Time) *time.Time { return &t }
	created := func(spec string, tm time.Time) chat.Event {
		return chat.Event{Seq: 1, Type: chat.EventChatCreated, Data: json.RawMessage(`{"spec": ` + spec + `}`), CreatedAt: tm}
	}
	msg := func(seq int64, role, name, content string, tm time.Time) chat.Event {
		return chat.Event{Seq: seq, Type: chat.EventMessage, Role: role, Name: name, Content: content,
			Data: json.RawMessage(`{"kind": "model"}`), CreatedAt: tm}
	}

	const spec = `{"task": "go", "agents": [{"name": "a", "type": "assistant"}]}`
	queued := &oldChat{
		chat: chat.Chat{ID: uuid.NewString(), Tenant: "acme", Name: "waiting", Spec: json.RawMessage(spec),
			Metadata: json.RawMessage(`{"team": "x"}`), Status: chat.StatusQueued, LastSeq: 2, MessageCount: 1,
			IdempotencyKey: "key-1", RequestHash: "hash-1", CreatedAt: at(0), UpdatedAt: at(0), Run: 1},
		events: []chat.Event{created(spec, at(0)), msg(2, "user", "user", "go", at(0))},
	}
	running := &oldChat{
		chat: chat.Chat{ID: uuid.NewString(), Tenant: "acme", Spec: json.RawMessage(spec), Status: chat.StatusRunning,
			LastSeq: 5, Turns: 2, MessageCount: 3, PromptTokens: 12, CompletionTokens: 3, Owner: "old-replica",
			LeaseExpiresAt: ptr(at(time.Minute)), Epoch: 3, CreatedAt: at(time.Second), UpdatedAt: at(4 * time.Second), Run: 1},
		events: []chat.Event{
			created(spec, at(time.Second)),
			{Seq: 2, Type: chat.EventChatRunning, CreatedAt: at(2 * time.Second)},
			msg(3, "user", "user", "go", at(2*time.Second)),
			{Seq: 4, Type: chat.EventMessage, Role: "assistant", Name: "a", CreatedAt: at(3 * time.Second),
				ToolCalls: []chat.ToolCall{{ID: "call_1", Type: "function", Function: chat.FunctionCall{Name: "add", Arguments: `{"x": 1}`}}}},
			{Seq: 5, Type: chat.EventMessage, Role: "tool", Name: "a", CreatedAt: at(4 * time.Second),
				ToolResponses: []chat.ToolResponse{{ToolCallID: "call_1", Role: "tool", Content: "2"}}},
		},
	}
	pending := json.RawMessage(`{"request_id": "req-1", "kind": "message", "agent": "human", "reason": "always"}`)
	awaiting := &oldChat{
		chat: chat.Chat{ID: uuid.NewString(), Tenant: "other", Spec: json.RawMessage(spec), Status: chat.StatusAwaitingInput,
			LastSeq: 4, Turns: 1, MessageCount: 2, PromptTokens: 5, CompletionTokens: 1, PendingInput: pending,
			InputExpiresAt: ptr(at(time.Hour)), Epoch: 2, CreatedAt: at(2 * time.Second), UpdatedAt: at(5 * time.Second), Run: 1},
		events: []chat.Event{
			created(spec, at(2*time.Second)),
			msg(2, "user", "user", "write", at(2*time.Second)),
			msg(3, "assistant", "writer", "draft 1", at(4*time.Second)),
			{Seq: 4, Type: chat.EventInputRequested, Data: pending, CreatedAt: at(5 * time.Second)},
		},
	}
	completed := &oldChat{
		chat: chat.Chat{ID: uuid.NewString(), Tenant: "acme", Spec: json.RawMessage(spec), Status: chat.StatusCompleted,
			StopReason: chat.StopMaxRound, StopDetail: "Maximum number of turns 2 reached.", LastSeq: 5, Turns: 2,
			MessageCount: 3, PromptTokens: 120, CompletionTokens: 30, Epoch: 1, CreatedAt: at(3 * time.Second),
			UpdatedAt: at(9 * time.Second), CompletedAt: ptr(at(9 * time.Second)), Run: 1},
		events: []chat.Event{
			created(spec, at(3*time.Second)),
			msg(2, "user", "user", "go", at(3*time.Second)),
			msg(3, "assistant", "a", "one", at(5*time.Second)),
			msg(4, "assistant", "a", "two", at(8*time.Second)),
			{Seq: 5, Type: chat.EventChatCompleted, Data: json.RawMessage(`{"stop_reason": "max_round"}`), CreatedAt: at(9 * time.Second)},
		},
	}
	old := []*oldChat{queued, running, awaiting, completed}
	for _, c := range old {
		insertOld(t, s, c)
	}

	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("migrate a database with chats: %v", err)
	}

	// Everything carried over.
	for _, c := range old {
		got, err := s.GetChat(t.Context(), "", c.chat.ID)
		if err != nil {
			t.Fatal(err)
		}
		assertChatIs(t, fmt.Sprintf("migrated %s chat", c.chat.Status), got, c.chat)
		assertEventsAre(t, s, c.chat.ID, c.events)
		assertProgress(t, s, c.chat.ID, chat.Progress{Status: c.chat.Status, LastSeq: c.chat.LastSeq})
	}
	if cs, _, err := s.ListChats(t.Context(), &chat.ListChatsParams{Tenant: "acme", Status: chat.StatusRunning}); err != nil || len(cs) != 1 || cs[0].ID != running.chat.ID {
		t.Errorf("running chats of acme: %v, %v; want the running chat", cs, err)
	}

	// The running chat's worker, which held its lease across the upgrade,
	// appends on; a stale epoch or a taken seq is fenced.
	r := running.chat
	turn := func(epoch, seq int64, u chat.ChatUpdate) error {
		return s.Append(t.Context(), &chat.AppendParams{ChatID: r.ID, Epoch: epoch,
			Events: []chat.Event{msg(seq, "assistant", "a", fmt.Sprintf("reply %d", seq), u.UpdatedAt)}, Update: u})
	}
	next := chat.ChatUpdate{Status: chat.StatusRunning, Turns: 3, MessageCount: 4, PromptTokens: 20, CompletionTokens: 5, UpdatedAt: at(10 * time.Second)}
	if err := turn(r.Epoch-1, r.LastSeq+1, next); !errors.Is(err, chat.ErrFenced) {
		t.Fatalf("append under an older epoch: %v, want ErrFenced", err)
	}
	if err := turn(r.Epoch, r.LastSeq+1, next); err != nil {
		t.Fatalf("append by the migrated chat's lease holder: %v", err)
	}
	if err := turn(r.Epoch, r.LastSeq+1, next); !errors.Is(err, chat.ErrFenced) {
		t.Fatalf("append of a taken seq: %v, want ErrFenced", err)
	}
	r.LastSeq, r.Turns, r.MessageCount, r.PromptTokens, r.CompletionTokens, r.UpdatedAt = 6, 3, 4, 20, 5, next.UpdatedAt
	running.events = append(running.events, msg(6, "assistant", "a", "reply 6", next.UpdatedAt))
	got, err := s.GetChat(t.Context(), "", r.ID)
	if err != nil {
		t.Fatal(err)
	}
	assertChatIs(t, "running chat after an append", got, r)
	assertEventsAre(t, s, r.ID, running.events)

	// While the lease lives, only the queued chat is claimable: the chat
	// awaiting input has neither an answer nor an expired request.
	claimed, err := s.Claim(t.Context(), &chat.ClaimParams{Owner: "new-replica", Now: at(30 * time.Second), LeaseUntil: at(time.Hour), Limit: 10})
	if err != nil || len(claimed) != 1 || claimed[0].ID != queued.chat.ID || claimed[0].Epoch != 1 || claimed[0].Owner != "new-replica" {
		t.Fatalf("claim during the running chat's lease: %v, %v; want the queued chat at epoch 1", claimed, err)
	}

	// The human answers; once the running chat's lease has run out, both
	// chats go to the new replica, each under the next epoch.
	a := awaiting.chat
	answered, err := s.SubmitInput(t.Context(), &chat.SubmitInputParams{ChatID: a.ID, RequestID: "req-1", Response: json.RawMessage(`{"content": "shorter"}`), Now: at(40 * time.Second)})
	if err != nil || len(answered.InputResponse) == 0 {
		t.Fatalf("answer the migrated pending input: %v, %v", answered, err)
	}
	assertProgress(t, s, a.ID, chat.Progress{Status: chat.StatusRunning, LastSeq: a.LastSeq, InputAnswered: true})
	claimed, err = s.Claim(t.Context(), &chat.ClaimParams{Owner: "new-replica", Now: at(2 * time.Minute), LeaseUntil: at(time.Hour), Limit: 10})
	if err != nil || len(claimed) != 2 || claimed[0].ID != r.ID || claimed[0].Epoch != r.Epoch+1 || claimed[1].ID != a.ID || claimed[1].Epoch != a.Epoch+1 {
		t.Fatalf("claim after the lease expired: %v, %v; want the running chat at epoch %d and the answered chat at %d", claimed, err, r.Epoch+1, a.Epoch+1)
	}

	// The old worker is fenced off; the new one finishes the chat.
	done := chat.ChatUpdate{Status: chat.StatusCompleted, StopReason: chat.StopMaxRound, StopDetail: "Maximum number of turns 4 reached.",
		Turns: 4, MessageCount: 5, PromptTokens: 30, CompletionTokens: 7, CompletedAt: ptr(at(3 * time.Minute)),
		UpdatedAt: at(3 * time.Minute), ReleaseLease: true}
	if err := turn(r.Epoch, r.LastSeq+1, done); !errors.Is(err, chat.ErrFenced) {
		t.Fatalf("append by the worker that lost the lease: %v, want ErrFenced", err)
	}
	if err := turn(r.Epoch+1, r.LastSeq+1, done); err != nil {
		t.Fatalf("append by the new lease holder: %v", err)
	}
	assertProgress(t, s, r.ID, chat.Progress{Status: chat.StatusCompleted, LastSeq: r.LastSeq + 1})

	// The answered chat's new worker appends the answer, which clears it.
	err = s.Append(t.Context(), &chat.AppendParams{ChatID: a.ID, Epoch: a.Epoch + 1,
		Events: []chat.Event{msg(a.LastSeq+1, "user", "human", "shorter", at(3*time.Minute))},
		Update: chat.ChatUpdate{Status: chat.StatusRunning, Turns: 2, MessageCount: 3, PromptTokens: 5, CompletionTokens: 1, UpdatedAt: at(3 * time.Minute)}})
	if err != nil {
		t.Fatalf("append the answer to the migrated chat: %v", err)
	}
	assertProgress(t, s, a.ID, chat.Progress{Status: chat.StatusRunning, LastSeq: a.LastSeq + 1})

	// The completed chat is left as it was.
	got, err = s.GetChat(t.Context(), "", completed.chat.ID)
	if err != nil {
		t.Fatal(err)
	}
	assertChatIs(t, "completed chat at the end", got, completed.chat)

	// Without the foreign key, the triggers keep chats with events from
	// being deleted.
	if _, err := s.pool.Exec(t.Context(), `DELETE FROM chats WHERE id = $1`, completed.chat.ID); err == nil || !strings.Contains(err.Error(), "never deleted") {
		t.Errorf("deleting a migrated chat: %v; want the trigger's refusal", err)
	}
}
