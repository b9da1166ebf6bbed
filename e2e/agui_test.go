package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/llm/openaitest"
)

// AG-UI, driven by the official client (@ag-ui/client's HttpAgent,
// e2e/js/agui.mjs) against the real binary.

// aguiEvent is an AG-UI event as the client handed it to its subscriber.
type aguiEvent struct {
	Type         string          `json:"type"`
	StepName     string          `json:"stepName"`
	MessageID    string          `json:"messageId"`
	Delta        string          `json:"delta"`
	ToolCallID   string          `json:"toolCallId"`
	ToolCallName string          `json:"toolCallName"`
	Content      json.RawMessage `json:"content"`
	ThreadID     string          `json:"threadId"`
	Outcome      *struct {
		Type       string `json:"type"`
		Interrupts []struct {
			ID, Reason, Message, ToolCallID string
		} `json:"interrupts"`
	} `json:"outcome"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

// aguiRun is one run as agui.mjs reports it.
type aguiRun struct {
	Events     []aguiEvent `json:"events"`
	Error      string      `json:"error"`
	Interrupts []struct {
		ID string `json:"id"`
	} `json:"interrupts"`
	// Messages are the messages HttpAgent holds after the run.
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

// types lists a run's event types, a step's with its name.
func (r aguiRun) types() []string {
	var ts []string
	for _, e := range r.Events {
		if e.StepName != "" {
			ts = append(ts, e.Type+":"+e.StepName)
			continue
		}
		ts = append(ts, e.Type)
	}
	return ts
}

// texts adds up each streamed message by its id, in the order they began,
// with how many CONTENT events each had.
func (r aguiRun) texts() (texts []string, contents []int) {
	index := map[string]int{}
	for _, e := range r.Events {
		switch e.Type {
		case "TEXT_MESSAGE_START":
			index[e.MessageID] = len(texts)
			texts, contents = append(texts, ""), append(contents, 0)
		case "TEXT_MESSAGE_CONTENT":
			texts[index[e.MessageID]] += e.Delta
			contents[index[e.MessageID]]++
		}
	}
	return texts, contents
}

// aguiTeams: calc calls a tool (an HTTP tool of the test) and a writer
// streams its reply; review's user_proxy asks a human; held's tool call
// waits for approval.
const (
	aguiCalc = `{"max_round": 2, "tools": [{"name": "add",
		"parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}, "implementation": {"type": "http", "url": %q}}],
		"agents": [{"name": "calc", "type": "assistant", "tools": ["add"], "tool_call_summary_format": "{result}",
			"model": {"provider": "replay", "responses": [{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}]}},
			{"name": "writer", "type": "assistant", "model": {"provider": "openai", "model": "gpt-test"}}]}`
	aguiReview = `{"max_round": 10, "termination": {"text_mention": {"text": "TERMINATE"}}, "agents": [
		{"name": "writer", "type": "assistant", "model": {"provider": "replay", "responses": ["draft one", "draft two TERMINATE"]}},
		{"name": "editor", "type": "user_proxy", "human_input_mode": "ALWAYS"}]}`
	aguiHeld = `{"max_round": 1, "tools": [{"name": "add",
		"parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}, "implementation": {"type": "http", "url": %q}}],
		"agents": [{"name": "calc", "type": "assistant", "tools": ["add"], "tool_approval": "always", "tool_call_summary_format": "{result}",
			"model": {"provider": "replay", "responses": [{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}]}}]}`
)

// TestAGUIClientRunsASavedTeam: HttpAgent runs a tool-using team (steps
// per turn, the tool call with its arguments and result, the writer's
// reply in the model's own fragments adding up to its message) and a team
// that asks a human: the run ends with an interrupt, the next run's
// resume answers it and the thread completes, and a later run on the
// thread is the chat's next run, starting with a messages snapshot; a
// held tool call is an interrupt that a resume approves with edited
// arguments.
func TestAGUIClientRunsASavedTeam(t *testing.T) {
	t.Parallel()
	needJS(t, "@ag-ui/client")
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Arguments struct{ A, B int } `json:"arguments"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		fmt.Fprintf(w, "%d", body.Arguments.A+body.Arguments.B)
	}))
	defer tool.Close()
	fake := openaitest.New(openaitest.WithAPIKey("sk-test-key"))
	defer fake.Close()
	fake.Respond(writerReply)
	const key = "sk-agentd-agui-e2e"
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none", "AGENTD_API_KEYS="+key+":acme",
		"AGENTD_TOOL_ALLOW_PRIVATE=true", "OPENAI_API_KEY=sk-test-key", "OPENAI_BASE_URL="+fake.URL())
	p.auth = "Bearer " + key
	for name, spec := range map[string]string{"calc": fmt.Sprintf(aguiCalc, tool.URL), "review": aguiReview, "held": fmt.Sprintf(aguiHeld, tool.URL)} {
		if code, _, body := p.do("PUT", "/v1/teams/"+name, []byte(spec)); code != http.StatusCreated {
			t.Fatalf("save team %s: %d %s", name, code, body)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "js/agui.mjs", p.base, key, "calc", "review", "held")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node agui.mjs: %v\n%s", err, stderr.String())
	}
	var got struct {
		Tools, Asked, Answered, Again aguiRun
		AnsweredAgain                 aguiRun
		Held, Approved                aguiRun
		ThreadID                      string `json:"threadId"`
	}
	mustUnmarshal(t, out, &got)

	// The tool-using team: steps per turn, the tool call, the messages.
	r := got.Tools
	if r.Error != "" {
		t.Fatalf("tools run raised %s", r.Error)
	}
	want := "RUN_STARTED STATE_SNAPSHOT STEP_STARTED:calc TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END TOOL_CALL_RESULT " +
		"TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END STEP_FINISHED:calc STEP_STARTED:writer TEXT_MESSAGE_START"
	if ts := strings.Join(r.types(), " "); !strings.HasPrefix(ts, want) || !strings.HasSuffix(ts, "TEXT_MESSAGE_END STEP_FINISHED:writer RUN_FINISHED") {
		t.Errorf("events:\n got %s\nwant %s … TEXT_MESSAGE_END STEP_FINISHED:writer RUN_FINISHED", ts, want)
	}
	var args, result string
	for _, e := range r.Events {
		switch e.Type {
		case "TOOL_CALL_START":
			if e.ToolCallName != "add" {
				t.Errorf("tool call %+v", e)
			}
		case "TOOL_CALL_ARGS":
			args += e.Delta
		case "TOOL_CALL_RESULT":
			_ = json.Unmarshal(e.Content, &result)
		}
	}
	var a struct{ A, B int }
	if json.Unmarshal([]byte(args), &a) != nil || a.A != 1 || a.B != 2 || result != "3" {
		t.Errorf("tool call arguments %q, result %q", args, result)
	}
	id := threadChat(t, p, "calc")
	var said []string
	for _, m := range p.messages(id) {
		if m.Role != "user" && m.Content != "" && m.Role != "tool" {
			said = append(said, m.Content)
		}
	}
	texts, contents := r.texts()
	if strings.Join(texts, "|") != strings.Join(said, "|") || len(contents) != 2 || contents[1] < 2 {
		t.Errorf("streamed messages %q (%v CONTENT events each), the chat's %q", texts, contents, said)
	}

	// The human: an interrupt, answered by the next run's resume.
	r = got.Asked
	last := r.Events[len(r.Events)-1]
	if r.Error != "" || last.Type != "RUN_FINISHED" || last.Outcome == nil || last.Outcome.Type != "interrupt" ||
		len(last.Outcome.Interrupts) != 1 || len(r.Interrupts) != 1 || r.Interrupts[0].ID != last.Outcome.Interrupts[0].ID {
		t.Fatalf("asked: %v (error %q, interrupts %+v)", r.types(), r.Error, r.Interrupts)
	}
	if texts, _ := r.texts(); strings.Join(texts, "|") != "draft one" {
		t.Errorf("asked: messages %q", texts)
	}
	r = got.Answered
	last = r.Events[len(r.Events)-1]
	if texts, _ := r.texts(); r.Error != "" || last.Type != "RUN_FINISHED" || last.Outcome.Type != "success" || strings.Join(texts, "|") != "draft two TERMINATE" {
		t.Errorf("answered: %v %q (error %q)", r.types(), texts, r.Error)
	}
	if r.Events[1].Type != "MESSAGES_SNAPSHOT" {
		t.Errorf("a resumed thread's run began %v", r.types())
	}
	// The same resume posted again: the run from the answer on, again.
	again := got.AnsweredAgain
	last = again.Events[len(again.Events)-1]
	if texts, _ := again.texts(); again.Error != "" || last.Type != "RUN_FINISHED" || last.Outcome.Type != "success" || strings.Join(texts, "|") != "draft two TERMINATE" {
		t.Errorf("the resume posted again: %v %q (error %q)", again.types(), texts, again.Error)
	}
	id = threadChat(t, p, "review")
	var human []string
	for _, m := range p.messages(id) {
		if m.Name == "editor" {
			human = append(human, m.Content)
		}
	}
	if strings.Join(human, "|") != "one more pass" {
		t.Errorf("the human's messages %q", human)
	}

	// A later run on the thread: the chat's run 2, after a snapshot of
	// the thread so far; the editor's turn is next, so it asks the human.
	r = got.Again
	if len(r.Events) < 3 || r.Events[1].Type != "MESSAGES_SNAPSHOT" || r.Events[len(r.Events)-1].Outcome == nil || r.Events[len(r.Events)-1].Outcome.Type != "interrupt" {
		t.Fatalf("again: %v (error %q)", r.types(), r.Error)
	}
	var snap []string
	for _, m := range r.Events[1].Messages {
		snap = append(snap, m.Role+":"+m.Content)
	}
	// The snapshot ends with the run's task, which the thread holds once
	// the run starts.
	if want := "user:Write a draft.|assistant:draft one|user:one more pass|assistant:draft two TERMINATE|user:And a third."; strings.Join(snap, "|") != want {
		t.Errorf("snapshot %q, want %q", snap, want)
	}
	var c struct {
		Run    int    `json:"run"`
		Status string `json:"status"`
	}
	_, _, body := p.do("GET", "/v1/chats/"+id, nil)
	mustUnmarshal(t, body, &c)
	if c.Run != 2 || c.Status != "awaiting_input" {
		t.Errorf("the thread's chat: run %d %s", c.Run, c.Status)
	}
	// HttpAgent holds the thread in its order: with the human's answer,
	// which came in a resume and not as a message, in its place, and the
	// third task where it was asked.
	var holds []string
	for _, m := range r.Messages {
		holds = append(holds, m.Role+": "+m.Content)
	}
	if thread := threadLines(p.messages(id)); !slices.Equal(holds, thread) {
		t.Errorf("HttpAgent holds %q, the thread %q", holds, thread)
	}

	// Approvals: the held call is an interrupt naming it; the resume
	// approves it with edited arguments, and its result is theirs.
	r = got.Held
	last = r.Events[len(r.Events)-1]
	if last.Outcome == nil || last.Outcome.Type != "interrupt" || last.Outcome.Interrupts[0].Reason != "agentd:approval" || last.Outcome.Interrupts[0].ToolCallID == "" {
		t.Fatalf("held: %v %+v (error %q)", r.types(), last.Outcome, r.Error)
	}
	r = got.Approved
	result = ""
	for _, e := range r.Events {
		if e.Type == "TOOL_CALL_RESULT" && e.ToolCallID == last.Outcome.Interrupts[0].ToolCallID {
			_ = json.Unmarshal(e.Content, &result)
		}
	}
	if r.Error != "" || result != "5" || r.Events[len(r.Events)-1].Type != "RUN_FINISHED" {
		t.Errorf("approved with edited arguments: %v, result %q (error %q)", r.types(), result, r.Error)
	}
}

// startAGUI starts agentd on SQLite for @ag-ui/client with one API key,
// which its requests then carry, and env (which may set the sandbox).
func startAGUI(t *testing.T, key string, env ...string) *proc {
	t.Helper()
	needJS(t, "@ag-ui/client")
	p := startAgentd(t, append([]string{"AGENTD_DATA_DIR=" + t.TempDir(), "AGENTD_SANDBOX=none", "AGENTD_API_KEYS=" + key + ":acme"}, env...)...)
	p.auth = "Bearer " + key
	return p
}

// threadChat is the one chat of a team made for an AG-UI thread.
func threadChat(t *testing.T, p *proc, team string) string {
	t.Helper()
	code, _, body := p.do("GET", "/v1/chats?team="+url.QueryEscape(team), nil)
	var list struct {
		Chats []struct {
			ID       string            `json:"id"`
			Metadata map[string]string `json:"metadata"`
		} `json:"chats"`
	}
	mustUnmarshal(t, body, &list)
	if code != http.StatusOK || len(list.Chats) != 1 || list.Chats[0].Metadata["ag_ui_thread"] == "" {
		t.Fatalf("chats of %s: %d %s", team, code, body)
	}
	return list.Chats[0].ID
}

// TestAGUIDocExampleRuns runs docs/ag-ui.md's script against its team on
// the real binary and checks it prints what the page says; then the
// route's errors.
func TestAGUIDocExampleRuns(t *testing.T) {
	t.Parallel()
	const key = "sk-agentd-agui-docs"
	p := startAGUI(t, key)
	team := fencedBlocks(t, "../docs/ag-ui.md", "json team")
	code := fencedBlocks(t, "../docs/ag-ui.md", "js")
	output := fencedBlocks(t, "../docs/ag-ui.md", "")
	if len(team) != 1 || len(code) != 1 || len(output) != 1 {
		t.Fatalf("docs/ag-ui.md has %d team, %d js and %d output blocks, want one of each", len(team), len(code), len(output))
	}
	if status, _, body := p.do("PUT", "/v1/teams/review", []byte(team[0])); status != http.StatusCreated {
		t.Fatalf("PUT the docs' team: %d %s", status, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--input-type=module", "-")
	cmd.Dir = "js" // where the pinned clients are installed
	cmd.Stdin = strings.NewReader(code[0])
	cmd.Env = append(os.Environ(), "AGENTD_URL="+p.base, "AGENTD_API_KEY="+key)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the example: %v\n%s", err, stderr.String())
	}
	if got, want := trimLines(string(out)), trimLines(output[0]); got != want {
		t.Errorf("the example printed\n%s\nthe doc says\n%s", got, want)
	}

	// Errors before a stream are problems, as on /v1: every problem of
	// the body at once, an unknown team, a missing key.
	status, _, body := p.do("POST", "/ag-ui/review", []byte(`{"messages": [{"id": "1", "role": "assistant", "content": "hi"}]}`))
	if status != http.StatusUnprocessableEntity || !strings.Contains(string(body), `"/threadId"`) || !strings.Contains(string(body), `"/runId"`) {
		t.Errorf("an input without ids: %d %s", status, body)
	}
	status, _, body = p.do("POST", "/ag-ui/review", []byte(`{"threadId": "t1", "runId": "r1", "messages": [{"id": "1", "role": "assistant", "content": "hi"}]}`))
	if status != http.StatusUnprocessableEntity || !strings.Contains(string(body), `"/messages"`) {
		t.Errorf("a new thread without a task: %d %s", status, body)
	}
	if status, _, body = p.do("POST", "/ag-ui/nope", []byte(`{"threadId": "t", "runId": "r", "messages": [{"id": "1", "role": "user", "content": "hi"}]}`)); status != http.StatusNotFound {
		t.Errorf("an unknown team: %d %s", status, body)
	}
	p.auth = ""
	if status, _, body = p.do("POST", "/ag-ui/review", []byte(`{}`)); status != http.StatusUnauthorized {
		t.Errorf("without a key: %d %s", status, body)
	}
}

// aguiStateTeam declares variables of its own, which a thread's state
// is merged over; its agent's first reply calls a Python function that
// sets a variable (in the chat's sandbox), its second says "two".
const aguiStateTeam = `{"max_round": 1, "context_variables": {"lang": "en", "tier": "silver"},
	"tools": [{"name": "tag", "description": "Tag the case.", "implementation": {"type": "python_function",
		"source_code": "def tag(label: str, context_variables) -> str:\n    context_variables['label'] = label\n    return 'tagged ' + label\n"}}],
	"agents": [{"name": "a", "type": "assistant", "tools": ["tag"], "model": {"provider": "replay",
		"responses": [{"tool_calls": [{"name": "tag", "arguments": {"label": "lamp"}}]}, "two"]}}]}`

// TestAGUIStateIsTheChatsContextVariables: HttpAgent's state is the
// thread's context variables. A first run's state is merged over the
// team's variables when the thread's chat is made, and its tool's change
// reaches the client while the run streams; a PATCH between runs and the
// client's own change of its state before the next run both reach the
// chat (the run merges what the client changed), and after each run the
// state HttpAgent holds equals the chat's variables.
func TestAGUIStateIsTheChatsContextVariables(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bwrap"); err != nil {
		missing(t, "bwrap sandbox: bubblewrap is not installed (apt-get install bubblewrap)")
	}
	const key = "sk-agentd-agui-state"
	p := startAGUI(t, key, "AGENTD_SANDBOX=bwrap", "AGENTD_SANDBOX_WORK_ROOT="+reachableDir(t))
	if code, _, body := p.do("PUT", "/v1/teams/desk", []byte(aguiStateTeam)); code != http.StatusCreated {
		t.Fatalf("save team: %d %s", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node := startNode(ctx, t, "js/agui_state.mjs", p.base, key, "desk")
	type runState struct {
		State     map[string]any   `json:"state"`
		Snapshots []map[string]any `json:"snapshots"`
		Error     string           `json:"error"`
	}
	next := func() runState {
		t.Helper()
		b, ok := <-node.lines
		if !ok {
			t.Fatalf("agui_state.mjs ended: %v\n%s", <-node.done, node.stderr.String())
		}
		var r runState
		mustUnmarshal(t, b, &r)
		if r.Error != "" {
			t.Fatalf("the run raised %s", r.Error)
		}
		return r
	}
	// vars are the chat's context variables, as JSON values.
	vars := func(id string) map[string]any {
		t.Helper()
		var c struct {
			ContextVariables map[string]any `json:"context_variables"`
		}
		_, _, body := p.do("GET", "/v1/chats/"+id, nil)
		mustUnmarshal(t, body, &c)
		return c.ContextVariables
	}

	first := next()
	id := threadChat(t, p, "desk")
	want := map[string]any{"label": "lamp", "lang": "en", "tier": "gold"}
	if got := vars(id); !reflect.DeepEqual(got, want) || !reflect.DeepEqual(first.State, want) {
		t.Errorf("after the first run: the chat's variables %v, HttpAgent's state %v; want both %v", got, first.State, want)
	}
	// The run began with the team's variables and the client's state,
	// then the tool's change came.
	if len(first.Snapshots) != 2 || !reflect.DeepEqual(first.Snapshots[0], map[string]any{"lang": "en", "tier": "gold"}) {
		t.Errorf("the first run's state snapshots %v: want the variables at its start, then the tool's change", first.Snapshots)
	}
	if code, _, body := p.do("PATCH", "/v1/chats/"+id, []byte(`{"context_variables": {"severity": 9}}`)); code != http.StatusOK {
		t.Fatalf("patch: %d %s", code, body)
	}
	if _, err := io.WriteString(node.stdin, "patched\n"); err != nil {
		t.Fatal(err)
	}
	second := next()
	node.wait(t)
	want = map[string]any{"label": "lamp", "lang": "en", "severity": float64(9), "tier": "platinum"}
	if got := vars(id); !reflect.DeepEqual(got, want) || !reflect.DeepEqual(second.State, want) {
		t.Errorf("after the second run: the chat's variables %v, HttpAgent's state %v; want both %v", got, second.State, want)
	}
	// The run began with the variables the PATCH left, then merged the
	// client's change.
	if len(second.Snapshots) < 2 || second.Snapshots[0]["severity"] != float64(9) || second.Snapshots[0]["tier"] != "gold" {
		t.Errorf("the second run's state snapshots %v: want the PATCH's variables first, then the client's change", second.Snapshots)
	}
}

// threadRun is what agui_thread.mjs prints for a run.
type threadRun struct {
	Started  []string `json:"started"`
	Texts    []string `json:"texts"`
	Ended    string   `json:"ended"`
	Error    string   `json:"error"`
	Messages []string `json:"messages"`
}

// nextRun reads what agui_thread.mjs printed for the run of task, which
// must have finished.
func nextRun(t *testing.T, node *nodeScript, task string) threadRun {
	t.Helper()
	b, ok := <-node.lines
	if !ok {
		node.wait(t)
		t.Fatalf("agui_thread.mjs ended before %q", task)
	}
	var got threadRun
	mustUnmarshal(t, b, &got)
	t.Logf("%s: %+v", task, got)
	if got.Error != "" || got.Ended != "RUN_FINISHED" {
		t.Fatalf("%q ended %q, error %q", task, got.Ended, got.Error)
	}
	return got
}

// TestAGUIClientHoldsTheThreadInOrder runs two runs of a thread through
// one HttpAgent, as a chat UI does, with replies streamed (a) and whole
// (b), and the model's connection dropped in the middle of one reply so
// that the call is made again and HttpAgent holds a fragment the thread
// does not; between them the first run is posted again with its runId,
// which streams it once more. After each run HttpAgent holds the thread's
// messages in the thread's order: each task where it was asked, the
// fragment gone, the replayed run's text once, and the second task kept
// while its run waits to start.
func TestAGUIClientHoldsTheThreadInOrder(t *testing.T) {
	needJS(t, "@ag-ui/client")
	t.Parallel()
	fake := openaitest.New(openaitest.WithAPIKey("sk-test-key"))
	defer fake.Close()
	var calls atomic.Int32
	fake.Respond(func(req openaitest.Request) openaitest.Reply {
		pieces := []string{"a", " after", " " + strings.Repeat("·", len(req.Chat.Messages)), "."}
		r := openaitest.Reply{Pieces: pieces, PieceDelay: 50 * time.Millisecond}
		if calls.Add(1) == 2 {
			r.CutAfter = 2 // a's second reply: made again
		}
		return r
	})
	const key = "sk-agentd-agui-thread"
	p := startAGUI(t, key, "OPENAI_API_KEY=sk-test-key", "OPENAI_BASE_URL="+fake.URL())
	team := `{"max_round": 3, "agents": [
		{"name": "a", "type": "assistant", "model": {"provider": "openai", "model": "gpt-test"}},
		{"name": "b", "type": "assistant", "model": {"provider": "replay", "responses": ["b one.", "b two.", "b three."]}}]}`
	if code, _, body := p.do("PUT", "/v1/teams/pair", []byte(team)); code != http.StatusCreated {
		t.Fatalf("save team: %d %s", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tasks := []string{"count", "=again", "count again", "=again"}
	node := startNode(ctx, t, append([]string{"js/agui_thread.mjs", p.base, key, "pair"}, tasks...)...)
	for i, task := range tasks {
		got := nextRun(t, node, task)
		thread := threadLines(p.messages(threadChat(t, p, "pair")))
		if !slices.Equal(got.Messages, thread) {
			t.Errorf("after %q HttpAgent holds %q, the thread %q", task, got.Messages, thread)
		}
		// The fragment reached the client (else there was nothing to
		// mend), and the run's end took it away again.
		if i == 0 && !slices.Contains(got.Texts, "a after") {
			t.Errorf("the client never got the cut reply's fragment: %q", got.Texts)
		}
		fmt.Fprintln(node.stdin) // the next run
	}
	node.wait(t)
}

// TestAGUIClientHoldsParallelRepliesInOrder: a graph's parallel step
// through HttpAgent, whose messages reach the client in another order
// than they land in the thread. slow's reply begins streaming first and
// lands last; quick's begins after it and lands first; calc's tool call
// lands first and its result (which HttpAgent puts right after the call)
// after quick's reply. The run ends with HttpAgent holding the thread's
// messages in the thread's order.
func TestAGUIClientHoldsParallelRepliesInOrder(t *testing.T) {
	needJS(t, "@ag-ui/client")
	t.Parallel()
	const key = "sk-agentd-agui-parallel"
	var p *proc
	// get reads path, off the test's goroutine (the model and the tool
	// wait in their handlers).
	get := func(ctx context.Context, path string, v any) bool {
		req, err := http.NewRequestWithContext(ctx, "GET", p.base+path, nil)
		if err != nil {
			return false
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(v) == nil
	}
	// landed waits until the thread holds a message of agent in role (the
	// thread's chat is made by the run, so it is looked up here).
	landed := func(ctx context.Context, agent, role string) {
		for ctx.Err() == nil {
			var list struct {
				Chats []struct{ ID string } `json:"chats"`
			}
			var page struct {
				Messages []messageView `json:"messages"`
			}
			if get(ctx, "/v1/chats?team=fan", &list) && len(list.Chats) == 1 && get(ctx, "/v1/chats/"+list.Chats[0].ID+"/messages?limit=100", &page) &&
				slices.ContainsFunc(page.Messages, func(m messageView) bool { return m.Name == agent && m.Role == role }) {
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	// The tool answers once quick's reply has landed.
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		landed(r.Context(), "quick", "assistant")
		fmt.Fprint(w, "looked up")
	}))
	defer tool.Close()
	fake := openaitest.New(openaitest.WithAPIKey("sk-test-key"))
	defer fake.Close()
	slowStarted, quickGo := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fake.Respond(func(req openaitest.Request) openaitest.Reply {
		if req.Chat.Messages[0].Text() == "quick" {
			return openaitest.Reply{Pieces: []string{"quick", " done."}, Hold: quickGo}
		}
		return openaitest.Reply{Pieces: []string{"slow", " one", " two."}, Sent: func(i int) {
			if i > 0 {
				return
			}
			once.Do(func() {
				close(slowStarted)
				// quick begins once slow's first piece has had time to
				// reach the client.
				time.AfterFunc(500*time.Millisecond, func() { close(quickGo) })
			})
			// The rest of slow's reply waits for calc's tool result.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			landed(ctx, "calc", "tool")
		}}
	})
	p = startAGUI(t, key, "AGENTD_TOOL_ALLOW_PRIVATE=true", "OPENAI_API_KEY=sk-test-key", "OPENAI_BASE_URL="+fake.URL())
	team := fmt.Sprintf(`{"max_round": 3, "speaker_selection": {"method": "graph", "graph": {"default_start_node": "lead", "nodes": {
			"lead": {"name": "lead", "edges": [{"target": "slow"}, {"target": "quick"}, {"target": "calc"}]},
			"slow": {"name": "slow", "edges": []}, "quick": {"name": "quick", "edges": []}, "calc": {"name": "calc", "edges": []}}}},
		"tools": [{"name": "lookup", "parameters": {"type": "object", "properties": {}}, "implementation": {"type": "http", "url": %q}}],
		"agents": [{"name": "lead", "type": "assistant", "model": {"provider": "replay", "responses": ["go."]}},
			{"name": "slow", "type": "assistant", "system_message": "slow", "model": {"provider": "openai", "model": "gpt-test"}},
			{"name": "quick", "type": "assistant", "system_message": "quick", "model": {"provider": "openai", "model": "gpt-test"}},
			{"name": "calc", "type": "assistant", "tools": ["lookup"], "tool_call_summary_format": "{result}",
				"model": {"provider": "replay", "responses": [{"tool_calls": [{"name": "lookup", "arguments": {}}]}]}}]}`, tool.URL)
	if code, _, body := p.do("PUT", "/v1/teams/fan", []byte(team)); code != http.StatusCreated {
		t.Fatalf("save team: %d %s", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node := startNode(ctx, t, "js/agui_thread.mjs", p.base, key, "fan", "fan out")
	got := nextRun(t, node, "fan out")
	msgs := p.messages(threadChat(t, p, "fan"))
	var order []string
	for _, m := range msgs {
		order = append(order, m.Name+"/"+m.Role)
	}
	// What the test is about: the thread has quick's reply before slow's
	// and calc's result after quick's, where the client got slow's
	// reply begun before quick's.
	if i, j := slices.Index(order, "quick/assistant"), slices.Index(order, "slow/assistant"); i < 0 || j < i {
		t.Fatalf("the thread's order %q: want quick's reply before slow's", order)
	}
	if i, j := slices.Index(order, "calc/tool"), slices.Index(order, "quick/assistant"); i < j {
		t.Fatalf("the thread's order %q: want calc's result after quick's reply", order)
	}
	if i, j := slices.IndexFunc(got.Started, func(id string) bool { return strings.HasSuffix(id, "-slow") }),
		slices.IndexFunc(got.Started, func(id string) bool { return strings.HasSuffix(id, "-quick") }); i < 0 || j < i {
		t.Fatalf("the client got the messages begun in the order %q: want slow's reply before quick's", got.Started)
	}
	if thread := threadLines(msgs); !slices.Equal(got.Messages, thread) {
		t.Errorf("HttpAgent holds %q, the thread %q", got.Messages, thread)
	}
	fmt.Fprintln(node.stdin)
	node.wait(t)
}
