package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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
		// Messages are the messages HttpAgent holds at the end, each as
		// "role: content".
		Messages []string `json:"messages"`
	}
	Attempts  int      `json:"attempts"`
	LastError string   `json:"lastError"`
	Unhandled []string `json:"unhandled"`
}

// TestProtocolStreamsThroughLBWhenAReplicaEnds streams a run through
// haproxy in front of two replicas with each protocol's official client
// (AG-UI's HttpAgent, the openai client's chat completion and Responses
// streams), and, once it has said something, a second client of the same
// run (the same runId, the same Idempotency-Key) straight from the other
// replica; then ends the replica that runs the chat mid-reply. Killed
// (kill -9), its stream is cut and the client raises the cut; stopped
// (SIGTERM, no drain), its stream ends with the protocol's error event
// (RUN_ERROR, an SSE error), which the client raises. Either way the
// first client then retries the same request and gets the one run's
// answer, which the other replica finished; the second client's stream
// follows the chat over to that replica and ends with the answer; the
// chat has one run and each of its turns once.
func TestProtocolStreamsThroughLBWhenAReplicaEnds(t *testing.T) {
	needJS(t, "@ag-ui/client", "openai")
	t.Parallel()
	for _, end := range []string{"kill9", "sigterm"} {
		for _, mode := range []string{"agui", "chat", "responses"} {
			t.Run(end+"/"+mode, func(t *testing.T) {
				t.Parallel()
				lbKill(t, mode, end == "sigterm")
			})
		}
	}
}

// nodeScript is a node script of e2e/js run by a test: the lines it
// prints, as they come, then its end.
type nodeScript struct {
	lines chan []byte
	// stdin is the script's standard input, for a script that waits for
	// the test.
	stdin  io.WriteCloser
	stderr *syncBuffer
	done   chan error
}

// startNode runs node with args (a script of e2e/js and its arguments).
func startNode(ctx context.Context, t *testing.T, args ...string) *nodeScript {
	t.Helper()
	cmd := exec.CommandContext(ctx, "node", args...)
	c := &nodeScript{lines: make(chan []byte, 16), stderr: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = c.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			c.lines <- slices.Clone(sc.Bytes())
		}
		close(c.lines)
		c.done <- cmd.Wait()
	}()
	return c
}

// wait waits for the script's end, failing the test if it failed.
func (c *nodeScript) wait(t *testing.T) {
	t.Helper()
	for range c.lines {
	}
	if err := <-c.done; err != nil {
		t.Fatalf("node: %v\n%s", err, c.stderr.String())
	}
}

// startLBClient runs js/lbkill.mjs on base (args: "once" or none).
func startLBClient(ctx context.Context, t *testing.T, base, mode, key string, args ...string) *nodeScript {
	t.Helper()
	return startNode(ctx, t, append([]string{"js/lbkill.mjs", base, a2aKey, "turns", mode, key}, args...)...)
}

// opened waits for lbkill.mjs's line saying the run has said something,
// and returns the chat (AG-UI: the thread) it named.
func (c *nodeScript) opened(t *testing.T) string {
	t.Helper()
	for b := range c.lines {
		var line struct {
			Opened bool   `json:"opened"`
			Chat   string `json:"chat"`
		}
		mustUnmarshal(t, b, &line)
		if line.Opened {
			return line.Chat
		}
	}
	t.Fatalf("lbkill.mjs ended before the run said anything: %v\n%s", <-c.done, c.stderr.String())
	return ""
}

// result waits for lbkill.mjs's end and returns what it printed last.
func (c *nodeScript) result(t *testing.T) lbKillResult {
	t.Helper()
	var last []byte
	for b := range c.lines {
		last = b
	}
	if err := <-c.done; err != nil {
		t.Fatalf("lbkill.mjs: %v\n%s", err, c.stderr.String())
	}
	var res lbKillResult
	mustUnmarshal(t, last, &res)
	return res
}

func lbKill(t *testing.T, mode string, term bool) {
	fake := openaitest.New(openaitest.WithAPIKey("sk-test-key"))
	defer fake.Close()
	fake.Respond(func(req openaitest.Request) openaitest.Reply {
		n := len(req.Chat.Messages)
		return openaitest.Reply{Pieces: []string{"turn", " after", " " + strings.Repeat("·", n), " messages", "."}, PieceDelay: 400 * time.Millisecond}
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
	key := "k-" + mode
	first := startLBClient(ctx, t, lb, mode, key)
	chatID := first.opened(t)
	if mode == "agui" { // the thread's chat
		code, _, body := p1.do("GET", "/v1/chats?metadata.ag_ui_thread="+url.QueryEscape(chatID), nil)
		var list struct {
			Chats []struct{ ID string } `json:"chats"`
		}
		mustUnmarshal(t, body, &list)
		if code != 200 || len(list.Chats) != 1 {
			t.Fatalf("the thread's chat: %d %s", code, body)
		}
		chatID = list.Chats[0].ID
	}
	// The replica that runs the chat is killed. The one that created it
	// (for AG-UI, posted the run) serves the first stream.
	posted := "chat created"
	if mode == "agui" {
		posted = "ag-ui run posted"
	}
	var killed, served *proc
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
	survivor := p1
	if killed == p1 {
		survivor = p2
	}
	second := startLBClient(ctx, t, survivor.base, mode, key, "once")
	second.opened(t)
	if term {
		killed.stop()
	} else {
		killed.kill9()
	}
	res, also := first.result(t), second.result(t)

	c := survivor.waitTerminal(chatID, 30*time.Second)
	msgs := survivor.messages(chatID)
	final := msgs[len(msgs)-1].Content
	t.Logf("%s: first stream served by the killed replica: %v; it got %+v; retried %d times (last error %q), then %+v; unhandled rejections %q",
		mode, served == killed, res.First, res.Attempts, res.LastError, res.Again, res.Unhandled)
	t.Logf("%s: the stream on the survivor got %+v", mode, also.First)

	// The first stream: an error the client raised (HttpAgent hands a
	// RUN_ERROR to its subscribers and resolves), never a success. A
	// replica stopped says why in the protocol's error event; one killed
	// cannot, and the client raises the cut.
	raised := res.First.Error != "" || strings.HasPrefix(res.First.Ended, "RUN_ERROR")
	if served == killed {
		said := res.First.Ended == "RUN_ERROR stream_interrupted" || strings.Contains(res.First.Error, "the server is shutting down")
		switch {
		case term && !said:
			t.Errorf("the stream of the stopped replica ended %q, error %q: want its error event saying the server is shutting down", res.First.Ended, res.First.Error)
		case !term && (res.First.Error == "" || res.First.Ended != ""):
			t.Errorf("the stream of the killed replica ended %q, error %q: want the client to raise the cut", res.First.Ended, res.First.Error)
		}
	}
	if !raised && !slices.Contains(res.First.Texts, final) {
		t.Errorf("the first stream ended %q without an error and without the answer %q: %q", res.First.Ended, final, res.First.Texts)
	}
	// The stream on the survivor: followed the chat to its end.
	success := map[string]string{"agui": "RUN_FINISHED", "chat": "stop", "responses": "completed"}[mode]
	if also.First.Error != "" || also.First.Ended != success || len(also.First.Texts) == 0 || also.First.Texts[len(also.First.Texts)-1] != final {
		t.Errorf("the stream on the surviving replica got %+v, want %s with the final message %q", also.First, success, final)
	}
	// The retry: the one run's answer.
	if res.Again.Error != "" || res.Again.Ended != success || len(res.Again.Texts) == 0 || res.Again.Texts[len(res.Again.Texts)-1] != final {
		t.Errorf("the retry got %+v, want %s with the run's final message %q", res.Again, success, final)
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
	// HttpAgent's messages are the thread's, in its order, a reply cut by
	// the kill not among them.
	if thread := threadLines(msgs); mode == "agui" && !slices.Equal(also.First.Messages, thread) {
		t.Errorf("HttpAgent on the surviving replica holds %q, the thread %q", also.First.Messages, thread)
	}
}

// threadLines are a chat's messages as lbkill.mjs prints HttpAgent's:
// "role: content", a line for each of a message's tool results (AG-UI
// has a message per result).
func threadLines(msgs []messageView) []string {
	var out []string
	for _, m := range msgs {
		if len(m.ToolResponses) == 0 {
			out = append(out, m.Role+": "+m.Content)
		}
		for _, tr := range m.ToolResponses {
			out = append(out, m.Role+": "+tr.Content)
		}
	}
	return out
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

// TestMCPCallThroughLBWhenAReplicaEnds calls a slow team's tool through
// haproxy (MCP sessions kept on their replica) with each official client,
// the TypeScript SDK's and the Go SDK's, and ends the replica serving the
// session once the team has said something. Stopped (SIGTERM, no drain),
// the call answers at once with an error result that names the chat and
// says the server is shutting down; killed (kill -9), the client raises
// the cut (the Go client at once, the TypeScript one at its timeout).
// Never a result that looks like the team's answer, and the run is not
// cancelled: it ends completed on the other replica.
func TestMCPCallThroughLBWhenAReplicaEnds(t *testing.T) {
	needA2AJS(t)
	t.Parallel()
	for _, end := range []string{"kill9", "sigterm"} {
		for _, client := range []string{"ts", "go"} {
			t.Run(end+"/"+client, func(t *testing.T) {
				t.Parallel()
				mcpLBEnd(t, client, end == "sigterm")
			})
		}
	}
}

// mcpLBCall is how a tool call ended: its result, or the client's error.
type mcpLBCall struct {
	Call *struct {
		Text       string `json:"text"`
		IsError    bool   `json:"isError"`
		Structured struct {
			ChatID string `json:"chat_id"`
			Status string `json:"status"`
		} `json:"structured"`
	} `json:"call"`
	Error string `json:"error"`
}

func mcpLBEnd(t *testing.T, client string, term bool) {
	env := []string{"AGENTD_DATABASE_URL=" + pgtest.URL(t), "AGENTD_LEASE_TTL=2s", "AGENTD_SHUTDOWN_DRAIN=0s"}
	p1, p2 := startA2A(t, env...), startA2A(t, env...)
	lb := startLB(t, p1, p2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	opened := make(chan struct{})
	ended := make(chan mcpLBCall, 1)
	if client == "ts" {
		node := startNode(ctx, t, "js/mcp.mjs", lb, a2aKey, "lbend")
		go func() {
			var last []byte
			for b := range node.lines {
				if strings.Contains(string(b), `"opened":true`) {
					close(opened)
					continue
				}
				last = b
			}
			var c mcpLBCall
			if err := <-node.done; err != nil || json.Unmarshal(last, &c) != nil {
				c.Error = fmt.Sprintf("mcp.mjs: %v %s\n%s", err, last, node.stderr.String())
			}
			ended <- c
		}()
	} else {
		go func() { ended <- mcpGoCall(ctx, lb, opened) }()
	}
	select {
	case <-opened:
	case c := <-ended:
		t.Fatalf("the call ended before the team said anything: %+v", c)
	}
	// The replica that took the call serves its session.
	var served *proc
	var chatID string
	for _, p := range []*proc{p1, p2} {
		for line := range strings.Lines(p.logs.String()) {
			if _, after, ok := strings.Cut(line, "mcp tool call started"); ok {
				served = p
				chatID, _, _ = strings.Cut(strings.SplitN(after, "chat_id=", 2)[1], " ")
			}
		}
	}
	if served == nil {
		t.Fatal("no replica logged the tool call")
	}
	begun := time.Now()
	if term {
		served.stop()
	} else {
		served.kill9()
	}
	c := <-ended
	how := "raising " + c.Error
	if c.Call != nil {
		how = fmt.Sprintf("with the result %+v", *c.Call)
	}
	t.Logf("%s: the call ended %s after the replica's end, %s", client, time.Since(begun).Round(time.Millisecond), how)
	switch {
	case c.Call != nil && !c.Call.IsError:
		t.Errorf("the cut call returned %q as if the team had answered", c.Call.Text)
	case term && (c.Call == nil || !strings.Contains(c.Call.Text, "shutting down") ||
		c.Call.Structured.ChatID != chatID || c.Call.Structured.Status != "running"):
		t.Errorf("the call on the stopped replica ended %s, want an error result saying the server is shutting down, naming chat %s as running", how, chatID)
	case !term && c.Error == "":
		t.Errorf("the call on the killed replica ended %s, want the client to raise the cut", how)
	}
	survivor := p1
	if served == p1 {
		survivor = p2
	}
	if ch := survivor.waitTerminal(chatID, time.Minute); ch.Status != "completed" {
		t.Errorf("the call's chat ended %s, want its run completed on the other replica", ch.Status)
	}
}

// mcpGoCall makes the call with the Go SDK's client, closing opened at
// its first progress notification.
func mcpGoCall(ctx context.Context, base string, opened chan struct{}) (c mcpLBCall) {
	var once sync.Once
	client := mcp.NewClient(&mcp.Implementation{Name: "agentd-e2e-go", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { once.Do(func() { close(opened) }) },
	})
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{a2aKey}}}, nil)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	// The session dies with its replica: closing it is not waited for.
	defer func() { go session.Close() }()
	if _, err := session.ListTools(ctx, nil); err != nil {
		c.Error = err.Error()
		return c
	}
	params := &mcp.CallToolParams{Name: "run_slow", Arguments: map[string]any{"task": "count slowly"}}
	params.SetProgressToken("lb-1")
	callCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := session.CallTool(callCtx, params)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	b, _ := json.Marshal(map[string]any{"text": res.Content[0].(*mcp.TextContent).Text, "isError": res.IsError, "structured": res.StructuredContent})
	_ = json.Unmarshal(b, &c.Call)
	return c
}
