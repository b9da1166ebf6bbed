package sqlite

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentd/agentd/internal/chat"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// newChat creates a chat leased to "a" (epoch 1) with its two first events.
func newChat(t *testing.T, s *Store, key string) *chat.Chat {
	t.Helper()
	c, created, err := s.CreateChat(t.Context(), createChat(key, "h"))
	if err != nil || !created {
		t.Fatalf("CreateChat: created %v, %v", created, err)
	}
	return c
}

func createChat(key, hash string) *chat.CreateChatParams {
	return &chat.CreateChatParams{ID: uuid.NewString(), Tenant: "acme", Spec: json.RawMessage(`{"agents": []}`),
		IdempotencyKey: key, RequestHash: hash, CreatedAt: t0, Owner: "a", LeaseUntil: t0.Add(time.Hour),
		Events: []chat.Event{
			{Seq: 1, Type: chat.EventChatCreated, Data: json.RawMessage(`{"status": "queued"}`)},
			{Seq: 2, Type: chat.EventMessage, Role: chat.RoleUser, Name: chat.UserName, Content: "go"},
		}}
}

// appendOne appends one message to c at the next seq with update u.
func appendOne(t *testing.T, s *Store, c *chat.Chat, u chat.ChatUpdate) *chat.Chat {
	t.Helper()
	u.UpdatedAt = t0.Add(time.Duration(c.LastSeq) * time.Second)
	e := chat.Event{Seq: c.LastSeq + 1, Type: chat.EventMessage, Role: chat.RoleAssistant, Name: "a", Content: "hi"}
	if err := s.Append(t.Context(), &chat.AppendParams{ChatID: c.ID, Epoch: c.Epoch, Events: []chat.Event{e}, Update: u}); err != nil {
		t.Fatalf("Append: %v", err)
	}
	got, err := s.GetChat(t.Context(), "", c.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// An append whose update keeps the status takes appendSteadySQL, which
// names none of the indexed columns; it must leave the record as
// appendChatSQL would. These are the cases where the two differ unless the
// steady statement's conditions send the append on to appendChatSQL.
func TestSteadyAppendWritesWhatTheFullUpdateWould(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := s.writer.ExecContext(t.Context(), q, args...); err != nil {
			t.Fatal(err)
		}
	}
	c := appendOne(t, s, newChat(t, s, ""), chat.ChatUpdate{Status: chat.StatusRunning, Turns: 1})
	if c.Status != chat.StatusRunning || c.Turns != 1 || c.Owner != "a" || c.LastSeq != 3 {
		t.Fatalf("after a status change: %+v", c)
	}
	// A completed_at the append does not carry is cleared.
	exec(`UPDATE chats SET completed_at = 1 WHERE id = ?`, c.ID)
	if c = appendOne(t, s, c, chat.ChatUpdate{Status: chat.StatusRunning, Turns: 2}); c.CompletedAt != nil || c.Turns != 2 {
		t.Fatalf("completed_at after a running append: %v (turns %d), want none", c.CompletedAt, c.Turns)
	}
	// One it carries is written.
	done := t0.Add(time.Minute)
	if c = appendOne(t, s, c, chat.ChatUpdate{Status: chat.StatusRunning, CompletedAt: &done}); c.CompletedAt == nil || !c.CompletedAt.Equal(done) {
		t.Fatalf("completed_at = %v, want %v", c.CompletedAt, done)
	}
	if c = appendOne(t, s, c, chat.ChatUpdate{Status: chat.StatusRunning}); c.CompletedAt != nil {
		t.Fatalf("completed_at = %v, want none", c.CompletedAt)
	}
	// A cancel request survives a running append, and the lease a release.
	exec(`UPDATE chats SET cancel_requested = 1 WHERE id = ?`, c.ID)
	if c = appendOne(t, s, c, chat.ChatUpdate{Status: chat.StatusRunning, Turns: 3}); !c.CancelRequested || c.Owner != "a" {
		t.Fatalf("after a running append: cancel %v, owner %q", c.CancelRequested, c.Owner)
	}
	if c = appendOne(t, s, c, chat.ChatUpdate{Status: chat.StatusRunning, ReleaseLease: true}); c.Owner != "" || c.LeaseExpiresAt != nil {
		t.Fatalf("after releasing the lease: owner %q, lease %v", c.Owner, c.LeaseExpiresAt)
	}
	// An append of another epoch is fenced whichever statement it takes.
	stale := *c
	stale.Epoch = 7
	err := s.Append(t.Context(), &chat.AppendParams{ChatID: c.ID, Epoch: stale.Epoch, Update: chat.ChatUpdate{Status: chat.StatusRunning, UpdatedAt: t0},
		Events: []chat.Event{{Seq: c.LastSeq + 1, Type: chat.EventMessage, Role: chat.RoleAssistant, Name: "a", Content: "late"}}})
	if !errors.Is(err, chat.ErrFenced) {
		t.Fatalf("Append with a stale epoch: %v, want ErrFenced", err)
	}
}

// Creates share group-commit batches with each other and with appends:
// many at once, some with one idempotency key, must each get their own chat
// and events, the key's creates one chat between them, and a create with an
// erased chat's id a conflict.
func TestConcurrentCreatesInBatches(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	const n = 64
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		keyed   = map[string]int{} // chat id → creates that answered with it
		created int
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := ""
			if i%2 == 0 {
				key = "same"
			}
			c, ok, err := s.CreateChat(t.Context(), createChat(key, "h"))
			if err != nil {
				t.Errorf("CreateChat %d: %v", i, err)
				return
			}
			// Every chat gets an append right away, into the batches of the
			// other creates.
			if ok {
				e := chat.Event{Seq: 3, Type: chat.EventMessage, Role: chat.RoleAssistant, Name: "a", Content: "hi"}
				if err := s.Append(t.Context(), &chat.AppendParams{ChatID: c.ID, Epoch: c.Epoch, Events: []chat.Event{e},
					Update: chat.ChatUpdate{Status: chat.StatusRunning, UpdatedAt: t0}}); err != nil {
					t.Errorf("Append to %s: %v", c.ID, err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if ok {
				created++
			}
			if key != "" {
				keyed[c.ID]++
			}
		}()
	}
	wg.Wait()
	if len(keyed) != 1 || created != n/2+1 {
		t.Fatalf("%d chats for one key (want 1), %d created (want %d)", len(keyed), created, n/2+1)
	}
	var events, chats int
	if err := s.reader.QueryRowContext(t.Context(), `SELECT count(*), count(DISTINCT chat_id) FROM events`).Scan(&events, &chats); err != nil {
		t.Fatal(err)
	}
	if chats != n/2+1 || events != 3*chats {
		t.Fatalf("%d events of %d chats, want 3 for each of %d", events, chats, n/2+1)
	}
	if _, _, err := s.CreateChat(t.Context(), createChat("same", "other")); !errors.Is(err, chat.ErrConflict) {
		t.Fatalf("CreateChat with the key of another request: %v, want ErrConflict", err)
	}
	p := createChat("", "h")
	if _, err := s.writer.ExecContext(t.Context(), `INSERT INTO chat_tombstones (id, tenant, deleted_at) VALUES (?, 'acme', 1)`, p.ID); err != nil {
		t.Fatal(fmt.Errorf("tombstone: %w", err))
	}
	if _, _, err := s.CreateChat(t.Context(), p); !errors.Is(err, chat.ErrConflict) {
		t.Fatalf("CreateChat with an erased chat's id: %v, want ErrConflict", err)
	}
}

// WAL checkpoints run on the checkpointer's connection after commits, not
// in the writer's commits: the writer's own wal_autocheckpoint is only the
// WAL's bound, far above what this test writes, so the database file grows
// only if the checkpointer copies the WAL into it.
func TestCheckpointsInTheBackground(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "agentd.db")
	s, err := Open(t.Context(), Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	var pages int
	if err := s.writer.QueryRowContext(t.Context(), `PRAGMA wal_autocheckpoint`).Scan(&pages); err != nil || pages != writerAutoCheckpoint {
		t.Fatalf("the writer's wal_autocheckpoint: %d, %v; want %d", pages, err, writerAutoCheckpoint)
	}
	c := newChat(t, s, "")
	content := strings.Repeat("x", 3000)
	const appends, perAppend = 20, 100 // about 6 MB: 1,500 pages and more
	for range appends {
		var es []chat.Event
		for i := range perAppend {
			es = append(es, chat.Event{Seq: c.LastSeq + 1 + int64(i), Type: chat.EventMessage, Role: chat.RoleAssistant, Name: "a", Content: content})
		}
		if err := s.Append(t.Context(), &chat.AppendParams{ChatID: c.ID, Epoch: c.Epoch, Events: es,
			Update: chat.ChatUpdate{Status: chat.StatusRunning, UpdatedAt: t0}}); err != nil {
			t.Fatal(err)
		}
		c.LastSeq += perAppend
	}
	var size int64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if size = fi.Size(); size >= appends*perAppend*3000 {
			return
		}
	}
	t.Fatalf("database file %d bytes after writing %d in the WAL: not checkpointed", size, appends*perAppend*3000)
}

// A new chat's spec is in chat_specs and its chats row holds null in its
// place (migration 0013), whichever way the chat was created; reads return
// the spec, as they return a spec a row written before holds itself; the
// erasure of the chat removes its spec.
func TestSpecOutsideTheChatsRow(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	batched := newChat(t, s, "")
	own := createChat("", "h")
	own.Spec = json.RawMessage(`{"agents": [{"name": "fork"}]}`)
	own.State = &chat.ChatUpdate{Status: chat.StatusCompleted, MessageCount: 1, Run: 1, CompletedAt: &t0}
	own.Owner, own.LeaseUntil = "", time.Time{}
	inTx, _, err := s.CreateChat(t.Context(), own) // a fork's way: a transaction of its own
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id   string
		spec string
	}{{batched.ID, `{"agents": []}`}, {inTx.ID, `{"agents": [{"name": "fork"}]}`}} {
		var inRow, inSpecs string
		if err := s.writer.QueryRowContext(t.Context(), `SELECT c.spec, s.spec FROM chats c JOIN chat_specs s ON s.id = c.id WHERE c.id = ?`,
			c.id).Scan(&inRow, &inSpecs); err != nil {
			t.Fatalf("chat %s: %v", c.id, err)
		}
		got, err := s.GetChat(t.Context(), "", c.id)
		if err != nil {
			t.Fatal(err)
		}
		if inRow != "null" || inSpecs != c.spec || string(got.Spec) != c.spec {
			t.Errorf("chat %s: chats.spec %s, chat_specs.spec %s, read %s; want null, %s, %s", c.id, inRow, inSpecs, got.Spec, c.spec, c.spec)
		}
	}
	if string(batched.Spec) != `{"agents": []}` || string(inTx.Spec) != `{"agents": [{"name": "fork"}]}` {
		t.Errorf("CreateChat returned specs %s and %s", batched.Spec, inTx.Spec)
	}

	// A chat written before 0013 has its spec in its row.
	if _, err := s.writer.ExecContext(t.Context(), `UPDATE chats SET spec = '{"agents": ["old"]}' WHERE id = ?`, batched.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetChat(t.Context(), "", batched.ID); err != nil || string(got.Spec) != `{"agents": ["old"]}` {
		t.Errorf("a chat with its spec in its row reads %s, %v", got.Spec, err)
	}

	if err := s.EraseChat(t.Context(), &chat.EraseChatParams{ChatID: inTx.ID, Now: t0}); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := s.writer.QueryRowContext(t.Context(), `SELECT count(*) FROM chat_specs WHERE id = ?`, inTx.ID).Scan(&left); err != nil || left != 0 {
		t.Errorf("the erased chat's spec: %d rows left, %v", left, err)
	}
	if _, err := s.writer.ExecContext(t.Context(), `DELETE FROM chat_specs WHERE id = ?`, batched.ID); err == nil {
		t.Error("a running chat's spec was deleted")
	}
}
