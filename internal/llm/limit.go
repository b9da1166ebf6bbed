package llm

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// limiter holds one endpoint's calls to its limits, per replica: calls in
// flight (max_concurrency), requests per minute (rpm, spaced evenly) and
// tokens per minute (tpm). Calls beyond them wait in one FIFO queue: the
// first waiter is let through as soon as every limit allows it, and no
// later call passes it, so a chat never loses its place to a luckier one
// (a call with a small token estimate does not starve a large one).
//
// Tokens are counted when a call starts by an estimate (the prompt's
// characters / 4 plus max_tokens, if set) and corrected to the usage the
// endpoint reported when it ends; a single call larger than the whole
// budget still runs, alone in its minute, rather than never.
type limiter struct {
	maxConc  int
	interval time.Duration // 60s / rpm; 0: no rpm limit
	tpm      int64
	now      func() time.Time
	m        limiterMetrics

	mu        sync.Mutex
	inFlight  int
	queue     []*waiter
	nextStart time.Time    // when the rpm spacing lets the next call start
	spent     []*tokenSpan // token reservations of the last minute, oldest first
	spentSum  int64        // their tokens
	timer     *time.Timer  // wakes the queue when a time-based limit lifts
	timerAt   time.Time
}

// waiter is a call waiting in the queue.
type waiter struct {
	tokens  int64
	ready   chan struct{} // closed when the call may start (nil: it started at once)
	granted bool
	span    *tokenSpan
	queued  time.Time
}

// tokenSpan is the tokens a call counts against the tpm budget, from when it
// started.
type tokenSpan struct {
	at      time.Time
	tokens  int64
	counted bool // still in spent (not yet a minute old)
}

// limiterMetrics are one endpoint's children of the limiter collectors.
type limiterMetrics struct {
	wait     prometheus.Observer
	inFlight prometheus.Gauge
	queued   prometheus.Gauge
}

// newLimiter returns the endpoint's limiter. An endpoint without limits has
// one too: its calls in flight are still counted (a lock per call, next to
// an HTTP request).
func newLimiter(ep *Endpoint, m limiterMetrics, now func() time.Time) *limiter {
	l := &limiter{maxConc: ep.MaxConcurrency, tpm: int64(ep.TPM), now: now, m: m}
	if ep.RPM > 0 {
		l.interval = time.Minute / time.Duration(ep.RPM)
	}
	return l
}

// permit is a granted call; release it when the call ends.
type permit struct {
	l *limiter
	w *waiter
}

// acquire waits for the call's turn. tokens is its estimate for the tpm
// budget. It fails only when ctx ends first; the call then never started.
func (l *limiter) acquire(ctx context.Context, tokens int64) (*permit, error) {
	w := &waiter{tokens: tokens}
	l.mu.Lock()
	w.queued = l.now()
	if len(l.queue) == 0 {
		// No one waits ahead: a call the limits let through starts at
		// once, without the queue and its channel. So do nearly all calls
		// of an endpoint with room, and all of one without limits.
		if _, ok := l.canStartLocked(w, w.queued); ok {
			l.startLocked(w, w.queued)
			l.mu.Unlock()
			l.m.wait.Observe(0)
			return &permit{l: l, w: w}, nil
		}
	}
	w.ready = make(chan struct{})
	l.queue = append(l.queue, w)
	l.m.queued.Inc()
	l.dispatchLocked()
	l.mu.Unlock()
	select {
	case <-w.ready:
		l.m.wait.Observe(l.now().Sub(w.queued).Seconds())
		return &permit{l: l, w: w}, nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.granted {
		// Granted while ctx ended: give the slot back at once.
		l.releaseLocked(w, -1)
		return nil, ctx.Err()
	}
	for i, q := range l.queue {
		if q == w {
			l.queue = append(l.queue[:i], l.queue[i+1:]...)
			l.m.queued.Dec()
			break
		}
	}
	// The call that left may have been the one everyone waited behind.
	l.dispatchLocked()
	return nil, ctx.Err()
}

// release ends the call. used is the tokens the endpoint reported
// (prompt and completion); < 0 keeps the estimate (the call failed without
// telling).
func (p *permit) release(used int64) {
	if p == nil {
		return
	}
	p.l.mu.Lock()
	defer p.l.mu.Unlock()
	p.l.releaseLocked(p.w, used)
}

func (l *limiter) releaseLocked(w *waiter, used int64) {
	l.inFlight--
	l.m.inFlight.Dec()
	if used >= 0 && w.span != nil {
		if w.span.counted {
			l.spentSum += used - w.span.tokens
		}
		w.span.tokens = used
	}
	l.dispatchLocked()
}

// dispatchLocked lets waiters start, in order, while every limit allows the
// first one. When a time-based limit holds the first back, a timer wakes
// the queue when it lifts; a concurrency limit lifts on a release.
func (l *limiter) dispatchLocked() {
	for len(l.queue) > 0 {
		now := l.now()
		w := l.queue[0]
		wait, ok := l.canStartLocked(w, now)
		if !ok {
			if wait > 0 {
				l.wakeAtLocked(now.Add(wait))
			}
			return
		}
		l.queue = l.queue[1:]
		l.m.queued.Dec()
		l.startLocked(w, now)
		close(w.ready)
	}
}

// startLocked lets w start now: it is in flight and counted against the
// limits.
func (l *limiter) startLocked(w *waiter, now time.Time) {
	l.inFlight++
	l.m.inFlight.Inc()
	if l.interval > 0 {
		l.nextStart = now.Add(l.interval)
	}
	if l.tpm > 0 {
		w.span = &tokenSpan{at: now, tokens: w.tokens, counted: true}
		l.spent = append(l.spent, w.span)
		l.spentSum += w.tokens
	}
	w.granted = true
}

// canStartLocked says whether w may start now, and if not, how long a
// time-based limit holds it (0: until a call ends).
func (l *limiter) canStartLocked(w *waiter, now time.Time) (time.Duration, bool) {
	if l.maxConc > 0 && l.inFlight >= l.maxConc {
		return 0, false
	}
	if l.interval > 0 && now.Before(l.nextStart) {
		return l.nextStart.Sub(now), false
	}
	if l.tpm > 0 {
		cut := now.Add(-time.Minute)
		i := 0
		for i < len(l.spent) && !l.spent[i].at.After(cut) {
			l.spentSum -= l.spent[i].tokens
			l.spent[i].counted = false
			l.spent[i] = nil
			i++
		}
		l.spent = l.spent[i:]
		used := l.spentSum
		if used > 0 && used+w.tokens > l.tpm {
			return l.spent[0].at.Add(time.Minute).Sub(now) + time.Millisecond, false
		}
	}
	return 0, true
}

// wakeAtLocked makes sure the queue is looked at again at t.
func (l *limiter) wakeAtLocked(t time.Time) {
	if l.timer != nil && !l.timerAt.After(t) && l.timerAt.After(l.now()) {
		return // an earlier wake-up is already set
	}
	d := t.Sub(l.now())
	l.timerAt = t
	if l.timer == nil {
		l.timer = time.AfterFunc(d, l.wake)
		return
	}
	l.timer.Reset(d)
}

func (l *limiter) wake() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dispatchLocked()
}
