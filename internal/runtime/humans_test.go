package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/runtime/runtimetest"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/openaitest"
	"github.com/agentd/agentd/internal/spec"
)

// waitFor waits on the runtime's commit signals until the chat is in one of
// the statuses.
func waitFor(t testing.TB, rt *runtime.Runtime, id string, within time.Duration, statuses ...chat.Status) *chat.Chat {
	t.Helper()
	sig, done := rt.Subscribe(id)
	defer done()
	deadline := time.After(within)
	for {
		c, err := rt.Get(context.Background(), "", id)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(statuses, c.Status) {
			return c
		}
		select {
		case <-sig:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("chat %s still %s after %v, want %v", id, c.Status, within, statuses)
		}
	}
}

// nextPause waits until the chat waits for input again, with a request other
// than the one c shows.
func nextPause(t testing.TB, rt *runtime.Runtime, c *chat.Chat) *chat.Chat {
	t.Helper()
	prev := pending(t, c).RequestID
	sig, done := rt.Subscribe(c.ID)
	defer done()
	deadline := time.After(5 * time.Second)
	for {
		c, err := rt.Get(context.Background(), "", c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if c.Status.Terminal() || c.Status == chat.StatusAwaitingInput && len(c.InputResponse) == 0 && pending(t, c).RequestID != prev {
			return c
		}
		select {
		case <-sig:
		case <-deadline:
			t.Fatalf("chat %s did not pause again: %+v", c.ID, c)
		}
	}
}

func create(t testing.TB, rt *runtime.Runtime, sp string) *chat.Chat {
	t.Helper()
	c, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: []byte(sp)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func pending(t testing.TB, c *chat.Chat) chat.PendingInput {
	t.Helper()
	var p chat.PendingInput
	if err := json.Unmarshal(c.PendingInput, &p); err != nil {
		t.Fatalf("pending_input %s: %v", c.PendingInput, err)
	}
	return p
}

func say(t testing.TB, rt *runtime.Runtime, c *chat.Chat, content string) {
	t.Helper()
	p := pending(t, c)
	if err := answerInput(rt, context.Background(), c.ID, &chat.Input{RequestID: p.RequestID, Content: &content}); err != nil {
		t.Fatal(err)
	}
}

func speakers(ms []chat.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name+":"+m.Content)
	}
	return out
}

const reviewSpec = `{"task": "write", "max_round": 10,
	"agents": [{"name": "writer", "type": "assistant", "model": {"provider": "replay", "responses": ["draft 1", "draft 2", "draft 3"]}},
	           {"name": "human", "type": "user_proxy", "human_input_mode": "ALWAYS", "default_auto_reply": "ok"}]%s}`

func TestHumanInputAlways(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	c := create(t, rt, fmt.Sprintf(reviewSpec, ""))
	c = waitFor(t, rt, c.ID, 5*time.Second, chat.StatusAwaitingInput)
	p := pending(t, c)
	if p.Kind != "message" || p.Agent != "human" || c.Owner != "" {
		t.Fatalf("pending = %+v, owner %q", p, c.Owner)
	}
	say(t, rt, c, "make it shorter")
	// The same request_id twice: 409, and nothing is appended.
	before := mustLastSeq(t, db, c.ID)
	content := "again"
	if err := answerInput(rt, context.Background(), c.ID, &chat.Input{RequestID: p.RequestID, Content: &content}); !errors.Is(err, chat.ErrNoPendingInput) {
		t.Fatalf("second answer to one request: %v", err)
	}
	c = nextPause(t, rt, c)
	if after := mustLastSeq(t, db, c.ID); after <= before {
		t.Fatal("no progress after the answer")
	}
	say(t, rt, c, "") // ALWAYS: empty skips to the auto-reply
	c = nextPause(t, rt, c)
	say(t, rt, c, "exit")
	c = waitTerminal(t, rt, c.ID, 5*time.Second)
	if c.StopReason != chat.StopHumanExit || c.StopDetail != "The human of 'human' ended the chat." {
		t.Fatalf("chat = %+v", c)
	}
	want := []string{"user:write", "writer:draft 1", "human:make it shorter", "writer:draft 2", "human:ok", "writer:draft 3"}
	if got := speakers(messages(t, db, c.ID)); !slices.Equal(got, want) {
		t.Fatalf("messages = %v\nwant %v", got, want)
	}
}

func mustLastSeq(t testing.TB, db chat.Store, id string) int64 {
	t.Helper()
	c, err := db.GetChat(context.Background(), "", id)
	if err != nil {
		t.Fatal(err)
	}
	return c.LastSeq
}

func TestHumanInputTerminateOnTerminationAndOnMaxAutoReply(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	sp := `{"task": "go", "max_round": 20,
		"agents": [{"name": "bot", "type": "assistant", "model": {"provider": "replay", "responses": ["one", "DONE", "three", "DONE again"]}},
		           {"name": "boss", "type": "user_proxy", "human_input_mode": "TERMINATE", "max_consecutive_auto_reply": 1, "default_auto_reply": "continue"}],
		"termination": {"text_mention": {"text": "DONE"}}}`
	c := create(t, rt, sp)
	// bot "one", boss auto "continue" (1 of 1), bot "DONE" fires → the human is asked.
	c = waitFor(t, rt, c.ID, 5*time.Second, chat.StatusAwaitingInput)
	if p := pending(t, c); p.Agent != "boss" || !strings.Contains(p.Reason, "termination condition fired: Text 'DONE' mentioned") {
		t.Fatalf("pending = %+v", p)
	}
	say(t, rt, c, "not yet, one more")
	// The human's message resets boss's auto-replies (AutoGen), and does not
	// take a turn: boss, next in order, auto-replies once more; the next
	// time it is selected it has used its one auto-reply and asks the human.
	c = nextPause(t, rt, c)
	if p := pending(t, c); !strings.Contains(p.Reason, "max_consecutive_auto_reply (1) reached") {
		t.Fatalf("pending = %+v", p)
	}
	say(t, rt, c, "fine")
	c = nextPause(t, rt, c) // "DONE again" fires again after the reset
	say(t, rt, c, "")       // TERMINATE: empty ends the chat
	c = waitTerminal(t, rt, c.ID, 5*time.Second)
	if c.StopReason != chat.StopHumanExit {
		t.Fatalf("chat = %+v", c)
	}
	want := []string{"user:go", "bot:one", "boss:continue", "bot:DONE", "boss:not yet, one more", "boss:continue", "bot:three", "boss:fine", "bot:DONE again"}
	if got := speakers(messages(t, db, c.ID)); !slices.Equal(got, want) {
		t.Fatalf("messages = %v\nwant %v", got, want)
	}
}

func TestHumanInputNeverEndsAtMaxConsecutiveAutoReply(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	c := create(t, rt, `{"task": "go", "max_round": 20,
		"agents": [{"name": "bot", "type": "assistant", "model": {"provider": "replay", "responses": ["1", "2", "3"]}},
		           {"name": "proxy", "type": "user_proxy", "human_input_mode": "NEVER", "max_consecutive_auto_reply": 2}]}`)
	c = waitTerminal(t, rt, c.ID, 5*time.Second)
	if c.StopReason != chat.StopMaxAutoReply || c.StopDetail != "Agent 'proxy' reached max_consecutive_auto_reply (2)." || c.Turns != 5 {
		t.Fatalf("chat = %+v", c)
	}
}

func TestInputTimeout(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	c := create(t, rt, fmt.Sprintf(reviewSpec, `, "input_timeout_s": 1`))
	c = waitFor(t, rt, c.ID, 5*time.Second, chat.StatusAwaitingInput)
	if p := pending(t, c); p.ExpiresAt == nil || c.InputExpiresAt == nil {
		t.Fatalf("no expiry: %+v", p)
	}
	c = waitTerminal(t, rt, c.ID, 10*time.Second)
	if c.StopReason != chat.StopInputTimeout || c.StopDetail != "No input received within 1 seconds." {
		t.Fatalf("chat = %+v", c)
	}
}

func TestManualSelection(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	c := create(t, rt, `{"task": "go", "max_round": 2, "speaker_selection": {"method": "manual"},
		"agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["from a"]}},
		           {"name": "b", "type": "assistant", "model": {"provider": "replay", "responses": ["from b"]}}]}`)
	c = waitFor(t, rt, c.ID, 5*time.Second, chat.StatusAwaitingInput)
	p := pending(t, c)
	if p.Kind != "speaker" || !slices.Equal(p.Candidates, []string{"a", "b"}) {
		t.Fatalf("pending = %+v", p)
	}
	bad := "zed"
	var ve *spec.ValidationError
	if err := answerInput(rt, context.Background(), c.ID, &chat.Input{RequestID: p.RequestID, Speaker: &bad}); !errors.As(err, &ve) || ve.Problems[0].Path != "/speaker" {
		t.Fatalf("unknown speaker: %v", err)
	}
	b := "b"
	if err := answerInput(rt, context.Background(), c.ID, &chat.Input{RequestID: p.RequestID, Speaker: &b}); err != nil {
		t.Fatal(err)
	}
	c = nextPause(t, rt, c)
	a := "a"
	if err := answerInput(rt, context.Background(), c.ID, &chat.Input{RequestID: pending(t, c).RequestID, Speaker: &a}); err != nil {
		t.Fatal(err)
	}
	c = waitTerminal(t, rt, c.ID, 5*time.Second)
	if got := speakers(messages(t, db, c.ID)); !slices.Equal(got, []string{"user:go", "b:from b", "a:from a"}) || c.StopReason != chat.StopMaxRound {
		t.Fatalf("messages = %v, chat = %+v", got, c)
	}
}

func TestTransitionsDeadEndStopsWithNoEligibleSpeaker(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	c := create(t, rt, `{"task": "go", "max_round": 9,
		"speaker_selection": {"transitions": {"a": ["b"]}, "transitions_type": "allowed"},
		"agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["a1"]}},
		           {"name": "b", "type": "assistant", "model": {"provider": "replay", "responses": ["b1"]}}]}`)
	c = waitTerminal(t, rt, c.ID, 5*time.Second)
	if c.StopReason != chat.StopNoEligibleSpeaker || c.StopDetail != "No eligible speaker after 'b': the transitions allow none." || c.Turns != 2 {
		t.Fatalf("chat = %+v", c)
	}
}

func TestSwarmWithoutHandoffKeepsTheSpeaker(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	c := create(t, rt, `{"task": "go", "max_round": 3, "speaker_selection": {"method": "swarm"},
		"agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["a1", "a2", "a3"]}},
		           {"name": "b", "type": "assistant", "model": {"provider": "replay", "responses": ["b1"]}}]}`)
	c = waitTerminal(t, rt, c.ID, 5*time.Second)
	if got := speakers(messages(t, db, c.ID)); !slices.Equal(got, []string{"user:go", "a:a1", "a:a2", "a:a3"}) || c.StopReason != chat.StopMaxRound {
		t.Fatalf("messages = %v, chat = %+v", got, c)
	}
}

func TestAutoSelectionWithReplaySelector(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	c := create(t, rt, `{"task": "plan a trip", "max_round": 3,
		"speaker_selection": {"method": "auto", "model": "selector"},
		"models": {"selector": {"provider": "replay", "responses": ["planner", "I pick the critic.", "planner"]}},
		"agents": [{"name": "planner", "type": "assistant", "description": "Plans.", "model": {"provider": "replay", "responses": ["p1", "p2"]}},
		           {"name": "critic", "type": "assistant", "description": "Criticises.", "model": {"provider": "replay", "responses": ["c1"]}}]}`)
	c = waitTerminal(t, rt, c.ID, 5*time.Second)
	if got := speakers(messages(t, db, c.ID)); !slices.Equal(got, []string{"user:plan a trip", "planner:p1", "critic:c1", "planner:p2"}) || c.StopReason != chat.StopMaxRound {
		t.Fatalf("messages = %v, chat = %+v", got, c)
	}
}

// TestAutoSelectorFailurePaths drives the selector through an OpenAI-wire
// server to see what it is sent: a reply naming two agents, none, an excluded
// one — each answered with feedback in the next attempt — and garbage three
// times, after which it falls back to round robin, never to the excluded
// last speaker.
func TestAutoSelectorFailurePaths(t *testing.T) {
	fake := openaitest.New()
	defer fake.Close()
	db := runtimetest.OpenSQLite(t)
	models, err := llm.New(llm.Config{OpenAI: llm.OpenAIConfig{BaseURL: fake.URL(), APIKey: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	rt := runtimetest.New(t, db, func(c *runtime.Config) { c.Models, c.Providers = models, models.Providers() })
	fake.Reply(
		openaitest.Text("a and b"), openaitest.Text("nobody"), openaitest.Text("b"), // turn 1: b
		openaitest.Text("b"), openaitest.Text("???"), openaitest.Text("!!!"), // turn 2: b excluded, then garbage → fallback c
	)
	c := create(t, rt, `{"task": "t", "max_round": 2,
		"speaker_selection": {"method": "auto", "model": {"provider": "openai", "model": "gpt-sel"}, "allow_repeated_speaker": false},
		"agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["a1"]}},
		           {"name": "b", "type": "assistant", "model": {"provider": "replay", "responses": ["b1"]}},
		           {"name": "c", "type": "assistant", "model": {"provider": "replay", "responses": ["c1"]}}]}`)
	c = waitTerminal(t, rt, c.ID, 10*time.Second)
	if got := speakers(messages(t, db, c.ID)); !slices.Equal(got, []string{"user:t", "b:b1", "c:c1"}) {
		t.Fatalf("messages = %v, chat %+v", got, c)
	}
	reqs := fake.Requests()
	if len(reqs) != 6 {
		t.Fatalf("%d selector requests, want 6", len(reqs))
	}
	lastUser := func(i int) string {
		msgs := reqs[i].Chat.Messages
		return msgs[len(msgs)-1].Text()
	}
	for i, want := range map[int]string{
		1: "Expected exactly one name to be mentioned. Please select only one from: ['a', 'b', 'c'].",
		2: "No valid name was mentioned",
		4: "Repeated speaker is not allowed, please select a different name from: ['a', 'c'].",
		5: "No valid name was mentioned",
	} {
		if !strings.Contains(lastUser(i), want) {
			t.Errorf("request %d ends with %q, want feedback %q", i, lastUser(i), want)
		}
	}
	evs, _ := db.ListEvents(context.Background(), &chat.ListEventsParams{ChatID: c.ID, Limit: 100})
	var sels []map[string]any
	for _, e := range evs {
		if e.Type == chat.EventSpeakerSelected {
			var m map[string]any
			_ = json.Unmarshal(e.Data, &m)
			sels = append(sels, m)
		}
	}
	if len(sels) != 2 || sels[1]["fallback"] != true || sels[1]["agent"] != "c" || len(sels[1]["replies"].([]any)) != 3 {
		t.Fatalf("speaker.selected data = %v", sels)
	}
}

// TestTerminationConditionsEndRuns runs one chat per condition and checks
// the speakers, stop reason and stop detail.
func TestTerminationConditionsEndRuns(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	tests := []struct {
		cond   string
		msgs   int // messages in the log, task included
		reason chat.StopReason
		detail string
	}{
		{`{"max_messages": 3}`, 3, chat.StopMaxMessages, "Maximum number of messages 3 reached, current message count: 3"},
		{`{"text_mention": {"text": "b-1"}}`, 5, chat.StopTextMention, "Text 'b-1' mentioned"},
		{`{"text_match": {"pattern": "^a-[2-9]$"}}`, 6, chat.StopTextMatch, "Text matched pattern '^a-[2-9]$'"},
		{`{"token_usage": {"max_prompt_tokens": 21}}`, 4, chat.StopTokenUsage, "Token usage limit reached, total token count: 26, prompt token count: 21, completion token count: 5."},
		{`{"source_match": {"sources": ["b"]}}`, 3, chat.StopSourceMatch, "'b' answered"},
		{`{"any": [{"max_messages": 50}, {"text_mention": {"text": "a-1"}}]}`, 4, chat.StopTextMention, "Text 'a-1' mentioned"},
		{`{"all": [{"text_mention": {"text": "b-0"}}, {"max_messages": 4}]}`, 4, chat.StopTextMention, "Text 'b-0' mentioned, Maximum number of messages 4 reached, current message count: 4"},
		{`{"all": [{"source_match": {"sources": ["a"]}}, {"any": [{"text_mention": {"text": "b-2"}}, {"max_messages": 99}]}]}`, 7, chat.StopSourceMatch, "'a' answered, Text 'b-2' mentioned"},
	}
	for _, tt := range tests {
		t.Run(tt.cond, func(t *testing.T) {
			c := create(t, rt, string(twoAgentSpec(8, 0, `, "termination": `+tt.cond)))
			c = waitTerminal(t, rt, c.ID, 5*time.Second)
			got := speakers(messages(t, db, c.ID))
			want := []string{"user:go"}
			for i := range tt.msgs - 1 {
				want = append(want, fmt.Sprintf("%c:%c-%d", "ab"[i%2], "ab"[i%2], i/2))
			}
			if !slices.Equal(got, want) || c.StopReason != tt.reason || c.StopDetail != tt.detail {
				t.Fatalf("got %v %s %q\nwant %v %s %q", got, c.StopReason, c.StopDetail, want, tt.reason, tt.detail)
			}
		})
	}
}

func TestTimeoutConditionCutsALongTurn(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	start := time.Now()
	c := create(t, rt, string(twoAgentSpec(3, 20000, `, "termination": {"timeout_s": 0.5}`)))
	c = waitTerminal(t, rt, c.ID, 5*time.Second)
	if c.StopReason != chat.StopTimeout || c.StopDetail != "Timeout of 0.5 seconds reached" || time.Since(start) > 3*time.Second {
		t.Fatalf("chat = %+v after %v", c, time.Since(start))
	}
}

// answerInput answers a chat's input request without an Idempotency-Key.
func answerInput(rt *runtime.Runtime, ctx context.Context, id string, in *chat.Input) error {
	_, err := rt.Input(ctx, "", id, "", in)
	return err
}

// A timeout inside `all` cuts the turn in flight and does not end the chat:
// the turn is redone with no deadline left to cut it, and the chat ends
// when the other part fires too. b's first reply takes 1 s and the timeout
// fires 0.9 s in, so the chat takes at least 1.9 s with the cut and about
// 1 s without it; a deadline that cut the redone turn too would never end.
func TestTimeoutInsideAllCutsOneTurn(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	start := time.Now()
	c := create(t, rt, `{"task": "go", "max_round": 10,
		"agents": [{"name": "a", "type": "assistant", "model": "ma"}, {"name": "b", "type": "assistant", "model": "mb"}],
		"models": {"ma": {"provider": "replay", "responses": [{"content": "a-0", "delay_ms": 10}, {"content": "a-1", "delay_ms": 10}]},
			"mb": {"provider": "replay", "responses": [{"content": "b-0", "delay_ms": 1000}]}},
		"termination": {"all": [{"timeout_s": 0.9}, {"max_messages": 4}]}}`)
	c = waitTerminal(t, rt, c.ID, 10*time.Second)
	took := time.Since(start)
	got := contents(messages(t, db, c.ID))
	const detail = "Timeout of 0.9 seconds reached, Maximum number of messages 4 reached, current message count: 4"
	if !slices.Equal(got, []string{"go", "a-0", "b-0", "a-1"}) || c.StopReason != chat.StopTimeout || c.StopDetail != detail || took < 1900*time.Millisecond {
		t.Fatalf("got %v %s %q after %v; want [go a-0 b-0 a-1] timeout %q after 1.9 s or more", got, c.StopReason, c.StopDetail, took, detail)
	}
}
