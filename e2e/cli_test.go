package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cli runs `agentd chat …` of the binary under test against p.
func (p *proc) cli(env []string, args ...string) (stdout, stderr string, code int) {
	p.t.Helper()
	return p.commandEnv(env, append([]string{"chat"}, args...)...)
}

// cliEnv is the test's environment without agentd's variables.
func cliEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTD_") {
			env = append(env, kv)
		}
	}
	return env
}

func writeSpec(t *testing.T, spec string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(f, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// Every `agentd chat` subcommand against the real server, with the exit
// statuses of completed (0), failed (3) and cancelled (4) chats.
func TestChatCommand(t *testing.T) {
	t.Parallel()
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none")

	// run: a completed chat, every message in order, exit 0.
	out, errOut, code := p.cli(nil, "run", "examples/debate.json")
	if code != 0 {
		t.Fatalf("run debate: exit %d\n%s%s", code, out, errOut)
	}
	var spec struct {
		Models map[string]struct {
			Responses []json.RawMessage `json:"responses"`
		} `json:"models"`
	}
	mustUnmarshal(t, readExample(t, "debate.json"), &spec)
	// The debate's replies, in the order the round robin speaks them.
	var want []string
	for i := range 2 {
		for _, m := range []string{"proponent_script", "opponent_script", "judge_script"} {
			var s string
			if json.Unmarshal(spec.Models[m].Responses[i], &s) != nil {
				var o struct{ Content string }
				mustUnmarshal(t, spec.Models[m].Responses[i], &o)
				s = o.Content
			}
			want = append(want, s)
		}
	}
	created := strings.Fields(strings.SplitN(out, "\n", 2)[0])
	if len(created) < 2 || created[0] != "chat" {
		t.Fatalf("first line %q does not name the chat", created)
	}
	debateID := created[1]
	// Every message of the log, each once, in order, as the API has it;
	// the replies are the script's; one end line.
	api := p.messages(debateID)
	ran := cliMessages(t, "run", out)
	checkCLIMessages(t, "run", ran, api)
	var replies []string
	for _, m := range ran[min(1, len(ran)):] {
		replies = append(replies, m.Content)
	}
	if !slices.Equal(replies, want) {
		t.Errorf("run printed the replies %q, want the script's %q", replies, want)
	}
	if n := strings.Count(out, "\n== "); n != 1 || !strings.Contains(out, "\n== completed: text_mention — ") {
		t.Errorf("run output does not say once how the chat ended (%d end lines):\n%s", n, out)
	}

	// run --json: one event per line, each as the contract describes.
	failing := writeSpec(t, `{"task": "t", "max_round": 3, "agents": [{"name": "a", "type": "assistant",
		"model": {"provider": "replay", "responses": ["only one"]}}]}`)
	// A failure's end says its error once (the stop detail is the error).
	out, errOut, code = p.cli(nil, "run", failing)
	failedID := strings.Fields(out)[1]
	if f := p.get(failedID); code != 3 || f.StopDetail == nil || !strings.HasSuffix(out, "\n== failed: error — "+*f.StopDetail+"\n") {
		t.Errorf("run of a failing chat: exit %d, want it to end with the one line\n== failed: error — %s\n%s%s", code, deref(f.StopDetail), out, errOut)
	}
	out, _, code = p.cli(nil, "run", "--json", failing)
	if code != 3 {
		t.Fatalf("run of a failing chat: exit %d, want 3\n%s", code, out)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	var ids []int64
	last := sseEvent{}
	for sc.Scan() {
		var e struct {
			ID    int64           `json:"id"`
			Event string          `json:"event"`
			Data  json.RawMessage `json:"data"`
		}
		mustUnmarshal(t, sc.Bytes(), &e)
		last = sseEvent{ID: e.ID, Type: e.Event, Data: e.Data}
		conformsEvent(t, last)
		if e.Event != "message.delta" { // ephemeral: no id
			ids = append(ids, e.ID)
		}
	}
	if len(ids) < 4 || last.Type != "chat.failed" {
		t.Errorf("run --json: %d events, last %s", len(ids), last.Type)
	}
	// Every event of the log, each once, in order: ids 1…last_seq.
	var failed struct {
		Chats []chatView `json:"chats"`
	}
	_, _, body := p.do("GET", "/v1/chats?limit=1", nil)
	mustUnmarshal(t, body, &failed)
	if len(failed.Chats) != 1 || failed.Chats[0].Status != "failed" {
		t.Fatalf("the newest chat is not the failed one: %s", body)
	}
	for i, id := range ids {
		if id != int64(i+1) || len(ids) != int(failed.Chats[0].LastSeq) {
			t.Errorf("run --json printed the events %v, want 1…%d each once", ids, failed.Chats[0].LastSeq)
			break
		}
	}

	// follow: a chat that ended replays and exits with its end.
	out, _, code = p.cli(nil, "follow", debateID)
	if code != 0 {
		t.Errorf("follow of a completed chat: exit %d\n%s", code, out)
	}
	checkCLIMessages(t, "follow", cliMessages(t, "follow", out), api)

	// cancelled: run a slow chat, cancel it from another process, exit 4.
	slow := writeSpec(t, string(slowSpec(6, 10000)))
	run := exec.Command(binPath, "chat", "run", slow)
	run.Env = append(cliEnv(), "AGENTD_URL="+p.base)
	runOut := &syncBuffer{}
	run.Stdout, run.Stderr = runOut, runOut
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	var slowID string
	for deadline := time.Now().Add(20 * time.Second); slowID == ""; {
		if f := strings.Fields(runOut.String()); len(f) > 1 && f[0] == "chat" {
			slowID = f[1]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run printed no chat id: %s", runOut.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// cancel prints the chat once the cancel took effect, not the
	// running chat the 202 shows.
	out, errOut, code = p.cli(nil, "cancel", slowID)
	cancelled := p.get(slowID)
	if want := fmt.Sprintf("chat %s  \n  status     cancelled\n  stopped    cancelled: External termination requested\n"+
		"  turns      0, 1 messages, last seq %d\n  usage      0 prompt + 0 completion tokens\n  created    %s\n",
		slowID, cancelled.LastSeq, cancelled.CreatedAt.Local().Format(time.DateTime)); code != 0 || out != want {
		t.Errorf("cancel: exit %d\n%s%s\nwant\n%s", code, out, errOut, want)
	}
	err := run.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 4 {
		t.Errorf("run of a cancelled chat: %v, want exit status 4\n%s", err, runOut.String())
	}
	if c := p.get(slowID); c.Status != "cancelled" {
		t.Errorf("status %s after cancel", c.Status)
	}

	// ls: text and JSON, filtered by status.
	out, _, code = p.cli(nil, "ls")
	if code != 0 || !strings.Contains(out, debateID) || !strings.Contains(out, slowID) || !strings.HasPrefix(out, "ID") {
		t.Errorf("ls: exit %d\n%s", code, out)
	}
	out, _, code = p.cli(nil, "ls", "--status", "cancelled", "--json")
	conforms(t, "ChatList", []byte(out))
	var list struct {
		Chats []chatView `json:"chats"`
	}
	mustUnmarshal(t, []byte(out), &list)
	if code != 0 || len(list.Chats) != 1 || list.Chats[0].ID != slowID {
		t.Errorf("ls --status cancelled: exit %d, %+v", code, list.Chats)
	}

	// show: the chat and its messages.
	out, _, code = p.cli(nil, "show", debateID)
	summary, transcript, _ := strings.Cut(out, "\n\n")
	if code != 0 || !strings.Contains(summary, "status     completed") {
		t.Errorf("show: exit %d\n%s", code, out)
	}
	checkCLIMessages(t, "show", cliMessages(t, "show", transcript), api)
	out, _, _ = p.cli(nil, "show", "--json", debateID)
	var shown struct {
		Chat     json.RawMessage   `json:"chat"`
		Messages []json.RawMessage `json:"messages"`
	}
	mustUnmarshal(t, []byte(out), &shown)
	conforms(t, "Chat", shown.Chat)
	if len(shown.Messages) != 7 {
		t.Errorf("show --json: %d messages, want 7 (task and 6 replies)", len(shown.Messages))
	}

	// again: the debate goes on for a second run, in French, with its
	// script's third replies, and ends as the first did.
	out, errOut, code = p.cli(nil, "again", debateID, "Now in French.")
	var french []string
	for _, m := range []string{"proponent_script", "opponent_script", "judge_script"} {
		if len(spec.Models[m].Responses) < 3 {
			t.Fatalf("the debate's %s has no third reply: the example cannot go on for a second run", m)
		}
		var s string
		mustUnmarshal(t, spec.Models[m].Responses[2], &s)
		french = append(french, s)
	}
	replies = nil
	posted, rest, _ := strings.Cut(out, "\n")
	again := cliMessages(t, "again", rest)
	for _, m := range again[min(1, len(again)):] {
		replies = append(replies, m.Content)
	}
	if code != 0 || posted != "run 2 of chat "+debateID+" posted" || len(again) == 0 || again[0].Content != "Now in French." ||
		!slices.Equal(replies, french) || !strings.HasSuffix(out, "\n== completed: text_mention — Text 'TERMINATE' mentioned\n") {
		t.Errorf("again on the debate: exit %d, want the replies %q and its end\n%s%s", code, french, out, errOut)
	}

	// answer --speaker: a manual selection, then a human message.
	manual := p.create(readExample(t, "manual-selection.json"))
	prev := ""
	for _, speaker := range []string{"colours", "fruits", "colours", "fruits"} {
		_, pending := p.waitPause(manual.ID, prev)
		prev = pending.RequestID
		out, errOut, code = p.cli(nil, "answer", manual.ID, "--speaker", speaker)
		if code != 0 {
			t.Fatalf("answer --speaker %s: exit %d\n%s%s", speaker, code, out, errOut)
		}
	}
	out, _, code = p.cli(nil, "follow", manual.ID)
	if code != 0 || !strings.Contains(out, "A plum.") {
		t.Errorf("follow of the manual chat: exit %d\n%s", code, out)
	}
	human := p.create(readExample(t, "human-review.json"))
	_, first := p.waitPause(human.ID, "")
	if out, errOut, code = p.cli(nil, "answer", human.ID, "Mention Last-Event-ID."); code != 0 {
		t.Fatalf("answer: exit %d\n%s%s", code, out, errOut)
	}
	p.waitPause(human.ID, first.RequestID)
	if _, _, code = p.cli(nil, "answer", human.ID, "exit"); code != 0 {
		t.Fatalf("answer exit: exit %d", code)
	}
	if c := p.waitTerminal(human.ID, 20*time.Second); c.Status != "completed" || *c.StopReason != "human_exit" {
		t.Errorf("human chat ended %s %v", c.Status, c.StopReason)
	}
	msgs := p.messages(human.ID)
	if !containsMessage(msgs, "editor", "Mention Last-Event-ID.") {
		t.Errorf("the answer is not in the log: %+v", msgs)
	}
	// Answering a chat that waits for nothing fails (exit 1) and says why.
	if _, errOut, code = p.cli(nil, "answer", human.ID, "late"); code != 1 || !strings.Contains(errOut, "waits for no input") {
		t.Errorf("answer of an ended chat: exit %d: %s", code, errOut)
	}

	// Usage errors exit 2; help exits 0.
	if _, _, code = p.cli(nil, "show"); code != 2 {
		t.Errorf("show without an id: exit %d, want 2", code)
	}
	if _, _, code = p.cli(nil, "frobnicate"); code != 2 {
		t.Errorf("unknown command: exit %d, want 2", code)
	}
	if out, _, code = p.cli(nil, "--help"); code != 0 || !strings.Contains(out, "follow ID") {
		t.Errorf("chat --help: exit %d\n%s", code, out)
	}
	// A 422 is shown with its JSON pointers, exit 1.
	bad := writeSpec(t, `{"task": "", "agents": [{"name": "1x", "type": "robot"}]}`)
	if _, errOut, code = p.cli(nil, "run", bad); code != 1 || !strings.Contains(errOut, "/agents/0/name") {
		t.Errorf("run of an invalid spec: exit %d: %s", code, errOut)
	}
}

// cliMessage is a message as `agentd chat run|follow|show` prints it.
type cliMessage struct {
	Seq                 int64
	Name, Role, Content string
}

// cliHead is the first line of a printed message: seq, name, the role
// unless assistant, and the usage if any.
var cliHead = regexp.MustCompile(`^#(\d+) ([A-Za-z][A-Za-z0-9_-]*)(?: \((\w+)\))?(?:  \[\d+\+\d+ tokens\])?$`)

// cliMessages reads the messages of a command's text output: a head line,
// then the content indented by two spaces. Lines of other events (a
// speaker, the chat's start and end, an input request, the line naming a
// created chat) end a message; any other line is an error.
func cliMessages(t *testing.T, cmd, out string) []cliMessage {
	t.Helper()
	var msgs []cliMessage
	var body []string
	inMessage := false
	flush := func() {
		if inMessage {
			msgs[len(msgs)-1].Content = strings.Join(body, "\n")
		}
		body, inMessage = nil, false
	}
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if m := cliHead.FindStringSubmatch(line); m != nil {
			flush()
			seq, _ := strconv.ParseInt(m[1], 10, 64)
			role := m[3]
			if role == "" {
				role = "assistant"
			}
			msgs = append(msgs, cliMessage{Seq: seq, Name: m[2], Role: role})
			inMessage = true
			continue
		}
		switch {
		case inMessage && strings.HasPrefix(line, "  "):
			body = append(body, strings.TrimPrefix(line, "  "))
		case strings.HasPrefix(line, "── ") || strings.HasPrefix(line, "== ") || strings.HasPrefix(line, "?? ") ||
			strings.HasPrefix(line, "chat ") && strings.Contains(line, " created; follow it with: "):
			flush()
		default:
			t.Errorf("%s printed a line that is no part of a message or an event: %q", cmd, line)
		}
	}
	flush()
	return msgs
}

// checkCLIMessages checks that a command printed exactly the messages the
// API lists: each once, in order, with its name, role and content.
func checkCLIMessages(t *testing.T, cmd string, got []cliMessage, api []messageView) {
	t.Helper()
	var want []cliMessage
	for _, m := range api {
		want = append(want, cliMessage{Seq: m.Seq, Name: m.Name, Role: m.Role, Content: m.Content})
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s printed the messages\n%+v\nthe API lists\n%+v", cmd, got, want)
	}
}

func containsMessage(msgs []messageView, name, content string) bool {
	for _, m := range msgs {
		if m.Name == name && m.Content == content {
			return true
		}
	}
	return false
}

// With API keys, the client sends AGENTD_API_KEY; without it every command fails.
func TestChatCommandAPIKey(t *testing.T) {
	t.Parallel()
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none", "AGENTD_API_KEYS=sekrit-0123456789abcdef:team")
	if _, errOut, code := p.cli(nil, "ls"); code != 1 || !strings.Contains(errOut, "401") {
		t.Errorf("ls without a key: exit %d: %s", code, errOut)
	}
	out, errOut, code := p.cli([]string{"AGENTD_API_KEY=sekrit-0123456789abcdef"}, "run", "examples/debate.json")
	if code != 0 {
		t.Fatalf("run with the key: exit %d\n%s%s", code, out, errOut)
	}
	if out, _, code := p.cli([]string{"AGENTD_API_KEY=sekrit-0123456789abcdef"}, "ls"); code != 0 || !strings.Contains(out, "tabs-vs-spaces-debate") {
		t.Errorf("ls with the key: exit %d\n%s", code, out)
	}
}

// agentd --help lists the subcommands and exits 0; --version and help work.
func TestTopLevelHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		out, err := exec.Command(binPath, args...).Output()
		if err != nil || !strings.Contains(string(out), "chat") || !strings.Contains(string(out), "migrate") {
			t.Errorf("agentd %v: %v\n%s", args, err, out)
		}
	}
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, err := exec.Command(binPath, args...).Output()
		if err != nil || !strings.HasPrefix(string(out), "agentd ") {
			t.Errorf("agentd %v: %v\n%s", args, err, out)
		}
	}
}

// Tool results and code results as agentd chat prints them, line for line,
// from the examples that call tools and run code (as they are, in a bwrap
// sandbox): a tool result's first line follows its mark with one space,
// and a code execution's output is printed once (the message's content
// holds it).
func TestChatCommandPrintsResults(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bwrap"); err != nil {
		missing(t, "bwrap sandbox: bubblewrap is not installed (apt-get install bubblewrap)")
	}
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=bwrap")

	out, errOut, code := p.cli(nil, "run", "examples/swarm-triage.json")
	call := regexp.MustCompile(`call_[0-9a-f]+`).FindString(out)
	if want := "#7 triage (tool)\n  ← Transferred to billing, adopting the role of billing immediately.  " + call + "\n#8 triage\n"; code != 0 || call == "" || !strings.Contains(out, want) {
		t.Errorf("run swarm-triage: exit %d, want the tool result as\n%s\ngot\n%s%s", code, want, out, errOut)
	}

	// The python_function example: the function runs in the sandbox, and
	// its result (not in the replay script) is what the agent reads.
	out, errOut, code = p.cli(nil, "run", "examples/python-tool.json")
	call = regexp.MustCompile(`call_[0-9a-f]+`).FindString(out)
	if want := "#7 assistant (tool)\n  ← 46  " + call + "\n"; code != 0 || call == "" || !strings.Contains(out, want) ||
		!strings.HasSuffix(out, "\n== completed: text_mention — Text 'TERMINATE' mentioned\n") {
		t.Errorf("run python-tool: exit %d, want the tool result as\n%s\nand the chat completed, got\n%s%s", code, want, out, errOut)
	}

	out, errOut, code = p.cli(nil, "run", "examples/code-execution.json")
	_, executor, _ := strings.Cut(out, "\n#8 executor (user)\n")
	executor, _, _ = strings.Cut(executor, "\n── ")
	if want := "  exitcode: 0 (execution succeeded)\n  Code output: 385"; code != 0 || executor != want {
		t.Errorf("run code-execution: exit %d, the executor's message printed as\n%s\nwant\n%s\nin\n%s%s", code, executor, want, out, errOut)
	}
}
