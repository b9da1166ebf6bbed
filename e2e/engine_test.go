package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/llm/openaitest"
	"github.com/agentd/agentd/internal/store/pgtest"
)

// openAIChat is a one-agent chat on the openai provider that ends after one turn.
const openAIChat = `{"task": "say something", "max_round": 1,
	"agents": [{"name": "writer", "type": "assistant", "model": {"provider": "openai", "model": "gpt-test"}}]}`

// TestNULReplyIsRepairedAfterOneModelCall: a model reply holding NUL (which
// Postgres cannot store) is made storable before it is appended — NUL
// becomes U+FFFD, the same on both stores — and the chat ends after one
// model call instead of calling the model again and again.
func TestNULReplyIsRepairedAfterOneModelCall(t *testing.T) {
	backends(t, func(t *testing.T, env []string) {
		fake := openaitest.New(openaitest.WithAPIKey("sk-test-key"))
		defer fake.Close()
		fake.Reply(openaitest.Text("before\x00after"))
		p := startAgentd(t, append(env, "OPENAI_API_KEY=sk-test-key", "OPENAI_BASE_URL="+fake.URL(), "AGENTD_LEASE_TTL=1s")...)
		c := p.create([]byte(openAIChat))
		view := p.waitTerminal(c.ID, 30*time.Second)
		if view.Status != "completed" || *view.StopReason != "max_round" {
			t.Fatalf("chat = %+v", view)
		}
		msgs := p.messages(c.ID)
		if len(msgs) != 2 || msgs[1].Content != "before\uFFFDafter" {
			t.Fatalf("messages = %+v", msgs)
		}
		time.Sleep(2 * time.Second) // two lease TTLs: a chat that loops would call again
		if n := len(fake.Requests()); n != 1 {
			t.Fatalf("the model was called %d times, want once", n)
		}
	})
}

// TestRefusedReplyFailsAfterOneModelCall: a reply the store refuses (over
// its event size limit) fails the chat with a clear error that does not
// hold the reply, after that one model call; the chat is never taken up
// again. Postgres only: the embedded store refuses the same event (the
// conformance suite checks both), but a race-instrumented pure-Go SQLite
// takes longer to claim an 8 MiB spec than a lease lasts.
func TestRefusedReplyFailsAfterOneModelCall(t *testing.T) {
	t.Parallel()
	func(t *testing.T, env []string) {
		huge := strings.Repeat("y", 8<<20+10)
		spec := fmt.Sprintf(`{"task": "say a lot", "max_round": 2, "agents": [{"name": "writer", "type": "assistant",
			"model": {"provider": "replay", "responses": [%q, "again"]}}]}`, huge)
		p := startAgentd(t, append(env, "AGENTD_MAX_BODY_BYTES=16000000")...)
		c := p.create([]byte(spec))
		view := p.waitTerminal(c.ID, 3*time.Minute) // an 8 MiB spec and reply take a while under the race detector
		if view.Status != "failed" || view.Error == nil || !strings.Contains(*view.Error, "refused") ||
			!strings.Contains(*view.Error, "over the limit") || strings.Contains(*view.Error, "yyyy") {
			t.Fatalf("chat = %.500v", view)
		}
		time.Sleep(2 * time.Second) // a chat that loops would be claimed again meanwhile
		after := p.get(c.ID)
		if after.Status != "failed" || after.LastSeq != view.LastSeq {
			t.Fatalf("the failed chat went on: %+v", after)
		}
		if msgs := p.messages(c.ID); len(msgs) != 1 {
			t.Fatalf("messages = %d, want only the task", len(msgs))
		}
	}(t, []string{"AGENTD_DATABASE_URL=" + pgtest.URL(t)})
}

// TestMidStreamResetIsRetried: the connection drops in the middle of a
// streamed reply; the call is retried, streams see a reset delta and the
// reply again from its start, and the chat completes.
func TestMidStreamResetIsRetried(t *testing.T) {
	t.Parallel()
	fake := openaitest.New(openaitest.WithAPIKey("sk-test-key"))
	defer fake.Close()
	// The model answers once the stream is open.
	open := make(chan struct{})
	fake.Reply(openaitest.Reply{Content: "a first attempt that breaks off", CutAfter: 2, Hold: open},
		openaitest.Text("the whole reply"))
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "OPENAI_API_KEY=sk-test-key", "OPENAI_BASE_URL="+fake.URL())
	c := p.create([]byte(openAIChat))
	events, stop := p.stream(c.ID, 0)
	defer stop()
	events = openOnFirst(events, open)
	var text strings.Builder
	resets := 0
	for _, e := range collect(t, events, 60*time.Second) {
		if e.Type != "message.delta" {
			continue
		}
		var d struct {
			Content string
			Reset   bool
		}
		mustUnmarshal(t, e.Data, &d)
		if d.Reset {
			resets++
			text.Reset()
		}
		text.WriteString(d.Content)
	}
	view := p.waitTerminal(c.ID, 30*time.Second)
	if view.Status != "completed" {
		t.Fatalf("chat = %+v", view)
	}
	if msgs := p.messages(c.ID); len(msgs) != 2 || msgs[1].Content != "the whole reply" {
		t.Fatalf("messages = %+v", msgs)
	}
	if n := len(fake.Requests()); n != 2 {
		t.Fatalf("%d model requests, want 2 (one retry)", n)
	}
	if resets != 1 || text.String() != "the whole reply" {
		t.Fatalf("%d resets, deltas after the last reset add up to %q", resets, text.String())
	}
}

// TestLockedChatRowKeepsTheSandbox: the chat's row is locked (another
// session) for longer than the append timeout while a turn is being
// appended. The append times out; the worker must not take that for the
// chat's end: the chat is continued from its log, its sandbox kept, and
// the code that reads the file an earlier block wrote prints it.
func TestLockedChatRowKeepsTheSandbox(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bwrap"); err != nil {
		missing(t, "bwrap sandbox: bubblewrap is not installed (apt-get install bubblewrap)")
	}
	psql, err := exec.LookPath("psql")
	if err != nil {
		missing(t, "psql is needed to hold a row lock from another session")
	}
	url := pgtest.URL(t)
	p := startAgentd(t, "AGENTD_DATABASE_URL="+url, "AGENTD_APPEND_TIMEOUT=1s", "AGENTD_LEASE_TTL=2s",
		"AGENTD_SANDBOX=bwrap", "AGENTD_SANDBOX_WORK_ROOT="+reachableDir(t))
	spec := `{"task": "write then read", "max_round": 6,
		"agents": [
			{"name": "coder", "type": "assistant", "model": {"provider": "replay", "responses": [
				"` + "```python\\nopen('f.txt', 'w').write('forty-two')\\n```" + `",
				{"content": "` + "```python\\nprint(open('f.txt').read())\\n```" + `", "delay_ms": 1500}]}},
			{"name": "exec", "type": "user_proxy", "human_input_mode": "NEVER", "code_execution": {}}],
		"termination": {"text_mention": {"text": "Code output: forty-two", "sources": ["exec"]}}}`
	c := p.create([]byte(spec))
	// Once the first block ran, the coder's second reply is on its way
	// (1.5 s): hold the chat's row for 35 s, over the append timeout and
	// over the 30 s a store transaction may take, so that the append fails.
	// The row an append updates is the chat's chat_state row (chats holds
	// only what never changes after create).
	events, stop := p.stream(c.ID, 0)
	defer stop()
	for e := range events {
		if e.Type == "message" && strings.Contains(string(e.Data), `"name":"exec"`) {
			break
		}
	}
	lock := exec.Command(psql, url, "-v", "ON_ERROR_STOP=1", "-c",
		fmt.Sprintf("BEGIN; SELECT 1 FROM chat_state WHERE id = '%s' FOR UPDATE; SELECT pg_sleep(35); COMMIT;", c.ID))
	if out, err := lock.CombinedOutput(); err != nil {
		t.Fatalf("psql: %v\n%s", err, out)
	}
	view := p.waitTerminal(c.ID, 90*time.Second)
	if view.Status != "completed" || *view.StopReason != "text_mention" {
		t.Fatalf("chat = %+v", view)
	}
	msgs := p.messages(c.ID)
	last := msgs[len(msgs)-1]
	if last.Name != "exec" || !strings.Contains(last.Content, "Code output: forty-two") {
		t.Fatalf("messages = %+v", msgs)
	}
	if !strings.Contains(p.logs.String(), "append not confirmed") {
		t.Fatalf("the append never timed out; the test did not test anything:\n%s", p.logs.String())
	}
}

// openOnFirst passes events on and closes open once the first has come: the
// stream is open and has read the chat so far.
func openOnFirst(events <-chan sseEvent, open chan struct{}) <-chan sseEvent {
	out := make(chan sseEvent)
	go func() {
		defer close(out)
		first := true
		for e := range events {
			out <- e
			if first {
				first = false
				close(open)
			}
		}
		if first {
			close(open)
		}
	}()
	return out
}
