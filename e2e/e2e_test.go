package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/llm/openaitest"
	"github.com/agentd/agentd/internal/store/pgtest"
)

// backends runs a test once on the embedded SQLite store and once on Postgres.
func backends(t *testing.T, f func(t *testing.T, env []string)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		f(t, []string{"AGENTD_DATA_DIR=" + t.TempDir()})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		f(t, []string{"AGENTD_DATABASE_URL=" + pgtest.URL(t)})
	})
}

// collect reads a stream until it closes, failing after `within`.
func collect(t *testing.T, events <-chan sseEvent, within time.Duration) []sseEvent {
	t.Helper()
	var got []sseEvent
	timeout := time.After(within)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return got
			}
			conformsEvent(t, ev)
			got = append(got, ev)
		case <-timeout:
			t.Fatalf("stream still open after %v; got %d events", within, len(got))
		}
	}
}

func types(evs []sseEvent) []string {
	var ts []string
	for _, e := range evs {
		ts = append(ts, e.Type)
	}
	return ts
}

func TestDebateExampleStreamsToCompletion(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, env []string) {
		p := startAgentd(t, env...)
		c := p.create(readExample(t, "debate.json"))
		events, stop := p.stream(c.ID, 0)
		defer stop()
		got := collect(t, events, 60*time.Second)

		want := []string{"chat.created", "run.started", "message", "chat.running"}
		for range 6 {
			want = append(want, "speaker.selected", "message")
		}
		want = append(want, "chat.completed")
		if !slices.Equal(types(got), want) {
			t.Fatalf("event types = %v\nwant %v", types(got), want)
		}
		for i, e := range got {
			if e.ID != int64(i+1) {
				t.Fatalf("event %d has id %d: ids must be the log's dense seq", i, e.ID)
			}
		}
		var final struct {
			Status, StopReason, StopDetail string
		}
		mustUnmarshal(t, bytes.ReplaceAll(got[len(got)-1].Data, []byte("stop_"), []byte("stop")), &final)
		if final.Status != "completed" || final.StopReason != "text_mention" || final.StopDetail != "Text 'TERMINATE' mentioned" {
			t.Fatalf("terminal event data = %s", got[len(got)-1].Data)
		}

		view := p.get(c.ID)
		if view.Status != "completed" || *view.StopReason != "text_mention" || *view.StopDetail != "Text 'TERMINATE' mentioned" {
			t.Fatalf("chat = %+v", view)
		}
		if view.Turns != 6 || view.MessageCount != 7 || view.LastSeq != int64(len(got)) {
			t.Fatalf("turns=%d message_count=%d last_seq=%d, want 6, 7, %d", view.Turns, view.MessageCount, view.LastSeq, len(got))
		}
		if view.Usage["prompt_tokens"] < 120 || view.Usage["completion_tokens"] < 18 {
			t.Fatalf("usage = %v, want at least the scripted 120/18", view.Usage)
		}
		msgs := p.messages(c.ID)
		speakers := []string{}
		for _, m := range msgs {
			speakers = append(speakers, m.Name)
		}
		if want := []string{"user", "proponent", "opponent", "judge", "proponent", "opponent", "judge"}; !slices.Equal(speakers, want) {
			t.Fatalf("speakers = %v, want %v", speakers, want)
		}
		if !strings.Contains(msgs[6].Content, "TERMINATE") || msgs[6].Role != "assistant" {
			t.Fatalf("last message = %+v", msgs[6])
		}
	})
}

func TestRandomExampleEndsOnMaxRound(t *testing.T) {
	t.Parallel()
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir())
	c := p.create(readExample(t, "random-brainstorm.json"))
	view := p.waitTerminal(c.ID, 60*time.Second)
	if view.Status != "completed" || *view.StopReason != "max_round" || *view.StopDetail != "Maximum number of turns 6 reached." {
		t.Fatalf("chat = %+v", view)
	}
	msgs := p.messages(c.ID)
	if len(msgs) != 7 {
		t.Fatalf("%d messages, want task + 6", len(msgs))
	}
	for i := 2; i < len(msgs); i++ {
		if msgs[i].Name == msgs[i-1].Name {
			t.Fatalf("allow_repeated_speaker=false, but %s spoke twice in a row", msgs[i].Name)
		}
	}
	// The same seed gives the same speakers in a second chat.
	c2 := p.create(readExample(t, "random-brainstorm.json"))
	p.waitTerminal(c2.ID, 60*time.Second)
	msgs2 := p.messages(c2.ID)
	for i := range msgs {
		if msgs[i].Name != msgs2[i].Name {
			t.Fatalf("seeded random selection differs at message %d: %s vs %s", i, msgs[i].Name, msgs2[i].Name)
		}
	}
}

// slowSpec is a round-robin chat of two replay agents whose every reply takes
// delayMS; message contents say who spoke in which of `rounds` turns, so a
// lost, repeated or reordered message shows.
func slowSpec(rounds, delayMS int) []byte {
	var a, b []string
	for i := range rounds {
		a = append(a, fmt.Sprintf(`{"content": "a-%d", "delay_ms": %d}`, i, delayMS))
		b = append(b, fmt.Sprintf(`{"content": "b-%d", "delay_ms": %d}`, i, delayMS))
	}
	return fmt.Appendf(nil, `{"task": "count", "max_round": %d,
		"agents": [{"name": "a", "type": "assistant", "model": "ma"}, {"name": "b", "type": "assistant", "model": "mb"}],
		"models": {"ma": {"provider": "replay", "responses": [%s]}, "mb": {"provider": "replay", "responses": [%s]}}}`,
		rounds, strings.Join(a, ","), strings.Join(b, ","))
}

func expectedContents(rounds int) []string {
	want := []string{"count"}
	for i := range rounds {
		want = append(want, fmt.Sprintf("%c-%d", "ab"[i%2], i/2))
	}
	return want
}

func TestSSEResumeDeliversEveryLaterEventOnceInOrder(t *testing.T) {
	t.Parallel()
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir())
	c := p.create(slowSpec(8, 100))
	events, stop := p.stream(c.ID, 0)
	var first []sseEvent
	for ev := range events {
		first = append(first, ev)
		if len(first) == 5 {
			break
		}
	}
	stop() // the client goes away mid-chat
	last := first[len(first)-1].ID

	events, stop = p.stream(c.ID, last)
	defer stop()
	rest := collect(t, events, 60*time.Second)
	all := append(first, rest...)
	for i, e := range all {
		if e.ID != int64(i+1) {
			t.Fatalf("after reconnecting with Last-Event-ID %d: event %d has id %d (ids %v)", last, i, e.ID, ids(all))
		}
	}
	if all[len(all)-1].Type != "chat.completed" {
		t.Fatalf("stream did not end with chat.completed: %v", types(all))
	}

	// A chat that ended replays its whole log and closes; ?after= works too.
	events, stop2 := p.stream(c.ID, 0)
	defer stop2()
	replay := collect(t, events, 10*time.Second)
	if !slices.Equal(ids(replay), ids(all)) {
		t.Fatalf("replay ids %v, want %v", ids(replay), ids(all))
	}
	code, _, body := p.do("GET", fmt.Sprintf("/v1/chats/%s/events?after=%d", c.ID, len(all)-1), nil)
	if code != 200 || strings.Count(string(body), "event: ") != 1 || !strings.Contains(string(body), "event: chat.completed") {
		t.Fatalf("?after=%d: %d %q", len(all)-1, code, body)
	}
}

func ids(evs []sseEvent) []int64 {
	var out []int64
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

func TestBadInputIsRejectedAndNothingIsWritten(t *testing.T) {
	t.Parallel()
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_MAX_BODY_BYTES=65536")
	type problem struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Errors []struct {
			Path    string `json:"path"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	check := func(name string, body []byte, wantStatus int) problem {
		t.Helper()
		code, h, b := p.do("POST", "/v1/chats", body)
		if code != wantStatus || h.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%s: %d %s %s, want %d problem+json", name, code, h.Get("Content-Type"), b, wantStatus)
		}
		conforms(t, "Problem", b)
		var pr problem
		mustUnmarshal(t, b, &pr)
		if pr.Status != wantStatus || pr.Title == "" {
			t.Fatalf("%s: problem %s", name, b)
		}
		return pr
	}
	check("malformed", []byte(`{"task": "x", `), http.StatusBadRequest)
	check("two values", []byte(`{} {}`), http.StatusBadRequest)
	check("too large", append([]byte(`{"task": "`), append(bytes.Repeat([]byte("x"), 70000), `"}`...)...), http.StatusRequestEntityTooLarge)
	pr := check("unknown field", []byte(`{"task": "x", "agents": [{"name": "a", "type": "assistant", "model": "m", "temprature": 1}], "models": {"m": {"provider": "replay", "responses": ["x"]}}}`), http.StatusUnprocessableEntity)
	if len(pr.Errors) != 1 || pr.Errors[0].Path != "/agents/0/temprature" {
		t.Fatalf("unknown field problem = %+v", pr)
	}
	pr = check("five mistakes", []byte(`{"task": "", "max_round": 0,
		"agents": [{"name": "1x", "type": "assistant", "model": "nope"}, {"name": "b", "type": "robot"}],
		"termination": {"text_match": {"pattern": "("}}}`), http.StatusUnprocessableEntity)
	var paths []string
	for _, e := range pr.Errors {
		paths = append(paths, e.Path)
	}
	slices.Sort(paths)
	if want := []string{"/agents/0/model", "/agents/0/name", "/agents/1/type", "/max_round", "/task", "/termination/text_match/pattern"}; !slices.Equal(paths, want) {
		t.Fatalf("problem paths = %v, want %v", paths, want)
	}

	code, _, b := p.do("GET", "/v1/chats/0190d5a4-0000-7000-8000-000000000000", nil)
	if code != http.StatusNotFound {
		t.Fatalf("unknown chat: %d %s", code, b)
	}
	code, _, b = p.do("GET", "/v1/chats", nil)
	var list struct {
		Chats []chatView `json:"chats"`
	}
	mustUnmarshal(t, b, &list)
	if code != 200 || len(list.Chats) != 0 {
		t.Fatalf("after rejected requests the list holds %d chats: %s", len(list.Chats), b)
	}
}

func TestIdempotencyKeyAndCancel(t *testing.T) {
	t.Parallel()
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir())
	spec := slowSpec(6, 10000)
	c := p.create(spec, "Idempotency-Key", "k-1")
	code, _, b := p.do("POST", "/v1/chats", spec, "Idempotency-Key", "k-1")
	var again chatView
	mustUnmarshal(t, b, &again)
	if code != http.StatusOK || again.ID != c.ID {
		t.Fatalf("repeat with the same key: %d %s", code, b)
	}
	if code, _, b := p.do("POST", "/v1/chats", slowSpec(5, 1), "Idempotency-Key", "k-1"); code != http.StatusConflict {
		t.Fatalf("same key, other body: %d %s", code, b)
	}
	// Wait for the first model call to be in flight (delay 10 s), then cancel.
	events, stop := p.stream(c.ID, 0)
	defer stop()
	for ev := range events {
		if ev.Type == "speaker.selected" {
			break
		}
	}
	start := time.Now()
	if code, _, b := p.do("POST", "/v1/chats/"+c.ID+"/cancel", nil); code != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", code, b)
	}
	var last sseEvent
	for ev := range events {
		last = ev
	}
	if last.Type != "chat.cancelled" || time.Since(start) > time.Second {
		t.Fatalf("stream ended with %q after %v, want chat.cancelled promptly", last.Type, time.Since(start))
	}
	view := p.get(c.ID)
	if view.Status != "cancelled" || *view.StopReason != "cancelled" {
		t.Fatalf("chat = %+v", view)
	}
	if code, _, b := p.do("POST", "/v1/chats/"+c.ID+"/cancel", nil); code != http.StatusOK {
		t.Fatalf("cancel of a cancelled chat: %d %s", code, b)
	}
}

// TestKill9MidChatsThenRestartLosesNothing kills agentd while 20 chats run
// and checks that the restarted server finishes every chat from its log with
// exactly the messages a run without a crash would have written.
func TestKill9MidChatsThenRestartLosesNothing(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, env []string) {
		env = append(env, "AGENTD_LEASE_TTL=1s")
		const chats, rounds = 20, 8
		p := startAgentd(t, env...)
		var ids []string
		for range chats {
			ids = append(ids, p.create(slowSpec(rounds, 150)).ID)
		}
		// Kill once the chats are under way: some turns done, none finished.
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, _, b := p.do("GET", "/v1/chats?limit=100", nil)
			conforms(t, "ChatList", b)
			var list struct {
				Chats []chatView `json:"chats"`
			}
			mustUnmarshal(t, b, &list)
			turns := 0
			for _, c := range list.Chats {
				turns += c.Turns
			}
			if code == 200 && turns >= chats {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("chats made no progress: %s", b)
			}
			p.do("GET", fmt.Sprintf("/v1/chats/%s/messages?after=%d&wait_s=1", ids[0], p.get(ids[0]).LastSeq), nil)
		}
		p.kill9()

		p2 := startAgentd(t, env...)
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				view := p2.waitTerminal(id, 90*time.Second)
				if view.Status != "completed" || *view.StopReason != "max_round" {
					t.Errorf("chat %s after restart: %+v", id, view)
					return
				}
				var got []string
				for _, m := range p2.messages(id) {
					got = append(got, m.Content)
				}
				if want := expectedContents(rounds); !slices.Equal(got, want) {
					t.Errorf("chat %s messages = %v, want %v", id, got, want)
				}
				events, stop := p2.stream(id, 0)
				defer stop()
				all := collect(t, events, 30*time.Second)
				for i, e := range all {
					if e.ID != int64(i+1) {
						t.Errorf("chat %s: event %d has seq %d", id, i, e.ID)
						return
					}
				}
			}()
		}
		wg.Wait()
	})
}

func TestOpenAIProviderAgainstWireCompatibleServer(t *testing.T) {
	t.Parallel()
	fake := openaitest.New(openaitest.WithAPIKey("sk-test-key"))
	defer fake.Close()
	// The first reply comes once the stream below is open, so that it sees
	// the model stream it.
	open := make(chan struct{})
	fake.Reply(openaitest.Reply{Content: "def rev(s): return s[::-1]", Hold: open}, openaitest.Text("APPROVED"))
	fake.FailNext(http.StatusTooManyRequests, "0")
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "OPENAI_API_KEY=sk-test-key", "OPENAI_BASE_URL="+fake.URL())
	c := p.create(readExample(t, "openai-review.json"))
	events, stop := p.stream(c.ID, 0)
	defer stop()
	events = openOnFirst(events, open)
	var deltas strings.Builder
	sawMessage := false
	for _, e := range collect(t, events, 60*time.Second) {
		switch {
		case e.Type == "message.delta" && !sawMessage:
			if e.ID != 0 {
				t.Fatalf("a delta has id %d: deltas are ephemeral", e.ID)
			}
			var d struct{ Name, Content string }
			mustUnmarshal(t, e.Data, &d)
			deltas.WriteString(d.Content)
		case e.Type == "message" && deltas.Len() > 0:
			sawMessage = true
		}
	}
	if deltas.String() != "def rev(s): return s[::-1]" {
		t.Fatalf("streamed deltas add up to %q", deltas.String())
	}
	view := p.waitTerminal(c.ID, 60*time.Second)
	if view.Status != "completed" || *view.StopReason != "text_mention" {
		t.Fatalf("chat = %+v", view)
	}
	if view.Usage["prompt_tokens"] == 0 || view.Usage["completion_tokens"] == 0 {
		t.Fatalf("usage not recorded: %v", view.Usage)
	}
	reqs := fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("the fake server saw %d requests, want 3 (one 429 retried)", len(reqs))
	}
	// The reviewer's request carries the coder's reply as a named user message.
	var last map[string]any
	mustUnmarshal(t, reqs[2].Body, &last)
	msgs, _ := json.Marshal(last["messages"])
	if !strings.Contains(string(msgs), `"name":"coder"`) || !strings.Contains(string(msgs), `"role":"system"`) {
		t.Fatalf("reviewer request messages = %s", msgs)
	}
}

// TestInterruptDrainsOnlyForALoadBalancer: Ctrl-C (SIGINT) of an agentd
// whose /readyz nothing has asked stops at once, well before the drain
// delay; one whose readiness a load balancer polls keeps /readyz at 503 for
// the whole delay, serving requests, before it stops.
func TestInterruptDrainsOnlyForALoadBalancer(t *testing.T) {
	t.Parallel()
	// A long drain for the local run, so that stopping "at once" has a
	// margin on a loaded machine; a short one for the balanced run.
	const localDrain, drain = 10 * time.Second, 3 * time.Second
	local := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none", "AGENTD_SHUTDOWN_DRAIN="+localDrain.String())
	balanced := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none", "AGENTD_SHUTDOWN_DRAIN="+drain.String())
	local.create(readExample(t, "debate.json"))
	if code, _, body := balanced.do("GET", "/readyz", nil); code != http.StatusOK {
		t.Fatalf("readyz: %d %s", code, body)
	}

	interrupt := func(p *proc) time.Time {
		if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		return time.Now()
	}
	start := interrupt(local)
	select {
	case <-local.exited:
	case <-time.After(localDrain):
		t.Fatalf("agentd without a readiness probe still runs %s after SIGINT", localDrain)
	}
	if took := time.Since(start); took > localDrain/4 || local.waitErr != nil {
		t.Errorf("agentd without a readiness probe stopped %s after SIGINT (%v), want well under the %s drain", took, local.waitErr, localDrain)
	} else {
		t.Logf("agentd without a readiness probe stopped %s after SIGINT (drain %s)", took, localDrain)
	}

	start = interrupt(balanced)
	for {
		code, _, _ := balanced.do("GET", "/readyz", nil)
		if code == http.StatusServiceUnavailable {
			break
		}
		if time.Since(start) > drain {
			t.Fatalf("readyz answered %d all through the drain", code)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, _, body := balanced.do("GET", "/v1/chats", nil); code != http.StatusOK {
		t.Errorf("API during the drain: %d %s", code, body)
	}
	select {
	case <-balanced.exited:
	case <-time.After(drain + 15*time.Second):
		t.Fatal("agentd polled by a load balancer did not stop after the drain")
	}
	if took := time.Since(start); took < drain || balanced.waitErr != nil {
		t.Errorf("agentd polled by a load balancer stopped %s after SIGINT (%v), want the %s drain first", took, balanced.waitErr, drain)
	}
}
