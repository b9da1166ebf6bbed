package chat_test

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

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/sandbox"
	"github.com/agentd/agentd/internal/spec"
)

// Append points of a chat, as faultStore recognises them.
const (
	pointModel       = "model"       // a model reply
	pointTool        = "tool"        // tool results
	pointCode        = "code"        // a code execution's reply
	pointInput       = "input"       // an input request
	pointTermination = "termination" // the chat's terminal event
)

// Faults faultStore injects into an append.
const (
	faultTimeoutBefore = "timeout before the write"    // the append times out and writes nothing
	faultTimeoutAfter  = "timeout after the write"     // the append commits, but its caller hears a timeout
	faultFence         = "fenced"                      // the store fences the append
	faultLoseLease     = "lease lost to another owner" // another owner claims the chat first: the real store fences
	faultRejectData    = "data rejected"               // the real store refuses a value (a NUL in jsonb)
)

// faultStore is the real Postgres store with one fault injected into the
// first append of a chosen point, per chat. Every other call goes through.
type faultStore struct {
	chat.Store
	owner func() string

	mu    sync.Mutex
	plans map[string]*faultPlan // by chat name, until created
	byID  map[string]*faultPlan
}

type faultPlan struct {
	point, fault string
	done         bool
}

func (f *faultStore) CreateChat(ctx context.Context, p *chat.CreateChatParams) (*chat.Chat, bool, error) {
	f.mu.Lock()
	if plan, ok := f.plans[p.Name]; ok {
		f.byID[p.ID] = plan
	}
	f.mu.Unlock()
	return f.Store.CreateChat(ctx, p)
}

// pointOf names the append point of an append; a terminal event wins.
func pointOf(evs []chat.Event) string {
	point := ""
	for _, e := range evs {
		switch {
		case e.Type.Terminal():
			return pointTermination
		case e.Type == chat.EventInputRequested:
			point = pointInput
		case e.Type == chat.EventMessage && e.Role == chat.RoleTool:
			point = pointTool
		case e.Type == chat.EventMessage && strings.Contains(string(e.Data), `"code_result"`):
			point = pointCode
		case e.Type == chat.EventMessage && strings.Contains(string(e.Data), `"kind":"model"`):
			point = pointModel
		}
	}
	return point
}

func (f *faultStore) Append(ctx context.Context, p *chat.AppendParams) error {
	f.mu.Lock()
	plan := f.byID[p.ChatID]
	inject := plan != nil && !plan.done && pointOf(p.Events) == plan.point
	if inject {
		plan.done = true
	}
	f.mu.Unlock()
	if !inject {
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
		// this one, then hands it back at once.
		if err := f.Store.ReleaseLease(ctx, chat.Lease{ChatID: p.ChatID, Epoch: p.Epoch}, f.owner()); err != nil {
			return err
		}
		now := time.Now()
		taken, err := f.Store.Claim(ctx, &chat.ClaimParams{Owner: "thief", Now: now, LeaseUntil: now.Add(time.Minute), Limit: 100})
		if err != nil {
			return err
		}
		for _, c := range taken {
			defer f.Store.ReleaseLease(context.WithoutCancel(ctx), chat.Lease{ChatID: c.ID, Epoch: c.Epoch}, "thief")
		}
		// Without the caller's deadline: the outcome under test is the
		// store's answer, not a timeout of a slow machine.
		return f.Store.Append(context.WithoutCancel(ctx), p) // fenced by the real store
	case faultRejectData:
		q := *p
		q.Events = slices.Clone(p.Events)
		q.Events[0].Data = json.RawMessage(`{"injected":"\u0000",` + strings.TrimPrefix(string(q.Events[0].Data), "{"))
		return f.Store.Append(context.WithoutCancel(ctx), &q) // refused by the real store
	}
	panic(plan.fault)
}

// watchedSandboxes is the real sandbox manager; it records each release
// and whether the chat was terminal in the store at that moment.
type watchedSandboxes struct {
	chat.Sandboxes
	store chat.Store

	mu       sync.Mutex
	released map[string]bool
	early    []string
}

func (w *watchedSandboxes) Release(ctx context.Context, chatID string) error {
	c, err := w.store.GetChat(ctx, "", chatID)
	w.mu.Lock()
	w.released[chatID] = true
	if err != nil || !c.Status.Terminal() {
		w.early = append(w.early, chatID)
	}
	w.mu.Unlock()
	return w.Sandboxes.Release(ctx, chatID)
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

// TestFaultsAtEveryAppendPoint: a fault at any append point of a chat —
// a timeout with or without the write, a fence, a lease lost to another
// owner, data the store refuses — never leaves a gap or a duplicate in the
// log, every chat ends, and a chat's sandbox is only removed once the
// store holds its terminal status (the code turn after the fault still
// finds the file the earlier one wrote). Refused data fails the chat with
// an error that does not hold the data; every other fault only delays it.
func TestFaultsAtEveryAppendPoint(t *testing.T) {
	pg := openPostgres(t)
	ts := newToolServer(t)
	boxes := &watchedSandboxes{Sandboxes: openBwrap(t), store: pg, released: map[string]bool{}}
	fs := &faultStore{Store: pg, plans: map[string]*faultPlan{}, byID: map[string]*faultPlan{}}
	rt := newRuntime(t, fs, withTools(t), func(c *chat.RuntimeConfig) {
		c.Sandboxes, c.AppendTimeout = boxes, time.Second
	})
	fs.owner = rt.Owner

	points := []string{pointModel, pointTool, pointCode, pointInput, pointTermination}
	faults := []string{faultTimeoutBefore, faultTimeoutAfter, faultFence, faultLoseLease, faultRejectData}
	type run struct {
		point, fault string
		id           string
	}
	var runs []*run
	for _, point := range points {
		for _, fault := range faults {
			name := point + "/" + fault
			fs.mu.Lock()
			fs.plans[name] = &faultPlan{point: point, fault: fault}
			fs.mu.Unlock()
			runs = append(runs, &run{point: point, fault: fault, id: create(t, rt, faultSpec(name, ts.URL)).ID})
		}
	}
	for _, r := range runs {
		t.Run(r.point+"/"+r.fault, func(t *testing.T) {
			c := answerUntilTerminal(t, rt, r.id, 60*time.Second)
			fs.mu.Lock()
			injected := fs.byID[r.id].done
			fs.mu.Unlock()
			if !injected {
				t.Fatalf("the fault was never injected; chat %s %s %q", c.Status, c.StopReason, c.StopDetail)
			}
			evs, err := pg.ListEvents(context.Background(), &chat.ListEventsParams{ChatID: r.id, Limit: 10000})
			if err != nil {
				t.Fatal(err)
			}
			checkDenseOnce(t, evs)
			if r.fault == faultRejectData {
				if c.Status != chat.StatusFailed || !strings.Contains(c.Error, "refused") || strings.Contains(c.Error, "\x00") || strings.Contains(c.Error, "injected") {
					t.Fatalf("refused data: chat %s, error %q", c.Status, c.Error)
				}
			} else {
				if c.Status != chat.StatusCompleted || c.StopReason != chat.StopTextMention {
					t.Fatalf("chat %s %s %q %q", c.Status, c.StopReason, c.StopDetail, c.Error)
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
			deadline := time.Now().Add(10 * time.Second)
			for {
				boxes.mu.Lock()
				released := boxes.released[r.id]
				boxes.mu.Unlock()
				if released || time.Now().After(deadline) {
					if !released {
						t.Fatal("the sandbox of the ended chat was not released")
					}
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	boxes.mu.Lock()
	defer boxes.mu.Unlock()
	if len(boxes.early) > 0 {
		t.Fatalf("sandboxes released while their chat was not terminal in the store: %v", boxes.early)
	}
}

// answerUntilTerminal answers every input request with "go on" until the
// chat ends.
func answerUntilTerminal(t *testing.T, rt *chat.Runtime, id string, within time.Duration) *chat.Chat {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		c, err := rt.Get(context.Background(), "", id)
		if err != nil {
			t.Fatal(err)
		}
		if c.Status.Terminal() {
			return c
		}
		if c.Status == chat.StatusAwaitingInput && len(c.InputResponse) == 0 {
			var p chat.PendingInput
			if err := json.Unmarshal(c.PendingInput, &p); err == nil {
				content := "go on"
				if err := rt.Input(context.Background(), "", id, &chat.Input{RequestID: p.RequestID, Content: &content}); err != nil && !errors.Is(err, chat.ErrNoPendingInput) {
					t.Fatal(err)
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, _ := rt.Get(context.Background(), "", id)
	t.Fatalf("chat %s still %s after %v", id, c.Status, within)
	return nil
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
	stores := map[string]chat.Store{"sqlite": openStore(t), "postgres": openPostgres(t)}
	for name, db := range stores {
		rt := newRuntime(t, db)
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
