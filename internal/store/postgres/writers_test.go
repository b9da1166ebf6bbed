package postgres

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/store/pgtest"
)

// Creates, appends, their notifications and relayed deltas go through while
// every connection of the pool is taken (by reads, say: many streams
// opening at once): the group committer and the notifier have connections
// of their own. From the pool, every append of the server waited for the
// burst of reads to end.
func TestWritesDoNotWaitForThePool(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), Config{URL: pgtest.URL(t), Logger: quiet, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	appended := make(chan string, 100)
	deltas := make(chan chat.RelayedDelta, 100)
	listening := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Listen(ctx, chat.NotifyHandler{Self: "me",
			Listening: sync.OnceFunc(func() { close(listening) }),
			Appended:  func(id string) { appended <- id },
			Deltas: func(_ string, ds []chat.RelayedDelta) {
				for _, d := range ds {
					deltas <- d
				}
			},
		})
	}()
	defer func() { cancel(); <-done }()
	<-listening

	// Take every connection of the pool.
	var held []*pgxpool.Conn
	for range s.pool.Config().MaxConns {
		c, err := s.pool.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()

	wctx, wcancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer wcancel()
	now := time.Now().UTC()
	id := uuid.NewString()
	c, _, err := s.CreateChat(wctx, &chat.CreateChatParams{ID: id, Spec: json.RawMessage(`{"name": "w", "agents": [{"name": "a", "type": "assistant"}]}`),
		CreatedAt: now, Events: []chat.Event{{Seq: 1, Type: chat.EventChatCreated, CreatedAt: now}}})
	if err != nil {
		t.Fatalf("create with the pool taken: %v", err)
	}
	e := chat.Event{Seq: 2, Type: chat.EventChatRunning, CreatedAt: now}
	if err := s.Append(wctx, &chat.AppendParams{ChatID: id, Epoch: c.Epoch, Events: []chat.Event{e},
		Update: chat.ChatUpdate{Status: chat.StatusRunning, UpdatedAt: now}}); err != nil {
		t.Fatalf("append with the pool taken: %v", err)
	}
	s.RelayDelta("other", chat.RelayedDelta{ChatID: id, Epoch: c.Epoch, Delta: chat.Delta{Name: "a", Content: "typed", AfterSeq: 2}})
	for gotAppend, gotDelta := false, false; !gotAppend || !gotDelta; {
		select {
		case got := <-appended:
			gotAppend = gotAppend || got == id
		case d := <-deltas:
			gotDelta = gotDelta || (d.ChatID == id && d.Content == "typed")
		case <-wctx.Done():
			t.Fatalf("with the pool taken, the append's notification came %v, the relayed delta %v", gotAppend, gotDelta)
		}
	}
}
