package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/store/pgtest"
	"github.com/agentd/agentd/internal/store/storetest"
	"github.com/agentd/agentd/migrations"
	"github.com/google/uuid"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Wrap(m)) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// openStore opens a store on url, unmigrated, closed at the end of the test.
func openStore(tb testing.TB, url string) *Store {
	tb.Helper()
	s, err := Open(tb.Context(), Config{URL: url, Logger: quiet, MaxConns: 8})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

// newStore returns a migrated store on a database of its own.
func newStore(tb testing.TB) chat.Store {
	s := openStore(tb, pgtest.URL(tb))
	if err := s.Migrate(tb.Context()); err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) chat.Store { return newStore(t) },
		storetest.WithExec(func(t *testing.T, s chat.Store, sql string) error {
			_, err := s.(*Store).pool.Exec(t.Context(), sql)
			return err
		}),
		storetest.WithCount(func(t *testing.T, s chat.Store, sql string) (n int64, err error) {
			err = s.(*Store).pool.QueryRow(t.Context(), sql).Scan(&n)
			return n, err
		}, "events.chat_id", "chats.id", "chat_state.id", "webhook_deliveries.chat_id", "messages.chat_id", "chat_runs.chat_id"))
}

func BenchmarkAppend(b *testing.B) { storetest.BenchmarkAppend(b, newStore) }

func TestMigrateTwiceAndConcurrently(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	// Replicas starting together, each migrating: the advisory lock must
	// make every version apply once.
	stores := []*Store{openStore(t, url), openStore(t, url), openStore(t, url)}
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = stores[i%len(stores)].Migrate(context.Background())
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if err := stores[0].Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	ms, err := migrations.List(migrations.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	var n, maxVersion int
	if err := stores[0].pool.QueryRow(t.Context(),
		`SELECT count(*), max(version) FROM schema_migrations`).Scan(&n, &maxVersion); err != nil {
		t.Fatal(err)
	}
	if n != len(ms) || maxVersion != len(ms) {
		t.Fatalf("schema_migrations has %d rows up to version %d, want %d", n, maxVersion, len(ms))
	}
}

func TestMessagesViewAndTruncate(t *testing.T) {
	t.Parallel()
	s := newStore(t).(*Store)
	if _, err := s.pool.Exec(t.Context(), "TRUNCATE events"); err == nil {
		t.Error("TRUNCATE events succeeded; the log must be append-only")
	}
	var n int
	if err := s.pool.QueryRow(t.Context(), "SELECT count(*) FROM messages").Scan(&n); err != nil {
		t.Fatalf("messages view: %v", err)
	}
}

func TestCloseDrainsAndRefuses(t *testing.T) {
	t.Parallel()
	s := newStore(t).(*Store)
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s.Kind() != "postgres" {
		t.Fatalf("Kind = %q", s.Kind())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	err := s.Append(t.Context(), &chat.AppendParams{ChatID: "6d9c7b36-5a2b-4f34-9f4e-0d0c8b7f2a11",
		Events: []chat.Event{{Seq: 1, Type: chat.EventChatRunning}}, Update: chat.ChatUpdate{Status: chat.StatusRunning}})
	if err == nil {
		t.Fatal("Append after Close succeeded")
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	for _, url := range []string{"", "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2", "::not a url::"} {
		if s, err := Open(t.Context(), Config{URL: url, Logger: quiet}); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", url)
		}
	}
}

// TestOnlyAgentdEraseChatErases: the triggers let a DELETE of the log
// through only from agentd_erase_chat itself, not from a function whose
// name merely ends like it, nor from one of its name and arguments in
// another schema (found first on the search_path or not).
func TestOnlyAgentdEraseChatErases(t *testing.T) {
	t.Parallel()
	s := newStore(t).(*Store)
	ctx := t.Context()
	c := createEndedChat(t, s)
	for _, impostor := range []string{
		`CREATE FUNCTION not_agentd_erase_chat(chat uuid, for_tenant text, at timestamptz) RETURNS text
			LANGUAGE plpgsql AS $$ BEGIN DELETE FROM events WHERE chat_id = chat; RETURN 'x'; END; $$`,
		`CREATE SCHEMA impostor`,
		`CREATE FUNCTION impostor.agentd_erase_chat(chat uuid, for_tenant text, at timestamptz) RETURNS text
			LANGUAGE plpgsql AS $$ BEGIN DELETE FROM public.events WHERE chat_id = chat; RETURN 'x'; END; $$`,
	} {
		if _, err := s.pool.Exec(ctx, impostor); err != nil {
			t.Fatal(err)
		}
	}
	for _, call := range []string{
		`SELECT not_agentd_erase_chat($1, '', now())`,
		`SELECT impostor.agentd_erase_chat($1, '', now())`,
		`SET search_path = impostor, public; SELECT agentd_erase_chat($1, '', now())`,
	} {
		conn, err := s.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		stmts := strings.Split(call, "; ")
		for _, st := range stmts[:len(stmts)-1] {
			if _, err := conn.Exec(ctx, st); err != nil {
				t.Fatal(err)
			}
		}
		_, err = conn.Exec(ctx, stmts[len(stmts)-1], c)
		_, _ = conn.Exec(ctx, "RESET search_path")
		conn.Release()
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: %v, want the append-only refusal", call, err)
		}
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE chat_id = $1`, c).Scan(&n); err != nil || n == 0 {
		t.Fatalf("the chat's events: %d, %v", n, err)
	}
	var got string
	if err := s.pool.QueryRow(ctx, `SELECT public.agentd_erase_chat($1, '', now())`, c).Scan(&got); err != nil || got != "erased" {
		t.Fatalf("agentd_erase_chat itself: %q, %v", got, err)
	}
}

// createEndedChat creates a chat with a task and marks it completed, as
// a worker that ended it leaves it; it returns its id.
func createEndedChat(t *testing.T, s *Store) string {
	t.Helper()
	now := time.Now()
	id := uuid.NewString()
	if _, _, err := s.CreateChat(t.Context(), &chat.CreateChatParams{
		ID: id, Tenant: "acme", Spec: json.RawMessage(`{"agents": [{"name": "coder", "type": "assistant"}]}`), CreatedAt: now,
		Events: []chat.Event{
			{Seq: 1, Type: chat.EventChatCreated, Data: json.RawMessage(`{"status": "queued"}`), CreatedAt: now},
			{Seq: 2, Type: chat.EventMessage, Role: chat.RoleUser, Name: chat.UserName, Content: "Reverse a string.",
				Data: json.RawMessage(`{"kind": "task"}`), CreatedAt: now},
		},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(t.Context(), `UPDATE chat_state SET status = 'completed', owner = NULL, completed_at = now() WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	return id
}

// Creating a chat writes its rows and nothing else: no check locks the new
// chats row (a foreign key from chat_state did, with a query and a WAL
// record per create; migration 0010), and the chat and its state still
// cannot be deleted but by agentd_erase_chat.
func TestCreateLocksNoChatRow(t *testing.T) {
	t.Parallel()
	s := newStore(t).(*Store)
	ctx := t.Context()
	id := createEndedChat(t, s)
	// A row lock sets the row's xmax to the locker; the create's own
	// insert leaves it 0.
	var xmax string
	if err := s.pool.QueryRow(ctx, `SELECT xmax::text FROM chats WHERE id = $1`, id).Scan(&xmax); err != nil {
		t.Fatal(err)
	}
	if xmax != "0" {
		t.Errorf("the new chat's row has xmax %s: something locked it while it was created", xmax)
	}
	for _, stmt := range []string{`DELETE FROM chat_state WHERE id = $1`, `DELETE FROM chats WHERE id = $1`} {
		if _, err := s.pool.Exec(ctx, stmt, id); err == nil || !strings.Contains(err.Error(), "never deleted") {
			t.Errorf("%s: %v, want the trigger's refusal", stmt, err)
		}
	}
	var got string
	if err := s.pool.QueryRow(ctx, `SELECT agentd_erase_chat($1, '', now())`, id).Scan(&got); err != nil || got != "erased" {
		t.Fatalf("agentd_erase_chat: %q, %v", got, err)
	}
}

// A new chat's spec is stored as the text it was given, not parsed into
// jsonb (migration 0011), and reads return it; a chat written before, with
// its spec in the jsonb column, reads as it did.
func TestSpecStoredAsText(t *testing.T) {
	t.Parallel()
	s := newStore(t).(*Store)
	ctx := t.Context()
	id := createEndedChat(t, s)
	var parsed bool
	var text string
	if err := s.pool.QueryRow(ctx, `SELECT spec IS NOT NULL, coalesce(spec_text, '(null)') FROM chats WHERE id = $1`, id).Scan(&parsed, &text); err != nil {
		t.Fatal(err)
	}
	const want = `{"agents": [{"name": "coder", "type": "assistant"}]}`
	if parsed || text != want {
		t.Errorf("stored spec: jsonb column set %v, text column %s; want only the text %s", parsed, text, want)
	}
	c, err := s.GetChat(ctx, "", id)
	if err != nil || string(c.Spec) != want {
		t.Fatalf("read spec %q, %v; want %q", c.Spec, err, want)
	}

	// A chat of an earlier version: its spec in the jsonb column only.
	old := uuid.NewString()
	if _, err := s.pool.Exec(ctx, `WITH c AS (
			INSERT INTO chats (id, tenant, spec, created_at) VALUES ($1, 'acme', '{"agents": []}'::jsonb, now()) RETURNING id)
		INSERT INTO chat_state (id, status, epoch, created_at, updated_at) SELECT id, 'completed', 1, now(), now() FROM c`, old); err != nil {
		t.Fatal(err)
	}
	c, err = s.GetChat(ctx, "", old)
	if err != nil || string(c.Spec) != `{"agents": []}` {
		t.Fatalf("read spec of an earlier chat %q, %v", c.Spec, err)
	}
	// A chat with neither is refused.
	if _, err := s.pool.Exec(ctx, `INSERT INTO chats (id, tenant, created_at) VALUES ($1, 'acme', now())`, uuid.NewString()); err == nil {
		t.Error("a chat without a spec was inserted")
	}
}

// An event's data is stored as the JSON text it was given, checked but not
// rebuilt as jsonb (migration 0012): it reads back byte for byte (jsonb
// would reorder its keys), the messages view still gives jsonb, and an
// event written before, with its data in the jsonb column, reads as it did.
func TestEventDataStoredAsJSON(t *testing.T) {
	t.Parallel()
	s := newStore(t).(*Store)
	ctx := t.Context()
	now := time.Now()
	id := uuid.NewString()
	c, _, err := s.CreateChat(ctx, &chat.CreateChatParams{ID: id, Tenant: "acme", CreatedAt: now,
		Spec:   json.RawMessage(`{"agents": [{"name": "coder", "type": "assistant"}]}`),
		Events: []chat.Event{{Seq: 1, Type: chat.EventChatCreated, Data: json.RawMessage(`{"status": "queued"}`), CreatedAt: now}}})
	if err != nil {
		t.Fatal(err)
	}
	const data = `{"turn":1,"a":true}`
	if err := s.Append(ctx, &chat.AppendParams{ChatID: id, Epoch: c.Epoch, Update: chat.ChatUpdate{Status: chat.StatusRunning, UpdatedAt: now},
		Events: []chat.Event{{Seq: 2, Type: chat.EventMessage, Role: chat.RoleAssistant, Name: "coder", Content: "hi", Data: json.RawMessage(data), CreatedAt: now}}}); err != nil {
		t.Fatal(err)
	}
	var parsed int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE chat_id = $1 AND data IS NOT NULL`, id).Scan(&parsed); err != nil {
		t.Fatal(err)
	}
	if parsed != 0 {
		t.Errorf("%d events of the chat have their data in the jsonb column, want none", parsed)
	}
	es, err := s.ListEvents(ctx, &chat.ListEventsParams{ChatID: id})
	if err != nil || len(es) != 2 || string(es[1].Data) != data {
		t.Fatalf("events %+v, %v; want the message's data %s as written", es, err, data)
	}
	var turn string
	if err := s.pool.QueryRow(ctx, `SELECT data->>'turn' FROM messages WHERE chat_id = $1`, id).Scan(&turn); err != nil || turn != "1" {
		t.Fatalf("messages view: turn %q, %v", turn, err)
	}

	// An event of an earlier version: its data in the jsonb column only.
	if _, err := s.pool.Exec(ctx, `INSERT INTO events (chat_id, seq, type, data, created_at) VALUES ($1, 3, 'chat.completed', '{"turn": 2, "a": false}'::jsonb, now())`, id); err != nil {
		t.Fatal(err)
	}
	es, err = s.ListEvents(ctx, &chat.ListEventsParams{ChatID: id, After: 2})
	if err != nil || len(es) != 1 || string(es[0].Data) != `{"a": false, "turn": 2}` {
		t.Fatalf("event of an earlier version: %+v, %v", es, err)
	}
}
