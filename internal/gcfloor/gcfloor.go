// Package gcfloor gives the garbage collector a minimum of headroom: the
// heap may always grow by at least a fixed number of bytes past what the
// last collection found live before the next collection starts.
//
// Go's collector sizes its headroom in proportion to what it must scan
// (GOGC: 100% by default). A server whose live heap is small, such as
// agentd running a few dozen chats, therefore collects very often, and
// every cycle pays fixed costs (scanning every goroutine's stack, the
// write barrier, sweeping) however little is live: under load that was a
// third of agentd's CPU. A floor of a few tens of megabytes makes those
// cycles several times rarer at a bounded price in memory. Once what the
// collector scans exceeds floor·100/GOGC, the proportional headroom is the
// larger and the floor changes nothing, so a replica holding many chats
// uses the memory it would without it.
//
// The runtime has no such setting, so Run keeps GOGC at
// max(base, floor·100/scanned) as the scanned size changes, lowered where
// the runtime's minimum heap would otherwise overshoot the floor (see
// Percent). GOMEMLIMIT still holds: the memory limit makes the collector
// run whatever GOGC is.
package gcfloor

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/agentd/agentd/internal/tick"
)

// maxPercent bounds the GOGC Run sets: with almost nothing live, the floor
// alone would ask for an unbounded percentage.
const maxPercent = 100_000

// runtimeHeapMinimum is the runtime's minimum heap goal at GOGC=100 (its
// defaultHeapMinimum, 4 MiB). The runtime scales it with GOGC: the heap
// goal is never below runtimeHeapMinimum·GOGC/100 (runtime/mgcpacer.go).
const runtimeHeapMinimum = 4 << 20

// Percent is the GOGC that gives a heap whose last collection found live
// bytes live, and whose collector scans scanned bytes (live heap, stacks
// and globals), a heap goal of live+floor: floor bytes of headroom, and
// never less than base, the GOGC otherwise in effect.
//
// The proportional goal is live + scanned·GOGC/100, so floor·100/scanned
// gives the floor. But the runtime also keeps the goal at least
// runtimeHeapMinimum·GOGC/100, and while less than 4 MiB is scanned that
// minimum is the larger: with 256 KiB scanned and a 32 MiB floor it would
// be 512 MiB. There GOGC is lowered until the minimum is live+floor.
// Either way the goal is live+floor, rounded up to a whole percentage.
func Percent(base int, floor, live, scanned uint64) int {
	if floor == 0 {
		return base
	}
	p := uint64(maxPercent)
	if scanned > 0 {
		p = min(p, floor*100/scanned)
		if floor*100%scanned != 0 {
			p++
		}
	}
	if m := (live + floor) * 100; m/runtimeHeapMinimum < p {
		p = m / runtimeHeapMinimum
		if m%runtimeHeapMinimum != 0 {
			p++ // the minimum just above live+floor, never under
		}
	}
	if p < uint64(base) {
		return base
	}
	return int(p)
}

// Tuner holds the GOGC in effect when it was made and sets the one
// Percent gives as the heap changes.
type Tuner struct {
	floor   uint64
	base    int
	current int
	samples []metrics.Sample
}

// New returns a Tuner for floor bytes of headroom over the GOGC now in
// effect, or nil if there is nothing to do: a zero floor, or collection
// turned off (GOGC=off).
func New(floor uint64) *Tuner {
	gogc := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(gogc)
	if floor == 0 || gogc[0].Value.Kind() != metrics.KindUint64 {
		return nil
	}
	// GOGC=off reads as -1 converted to uint64.
	v := gogc[0].Value.Uint64()
	if v > math.MaxInt32 {
		return nil
	}
	base := int(v)
	return &Tuner{floor: floor, base: base, current: base, samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/scan/stack:bytes"},
		{Name: "/gc/scan/globals:bytes"},
	}}
}

// Base is the GOGC the Tuner started from and restores when Run returns.
func (t *Tuner) Base() int { return t.base }

// Tune sets GOGC from the last collection's figures and returns it. It
// leaves GOGC alone when it would change by less than a tenth, so that a
// heap that moves a little does not recompute the collector's pacing at
// every call.
func (t *Tuner) Tune() int {
	metrics.Read(t.samples) // the live heap, then the other scanned bytes
	live := uint64Value(t.samples[0])
	scanned := live + uint64Value(t.samples[1]) + uint64Value(t.samples[2])
	p := Percent(t.base, t.floor, live, scanned)
	if d := p - t.current; d*10 > t.current || -d*10 > t.current || (p == t.base && t.current != t.base) {
		debug.SetGCPercent(p)
		t.current = p
	}
	return t.current
}

// uint64Value is a sample's value, or 0 if the runtime does not have it.
func uint64Value(s metrics.Sample) uint64 {
	if s.Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s.Value.Uint64()
}

// Run tunes GOGC every interval until ctx ends, then restores the base.
// What is live changes only at the end of a collection; polling a few
// times a second follows it closely enough, for the cost of reading three
// runtime counters.
func (t *Tuner) Run(ctx context.Context, interval time.Duration) {
	defer debug.SetGCPercent(t.base)
	t.Tune()
	tick.Every(ctx, interval, func(context.Context) { t.Tune() })
}
