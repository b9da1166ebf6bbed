package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/runtime/runtimetest"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/sandbox"
	"github.com/agentd/agentd/internal/spec"
)

// Append points of a chat: the kinds of event an append may hold, as
// faultStore recognises them. One append may hold several: a chat's
// chat.running goes with its first reply, a human's answer with the
// chat.running that resumes the chat, the last code reply with the
// terminal event.
const (
	pointRunning     = "running"     // chat.running: the chat starts, or goes on after an answer
	pointSelection   = "selection"   // exec's speaker.selected, flushed alone while its code runs
	pointModel       = "model"       // a model reply
	pointTool        = "tool"        // tool results
	pointCode        = "code"        // a code execution's reply
	pointInput       = "input"       // an input request
	pointHuman       = "human"       // a human's answer
	pointTermination = "termination" // the chat's terminal event
)

var allPoints = []string{pointRunning, pointSelection, pointModel, pointTool, pointCode, pointInput, pointHuman, pointTermination}

// Faults faultStore injects into an append.
const (
	faultTimeoutBefore = "timeout before the write"    // the append times out and writes nothing
	faultTimeoutAfter  = "timeout after the write"     // the append commits, but its caller hears a timeout
	faultFence         = "fenced"                      // the store fences the append
	faultLoseLease     = "lease lost to another owner" // another owner claims the chat first: the real store fences
	faultRejectData    = "data rejected"               // the real store refuses a value (data that is not JSON)
)

var allFaults = []string{faultTimeoutBefore, faultTimeoutAfter, faultFence, faultLoseLease, faultRejectData}

// execAgent is the faultSpec agent whose selections are flushed alone: its
// code waits until its turn's selection is being appended (see waitFlush).
const execAgent = "exec"

// pointsOf returns, for each point an append holds, the index of its event.
func pointsOf(evs []chat.Event) map[string]int {
	at := map[string]int{}
	onlySelections := true
	for i, e := range evs {
		if e.Type != chat.EventSpeakerSelected {
			onlySelections = false
		}
		var d struct {
			Kind       string          `json:"kind"`
			Agent      string          `json:"agent"`
			CodeResult json.RawMessage `json:"code_result"`
		}
		_ = json.Unmarshal(e.Data, &d)
		point := ""
		switch {
		case e.Type.Terminal():
			point = pointTermination
		case e.Type == chat.EventChatRunning:
			point = pointRunning
		case e.Type == chat.EventInputRequested:
			point = pointInput
		case e.Type == chat.EventSpeakerSelected && d.Agent == execAgent:
			point = pointSelection
		case e.Type != chat.EventMessage:
		case e.Role == chat.RoleTool:
			point = pointTool
		case d.CodeResult != nil:
			point = pointCode
		case d.Kind == "model":
			point = pointModel
		case d.Kind == "human":
			point = pointHuman
		}
		if _, ok := at[point]; point != "" && !ok {
			at[point] = i
		}
	}
	if !onlySelections {
		delete(at, pointSelection) // a selection that went with its turn's output
	}
	return at
}

// faultStore is the real Postgres store with one fault injected into one
// append of each chat that has a plan: the first attempt of the append
// whose event of the plan's point has the plan's seq (every attempt, for
// refused data: the store would refuse the same events again). Every
// other call goes through. It also tells waitFlush when exec's selection
// is being appended alone.
type faultStore struct {
	chat.Store
	owner func() string

	// claims is held for writing while the other owner claims, so that
	// the runtime's own claims cannot take the chat first.
	claims sync.RWMutex

	mu    sync.Mutex
	plans map[string]*faultPlan // by chat name, until created
	byID  map[string]*faultPlan
	// flushes are the attempts to append exec's selection alone, by chat;
	// changed is closed (and replaced) at each.
	flushes map[string][]*flushAttempt
	changed chan struct{}
}

// faultPlan is one chat's fault, and what became of it.
type faultPlan struct {
	point, fault string
	seq          int64
	// done: the fault was injected. stolen: the other owner's claim took
	// the chat; fenced: the real store then refused the append as fenced.
	done, stolen, fenced bool
}

type flushAttempt struct {
	seq      int64
	consumed bool
}

func newFaultStore(s chat.Store) *faultStore {
	return &faultStore{Store: s, plans: map[string]*faultPlan{}, byID: map[string]*faultPlan{},
		flushes: map[string][]*flushAttempt{}, changed: make(chan struct{})}
}

func (f *faultStore) plan(name string, p *faultPlan) {
	f.mu.Lock()
	f.plans[name] = p
	f.mu.Unlock()
}

func (f *faultStore) CreateChat(ctx context.Context, p *chat.CreateChatParams) (*chat.Chat, bool, error) {
	f.mu.Lock()
	if plan, ok := f.plans[p.Name]; ok {
		f.byID[p.ID] = plan
	}
	f.mu.Unlock()
	return f.Store.CreateChat(ctx, p)
}

func (f *faultStore) Claim(ctx context.Context, p *chat.ClaimParams) ([]*chat.Chat, error) {
	f.claims.RLock()
	defer f.claims.RUnlock()
	return f.Store.Claim(ctx, p)
}

func (f *faultStore) Append(ctx context.Context, p *chat.AppendParams) error {
	at := pointsOf(p.Events)
	f.mu.Lock()
	if i, ok := at[pointSelection]; ok {
		f.flushes[p.ChatID] = append(f.flushes[p.ChatID], &flushAttempt{seq: p.Events[i].Seq})
		close(f.changed)
		f.changed = make(chan struct{})
	}
	plan := f.byID[p.ChatID]
	target := -1
	if plan != nil && (!plan.done || plan.fault == faultRejectData) {
		if i, ok := at[plan.point]; ok && p.Events[i].Seq == plan.seq {
			target, plan.done = i, true
		}
	}
	f.mu.Unlock()
	if target < 0 {
		return f.Store.Append(ctx, p)
	}
	switch plan.fault {
	case faultTimeoutBefore:
		<-ctx.Done()
		return ctx.Err()
	case faultTimeoutAfter:
		if err := f.Store.Append(context.WithoutCancel(ctx), p); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	case faultFence:
		return fmt.Errorf("injected: %w", chat.ErrFenced)
	case faultLoseLease:
		// Another replica takes the chat over between our last write and
		// this one, then hands it back at once. Without the caller's
		// deadline: the outcome under test is the store's answer, not a
		// timeout of a slow machine.
		ctx := context.WithoutCancel(ctx)
		f.claims.Lock()
		err := f.Store.ReleaseLease(ctx, chat.Lease{ChatID: p.ChatID, Epoch: p.Epoch}, f.owner())
		var taken []*chat.Chat
		if err == nil {
			now := time.Now()
			taken, err = f.Store.Claim(ctx, &chat.ClaimParams{Owner: "thief", Now: now, LeaseUntil: now.Add(time.Minute), Limit: 100})
		}
		f.claims.Unlock()
		if err != nil {
			return err
		}
		stolen := false
		for _, c := range taken {
			stolen = stolen || c.ID == p.ChatID
			defer f.Store.ReleaseLease(ctx, chat.Lease{ChatID: c.ID, Epoch: c.Epoch}, "thief")
		}
		err = f.Store.Append(ctx, p) // fenced by the real store
		f.mu.Lock()
		plan.stolen, plan.fenced = stolen, errors.Is(err, chat.ErrFenced)
		f.mu.Unlock()
		return err
	case faultRejectData:
		q := *p
		q.Events = slices.Clone(p.Events)
		q.Events[target].Data = json.RawMessage(`{"injected":,` + strings.TrimPrefix(string(q.Events[target].Data), "{"))
		return f.Store.Append(context.WithoutCancel(ctx), &q) // refused by the real store
	}
	panic(plan.fault)
}

// waitFlush is the flush gate: it returns once exec's selection of the
// turn in progress is durable, or an attempt to append it alone has begun
// since the gate last let a turn through. Each selection the worker holds
// is flushed once its hold delay ends, and the worker, blocked here, cannot
// take it back first; so exec's selections are always appended alone, and
// the selection point is the same append in every run.
func (f *faultStore) waitFlush(ctx context.Context, chatID string) error {
	evs, err := f.Store.ListEvents(ctx, &chat.ListEventsParams{ChatID: chatID, Limit: 10000})
	if err != nil {
		return err
	}
	if len(evs) == 0 {
		return fmt.Errorf("chat %s has no log", chatID)
	}
	last := evs[len(evs)-1]
	want := last.Seq + 1 // held: the selection comes next
	if _, ok := pointsOf([]chat.Event{last})[pointSelection]; ok {
		want = last.Seq // durable, flushed by this turn or an earlier worker
	}
	deadline := time.After(30 * time.Second)
	for {
		f.mu.Lock()
		for _, a := range f.flushes[chatID] {
			if a.seq == want && !a.consumed {
				a.consumed = true
				f.mu.Unlock()
				return nil
			}
		}
		changed := f.changed
		f.mu.Unlock()
		if want == last.Seq {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("test gate: exec's selection seq %d was never appended alone", want)
		}
	}
}

// watchedSandboxes is the real sandbox manager; it records each release
// and whether the chat was terminal in the store at that moment, and
// holds exec's code until its selection is being appended (waitFlush).
type watchedSandboxes struct {
	chat.Sandboxes
	store *faultStore

	mu       sync.Mutex
	released map[string]chan struct{}
	early    []string
}

func (w *watchedSandboxes) Exec(ctx context.Context, req *chat.ExecRequest) (*chat.ExecResult, error) {
	if err := w.store.waitFlush(ctx, req.ChatID); err != nil {
		return nil, err
	}
	return w.Sandboxes.Exec(ctx, req)
}

func (w *watchedSandboxes) Release(ctx context.Context, chatID string) error {
	c, err := w.store.GetChat(ctx, "", chatID)
	w.mu.Lock()
	if err != nil || !c.Status.Terminal() {
		w.early = append(w.early, chatID)
	}
	ch := w.releasedLocked(chatID)
	select {
	case <-ch:
	default:
		close(ch)
	}
	w.mu.Unlock()
	return w.Sandboxes.Release(ctx, chatID)
}

// releasedCh is closed once the chat's sandbox is released.
func (w *watchedSandboxes) releasedCh(chatID string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.releasedLocked(chatID)
}

func (w *watchedSandboxes) releasedLocked(chatID string) chan struct{} {
	ch, ok := w.released[chatID]
	if !ok {
		ch = make(chan struct{})
		w.released[chatID] = ch
	}
	return ch
}

func openBwrap(t *testing.T) sandbox.Manager {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	m, err := sandbox.Open(context.Background(), sandbox.Config{Backend: sandbox.BackendBwrap, WorkRoot: root,
		DefaultMemoryMB: 256, DefaultCPUs: 1, DefaultTimeout: 20 * time.Second, PidsLimit: 64, OutputLimit: 64 << 10})
	if err != nil {
		if os.Getenv("CI") == "true" || !errors.Is(err, sandbox.ErrNoSandbox) {
			t.Fatalf("open bwrap sandbox: %v", err)
		}
		t.Skipf("bwrap sandbox unavailable: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// faultSpec touches every append point: a tool call and its results, a
// code block that writes a file in the sandbox, a human's answer, a code
// block that reads the file back, and the termination on its output.
func faultSpec(name, toolURL string) string {
	return fmt.Sprintf(`{"name": %q, "task": "write then read", "max_round": 8,
		"tools": [%s],
		"agents": [
			{"name": "coder", "type": "assistant", "tools": ["lookup_id"], "reflect_on_tool_use": true,
			 "model": {"provider": "replay", "responses": [
				{"tool_calls": [{"name": "lookup_id", "arguments": {"name": "x"}}]},
				"`+"```python\\nopen('f.txt', 'w').write('forty-two')\\nprint('written')\\n```"+`",
				"`+"```python\\nprint(open('f.txt').read())\\n```"+`"]}},
			{"name": "exec", "type": "user_proxy", "human_input_mode": "NEVER", "code_execution": {}},
			{"name": "human", "type": "user_proxy", "human_input_mode": "ALWAYS"}],
		"termination": {"text_mention": {"text": "Code output: forty-two", "sources": ["exec"]}}}`, name, httpTool("lookup_id", toolURL))
}

// TestFaultsAtEveryAppendPoint: a fault at any append of a chat — a
// timeout with or without the write, a fence, a lease lost to another
// owner, data the store refuses — never leaves a gap or a duplicate in the
// log, every chat ends, and a chat's sandbox is only removed once the
// store holds its terminal status (the code turn after the fault still
// finds the file the earlier one wrote). Refused data fails the chat with
// an error that does not hold the data; every other fault only delays it.
//
// The appends faulted are every append of a fault-free run of the same
// chat, named by point and seq: chat.running at the start and on the
// answer, each of exec's selections flushed alone, each model reply, the
// tool results, each code reply, the input request, the human's answer and
// the terminal event. Whatever the fault, the human's answer is in the log
// exactly once, the stored answer is cleared, and the chat never asks
// again; a lost lease was really taken by the other owner, and the store
// fenced the append.
func TestFaultsAtEveryAppendPoint(t *testing.T) {
	pg := runtimetest.OpenPostgres(t)
	ts := newToolServer(t)
	fs := newFaultStore(pg)
	boxes := &watchedSandboxes{Sandboxes: openBwrap(t), store: fs, released: map[string]chan struct{}{}}
	rt := runtimetest.New(t, fs, withTools(t), func(c *runtime.Config) {
		// A selection is flushed alone as soon as it is held: exec's code
		// waits for that (waitFlush), every other turn goes on at once.
		c.Sandboxes, c.AppendTimeout, c.HoldSelection = boxes, time.Second, time.Millisecond
		// A worker hands its chat back itself, whatever the fault; a lease
		// that ran out on a busy machine would add faults of its own.
		c.LeaseDuration = time.Minute
	})
	fs.owner = rt.Owner
	ctx, cancel := context.WithCancel(context.Background())
	var drivers sync.WaitGroup
	t.Cleanup(func() { cancel(); drivers.Wait() })

	type run struct {
		name string
		plan *faultPlan
		id   string
		end  chan driven
	}
	start := func(name string, plan *faultPlan) *run {
		if plan != nil {
			fs.plan(name, plan)
		}
		r := &run{name: name, plan: plan, id: create(t, rt, faultSpec(name, ts.URL)).ID, end: make(chan driven, 1)}
		drivers.Add(1)
		go func() {
			defer drivers.Done()
			r.end <- drive(ctx, rt, r.id)
		}()
		return r
	}
	wait := func(t *testing.T, r *run) driven {
		t.Helper()
		select {
		case d := <-r.end:
			if d.err != nil {
				t.Fatal(d.err)
			}
			return d
		case <-time.After(2 * time.Minute):
			if c, err := rt.Get(context.Background(), "", r.id); err != nil {
				t.Fatalf("chat %s (%s) did not end: %v", r.id, r.name, err)
			} else {
				t.Fatalf("chat %s (%s) did not end: %s at seq %d, owner %q, epoch %d", r.id, r.name, c.Status, c.LastSeq, c.Owner, c.Epoch)
			}
			return driven{}
		}
	}

	// A fault-free run names the appends to fault: by the point and seq of
	// each event of its log (exec's selections were appended alone).
	healthy := start("healthy", nil)
	checkFaultRun(t, pg, boxes, healthy.id, "", wait(t, healthy))
	evs, err := pg.ListEvents(context.Background(), &chat.ListEventsParams{ChatID: healthy.id, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string][]int64{}
	for _, e := range evs {
		for point := range pointsOf([]chat.Event{e}) {
			seen[point] = append(seen[point], e.Seq)
		}
	}
	t.Logf("events of a fault-free run, by point: %v", seen)
	for _, point := range allPoints {
		if len(seen[point]) == 0 {
			t.Fatalf("a fault-free run made no append of point %s: %v", point, seen)
		}
	}

	var runs []*run
	for _, point := range allPoints {
		for _, seq := range seen[point] {
			for _, fault := range allFaults {
				name := fmt.Sprintf("%s@%d/%s", point, seq, fault)
				runs = append(runs, start(name, &faultPlan{point: point, seq: seq, fault: fault}))
			}
		}
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			d := wait(t, r)
			fs.mu.Lock()
			p := *r.plan
			fs.mu.Unlock()
			if !p.done {
				t.Fatalf("the fault was never injected; chat %s %s %q", d.chat.Status, d.chat.StopReason, d.chat.StopDetail)
			}
			if p.fault == faultLoseLease && (!p.stolen || !p.fenced) {
				t.Fatalf("lease lost: the other owner took the chat: %v; the store fenced the append: %v", p.stolen, p.fenced)
			}
			checkFaultRun(t, pg, boxes, r.id, p.fault, d)
		})
	}
	boxes.mu.Lock()
	defer boxes.mu.Unlock()
	if len(boxes.early) > 0 {
		t.Fatalf("sandboxes released while their chat was not terminal in the store: %v", boxes.early)
	}
}

// checkFaultRun checks how a chat of faultSpec ended under a fault ("" for
// none), from its record, its log and its sandbox.
func checkFaultRun(t *testing.T, pg chat.Store, boxes *watchedSandboxes, id, fault string, d driven) {
	t.Helper()
	c := d.chat
	evs, err := pg.ListEvents(context.Background(), &chat.ListEventsParams{ChatID: id, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	checkDenseOnce(t, evs)
	if len(c.InputResponse) > 0 || len(c.PendingInput) > 0 {
		t.Fatalf("chat %s ended with input response %s, pending input %s: both must be cleared", c.Status, c.InputResponse, c.PendingInput)
	}
	var requests, answers []string
	for _, e := range evs {
		var data struct {
			Kind      string `json:"kind"`
			RequestID string `json:"request_id"`
		}
		_ = json.Unmarshal(e.Data, &data)
		switch {
		case e.Type == chat.EventInputRequested:
			requests = append(requests, data.RequestID)
		case e.Type == chat.EventMessage && data.Kind == "human":
			answers = append(answers, data.RequestID+":"+e.Content)
		}
	}
	if len(requests) > 1 || len(d.answered) > 1 || len(answers) > 1 {
		t.Fatalf("the chat asked again: input requests %v, answered %v, answers in the log %v", requests, d.answered, answers)
	}
	if len(answers) == 1 && (len(requests) != 1 || answers[0] != requests[0]+":go on") {
		t.Fatalf("the answer in the log %v is not the answer to the request %v", answers, requests)
	}
	if fault == faultRejectData {
		if c.Status != chat.StatusFailed || !strings.Contains(c.Error, "refused") || strings.Contains(c.Error, "\x00") || strings.Contains(c.Error, "injected") {
			t.Fatalf("refused data: chat %s, error %q", c.Status, c.Error)
		}
	} else {
		if c.Status != chat.StatusCompleted || c.StopReason != chat.StopTextMention {
			t.Fatalf("chat %s %s %q %q", c.Status, c.StopReason, c.StopDetail, c.Error)
		}
		if len(requests) != 1 || len(answers) != 1 {
			t.Fatalf("input requests %v, answers %v: want one of each", requests, answers)
		}
		var got []string
		for _, e := range evs {
			if m, ok := chat.MessageFromEvent(e); ok {
				got = append(got, m.Name+":"+m.Role)
			}
		}
		want := []string{"user:user", "coder:assistant", "coder:tool", "coder:assistant", "exec:user", "human:user", "coder:assistant", "exec:user"}
		if !slices.Equal(got, want) {
			t.Fatalf("messages %v, want %v", got, want)
		}
		last, _ := chat.MessageFromEvent(evs[len(evs)-2])
		if last.CodeResult == nil || last.CodeResult.Output != "forty-two\n" {
			t.Fatalf("the second code block did not find the first one's file: %+v", last)
		}
	}
	select {
	case <-boxes.releasedCh(id):
	case <-time.After(10 * time.Second):
		t.Fatal("the sandbox of the ended chat was not released")
	}
}

// driven is how a chat ended under drive: the chat, the request ids drive
// answered, or the error that stopped it.
type driven struct {
	chat     *chat.Chat
	answered []string
	err      error
}

// drive answers each input request of a chat with "go on", once, as soon
// as the request is stored, until the chat ends. It wakes on the runtime's
// commit signals (and looks again every 100 ms: a worker that did not hear
// its append's outcome publishes nothing).
func drive(ctx context.Context, rt *runtime.Runtime, id string) driven {
	sig, done := rt.Subscribe(id)
	defer done()
	var answered []string
	for {
		c, err := rt.Get(ctx, "", id)
		if err != nil {
			return driven{err: err}
		}
		if c.Status.Terminal() {
			return driven{chat: c, answered: answered}
		}
		if c.Status == chat.StatusAwaitingInput && len(c.InputResponse) == 0 && len(c.PendingInput) > 0 {
			var p chat.PendingInput
			if err := json.Unmarshal(c.PendingInput, &p); err != nil {
				return driven{err: fmt.Errorf("pending input %s: %w", c.PendingInput, err)}
			}
			if !slices.Contains(answered, p.RequestID) {
				content := "go on"
				err := answerInput(rt, ctx, id, &chat.Input{RequestID: p.RequestID, Content: &content})
				switch {
				case err == nil:
					answered = append(answered, p.RequestID)
				case !errors.Is(err, chat.ErrNoPendingInput): // a worker still holds the chat: later
					return driven{err: fmt.Errorf("answer %s: %w", p.RequestID, err)}
				}
			}
		}
		select {
		case <-sig:
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return driven{err: ctx.Err()}
		}
	}
}

// checkDenseOnce: seqs 1..n, one terminal event and it is the last, and no
// message or tool result appears twice.
func checkDenseOnce(t *testing.T, evs []chat.Event) {
	t.Helper()
	seen := map[string]bool{}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: the log has a gap", i, e.Seq)
		}
		if e.Type.Terminal() != (i == len(evs)-1) {
			t.Fatalf("seq %d (%s): the terminal event must be the last, and there must be one", e.Seq, e.Type)
		}
		if e.Type != chat.EventMessage {
			continue
		}
		var d struct {
			Turn int    `json:"turn"`
			Kind string `json:"kind"`
		}
		_ = json.Unmarshal(e.Data, &d)
		key := fmt.Sprintf("%s/%s/%d/%s/%s", e.Name, e.Role, d.Turn, d.Kind, e.Content)
		for _, r := range e.ToolResponses {
			key += "/" + r.ToolCallID
		}
		if seen[key] {
			t.Fatalf("seq %d duplicates an earlier message: %s", e.Seq, key)
		}
		seen[key] = true
	}
}

// TestUnstorableSpecsAreRefusedAlikeOnBothStores: a spec holding a value
// one of the stores cannot hold is a validation error (422) on both, never
// stored by one and a 500 on the other.
func TestUnstorableSpecsAreRefusedAlikeOnBothStores(t *testing.T) {
	stores := map[string]chat.Store{"sqlite": runtimetest.OpenSQLite(t), "postgres": runtimetest.OpenPostgres(t)}
	for name, db := range stores {
		rt := runtimetest.New(t, db)
		for _, body := range []string{
			`{"task": "a\u0000b", "agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]}}]}`,
			`{"task": "t", "metadata": {"k": "\ud800"}, "agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]}}]}`,
			`{"task": "t", "metadata": {"n": 1e999999}, "agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]}}]}`,
			"{\"task\": \"\xff\", \"agents\": [{\"name\": \"a\", \"type\": \"assistant\", \"model\": {\"provider\": \"replay\", \"responses\": [\"x\"]}}]}",
		} {
			_, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: []byte(body)})
			var verr *spec.ValidationError
			if !errors.As(err, &verr) {
				t.Errorf("%s: create %q: err = %v, want a validation error", name, body, err)
			}
		}
	}
}
