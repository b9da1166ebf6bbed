package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/runtime/runtimetest"
	"github.com/agentd/agentd/internal/spec"
)

// systemRecorder is a model that answers "ok" and records the system
// message of each call; a call waits while hold is set, until it is
// closed.
type systemRecorder struct {
	chat.ModelClient
	mu      sync.Mutex
	systems []string
	hold    chan struct{}
	called  chan struct{}
}

func (m *systemRecorder) Complete(ctx context.Context, req *chat.ModelRequest) (*chat.ModelResponse, error) {
	m.mu.Lock()
	if len(req.Messages) > 0 && req.Messages[0].Role == chat.RoleSystem {
		m.systems = append(m.systems, req.Messages[0].Content)
	}
	hold := m.hold
	m.mu.Unlock()
	m.called <- struct{}{}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &chat.ModelResponse{Content: "ok"}, nil
}

func (m *systemRecorder) system(i int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.systems[i]
}

func varsOf(t *testing.T, c *chat.Chat) string {
	t.Helper()
	return string(c.ContextVariables)
}

// TestContextVariablesBetweenRuns: a chat's variables are the spec's, then
// what a PATCH between runs makes of them; a PATCH during a run is
// refused and changes nothing; the next run's model calls render them;
// forks copy them as of the fork point.
func TestContextVariablesBetweenRuns(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	model := &systemRecorder{called: make(chan struct{}, 10)}
	rt := runtimetest.New(t, db, func(c *runtime.Config) { c.Models = model })
	ctx := context.Background()
	c := create(t, rt, `{"task": "t", "max_round": 1, "context_variables": {"customer": "Ada", "tier": "gold", "severity": null},
		"agents": [{"name": "sales", "type": "assistant", "model": {"provider": "replay", "responses": ["unused"]},
		            "system_message_template": "Customer {customer} ({tier}), severity {severity}."}]}`)
	if got := varsOf(t, c); got != `{"customer":"Ada","tier":"gold"}` {
		t.Fatalf("created with variables %s", got)
	}
	waitTerminal(t, rt, c.ID, 5*time.Second)
	if got := model.system(0); got != "Customer Ada (gold), severity ." {
		t.Fatalf("run 1's system message %q", got)
	}

	// Problems are refused with their paths, and change nothing.
	var verr *spec.ValidationError
	if _, err := rt.PatchContext(ctx, "", c.ID, json.RawMessage(`[1]`)); !errors.As(err, &verr) || verr.Problems[0].Path != "/context_variables" {
		t.Fatalf("a list: %v", err)
	}
	big := fmt.Sprintf(`{"big": %q}`, strings.Repeat("x", spec.MaxContextBytes-20))
	if _, err := rt.PatchContext(ctx, "", c.ID, json.RawMessage(big)); !errors.As(err, &verr) || !strings.Contains(verr.Problems[0].Message, "over 65536") {
		t.Fatalf("too large with the chat's variables: %v", err)
	}
	p, err := rt.PatchContext(ctx, "", c.ID, json.RawMessage(`{"tier": null, "severity": 9}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := varsOf(t, p); got != `{"customer":"Ada","severity":9}` {
		t.Fatalf("patched variables %s", got)
	}
	got, err := rt.Get(ctx, "", c.ID)
	if err != nil || varsOf(t, got) != `{"customer":"Ada","severity":9}` || got.LastSeq != p.LastSeq {
		t.Fatalf("get after the patch: %s at seq %d, %v", got.ContextVariables, got.LastSeq, err)
	}
	patchSeq := p.LastSeq
	evs, _ := db.ListEvents(ctx, &chat.ListEventsParams{ChatID: c.ID, After: patchSeq - 1, Limit: 10})
	var u chat.ContextUpdate
	if len(evs) != 1 || evs[0].Type != chat.EventContextUpdated || json.Unmarshal(evs[0].Data, &u) != nil ||
		u.By.Client != chat.ContextByPatch || len(u.Removed) != 1 || u.Removed[0] != "tier" || string(u.Set["severity"]) != "9" {
		t.Fatalf("the patch's event: %+v (%s)", evs, evs[0].Data)
	}

	// During a run: refused, nothing written.
	model.mu.Lock()
	model.hold = make(chan struct{})
	model.mu.Unlock()
	submitRun(t, rt, c.ID, `{"task": "again"}`)
	<-model.called
	<-model.called
	if _, err := rt.PatchContext(ctx, "", c.ID, json.RawMessage(`{"x": 1}`)); !errors.Is(err, chat.ErrRunActive) {
		t.Fatalf("patch during a run: %v", err)
	}
	close(model.hold)
	waitRun(t, rt, c.ID, 2)
	if got := model.system(1); got != "Customer Ada (), severity 9." {
		t.Fatalf("run 2's system message %q", got)
	}
	got, _ = rt.Get(ctx, "", c.ID)
	if varsOf(t, got) != `{"customer":"Ada","severity":9}` {
		t.Fatalf("after run 2: %s", got.ContextVariables)
	}

	// Forks copy the variables as of their seq.
	for at, want := range map[int64]string{patchSeq - 1: `{"customer":"Ada","tier":"gold"}`, patchSeq: `{"customer":"Ada","severity":9}`} {
		f, err := rt.Fork(ctx, "", c.ID, "", spec.DecodeForkRequest(fmt.Appendf(nil, `{"at_seq": %d}`, at)))
		if err != nil {
			t.Fatal(err)
		}
		if varsOf(t, f) != want {
			t.Errorf("fork at %d: %s, want %s", at, f.ContextVariables, want)
		}
		if g, _ := rt.Get(ctx, "", f.ID); varsOf(t, g) != want {
			t.Errorf("fork at %d read back: %s, want %s", at, g.ContextVariables, want)
		}
	}

	// A run's variables merge as it starts, before its task; a fork's
	// right after the copy, and its run's after those.
	submitRun(t, rt, c.ID, `{"task": "third", "context_variables": {"tier": "silver", "customer": null}}`)
	waitRun(t, rt, c.ID, 3)
	if got := model.system(2); got != "Customer  (silver), severity 9." {
		t.Fatalf("run 3's system message %q", got)
	}
	f, err := rt.Fork(ctx, "", c.ID, "", spec.DecodeForkRequest([]byte(`{"context_variables": {"severity": 2}, "run": {"task": "t", "context_variables": {"customer": "Bo"}}}`)))
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, rt, f.ID, 4)
	if got := model.system(3); got != "Customer Bo (silver), severity 2." {
		t.Fatalf("the fork's run's system message %q", got)
	}
	evs, _ = db.ListEvents(ctx, &chat.ListEventsParams{ChatID: f.ID, Type: chat.EventContextUpdated, Limit: 100})
	var by []string
	for _, e := range evs {
		var u chat.ContextUpdate
		_ = json.Unmarshal(e.Data, &u)
		by = append(by, u.By.Client)
	}
	if strings.Join(by, ",") != "create,patch,run,fork,run" {
		t.Errorf("the fork's changes came from %v", by)
	}
	// Too large with the chat's variables: refused when posted.
	_, _, err = rt.SubmitRun(ctx, "", c.ID, "", spec.DecodeRunRequest([]byte(`{"context_variables": `+big+`}`)))
	if !errors.As(err, &verr) {
		t.Fatalf("a run over the limit: %v", err)
	}
}
