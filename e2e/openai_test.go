package e2e

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/llm/openaitest"
	"github.com/agentd/agentd/internal/store/pgtest"
)

// openAIWriter is the saved team the OpenAI-compatible API serves in these
// tests: one assistant whose model (the fake OpenAI server) streams its
// reply in pieces.
const openAIWriter = `{"max_round": 1,
	"agents": [{"name": "writer", "type": "assistant", "model": {"provider": "openai", "model": "gpt-test"}}]}`

// writerReply is what the fake model answers to a task: pieces naming the
// task, so that each answer is told from the others.
func writerReply(req openaitest.Request) openaitest.Reply {
	task := ""
	if req.Chat != nil && len(req.Chat.Messages) > 0 {
		task = req.Chat.Messages[len(req.Chat.Messages)-1].Text()
	}
	return openaitest.Reply{Pieces: []string{"Answer", " to", " «", task, "»", " from", " the", " team."}, PieceDelay: 20 * time.Millisecond}
}

// openAIResult is what e2e/js/openai.mjs and e2e/py/openai_sdk.py print.
type openAIResult struct {
	Models     []string `json:"models"`
	Completion struct {
		ID      string         `json:"id"`
		Content string         `json:"content"`
		Finish  string         `json:"finish"`
		Usage   map[string]int `json:"usage"`
	} `json:"completion"`
	Stream struct {
		ID     string         `json:"id"`
		Pieces []string       `json:"pieces"`
		Finish string         `json:"finish"`
		Usage  map[string]int `json:"usage"`
	} `json:"stream"`
	Turn1 struct {
		ID, Conversation, Text, Status string
		Usage                          map[string]any `json:"usage"`
	} `json:"turn1"`
	Turn2 struct {
		ID, Conversation, Text, Status, Previous string
		Deltas                                   []string `json:"deltas"`
	} `json:"turn2"`
	Retrieved struct{ ID, Text, Status string } `json:"retrieved"`
	Unknown   struct {
		Status                     int
		Type, Code, Param, Message string
	} `json:"unknown"`
}

// TestOpenAISDKRunsASavedTeam points the official openai npm client at
// agentd: the models list holds the saved team; a chat completion is a new
// chat (its history the messages before the last) whose final message is
// the answer and whose usage is the chat's; a stream's chunks are the
// model's fragments (more than one) and add up to the final message; a Responses
// conversation of two turns is one chat with two runs, each answer its
// run's final message; an unknown team is OpenAI's 404 model_not_found.
func TestOpenAISDKRunsASavedTeam(t *testing.T) {
	t.Parallel()
	needJS(t, "openai")
	testOpenAISDK(t, func(ctx context.Context, base, key string) *exec.Cmd {
		return exec.CommandContext(ctx, "node", "js/openai.mjs", base, key, "writer")
	})
}

// TestOpenAIPythonSDK makes the same calls and checks as
// TestOpenAISDKRunsASavedTeam with the official openai Python package
// (e2e/py/openai_sdk.py), Debian's build of it in a Debian root that
// AGENTD_TEST_PYOPENAI_ROOT names (.ci/run builds one with mmdebstrap: no
// Python package index is reachable here). Python runs under bubblewrap,
// the root read-only, in the host's network namespace so that it reaches
// agentd on the loopback.
func TestOpenAIPythonSDK(t *testing.T) {
	t.Parallel()
	root := needPyOpenAI(t)
	script, err := filepath.Abs("py")
	if err != nil {
		t.Fatal(err)
	}
	testOpenAISDK(t, func(ctx context.Context, base, key string) *exec.Cmd {
		return pyOpenAI(ctx, root, script, "/tmp/py/openai_sdk.py", base, key, "writer")
	})
}

// pyOpenAI is python3 with args in the Debian root, under bubblewrap: the
// root read-only, dir (when not empty) read-only at /tmp/py, the host's
// network namespace (agentd listens on its loopback), no environment.
func pyOpenAI(ctx context.Context, root, dir string, args ...string) *exec.Cmd {
	bw := []string{"--ro-bind", root, "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"}
	if dir != "" {
		bw = append(bw, "--ro-bind", dir, "/tmp/py")
	}
	bw = append(bw, "--unshare-all", "--share-net", "--die-with-parent", "--new-session", "--clearenv",
		"--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp", "--setenv", "PYTHONDONTWRITEBYTECODE", "1", "python3")
	return exec.CommandContext(ctx, "bwrap", append(bw, args...)...)
}

// needPyOpenAI returns the Debian root with python3 and the openai
// package that AGENTD_TEST_PYOPENAI_ROOT names, skipping the test (failing
// it with CI=true) when there is none, or bwrap is missing.
func needPyOpenAI(t *testing.T) string {
	t.Helper()
	root := os.Getenv("AGENTD_TEST_PYOPENAI_ROOT")
	_, errBwrap := exec.LookPath("bwrap")
	_, errPy := os.Stat(filepath.Join(root, "usr/lib/python3/dist-packages/openai/__init__.py"))
	if root != "" && errBwrap == nil && errPy == nil {
		return root
	}
	msg := "bwrap and a Debian root with python3-openai (AGENTD_TEST_PYOPENAI_ROOT; .ci/run builds one) are needed for the Python openai client"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: a failure, not a skip)")
	}
	t.Skip(msg)
	return ""
}

// testOpenAISDK saves the team the SDK scripts use, runs the script that
// sdk starts against agentd, and checks what it printed against the chats
// read through /v1.
func testOpenAISDK(t *testing.T, sdk func(ctx context.Context, base, key string) *exec.Cmd) {
	fake := openaitest.New(openaitest.WithAPIKey("sk-test-key"))
	defer fake.Close()
	fake.Respond(writerReply)
	const key = "sk-agentd-openai-e2e"
	p := startAgentd(t, "AGENTD_DATABASE_URL="+pgtest.URL(t), "AGENTD_SANDBOX=none", "AGENTD_API_KEYS="+key+":acme",
		"OPENAI_API_KEY=sk-test-key", "OPENAI_BASE_URL="+fake.URL())
	p.auth = "Bearer " + key
	if code, _, body := p.do("PUT", "/v1/teams/writer", []byte(openAIWriter)); code != http.StatusCreated {
		t.Fatalf("save team: %d %s", code, body)
	}
	if code, _, body := p.do("GET", "/openai/v1/models", nil); code != http.StatusOK {
		t.Fatalf("models: %d %s", code, body)
	} else {
		conforms(t, "OpenAIModelList", body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := sdk(ctx, p.base, key)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr.String())
	}
	var got openAIResult
	mustUnmarshal(t, out, &got)

	if strings.Join(got.Models, ",") != "team:writer" {
		t.Errorf("models = %v, want [team:writer]", got.Models)
	}

	// The completion: the chat's final message and usage, read through /v1.
	chatID := strings.TrimPrefix(got.Completion.ID, "chatcmpl-")
	c := p.waitTerminal(chatID, 10*time.Second)
	msgs := p.messages(chatID)
	final := msgs[len(msgs)-1]
	if got.Completion.Content != final.Content || final.Name != "writer" || !strings.Contains(final.Content, "«Say hello.»") {
		t.Errorf("completion %q, the chat's final message %s: %q", got.Completion.Content, final.Name, final.Content)
	}
	if got.Completion.Finish != "stop" || got.Completion.Usage["prompt_tokens"] != c.Usage["prompt_tokens"] ||
		got.Completion.Usage["completion_tokens"] != c.Usage["completion_tokens"] || c.Usage["completion_tokens"] == 0 {
		t.Errorf("completion finish %q usage %v, the chat's usage %v", got.Completion.Finish, got.Completion.Usage, c.Usage)
	}
	var history []string
	for _, m := range msgs[:len(msgs)-1] {
		history = append(history, m.Role+":"+m.Content)
	}
	if want := "system:Earlier context.,user:first question,assistant:first answer,user:Say hello."; strings.Join(history, ",") != want {
		t.Errorf("the chat's messages before the answer = %q, want %q", strings.Join(history, ","), want)
	}

	// The stream: the model's pieces, adding up to the final message.
	msgs = p.messages(strings.TrimPrefix(got.Stream.ID, "chatcmpl-"))
	final = msgs[len(msgs)-1]
	if strings.Join(got.Stream.Pieces, "") != final.Content || len(got.Stream.Pieces) < 2 || !strings.Contains(final.Content, "«Stream it.»") {
		t.Errorf("stream pieces %q, the chat's final message %q", got.Stream.Pieces, final.Content)
	}
	if got.Stream.Finish != "stop" || got.Stream.Usage["completion_tokens"] == 0 {
		t.Errorf("stream finish %q usage %v", got.Stream.Finish, got.Stream.Usage)
	}

	// The conversation: one chat, two runs, each answer its run's final message.
	conv := got.Turn1.Conversation
	if conv == "" || got.Turn2.Conversation != conv || got.Turn2.Previous != got.Turn1.ID {
		t.Fatalf("turn 1 %+v, turn 2 %+v: not one conversation", got.Turn1, got.Turn2)
	}
	_, _, body := p.do("GET", "/v1/chats/"+conv, nil)
	var ch struct {
		Run    int    `json:"run"`
		Status string `json:"status"`
	}
	mustUnmarshal(t, body, &ch)
	if ch.Run != 2 || ch.Status != "completed" {
		t.Errorf("the conversation's chat: run %d status %s, want run 2 completed", ch.Run, ch.Status)
	}
	var answers []string
	for _, m := range p.messages(conv) {
		if m.Name == "writer" {
			answers = append(answers, m.Content)
		}
	}
	if len(answers) != 2 || got.Turn1.Text != answers[0] || got.Turn2.Text != answers[1] ||
		!strings.Contains(answers[1], "«Turn two.»") || strings.Join(got.Turn2.Deltas, "") != answers[1] {
		t.Errorf("turns %q and %q (deltas %q), the chat's answers %q", got.Turn1.Text, got.Turn2.Text, got.Turn2.Deltas, answers)
	}
	if got.Turn1.Status != "completed" || got.Turn2.Status != "completed" || got.Retrieved.Text != got.Turn1.Text || got.Retrieved.ID != got.Turn1.ID {
		t.Errorf("statuses %s/%s, retrieved %+v", got.Turn1.Status, got.Turn2.Status, got.Retrieved)
	}

	if u := got.Unknown; u.Status != http.StatusNotFound || u.Code != "model_not_found" || u.Type != "invalid_request_error" || u.Param != "model" {
		t.Errorf("unknown team: %+v, want OpenAI's 404 model_not_found", u)
	}
}

// TestOpenAIChatCompletionIdempotencyKey: a chat completion retried with
// the same Idempotency-Key is the same chat and the same answer; without
// a key, or in the wrong shape, the errors are OpenAI's.
func TestOpenAIChatCompletionIdempotencyKey(t *testing.T) {
	t.Parallel()
	fake := openaitest.New(openaitest.WithAPIKey("sk-test-key"))
	defer fake.Close()
	fake.Respond(writerReply)
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none", "AGENTD_API_KEYS=sk-agentd-idempotent:acme",
		"OPENAI_API_KEY=sk-test-key", "OPENAI_BASE_URL="+fake.URL())
	p.auth = "Bearer sk-agentd-idempotent"
	if code, _, body := p.do("PUT", "/v1/teams/writer", []byte(openAIWriter)); code != http.StatusCreated {
		t.Fatalf("save team: %d %s", code, body)
	}
	req := []byte(`{"model": "team:writer", "messages": [{"role": "user", "content": "Once."}]}`)
	type answer struct {
		ID      string `json:"id"`
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	var first, again answer
	code, h, body := p.do("POST", "/openai/v1/chat/completions", req, "Idempotency-Key", "k-1")
	if code != http.StatusOK {
		t.Fatalf("first: %d %s", code, body)
	}
	mustUnmarshal(t, body, &first)
	code, _, body = p.do("POST", "/openai/v1/chat/completions", req, "Idempotency-Key", "k-1")
	if code != http.StatusOK {
		t.Fatalf("again: %d %s", code, body)
	}
	mustUnmarshal(t, body, &again)
	if first.ID != again.ID || first.Choices[0].Message.Content != again.Choices[0].Message.Content || h.Get("Agentd-Chat-Id") != strings.TrimPrefix(first.ID, "chatcmpl-") {
		t.Errorf("first %+v, again %+v (chat header %q)", first, again, h.Get("Agentd-Chat-Id"))
	}
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("the model was called %d times, want once", n)
	}

	for _, c := range []struct {
		name, body, auth string
		status           int
		code             string
	}{
		{"another body, same key", `{"model": "team:writer", "messages": [{"role": "user", "content": "Twice."}]}`, "Bearer sk-agentd-idempotent", http.StatusConflict, "conflict"},
		{"no key", string(req), "", http.StatusUnauthorized, "unauthorized"},
		{"not json", `{"model":`, "Bearer sk-agentd-idempotent", http.StatusBadRequest, "invalid_json"},
		{"no task", `{"model": "team:writer", "messages": [{"role": "assistant", "content": "x"}]}`, "Bearer sk-agentd-idempotent", http.StatusBadRequest, "invalid_request"},
	} {
		p.auth = c.auth
		code, _, body := p.do("POST", "/openai/v1/chat/completions", []byte(c.body), "Idempotency-Key", "k-1")
		var e struct {
			Error struct {
				Message, Type string
				Code          *string
			} `json:"error"`
		}
		conforms(t, "OpenAIError", body)
		mustUnmarshal(t, body, &e)
		if code != c.status || e.Error.Code == nil || *e.Error.Code != c.code || e.Error.Message == "" {
			t.Errorf("%s: %d %s, want %d with code %s", c.name, code, body, c.status, c.code)
		}
	}
}

// TestOpenAIDocsExampleRuns runs the JavaScript example of docs/openai.md,
// as written but for the server's address, against the team the page
// saves: the page's example works.
func TestOpenAIDocsExampleRuns(t *testing.T) {
	t.Parallel()
	needJS(t, "openai")
	testOpenAIDocsExample(t, "```js", "Tabs, for accessibility. {", func(ctx context.Context) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "node", "--input-type=module", "-")
		cmd.Dir = "js" // where node_modules/openai is
		return cmd
	})
}

// TestOpenAIPythonDocsExampleRuns runs the Python example of
// docs/openai.md the same way, with the openai package of
// TestOpenAIPythonSDK.
func TestOpenAIPythonDocsExampleRuns(t *testing.T) {
	t.Parallel()
	root := needPyOpenAI(t)
	testOpenAIDocsExample(t, "```python", "Tabs, for accessibility. CompletionUsage(", func(ctx context.Context) *exec.Cmd {
		return pyOpenAI(ctx, root, "", "-")
	})
}

// testOpenAIDocsExample saves the team of docs/openai.md, feeds the page's
// block under fence, its server address replaced, to the command that run
// starts, and wants its output to hold the first answer as completion
// prints it (then its usage), and the two turns of the conversation.
func testOpenAIDocsExample(t *testing.T, fence, completion string, run func(context.Context) *exec.Cmd) {
	page, err := os.ReadFile("../docs/openai.md")
	if err != nil {
		t.Fatal(err)
	}
	block := func(fence string) string {
		_, rest, ok := strings.Cut(string(page), "\n"+fence+"\n")
		body, _, closed := strings.Cut(rest, "\n```\n")
		if !ok || !closed {
			t.Fatalf("docs/openai.md has no %s block", fence)
		}
		return body
	}
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none")
	if code, _, body := p.do("PUT", "/v1/teams/writer", []byte(block("```json team"))); code != http.StatusCreated {
		t.Fatalf("save the page's team: %d %s", code, body)
	}
	script := strings.ReplaceAll(block(fence), "http://127.0.0.1:8080", p.base)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := run(ctx)
	cmd.Stdin = strings.NewReader(script)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the page's example: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{completion, "Tabs, for accessibility. / Spaces, after all. / chat "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the example printed %q, without %q", out, want)
		}
	}
}

// TestOpenAIRunThatAsksAHuman: a team that asks a human is answered with
// OpenAI's error shape, 409 input_required naming the chat and marked not
// to be retried; a chat completion stream ends with an error chunk (no
// [DONE]), a Responses stream with response.incomplete; the chat waits
// for its input, readable through /v1.
func TestOpenAIRunThatAsksAHuman(t *testing.T) {
	t.Parallel()
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none")
	team := `{"max_round": 3, "agents": [
		{"name": "writer", "type": "assistant", "model": "script"},
		{"name": "editor", "type": "user_proxy", "human_input_mode": "ALWAYS"}],
		"models": {"script": {"provider": "replay", "responses": ["A draft."]}}}`
	if code, _, body := p.do("PUT", "/v1/teams/reviewed", []byte(team)); code != http.StatusCreated {
		t.Fatalf("save team: %d %s", code, body)
	}
	code, h, body := p.do("POST", "/openai/v1/chat/completions", []byte(`{"model": "team:reviewed", "messages": [{"role": "user", "content": "Write."}]}`))
	chatID := h.Get("Agentd-Chat-Id")
	conforms(t, "OpenAIError", body)
	if code != http.StatusConflict || h.Get("X-Should-Retry") != "false" || !strings.Contains(string(body), `"code":"input_required"`) ||
		chatID == "" || !strings.Contains(string(body), "/v1/chats/"+chatID+"/input") {
		t.Errorf("completion: %d %v %s", code, h, body)
	}
	if c := p.get(chatID); c.Status != "awaiting_input" {
		t.Errorf("the chat is %s, want awaiting_input", c.Status)
	}
	code, _, body = p.do("POST", "/openai/v1/chat/completions", []byte(`{"model": "team:reviewed", "stream": true, "messages": [{"role": "user", "content": "Write."}]}`))
	if code != http.StatusOK || !strings.Contains(string(body), `"role":"assistant"`) || !strings.Contains(string(body), `data: {"error":{`) ||
		!strings.Contains(string(body), `"code":"input_required"`) || strings.Contains(string(body), "[DONE]") {
		t.Errorf("completion stream: %d %s", code, body)
	}
	code, _, body = p.do("POST", "/openai/v1/responses", []byte(`{"model": "team:reviewed", "stream": true, "input": "Write."}`))
	if code != http.StatusOK || !strings.Contains(string(body), "event: response.created") || !strings.Contains(string(body), "event: response.incomplete") ||
		!strings.Contains(string(body), `"incomplete_details":{"reason":"input_required"}`) || strings.Contains(string(body), "response.completed") {
		t.Errorf("responses stream: %d %s", code, body)
	}
}

// openAILiveTeam: a poet (replayed, not streamed) and a critic whose model
// streams its reply slowly: the run goes on for seconds after the critic's
// first fragment.
const openAILiveTeam = `{"max_round": 2, "agents": [
	{"name": "poet", "type": "assistant", "model": {"provider": "replay", "responses": ["Logs scroll.", "Logs scroll again."]}},
	{"name": "critic", "type": "assistant", "model": {"provider": "openai", "model": "gpt-test"}}]}`

// TestOpenAIStreamsLive: a chat completion stream and a Responses stream,
// read with the official openai client, show the team's replies as they
// are typed (reasoning_content chunks; reasoning items): the first arrives
// while the run still goes on, and they add up to the critic's reply; the
// content (output_text) is the run's final message, exactly.
func TestOpenAIStreamsLive(t *testing.T) {
	t.Parallel()
	needJS(t, "openai")
	fake := openaitest.New(openaitest.WithAPIKey("sk-test-key"))
	defer fake.Close()
	fake.Respond(func(openaitest.Request) openaitest.Reply {
		return openaitest.Reply{Pieces: []string{"Short", " lines,", " long", " nights:", " it scans."}, PieceDelay: 400 * time.Millisecond}
	})
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none", "OPENAI_API_KEY=sk-test-key", "OPENAI_BASE_URL="+fake.URL())
	if code, _, body := p.do("PUT", "/v1/teams/critics", []byte(openAILiveTeam)); code != http.StatusCreated {
		t.Fatalf("save team: %d %s", code, body)
	}
	for _, mode := range []string{"chat", "responses"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		script := startNode(ctx, t, "js/openai_live.mjs", p.base, "none", "critics", mode, "Write about logs.")
		var chatID, statusAtFirst string
		var last struct {
			Chat, Reasoning, Content string
			Done                     bool
			Items                    []string
		}
		for b := range script.lines {
			last.Done = false
			mustUnmarshal(t, b, &last)
			if !last.Done && chatID == "" {
				chatID = last.Chat
				statusAtFirst = p.get(chatID).Status // the run, as the first fragment arrived
			}
		}
		script.wait(t)
		cancel()
		if !last.Done || chatID == "" {
			t.Fatalf("%s: no reasoning fragment came (last line %+v)", mode, last)
		}
		if statusAtFirst != "running" {
			t.Errorf("%s: the first fragment came when the chat was %s, not while it ran", mode, statusAtFirst)
		}
		msgs := p.messages(chatID)
		final := msgs[len(msgs)-1]
		if final.Name != "critic" || last.Content != final.Content {
			t.Errorf("%s: content %q, the run's final message %s: %q", mode, last.Content, final.Name, final.Content)
		}
		want := "critic: " + final.Content
		if mode == "responses" {
			want = final.Content
			if strings.Join(last.Items, ",") != "reasoning,message" {
				t.Errorf("responses: output items %v, want a reasoning item and the message", last.Items)
			}
		}
		if last.Reasoning != want {
			t.Errorf("%s: reasoning %q, want %q", mode, last.Reasoning, want)
		}
	}
}
