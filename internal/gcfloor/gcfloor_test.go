package gcfloor

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

const mb = 1 << 20

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		name                 string
		base                 int
		floor, live, scanned uint64
		want                 int
	}{
		{"no floor", 100, 0, 4 * mb, 4 * mb, 100},
		{"small heap: the floor", 100, 32 * mb, 4 * mb, 4 * mb, 800},
		{"rounded up", 100, 32 * mb, 6 * mb, 6 * mb, 534},
		{"large heap: GOGC", 100, 32 * mb, 64 * mb, 64 * mb, 100},
		{"at the crossing", 100, 32 * mb, 32 * mb, 32 * mb, 100},
		{"a higher GOGC stays", 400, 32 * mb, 16 * mb, 16 * mb, 400},
		// Under 4 MiB scanned the runtime's minimum heap (4 MiB·GOGC/100)
		// sets the goal: GOGC makes it live+floor.
		{"small scan: the runtime's minimum heap", 100, 32 * mb, 200 << 10, 256 << 10, 805},
		{"stacks and globals scanned too", 100, 32 * mb, 2 * mb, 3 * mb, 850},
		{"nothing scanned", 100, 32 * mb, 0, 0, 800},
		{"bounded", 100, 1 << 40, 1, 1, maxPercent},
	} {
		if got := Percent(c.base, c.floor, c.live, c.scanned); got != c.want {
			t.Errorf("%s: Percent(%d, %d, %d, %d) = %d, want %d", c.name, c.base, c.floor, c.live, c.scanned, got, c.want)
		}
	}
}

// TestPercentGivesTheFloor checks Percent against the runtime's heap goal
// (runtime/mgcpacer.go: live + scanned·GOGC/100, and at least
// 4 MiB·GOGC/100): wherever the floor is more than GOGC alone gives, the
// goal is live+floor, rounded up to a whole percentage.
func TestPercentGivesTheFloor(t *testing.T) {
	for _, floor := range []uint64{mb, 8 * mb, 32 * mb, 64 * mb, 256 * mb} {
		for _, live := range []uint64{0, 64 << 10, 512 << 10, mb, 3 * mb, 4 * mb, 5 * mb, 16 * mb, 100 * mb} {
			for _, other := range []uint64{0, 100 << 10, 2 * mb} { // stacks and globals
				scanned := live + other
				p := Percent(100, floor, live, scanned)
				goal := max(live+scanned*uint64(p)/100, runtimeHeapMinimum*uint64(p)/100)
				switch {
				case p == 100:
					if base := max(live+scanned, runtimeHeapMinimum); base < live+floor {
						t.Errorf("floor %d, live %d, scanned %d: GOGC 100 gives a goal of %d, under live+floor", floor, live, scanned, base)
					}
				case goal < live+floor || goal > live+floor+max(scanned, runtimeHeapMinimum)/100+1:
					t.Errorf("floor %d, live %d, scanned %d: GOGC %d gives a goal of %d, want live+floor = %d", floor, live, scanned, p, goal, live+floor)
				}
			}
		}
	}
}

// read returns the runtime metrics named, as integers.
func read(names ...string) []uint64 {
	s := make([]metrics.Sample, len(names))
	for i, n := range names {
		s[i].Name = n
	}
	metrics.Read(s)
	out := make([]uint64, len(names))
	for i := range s {
		out[i] = uint64Value(s[i])
	}
	return out
}

// cycles is the number of completed collections.
func cycles() uint64 { return read("/gc/cycles/total:gc-cycles")[0] }

// gogc is the GOGC in effect, as the runtime has it (-1: off).
func gogc() int { return int(int64(read("/gc/gogc:percent")[0])) }

// headroom is how far the heap may grow past what the last collection
// found live before the next collection: the memory the floor costs.
func headroom() (live, room uint64) {
	v := read("/gc/heap/live:bytes", "/gc/heap/goal:bytes")
	return v[0], v[1] - v[0]
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
// GOGC alone (its heap goal is a few MB), and with a 64 MB floor four or
// five: at most a handful, and at least three, for the collector still
// runs and the heap grows by the floor, not by more. Stopping the tuner
// restores GOGC.
func TestTheFloorMakesCollectionsRarer(t *testing.T) {
	const floor = 64 * mb
	base := debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	runtime.GC()

	without := churn(256 << 20)

	tuner := New(floor)
	if tuner == nil {
		t.Fatal("New(64 MB) = nil with GOGC=100")
	}
	if p := tuner.Tune(); p <= 100 || gogc() != p {
		t.Fatalf("Tune() = %d with a small heap, GOGC %d: want more than 100, in effect", p, gogc())
	}
	if live, room := headroom(); room < floor || room > floor+floor/16 {
		t.Fatalf("with %d bytes live the heap may grow by %d before a collection, want the floor, %d", live, room, uint64(floor))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tuner.Run(ctx, 10*time.Millisecond); close(done) }()
	with := churn(256 << 20)
	cancel()
	<-done

	t.Logf("collections for 256 MB of garbage: %d with GOGC alone, %d with a 64 MB floor", without, with)
	if without < 16 {
		t.Fatalf("only %d collections without a floor: the heap is not small enough to show anything", without)
	}
	// 256 MB through 64 MB of headroom: at least three collections end
	// (four start); the pacer starts each a little before the goal.
	if with < 3 || with > 8 || with*3 > without {
		t.Errorf("%d collections with the floor against %d without, want from 3 to 8, and at most a third", with, without)
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

// TestGOGCFollowsTheLiveHeap grows the live heap past the floor: GOGC, as
// the runtime has it, falls as the heap grows, the heap may grow by the
// floor while it is smaller than the floor, and once it is larger GOGC is
// its base again, so that a replica with many chats uses no more memory
// than without the floor.
func TestGOGCFollowsTheLiveHeap(t *testing.T) {
	const floor = 32 * mb
	base := debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	tuner := New(floor)
	var live [][]byte
	prev := 0
	for _, size := range []int{0, 8 * mb, 16 * mb, 64 * mb} {
		for len(live) < size/mb {
			live = append(live, make([]byte, mb))
		}
		runtime.GC()
		p := tuner.Tune()
		held, room := headroom()
		t.Logf("%d bytes live: GOGC %d, the heap may grow by %d", held, gogc(), room)
		if gogc() != p {
			t.Fatalf("%d MB live: Tune() = %d, but GOGC is %d", size/mb, p, gogc())
		}
		if size < floor {
			if p <= 100 || prev != 0 && p >= prev {
				t.Errorf("%d MB live: GOGC %d, want more than 100 and less than the %d of a smaller heap", size/mb, p, prev)
			}
			if room < floor || room > floor+floor/16 {
				t.Errorf("%d MB live: the heap may grow by %d, want the floor, %d", size/mb, room, uint64(floor))
			}
		} else if p != 100 {
			t.Errorf("%d MB live, more than the %d MB floor: GOGC %d, want its base, 100", size/mb, floor/mb, p)
		}
		prev = p
	}
	runtime.KeepAlive(live)
}
