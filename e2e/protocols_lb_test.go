package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/llm/openaitest"
	"github.com/agentd/agentd/internal/store/pgtest"
)

// lbKillTeam: two agents taking four turns, each reply streamed slowly by
// the model, so that a run lasts seconds and is killed mid-reply.
const lbKillTeam = `{"max_round": 4, "agents": [
	{"name": "a", "type": "assistant", "model": {"provider": "openai", "model": "gpt-test"}},
	{"name": "b", "type": "assistant", "model": {"provider": "openai", "model": "gpt-test"}}]}`

// lbKillResult is what js/lbkill.mjs prints at its end.
type lbKillResult struct {
	First, Again struct {
		Texts []string `json:"texts"`
		Ended string   `json:"ended"`
		Error string   `json:"error"`
	}
	Attempts  int      `json:"attempts"`
	LastError string   `json:"lastError"`
	Unhandled []string `json:"unhandled"`
}

// TestProtocolStreamsThroughLBAfterKill9 streams a run through haproxy in
// front of two replicas with each protocol's official client (AG-UI's
// HttpAgent, the openai client's chat completion and Responses streams),
// kills the replica that runs the chat (kill -9) mid-reply, and retries
// the same request (the same runId, the same Idempotency-Key): the first
// stream does not end as if the run had (the client raises an error, or,
// on the replica that survived, the stream follows the chat over to the
// other replica and ends with the whole answer), and the retry gets the
// answer of the one run, which the other replica finished: the chat has
// one run and each of its turns once.
func TestProtocolStreamsThroughLBAfterKill9(t *testing.T) {
	needJS(t, "@ag-ui/client", "openai")
	t.Parallel()
	for _, mode := range []string{"agui", "chat", "responses"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			lbKill(t, mode)
		})
	}
}

func lbKill(t *testing.T, mode string) {
	fake := openaitest.New(openaitest.WithAPIKey("sk-test-key"))
	defer fake.Close()
	fake.Respond(func(req openaitest.Request) openaitest.Reply {
		n := len(req.Chat.Messages)
		return openaitest.Reply{Pieces: []string{"turn", " after", " " + strings.Repeat("·", n), " messages", "."}, PieceDelay: 300 * time.Millisecond}
	})
	env := []string{"AGENTD_DATABASE_URL=" + pgtest.URL(t), "AGENTD_LEASE_TTL=2s", "AGENTD_SHUTDOWN_DRAIN=0s",
		"OPENAI_API_KEY=sk-test-key", "OPENAI_BASE_URL=" + fake.URL()}
	p1, p2 := startA2A(t, env...), startA2A(t, env...)
	if code, _, body := p1.do("PUT", "/v1/teams/turns", []byte(lbKillTeam)); code != 201 {
		t.Fatalf("save team: %d %s", code, body)
	}
	lb := startLB(t, p1, p2)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "js/lbkill.mjs", lb, a2aKey, "turns", mode, "k-"+mode)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var chatID string
	var killed, served *proc
	var res lbKillResult
	for sc.Scan() {
		var line struct {
			Opened bool   `json:"opened"`
			Chat   string `json:"chat"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("lbkill.mjs: %q: %v", sc.Text(), err)
		}
		if !line.Opened {
			mustUnmarshal(t, sc.Bytes(), &res)
			continue
		}
		chatID = line.Chat
		if mode == "agui" { // the thread's chat
			code, _, body := p1.do("GET", "/v1/chats?metadata.ag_ui_thread="+url.QueryEscape(line.Chat), nil)
			var list struct {
				Chats []struct{ ID string } `json:"chats"`
			}
			mustUnmarshal(t, body, &list)
			if code != 200 || len(list.Chats) != 1 {
				t.Fatalf("the thread's chat: %d %s", code, body)
			}
			chatID = list.Chats[0].ID
		}
		// The replica that runs the chat is killed; the one that created
		// it serves the stream (for AG-UI, the one that posted the run).
		posted := "chat created"
		if mode == "agui" {
			posted = "ag-ui run posted"
		}
		for _, p := range []*proc{p1, p2} {
			logged := p.logs.String()
			if loggedWith(logged, "chat claimed", chatID) {
				killed = p
			}
			if loggedWith(logged, posted, chatID) {
				served = p
			}
		}
		if killed == nil || served == nil {
			t.Fatalf("no replica logged that it runs chat %s (runs %v, serves %v)", chatID, killed != nil, served != nil)
		}
		killed.kill9()
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("lbkill.mjs: %v\n%s", err, stderr.String())
	}
	if killed == nil {
		t.Fatalf("the run said nothing before it ended: %+v", res)
	}
	survivor := p1
	if killed == p1 {
		survivor = p2
	}
	c := survivor.waitTerminal(chatID, 30*time.Second)
	msgs := survivor.messages(chatID)
	final := msgs[len(msgs)-1].Content
	t.Logf("%s: stream served by the killed replica: %v; first attempt %+v; retried %d times (last error %q), then %+v; unhandled rejections %q",
		mode, served == killed, res.First, res.Attempts, res.LastError, res.Again, res.Unhandled)

	// The first stream: an error the client raised, or the whole answer.
	if res.First.Error == "" && !slices.Contains(res.First.Texts, final) {
		t.Errorf("the first stream ended %q without an error and without the answer %q: %q", res.First.Ended, final, res.First.Texts)
	}
	if served == killed && res.First.Error == "" {
		t.Errorf("the stream of the killed replica ended %q without the client raising an error", res.First.Ended)
	}
	// The retry: the one run's answer.
	if res.Again.Error != "" || len(res.Again.Texts) == 0 || res.Again.Texts[len(res.Again.Texts)-1] != final {
		t.Errorf("the retry got %+v, want the run's final message %q", res.Again, final)
	}
	var runs struct {
		Run int `json:"run"`
	}
	_, _, body := survivor.do("GET", "/v1/chats/"+chatID, nil)
	mustUnmarshal(t, body, &runs)
	if c.Status != "completed" || runs.Run != 1 {
		t.Errorf("the chat is %s after %d runs, want one completed run", c.Status, runs.Run)
	}
	var turns []string
	for _, m := range msgs {
		if m.Role == "assistant" {
			turns = append(turns, m.Name)
		}
	}
	if strings.Join(turns, ",") != "a,b,a,b" {
		t.Errorf("the chat's turns are %v, want a,b,a,b once each", turns)
	}
}

// loggedWith reports whether a log holds a line with msg about chat id.
func loggedWith(logs, msg, id string) bool {
	for line := range strings.Lines(logs) {
		if strings.Contains(line, msg) && strings.Contains(line, "chat_id="+id) {
			return true
		}
	}
	return false
}
