package runtime

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/chat"
)

// The stages of a chat's turn cycle, in order: from the moment the
// previous append was published to the moment this turn's append is.
const (
	stagePlan    = iota // the next step planned, up to the model call
	stageModel          // the model call
	stageReply          // the reply made into events and planned, up to Store.Append
	stageQueue          // waiting in the group commit's queue for a batch to take it
	stageCommit         // the batch's transaction, its WAL flush included
	stageWake           // from the commit's return to the worker's Store.Append returning
	stagePublish        // the worker adopting the state and handing the events to the broker
	stageCount
)

var stageNames = [stageCount]string{"plan", "model call", "reply to append", "queue (batch wait)",
	"commit + flush", "wake-up", "publish"}

// cycleRecorder collects the turn cycles of every worker, stage by stage.
// Only the turn-cycle benchmark makes one (Runtime.cycles); in production
// it is nil and each stamp on the way is one nil check.
type cycleRecorder struct {
	mu      sync.Mutex
	stages  [stageCount][]time.Duration
	turns   []time.Duration
	batches []int
	// paused: cycles that end now are not recorded.
	paused bool
}

// turnStamps are one worker's times of its turn in progress.
type turnStamps struct {
	// published is when the worker's previous append was published: the
	// start of the cycle that follows.
	published              time.Time
	modelStart, modelEnd   time.Time
	appendStart, appendEnd time.Time
	trace                  chat.AppendTrace
}

// committed closes a cycle: the append that carried a model's reply has
// been published. Appends without a model call before them (a chat's
// start, its end) only start the next cycle.
func (c *cycleRecorder) committed(t *turnStamps) {
	now := time.Now()
	if !t.published.IsZero() && !t.modelStart.IsZero() && !t.trace.Taken.IsZero() {
		at := [stageCount + 1]time.Time{t.published, t.modelStart, t.modelEnd, t.appendStart,
			t.trace.Taken, t.trace.Committed, t.appendEnd, now}
		c.mu.Lock()
		if c.paused {
			c.mu.Unlock()
			*t = turnStamps{published: now}
			return
		}
		for i := range stageCount {
			c.stages[i] = append(c.stages[i], at[i+1].Sub(at[i]))
		}
		c.turns = append(c.turns, now.Sub(t.published))
		c.batches = append(c.batches, t.trace.Batch)
		c.mu.Unlock()
	}
	*t = turnStamps{published: now}
}

// report is the breakdown: per stage its mean, its share of the mean
// turn, p50 and p99; then the whole turn and the mean batch.
func (c *cycleRecorder) report() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.turns) == 0 {
		return "no turn cycles recorded\n"
	}
	var b strings.Builder
	turnMean := mean(c.turns)
	n := 0
	for _, x := range c.batches {
		n += x
	}
	fmt.Fprintf(&b, "turn cycle, %d turns, mean batch %.1f appends; per stage mean µs, share, p50 µs, p99 µs:\n",
		len(c.turns), float64(n)/float64(len(c.batches)))
	for i := range stageCount {
		m := mean(c.stages[i])
		fmt.Fprintf(&b, "  %-22s %8.0f  %4.0f%%  %6.0f  %6.0f\n", stageNames[i], us(m),
			100*float64(m)/float64(turnMean), us(pct(c.stages[i], 0.5)), us(pct(c.stages[i], 0.99)))
	}
	fmt.Fprintf(&b, "  %-22s %8.0f  %4d%%  %6.0f  %6.0f\n", "whole turn", us(turnMean), 100, us(pct(c.turns, 0.5)), us(pct(c.turns, 0.99)))
	return b.String()
}

func mean(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(max(len(ds), 1))
}

func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
