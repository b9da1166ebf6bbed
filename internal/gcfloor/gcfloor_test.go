package gcfloor

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		name           string
		base           int
		floor, scanned uint64
		want           int
	}{
		{"no floor", 100, 0, 4 * mb, 100},
		{"small heap: the floor", 100, 32 * mb, 4 * mb, 800},
		{"rounded up", 100, 32 * mb, 3 * mb, 1067},
		{"large heap: GOGC", 100, 32 * mb, 64 * mb, 100},
		{"at the crossing", 100, 32 * mb, 32 * mb, 100},
		{"a higher GOGC stays", 400, 32 * mb, 16 * mb, 400},
		{"nothing scanned", 100, 32 * mb, 0, maxPercent},
		{"bounded", 100, 1 << 40, 1, maxPercent},
	} {
		if got := Percent(c.base, c.floor, c.scanned); got != c.want {
			t.Errorf("%s: Percent(%d, %d, %d) = %d, want %d", c.name, c.base, c.floor, c.scanned, got, c.want)
		}
	}
}

// cycles is the number of completed collections.
func cycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// churn allocates n bytes of garbage in small objects, keeping almost
// nothing live, and returns how many collections that took.
func churn(n int) uint64 {
	start := cycles()
	var keep []byte
	for range n / 1024 {
		keep = make([]byte, 1024)
	}
	runtime.KeepAlive(keep)
	return cycles() - start
}

// TestTheFloorMakesCollectionsRarer is the point of the package: with a
// small live heap, 256 MB of garbage takes dozens of collections under
// GOGC alone (its heap goal is a few MB) and at most a handful with a
// 64 MB floor; and stopping the tuner restores GOGC.
func TestTheFloorMakesCollectionsRarer(t *testing.T) {
	base := debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	runtime.GC()

	without := churn(256 << 20)

	tuner := New(64 << 20)
	if tuner == nil {
		t.Fatal("New(64 MB) = nil with GOGC=100")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tuner.Run(ctx, 10*time.Millisecond); close(done) }()
	if p := tuner.Tune(); p <= 100 {
		t.Fatalf("Tune() = %d with a small heap, want more than 100", p)
	}
	with := churn(256 << 20)
	cancel()
	<-done

	t.Logf("collections for 256 MB of garbage: %d with GOGC alone, %d with a 64 MB floor", without, with)
	if without < 16 {
		t.Fatalf("only %d collections without a floor: the heap is not small enough to show anything", without)
	}
	if with > 8 || with*4 > without {
		t.Errorf("%d collections with the floor against %d without, want at most 8 and a quarter", with, without)
	}
	if got := debug.SetGCPercent(base); got != 100 {
		t.Errorf("GOGC after Run = %d, want the base, 100", got)
	}
}

func TestNothingToDo(t *testing.T) {
	if New(0) != nil {
		t.Error("New(0) is not nil")
	}
	base := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(base)
	if New(32<<20) != nil {
		t.Error("New with GOGC=off is not nil")
	}
}

// TestALargeHeapKeepsGOGC holds more live memory than the floor: the
// tuner must leave GOGC as it was, so a replica with many chats uses no
// more memory than without it.
func TestALargeHeapKeepsGOGC(t *testing.T) {
	base := debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	live := make([][]byte, 0, 64)
	for range 64 {
		live = append(live, make([]byte, 1<<20))
	}
	runtime.GC()
	tuner := New(32 << 20)
	if p := tuner.Tune(); p != 100 {
		t.Errorf("Tune() = %d with 64 MB live and a 32 MB floor, want 100", p)
	}
	runtime.KeepAlive(live)
}
