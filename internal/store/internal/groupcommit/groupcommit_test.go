package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/chat"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeDB records committed appends. An append with Epoch < 0 is fenced; one
// with Epoch == 666 makes the whole transaction fail (a bad member).
type fakeDB struct {
	mu        sync.Mutex
	committed []string
	batches   []int
	gate      chan struct{} // when non-nil, each commit waits for a receive
	entered   chan struct{} // when non-nil, each commit announces itself (buffered, never blocks)
}

func (f *fakeDB) commit(ctx context.Context, batch []*chat.AppendParams, fenced []bool) error {
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for _, p := range batch {
		if p.Epoch == 666 {
			return errors.New("bad member")
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches = append(f.batches, len(batch))
	for i, p := range batch {
		if p.Epoch < 0 {
			fenced[i] = true
			continue
		}
		f.committed = append(f.committed, p.ChatID)
	}
	return nil
}

// newCommitter returns a started Committer on f and a channel that receives
// a value per queued append.
func newCommitter(t *testing.T, f *fakeDB) (*Committer[*chat.AppendParams], <-chan struct{}) {
	t.Helper()
	c := New(Config[*chat.AppendParams]{Commit: f.commit, MaxBatch: 8, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	queued := make(chan struct{}, 100)
	c.enqueued = func() { queued <- struct{}{} }
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return c, queued
}

func TestBatchesWhileCommitting(t *testing.T) {
	f := &fakeDB{gate: make(chan struct{}), entered: make(chan struct{}, 100)}
	c, queued := newCommitter(t, f)

	// The first append occupies the committer; the next 20 queue up behind
	// it and must go out in batches of at most MaxBatch (8).
	errs := make(chan error, 21)
	go func() { errs <- c.Append(t.Context(), &chat.AppendParams{ChatID: "first"}) }()
	<-f.entered
	for i := range 20 {
		go func() { errs <- c.Append(t.Context(), &chat.AppendParams{ChatID: fmt.Sprint("c", i)}) }()
	}
	waitQueued(t, queued, 1+20) // the first append's signal, too
	for range 4 {
		f.gate <- struct{}{}
	}
	for range 21 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	want := []int{1, 8, 8, 4}
	if fmt.Sprint(f.batches) != fmt.Sprint(want) {
		t.Fatalf("batch sizes %v, want %v", f.batches, want)
	}
}

// waitQueued waits until n more appends have been queued.
func waitQueued(t *testing.T, queued <-chan struct{}, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for range n {
		select {
		case <-queued:
		case <-timeout:
			t.Fatalf("fewer than %d appends were queued in 10s", n)
		}
	}
}

func TestFencedAndBadMembersFailAlone(t *testing.T) {
	f := &fakeDB{gate: make(chan struct{}), entered: make(chan struct{}, 100)}
	c, queued := newCommitter(t, f)

	go func() { _ = c.Append(t.Context(), &chat.AppendParams{ChatID: "warmup"}) }()
	<-f.entered
	type result struct {
		id  string
		err error
	}
	res := make(chan result, 5)
	for _, p := range []*chat.AppendParams{
		{ChatID: "a"}, {ChatID: "fenced", Epoch: -1}, {ChatID: "bad", Epoch: 666}, {ChatID: "b"},
	} {
		go func() { res <- result{p.ChatID, c.Append(t.Context(), p)} }()
	}
	waitQueued(t, queued, 1+4)
	close(f.gate) // let every commit through
	got := map[string]error{}
	for range 4 {
		r := <-res
		got[r.id] = r.err
	}
	if got["a"] != nil || got["b"] != nil {
		t.Errorf("good appends failed: a=%v b=%v", got["a"], got["b"])
	}
	if !errors.Is(got["fenced"], chat.ErrFenced) {
		t.Errorf("fenced append: %v, want ErrFenced", got["fenced"])
	}
	if got["bad"] == nil || errors.Is(got["bad"], chat.ErrFenced) {
		t.Errorf("bad append: %v, want its own error", got["bad"])
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fmt.Sprint(f.committed) != "[warmup a b]" {
		t.Errorf("committed %v, want [warmup a b]", f.committed)
	}
}

func TestAbandonedAppendIsNotWritten(t *testing.T) {
	f := &fakeDB{gate: make(chan struct{}), entered: make(chan struct{}, 100)}
	c, queued := newCommitter(t, f)

	go func() { _ = c.Append(t.Context(), &chat.AppendParams{ChatID: "busy"}) }()
	<-f.entered
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- c.Append(ctx, &chat.AppendParams{ChatID: "gone"}) }()
	waitQueued(t, queued, 1+1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Append: %v, want context.Canceled", err)
	}
	close(f.gate)
	if err := c.Append(t.Context(), &chat.AppendParams{ChatID: "after"}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fmt.Sprint(f.committed) != "[busy after]" {
		t.Fatalf("committed %v, want [busy after]", f.committed)
	}
}

func TestStopDrainsAndRefuses(t *testing.T) {
	f := &fakeDB{gate: make(chan struct{}), entered: make(chan struct{}, 100)}
	c := New(Config[*chat.AppendParams]{Commit: f.commit})
	if err := c.Stop(t.Context()); err != nil { // before Start: no-op
		t.Fatal(err)
	}
	c = New(Config[*chat.AppendParams]{Commit: f.commit})
	queued := make(chan struct{}, 10)
	c.enqueued = func() { queued <- struct{}{} }
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 3)
	go func() { errs <- c.Append(t.Context(), &chat.AppendParams{ChatID: "x"}) }()
	<-f.entered
	for _, id := range []string{"y", "z"} {
		go func() { errs <- c.Append(t.Context(), &chat.AppendParams{ChatID: id}) }()
	}
	waitQueued(t, queued, 1+2)
	stopped := make(chan error, 1)
	go func() { stopped <- c.Stop(context.Background()) }()
	close(f.gate)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatalf("queued append failed on Stop: %v", err)
		}
	}
	if err := c.Append(t.Context(), &chat.AppendParams{ChatID: "late"}); !errors.Is(err, ErrStopped) {
		t.Fatalf("Append after Stop: %v, want ErrStopped", err)
	}
	if err := c.Stop(t.Context()); err != nil { // twice
		t.Fatal(err)
	}
}

// With InFlight 2, an append that arrives while a batch is committing goes
// out at once in a second batch instead of waiting; and Stop ends every
// loop (goleak checks that none is left).
func TestInFlightBatchesCommitConcurrently(t *testing.T) {
	f := &fakeDB{gate: make(chan struct{}), entered: make(chan struct{}, 100)}
	c := New(Config[*chat.AppendParams]{Commit: f.commit, InFlight: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 3)
	go func() { errs <- c.Append(t.Context(), &chat.AppendParams{ChatID: "a"}) }()
	<-f.entered
	go func() { errs <- c.Append(t.Context(), &chat.AppendParams{ChatID: "b"}) }()
	select {
	case <-f.entered: // the second batch is committing while the first still is
	case <-time.After(10 * time.Second):
		t.Fatal("the second append waited for the first batch's commit")
	}
	close(f.gate)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Append(t.Context(), &chat.AppendParams{ChatID: "late"}); !errors.Is(err, ErrStopped) {
		t.Fatalf("Append after Stop: %v, want ErrStopped", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fmt.Sprint(f.batches) != "[1 1]" {
		t.Fatalf("batches %v, want two of one", f.batches)
	}
}

// An append that asks for a trace gets its batch's times and size; one that
// does not is left alone.
func TestTraceStampsTheBatch(t *testing.T) {
	f := &fakeDB{gate: make(chan struct{}), entered: make(chan struct{}, 100)}
	c, queued := newCommitter(t, f)
	errs := make(chan error, 4)
	go func() { errs <- c.Append(t.Context(), &chat.AppendParams{ChatID: "first"}) }()
	<-f.entered
	traces := []*chat.AppendTrace{{}, {}, nil}
	before := time.Now()
	for i, tr := range traces {
		go func() { errs <- c.Append(t.Context(), &chat.AppendParams{ChatID: fmt.Sprint("c", i), Trace: tr}) }()
	}
	waitQueued(t, queued, 1+len(traces))
	f.gate <- struct{}{}
	f.gate <- struct{}{}
	for range 1 + len(traces) {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i, tr := range traces[:2] {
		if tr.Batch != 3 || tr.Taken.Before(before) || tr.Committed.Before(tr.Taken) {
			t.Errorf("trace %d: %+v, want a batch of 3 taken after %v and committed after it was taken", i, *tr, before)
		}
	}
}

// Appenders that append again as soon as their batch is answered go out
// together in the next batch, not the first of them alone and the rest in
// the batch after (see gather). On one processor the order of goroutines
// is fixed, which makes the batches' sizes exact.
func TestAnsweredAppendersGoInTheNextBatchTogether(t *testing.T) {
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(1))
	f := &fakeDB{}
	c, _ := newCommitter(t, f)
	const appenders, rounds = 6, 4
	var wg sync.WaitGroup
	for i := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if err := c.Append(t.Context(), &chat.AppendParams{ChatID: fmt.Sprint("c", i)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	// The first batch may hold only the first appender: the others had
	// not run yet. After it, a batch is every appender, or nearly: the
	// runtime's own goroutines (the collector's workers, a timer) may run
	// in between and leave one appender to the batch after. Without
	// gather every batch is one append, 24 in all; with it, 4 to 6 (5 nine
	// times in ten). The bound is 8, so that a batch of the ones left
	// behind does not fail the test and a gather that stops working does.
	if len(f.batches) > 2*rounds {
		t.Fatalf("%d appends in %d batches %v, want at most %d", appenders*rounds, len(f.batches), f.batches, 2*rounds)
	}
	t.Logf("%d appends in %d batches %v", appenders*rounds, len(f.batches), f.batches)
}
