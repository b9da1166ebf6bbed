package runtime

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// countingStore counts CountByStatus calls; nothing else of Store is used.
type countingStore struct {
	chat.Store
	calls atomic.Int64
}

func (s *countingStore) CountByStatus(context.Context) (map[chat.Status]int64, error) {
	n := s.calls.Add(1)
	return map[chat.Status]int64{chat.StatusRunning: n}, nil
}

// TestChatsByStatusIsCached checks that scrapes within the TTL reuse one
// count instead of each running a GROUP BY over every chat.
func TestChatsByStatusIsCached(t *testing.T) {
	t.Parallel()
	store := &countingStore{}
	var now atomic.Pointer[time.Time]
	start := time.Unix(1_800_000_000, 0)
	now.Store(&start)
	reg := prometheus.NewRegistry()
	if _, err := newMetrics(reg, store, 15*time.Second, func() time.Time { return *now.Load() }); err != nil {
		t.Fatal(err)
	}
	running := func() float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "agentd_chats" {
				continue
			}
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == string(chat.StatusRunning) {
					return m.GetGauge().GetValue()
				}
			}
		}
		t.Fatal("no agentd_chats{status=running}")
		return 0
	}
	for range 5 {
		if got := running(); got != 1 {
			t.Fatalf("running = %v, want 1 (the first count, cached)", got)
		}
	}
	if n := store.calls.Load(); n != 1 {
		t.Fatalf("5 scrapes within the TTL counted %d times, want 1", n)
	}
	later := start.Add(16 * time.Second)
	now.Store(&later)
	if got := running(); got != 2 {
		t.Fatalf("running after the TTL = %v, want 2 (a fresh count)", got)
	}
	if n, err := testutil.GatherAndCount(reg, "agentd_chats"); err != nil || n != len(chat.AllStatuses) {
		t.Fatalf("agentd_chats series = %d, %v; want one per status", n, err)
	}
}
