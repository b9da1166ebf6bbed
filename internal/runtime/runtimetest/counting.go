package runtimetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
)

// CountingStore is a real store that counts the reads that could serve a
// chat's streams and subscribers (ListEvents, GetProgress, GetChat) and
// the appends, and notes when each seq was confirmed: what tests and
// benchmarks of serving events from memory measure.
type CountingStore struct {
	chat.Store
	// Reads and Appends count the calls so far.
	Reads, Appends atomic.Int64

	mu        sync.Mutex
	committed map[int64]time.Time
	messages  []time.Time
}

// Counting wraps s.
func Counting(s chat.Store) *CountingStore {
	return &CountingStore{Store: s, committed: map[int64]time.Time{}}
}

// ListEvents counts a read.
func (s *CountingStore) ListEvents(ctx context.Context, p *chat.ListEventsParams) ([]chat.Event, error) {
	s.Reads.Add(1)
	return s.Store.ListEvents(ctx, p)
}

// GetProgress counts a read.
func (s *CountingStore) GetProgress(ctx context.Context, tenant, id string) (chat.Progress, error) {
	s.Reads.Add(1)
	return s.Store.GetProgress(ctx, tenant, id)
}

// GetChat counts a read.
func (s *CountingStore) GetChat(ctx context.Context, tenant, id string) (*chat.Chat, error) {
	s.Reads.Add(1)
	return s.Store.GetChat(ctx, tenant, id)
}

// Append counts a confirmed append and notes when its events were
// confirmed.
func (s *CountingStore) Append(ctx context.Context, p *chat.AppendParams) error {
	err := s.Store.Append(ctx, p)
	if err == nil {
		now := time.Now()
		s.Appends.Add(1)
		s.mu.Lock()
		for _, e := range p.Events {
			s.committed[e.Seq] = now
			if e.Type == chat.EventMessage {
				s.messages = append(s.messages, now)
			}
		}
		s.mu.Unlock()
	}
	return err
}

// Committed is when the append of seq was confirmed; false for a seq not
// appended through this store (a chat's first events are written with it).
func (s *CountingStore) Committed(seq int64) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.committed[seq]
	return at, ok
}

// Messages are the times message events were confirmed, in order.
func (s *CountingStore) Messages() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.messages...)
}

// TurnsSpec is a chat of one replay agent with turns replies: the first
// after firstMS (time for readers to subscribe), the others after delayMS
// each.
func TurnsSpec(turns, firstMS, delayMS int) string {
	responses := []string{fmt.Sprintf(`{"content": "turn 1", "delay_ms": %d}`, firstMS)}
	for i := 2; i <= turns; i++ {
		responses = append(responses, fmt.Sprintf(`{"content": "turn %d", "delay_ms": %d}`, i, delayMS))
	}
	return fmt.Sprintf(`{"task": "go", "max_round": %d, "agents": [{"name": "a", "type": "assistant",
		"model": {"provider": "replay", "responses": [%s]}}]}`, turns, strings.Join(responses, ","))
}

// CheckSeqs fails unless every reader saw seqs 1, 2, … in order, and, when
// last > 0, up to last.
func CheckSeqs(t testing.TB, seen [][]int64, last int64) {
	t.Helper()
	for i, s := range seen {
		for j := range s {
			if s[j] != int64(j+1) {
				t.Fatalf("reader %d saw seqs %v", i, s)
			}
		}
		if last > 0 && (len(s) == 0 || s[len(s)-1] != last) {
			t.Fatalf("reader %d saw seqs %v: not to seq %d", i, s, last)
		}
	}
}
