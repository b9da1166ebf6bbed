package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/runtime/runtimetest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/spec"
)

// stoppableRuntime is a started runtime with leases of a minute, which a
// test stops itself (stopRuntime) to hand its chats to another.
func stoppableRuntime(t testing.TB, db chat.Store) *runtime.Runtime {
	t.Helper()
	models, _ := llm.New(llm.Config{})
	rt, err := runtime.New(runtime.Config{Store: db, Models: models, LeaseDuration: time.Minute, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rt
}

// stopRuntime stops rt as a shutdown does: its workers hand their chats
// back, to be continued from their logs.
func stopRuntime(t testing.TB, rt *runtime.Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitLog waits until the chat's log satisfies ok, or fails saying what
// it waited for.
func waitLog(t testing.TB, rt *runtime.Runtime, db chat.Store, id, what string, ok func([]chat.Event) bool) {
	t.Helper()
	sig, done := rt.Subscribe(id)
	defer done()
	for {
		evs, err := db.ListEvents(context.Background(), &chat.ListEventsParams{ChatID: id, Limit: 10000})
		if err != nil {
			t.Fatal(err)
		}
		if ok(evs) {
			return
		}
		select {
		case <-sig:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s never happened", what)
		}
	}
}

// waitTerminal waits until the chat is terminal (see waitFor).
func waitTerminal(t testing.TB, rt *runtime.Runtime, id string, within time.Duration) *chat.Chat {
	t.Helper()
	return waitFor(t, rt, id, within, chat.StatusCompleted, chat.StatusFailed, chat.StatusCancelled)
}

func messages(t testing.TB, db chat.Store, id string) []chat.Message {
	t.Helper()
	evs, err := db.ListEvents(context.Background(), &chat.ListEventsParams{ChatID: id, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	var out []chat.Message
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
		if m, ok := chat.MessageFromEvent(e); ok {
			out = append(out, m)
		}
	}
	return out
}

func twoAgentSpec(rounds, delayMS int, extra string) []byte {
	var a, b []string
	for i := range rounds {
		a = append(a, fmt.Sprintf(`{"content": "a-%d", "delay_ms": %d, "usage": {"prompt_tokens": 10, "completion_tokens": 2}}`, i, delayMS))
		b = append(b, fmt.Sprintf(`{"content": "b-%d", "delay_ms": %d, "usage": {"prompt_tokens": 1, "completion_tokens": 1}}`, i, delayMS))
	}
	return fmt.Appendf(nil, `{"task": "go", "max_round": %d,
		"agents": [{"name": "a", "type": "assistant", "model": "ma"}, {"name": "b", "type": "assistant", "model": "mb"}],
		"models": {"ma": {"provider": "replay", "responses": [%s]}, "mb": {"provider": "replay", "responses": [%s]}}%s}`,
		rounds, strings.Join(a, ","), strings.Join(b, ","), extra)
}

func contents(ms []chat.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Content)
	}
	return out
}

func TestRuntimeRunsAChatToMaxRound(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	c, created, err := rt.Create(context.Background(), &chat.CreateParams{Tenant: "t", Body: twoAgentSpec(4, 0, "")})
	if err != nil || !created {
		t.Fatal(created, err)
	}
	got := waitTerminal(t, rt, c.ID, 10*time.Second)
	if got.Status != chat.StatusCompleted || got.StopReason != chat.StopMaxRound || got.StopDetail != "Maximum number of turns 4 reached." {
		t.Fatalf("chat = %+v", got)
	}
	if got.Turns != 4 || got.MessageCount != 5 || got.PromptTokens != 22 || got.Owner != "" {
		t.Fatalf("turns %d, messages %d, prompt tokens %d, owner %q", got.Turns, got.MessageCount, got.PromptTokens, got.Owner)
	}
	if want := []string{"go", "a-0", "b-0", "a-1", "b-1"}; !slices.Equal(contents(messages(t, db, c.ID)), want) {
		t.Fatalf("messages = %v", contents(messages(t, db, c.ID)))
	}
}

func TestTerminationFiresInTheSameAppendAsItsMessage(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	sp := twoAgentSpec(5, 0, `, "termination": {"any": [{"text_mention": {"text": "b-1"}}, {"token_usage": {"max_prompt_tokens": 1000}}]}`)
	c, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: sp})
	if err != nil {
		t.Fatal(err)
	}
	got := waitTerminal(t, rt, c.ID, 10*time.Second)
	if got.StopReason != chat.StopTextMention || got.Turns != 4 {
		t.Fatalf("chat = %+v", got)
	}
	evs, _ := db.ListEvents(context.Background(), &chat.ListEventsParams{ChatID: c.ID, Limit: 100})
	last, prev := evs[len(evs)-1], evs[len(evs)-2]
	if last.Type != chat.EventChatCompleted || prev.Content != "b-1" || !last.CreatedAt.Equal(prev.CreatedAt) {
		t.Fatalf("log ends with %s at %v after %q at %v", last.Type, last.CreatedAt, prev.Content, prev.CreatedAt)
	}
}

func TestReplayExhaustedFailsTheChat(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	sp := []byte(`{"task": "go", "max_round": 3, "agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["only one"]}}]}`)
	c, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: sp})
	if err != nil {
		t.Fatal(err)
	}
	got := waitTerminal(t, rt, c.ID, 10*time.Second)
	if got.Status != chat.StatusFailed || got.StopReason != chat.StopError || !strings.Contains(got.Error, "replay") {
		t.Fatalf("chat = %+v", got)
	}
}

func TestStoppedRuntimeHandsChatsBackAndAnotherFinishesThem(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt1 := stoppableRuntime(t, db)
	var ids []string
	for range 5 {
		c, _, err := rt1.Create(context.Background(), &chat.CreateParams{Body: twoAgentSpec(6, 40, "")})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	// Let every chat get going, then stop mid-turn.
	sig, done := rt1.Subscribe(ids[4])
	for range 4 {
		<-sig
	}
	done()
	stopRuntime(t, rt1)
	// The leases were released on stop (a minute-long lease would otherwise
	// hold the chats), so a second runtime continues them at once.
	rt2 := runtimetest.New(t, db)
	for _, id := range ids {
		got := waitTerminal(t, rt2, id, 15*time.Second)
		if got.StopReason != chat.StopMaxRound {
			t.Fatalf("chat %s = %+v", id, got)
		}
		want := []string{"go", "a-0", "b-0", "a-1", "b-1", "a-2", "b-2"}
		if g := contents(messages(t, db, id)); !slices.Equal(g, want) {
			t.Fatalf("chat %s messages = %v, want %v", id, g, want)
		}
	}
}

func TestCancelCutsAnInFlightModelCall(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	c, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: twoAgentSpec(3, 10000, "")})
	if err != nil {
		t.Fatal(err)
	}
	sig, done := rt.Subscribe(c.ID)
	defer done()
	for {
		<-sig
		evs, _ := db.ListEvents(context.Background(), &chat.ListEventsParams{ChatID: c.ID, Limit: 100})
		if evs[len(evs)-1].Type == chat.EventSpeakerSelected {
			break
		}
	}
	start := time.Now()
	if _, changed, err := rt.Cancel(context.Background(), "", c.ID); err != nil || !changed {
		t.Fatal(changed, err)
	}
	got := waitTerminal(t, rt, c.ID, 5*time.Second)
	if got.Status != chat.StatusCancelled || got.StopReason != chat.StopCancelled || time.Since(start) > time.Second {
		t.Fatalf("chat = %+v after %v", got, time.Since(start))
	}
	if _, changed, _ := rt.Cancel(context.Background(), "", c.ID); changed {
		t.Fatal("cancelling a cancelled chat changed it")
	}
}

func TestCreateRejectsInvalidSpecWithEveryProblem(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	// An unknown field hides nothing else.
	_, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: []byte(`{"task": "", "agents": [], "bogus": 1}`)})
	var ve *spec.ValidationError
	if !asValidation(err, &ve) || len(ve.Problems) != 3 || ve.Problems[0].Path != "/bogus" {
		t.Fatalf("err = %v", err)
	}
	_, _, err = rt.Create(context.Background(), &chat.CreateParams{Body: []byte(`{"task": "", "agents": []}`)})
	if !asValidation(err, &ve) || len(ve.Problems) != 2 {
		t.Fatalf("err = %v", err)
	}
	chats, _, _ := rt.List(context.Background(), &chat.ListChatsParams{Limit: 10})
	if len(chats) != 0 {
		t.Fatalf("rejected specs created %d chats", len(chats))
	}
}

func asValidation(err error, target **spec.ValidationError) bool {
	ve, ok := err.(*spec.ValidationError)
	if ok {
		*target = ve
	}
	return ok
}

func TestMetricsCountTurnsAndReportStatusesFromTheStore(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	reg := prometheus.NewRegistry()
	rt := runtimetest.New(t, db, func(c *runtime.Config) { c.Registerer = reg })
	c, _, _ := rt.Create(context.Background(), &chat.CreateParams{Body: twoAgentSpec(2, 0, "")})
	waitTerminal(t, rt, c.ID, 5*time.Second)
	want := `
# HELP agentd_chats Chats in the store, by status (refreshed at most every 15 s by default).
# TYPE agentd_chats gauge
agentd_chats{status="awaiting_input"} 0
agentd_chats{status="cancelled"} 0
agentd_chats{status="completed"} 1
agentd_chats{status="failed"} 0
agentd_chats{status="queued"} 0
agentd_chats{status="running"} 0
# HELP agentd_turns_total Agent turns completed.
# TYPE agentd_turns_total counter
agentd_turns_total 2
# HELP agentd_messages_appended_total Messages appended to chat logs by workers.
# TYPE agentd_messages_appended_total counter
agentd_messages_appended_total 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "agentd_chats", "agentd_turns_total", "agentd_messages_appended_total"); err != nil {
		t.Fatal(err)
	}
}

// panickingModel is a model client whose every call panics, standing in for
// a bug anywhere below a worker.
type panickingModel struct{ chat.ModelClient }

func (panickingModel) Complete(context.Context, *chat.ModelRequest) (*chat.ModelResponse, error) {
	panic("model client bug")
}

func TestAPanickingWorkerFailsItsChatNotTheServer(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db, func(c *runtime.Config) { c.Models = panickingModel{} })
	c := create(t, rt, string(twoAgentSpec(2, 0, "")))
	got := waitTerminal(t, rt, c.ID, 5*time.Second)
	if got.Status != chat.StatusFailed || got.Error != "internal error: model client bug" {
		t.Fatalf("chat = %+v", got)
	}
	// The runtime goes on serving: a chat that needs no model completes.
	c = create(t, rt, `{"task": "t", "max_round": 1, "agents": [{"name": "p", "type": "user_proxy", "human_input_mode": "NEVER"}]}`)
	if got := waitTerminal(t, rt, c.ID, 5*time.Second); got.Status != chat.StatusCompleted {
		t.Fatalf("chat after the panic = %+v", got)
	}
}

// TestCreateRunsTheChatWhereItWasCreated: a chat created on a replica with
// room is created leased to it (epoch 1) and runs at once; one created
// without room is left queued, unowned, to be claimed when room frees up.
func TestCreateRunsTheChatWhereItWasCreated(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db, func(c *runtime.Config) {
		c.MaxActiveChats = 1
		c.LeaseDuration = 5 * time.Second
		c.PollInterval = time.Hour // only wake-ups claim
	})
	first, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: twoAgentSpec(2, 1000, "")})
	if err != nil {
		t.Fatal(err)
	}
	if first.Owner != rt.Owner() || first.Epoch != 1 || first.LeaseExpiresAt == nil {
		t.Fatalf("first chat: owner %q, epoch %d, lease %v; want leased to %q at create", first.Owner, first.Epoch, first.LeaseExpiresAt, rt.Owner())
	}
	second, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: twoAgentSpec(2, 0, "")})
	if err != nil {
		t.Fatal(err)
	}
	if second.Owner != "" || second.Epoch != 0 {
		t.Fatalf("second chat (no room): owner %q, epoch %d; want unowned", second.Owner, second.Epoch)
	}
	if stored, err := db.GetChat(context.Background(), "", first.ID); err != nil || stored.Owner != rt.Owner() || stored.Epoch != 1 {
		t.Fatalf("stored first chat = %+v, %v", stored, err)
	}
	for _, id := range []string{first.ID, second.ID} {
		if got := waitTerminal(t, rt, id, 20*time.Second); got.Status != chat.StatusCompleted {
			t.Fatalf("chat %s = %+v", id, got)
		}
	}
}

// claimCounter is the real store, counting the claim queries.
type claimCounter struct {
	chat.Store
	claims atomic.Int64
}

func (c *claimCounter) Claim(ctx context.Context, p *chat.ClaimParams) ([]*chat.Chat, error) {
	c.claims.Add(1)
	return c.Store.Claim(ctx, p)
}

// Chats created where there is room run there without a claim query, and
// their ends claim nothing: nothing waits for the room they free. A chat
// created without room is claimed when room frees (see
// TestCreateRunsTheChatWhereItWasCreated).
func TestChatsThatRunWhereCreatedNeedNoClaims(t *testing.T) {
	db := &claimCounter{Store: runtimetest.OpenSQLite(t)}
	rt := runtimetest.New(t, db, func(c *runtime.Config) { c.PollInterval = time.Hour })
	// The claim at start, for what an earlier run left.
	deadline := time.Now().Add(5 * time.Second)
	for db.claims.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	before := db.claims.Load()
	for range 10 {
		c := create(t, rt, string(twoAgentSpec(2, 0, "")))
		if got := waitTerminal(t, rt, c.ID, 10*time.Second); got.Status != chat.StatusCompleted {
			t.Fatalf("chat = %+v", got)
		}
	}
	time.Sleep(50 * time.Millisecond) // a claim the last end would wake
	if n := db.claims.Load() - before; n != 0 {
		t.Fatalf("%d claim queries for 10 chats that ran where they were created", n)
	}
}

// A worker's log lines name its chat: the worker makes its logger when it
// logs (see worker.log), and a line without the id could not be told
// apart from another chat's.
func TestAWorkersLogLinesNameItsChat(t *testing.T) {
	// A file takes writes from any goroutine.
	out, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	rt := runtimetest.New(t, runtimetest.OpenSQLite(t), func(c *runtime.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(out, nil))
	})
	c := create(t, rt, `{"task": "t", "max_round": 1,
		"agents": [{"name": "writer", "type": "assistant", "model": {"provider": "replay", "responses": ["done"]}}]}`)
	waitFor(t, rt, c.ID, 20*time.Second, chat.StatusCompleted)
	logged, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	var claimed int
	for _, line := range strings.Split(strings.TrimSpace(string(logged)), "\n") {
		var rec struct {
			Msg    string `json:"msg"`
			ChatID string `json:"chat_id"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec.Msg == "chat claimed" || rec.Msg == "run started" {
			claimed++
			if rec.ChatID != c.ID {
				t.Errorf("%q names chat %q, want %q", rec.Msg, rec.ChatID, c.ID)
			}
		}
	}
	if claimed == 0 {
		t.Fatalf("no worker line in the log:\n%s", logged)
	}
}
