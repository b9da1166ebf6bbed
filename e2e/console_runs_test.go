package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentd/agentd/internal/llm/openaitest"
)

// runsShown summarises what the chat view shows of its runs, in order:
// "run N: <the task as the separator shows it>", "name:content" for each
// message, "end N: <stop reason>" for each run's end.
const runsShown = `[...document.querySelectorAll('#transcript > li.run-sep, #transcript > li.run-end, #transcript > li.msg[data-seq]')].map(li =>
	li.classList.contains('run-sep') ? 'run ' + li.dataset.run + ': ' + li.querySelector('.run-task').textContent :
	li.classList.contains('run-end') ? 'end ' + li.dataset.run + ': ' + li.dataset.stopReason :
	li.dataset.name + ':' + (li.querySelector(':scope > .content')?.textContent ?? ''))`

// gatedModel is an OpenAI-wire model whose nth request (from 1) is answered
// replies[n-1], and only once gate n is released when there is one: a turn
// lasts as long as the test needs it to, however loaded the machine is.
type gatedModel struct {
	*openaitest.Server
	asked atomic.Int32
	gates map[int]chan struct{}
	once  map[int]*sync.Once
}

func newGatedModel(t *testing.T, replies []string, gated ...int) *gatedModel {
	m := &gatedModel{Server: openaitest.New(), gates: map[int]chan struct{}{}, once: map[int]*sync.Once{}}
	for _, n := range gated {
		m.gates[n], m.once[n] = make(chan struct{}), &sync.Once{}
	}
	m.Respond(func(openaitest.Request) openaitest.Reply {
		n := int(m.asked.Add(1))
		if g := m.gates[n]; g != nil {
			<-g
		}
		if n > len(replies) {
			return openaitest.Text("(no reply scripted)")
		}
		return openaitest.Text(replies[n-1])
	})
	t.Cleanup(m.Close)
	// Before Close, which waits for the requests it serves.
	t.Cleanup(func() {
		for n := range m.gates {
			m.release(n)
		}
	})
	return m
}

func (m *gatedModel) release(n int) { m.once[n].Do(func() { close(m.gates[n]) }) }

// TestConsoleRuns drives a chat's runs in the browser: run again and see
// run 2 in the transcript, queue a run while one is held busy, a reload
// that loses and doubles nothing, a run's max_round refused at its field,
// Stop in the middle of a slow turn (the turn finishes, then the run ends
// external), and a fork from run 1's end that opens with its own first
// run and links back to its source.
func TestConsoleRuns(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	model := newGatedModel(t, []string{"Hello.", "Bonjour.", "Hallo.", "Slowly done.", "Hello again."}, 2, 4)
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none",
		"OPENAI_API_KEY=sk-console-test", "OPENAI_BASE_URL="+model.URL())
	c := p.create([]byte(`{"name": "runs", "task": "Say hello.", "max_round": 1,
		"agents": [{"name": "a", "type": "assistant", "model": {"provider": "openai", "model": "gpt-test"}}]}`))

	b.openChat(p.base, c.ID)
	b.waitJS("the end of run 1", `document.querySelector('#chat-end [data-stop-reason="max_round"]') && document.querySelector('li.run-end[data-run="1"]')`)
	b.offers("a chat whose run has ended", "#fork", "#erase")
	b.shows("run 1", []string{"run 1: Say hello.", "user:Say hello.", "a:Hello.", "end 1: max_round"})

	// Run again: run 2 starts in the same transcript, its task (markup
	// and all, as text) in its separator; the model holds its turn.
	const task2 = `<b>Now</b> in French & <i>co</i>.`
	b.run(chromedp.SetValue(chromedp.CSS("#run-form .run-task"), task2), chromedp.Click(chromedp.CSS("#run-submit")))
	b.waitJS("run 2 under way", `document.querySelector('li.run-sep[data-run="2"]') && document.querySelector('#run-posted').dataset.run === '2'
		&& document.querySelector('#stop:not([hidden])') && document.querySelector('li.run-sep[data-run="2"] ~ li[data-event="speaker.selected"]')`)
	if n := eval[int](b, `document.querySelector('li.run-sep[data-run="2"]').querySelectorAll('b, i').length`); n != 0 {
		t.Errorf("the task of run 2 became %d elements in its separator", n)
	}
	b.offers("a chat with a run under way", "#stop", "#cancel")
	if eval[bool](b, `!!document.querySelector('#chat-end:not([hidden])')`) {
		t.Error("the end of run 1 is still shown as the chat's end while run 2 runs")
	}

	// While it is busy, the form queues the next run after it.
	b.waitJS("the if_busy choice", `document.querySelector('#run-form .if-busy:not([hidden])') && document.querySelector('#run-submit').textContent === 'Queue the run'`)
	b.run(chromedp.SetValue(chromedp.CSS("#run-form .run-task"), "And in German."), chromedp.Click(chromedp.CSS("#run-submit")))
	b.waitJS("the queued run in the head", `document.querySelector('#chat-facts [data-fact="queued_runs"]')?.textContent === '1 queued run'
		&& document.querySelector('#run-posted').dataset.run === '3'`)
	if got := eval[string](b, `document.querySelector('#chat-facts [data-fact="run"]').textContent`); got != "run 2" {
		t.Errorf("the head says %q while run 2 runs with run 3 queued", got)
	}
	b.fullScreenshot("run-queued")
	model.release(2)
	b.waitJS("the end of run 3", `document.querySelector('li.run-end[data-run="3"]') && document.querySelector('#chat-end [data-stop-reason="max_round"]')
		&& !document.querySelector('#chat-facts [data-fact="queued_runs"]')`)
	three := []string{"run 1: Say hello.", "user:Say hello.", "a:Hello.", "end 1: max_round",
		"run 2: " + task2, "user:" + task2, "a:Bonjour.", "end 2: max_round",
		"run 3: And in German.", "user:And in German.", "a:Hallo.", "end 3: max_round"}
	b.shows("three runs", three)
	b.checkTranscript(p, c.ID)

	// A reload streams the log again: every run once, nothing lost.
	b.run(chromedp.Reload())
	b.waitJS("the reloaded chat", `document.querySelector('li.run-end[data-run="3"]')`)
	b.checkTranscript(p, c.ID)
	b.shows("three runs after a reload", three)

	// A run's problems are shown at their fields.
	b.run(chromedp.SetValue(chromedp.CSS("#run-form .run-task"), "Take your time."),
		chromedp.SetValue(chromedp.CSS("#run-form .run-max-round"), "0"), chromedp.Click(chromedp.CSS("#run-submit")))
	b.waitJS("the problem at /max_round", `document.querySelector('#run-form .field-problem[data-path="/max_round"]')`)
	if got := eval[string](b, `document.querySelector('#run-form .field-problem[data-path="/max_round"]').previousElementSibling.textContent`); !strings.HasPrefix(got, "max_round") {
		t.Errorf("the problem at /max_round is shown after %q", got)
	}

	// Stop in the middle of a slow turn: the turn finishes, then the run
	// ends with stop reason external, though max_round allows 3 turns.
	b.run(chromedp.SetValue(chromedp.CSS("#run-form .run-max-round"), "3"), chromedp.Click(chromedp.CSS("#run-submit")))
	b.waitJS("run 4's turn", `document.querySelector('li.run-sep[data-run="4"] .run-meta')?.textContent === 'max_round 3'
		&& document.querySelector('li.run-sep[data-run="4"] ~ li[data-event="speaker.selected"]') && document.querySelector('#stop:not([hidden]):not(:disabled)')`)
	if eval[bool](b, `!!document.querySelector('#run-form .field-problem')`) {
		t.Error("the problem of the refused run is still shown after the run was posted")
	}
	b.run(chromedp.Click(chromedp.CSS("#stop")))
	b.waitJS("the stop to be sent", `document.querySelector('#stop:disabled')`)
	b.offers("a run that is stopping", "#stop (disabled)", "#cancel")
	b.fullScreenshot("run-stopping")
	model.release(4)
	b.waitJS("the stopped run", `document.querySelector('#chat-end [data-stop-reason="external"]') && document.querySelector('li.run-end[data-run="4"]')`)
	b.shows("the stopped run", append(slices.Clone(three), "run 4: Take your time.", "user:Take your time.", "a:Slowly done.", "end 4: external"))
	if got := eval[string](b, `document.querySelector('li.run-end[data-run="4"] .detail').textContent`); !strings.Contains(got, "External termination requested") {
		t.Errorf("run 4's end says %q", got)
	}
	if n := model.asked.Load(); n != 4 {
		t.Errorf("the model was asked %d times by 4 runs of one turn each", n)
	}
	b.offers("a stopped chat", "#fork", "#erase")
	b.checkTranscript(p, c.ID)
	srcLast := p.get(c.ID).LastSeq

	// Fork from run 1's end, with a first run of its own: the fork opens,
	// links back to its source, and shows run 1's copy and its run 2.
	end1 := eval[int64](b, `+document.querySelector('li.run-end[data-run="1"]').dataset.seq`)
	b.run(chromedp.Click(chromedp.CSS(`li.run-end[data-run="1"] .fork-here`)))
	b.waitJS("the fork form", `document.querySelector('li.run-end[data-run="1"] + li.fork-form .run-task')`)
	b.run(chromedp.SetValue(chromedp.CSS(".fork-form .run-task"), "Try again."), chromedp.Click(chromedp.CSS(`.fork-form [data-action="fork"]`)))
	b.waitJS("the fork's page", fmt.Sprintf(`location.hash.startsWith('#/chats/') && location.hash !== '#/chats/%s'`, c.ID))
	forkID := strings.TrimPrefix(eval[string](b, `location.hash`), "#/chats/")
	b.waitJS("the fork's first run", `document.querySelector('li.run-end[data-run="2"]') && document.querySelector('#chat-end [data-stop-reason="max_round"]')`)
	link := eval[string](b, `(() => { const f = document.querySelector('#chat-facts [data-fact="forked_from"]'); return f.textContent + ' ' + f.querySelector('a').getAttribute('href'); })()`)
	if want := fmt.Sprintf("forked from %s at #%d #/chats/%s", c.ID[:8], end1, c.ID); link != want {
		t.Errorf("the fork's head says %q, want %q", link, want)
	}
	b.shows("the fork", []string{"run 1: Say hello.", "user:Say hello.", "a:Hello.", "end 1: max_round",
		"run 2: Try again.", "user:Try again.", "a:Hello again.", "end 2: max_round"})
	b.checkTranscript(p, forkID)
	b.fullScreenshot("fork")
	if got := p.get(c.ID).LastSeq; got != srcLast {
		t.Errorf("the source's log grew from %d to %d events with the fork", srcLast, got)
	}
	b.sameOrigin(p)
}

// TestConsoleApprovals: held tool calls are decided in the browser. One
// call is approved with edited arguments, the other rejected with a
// reason; an edit that fails the tool's schema is refused with the problem
// shown at its arguments; a real HTTP tool server sees only the approved
// call, with the edit.
func TestConsoleApprovals(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var calls []string
	tools := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		calls = append(calls, fmt.Sprintf("%s %v", body.Name, body.Arguments))
		mu.Unlock()
		fmt.Fprintf(w, "%s done with %v", body.Name, body.Arguments["n"])
	}))
	t.Cleanup(tools.Close)
	b := newBrowser(t)
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none", "AGENTD_TOOL_ALLOW_PRIVATE=true")
	tool := func(name string) string {
		return fmt.Sprintf(`{"name": %q, "parameters": {"type": "object", "properties": {"n": {"type": "integer"}, "memo": {"type": "string"}}, "required": ["n"]},
			"implementation": {"type": "http", "url": %q}}`, name, tools.URL)
	}
	c := p.create(fmt.Appendf(nil, `{"name": "approvals", "task": "pay", "max_round": 1, "tools": [%s, %s],
		"agents": [{"name": "a", "type": "assistant", "tools": ["pay", "refund"], "tool_approval": "always",
			"tool_call_summary_format": "{tool_name}: {result}",
			"model": {"provider": "replay", "responses": [{"tool_calls": [
				{"name": "pay", "arguments": {"n": 100, "memo": "<img src=/nothing onerror=\"window.agentdMarkupRan = true\">"}},
				{"name": "refund", "arguments": {"n": 5}}]}]}}]}`, tool("pay"), tool("refund")))

	b.openChat(p.base, c.ID)
	b.waitJS("the held calls", `document.querySelectorAll('#input-panel[data-kind="approval"] .approval[data-call-id]').length === 2`)
	b.offers("a chat waiting for approvals", "#stop", "#cancel")
	shown := eval[[]string](b, `[...document.querySelectorAll('#input-panel .approval')].map(a => a.querySelector('.call-name').textContent + ' ' + a.querySelector('textarea.args').value)`)
	wantPay := "pay {\n  \"n\": 100,\n  \"memo\": \"<img src=/nothing onerror=\\\"window.agentdMarkupRan = true\\\">\"\n}"
	if len(shown) != 2 || shown[0] != wantPay || shown[1] != "refund {\n  \"n\": 5\n}" {
		t.Errorf("the held calls are shown as %q", shown)
	}

	// An edit the tool's schema refuses: the 422 is shown at the call's
	// arguments, and nothing runs.
	pay, refund := `#input-panel .approval[data-index="0"]`, `#input-panel .approval[data-index="1"]`
	b.run(chromedp.SetValue(chromedp.CSS(pay+" textarea.args"), `{"n": "ten"}`),
		chromedp.Click(chromedp.CSS(pay+` input[value="approve"]`)),
		chromedp.Click(chromedp.CSS(refund+` input[value="reject"]`)),
		chromedp.SetValue(chromedp.CSS(refund+" .reason"), "no refunds today"),
		chromedp.Click(chromedp.CSS(`#input-panel [data-action="send-approvals"]`)))
	b.waitJS("the problem at the edited arguments", `document.querySelector('#input-panel .field-problem[data-path="/approvals/0/arguments"]')`)
	if !eval[bool](b, `!!document.querySelector('`+pay+` textarea.args + .field-problem[data-path="/approvals/0/arguments"]')`) {
		t.Error("the problem at /approvals/0/arguments is not shown under the arguments of pay")
	}
	if eval[bool](b, `!!document.querySelector('#input-panel .problem:not([hidden]) li')`) {
		t.Error("a problem of the refused decisions is not shown at its field")
	}
	b.screenshot("approval-problem")

	// Fixed: both decisions go in one POST, the chat runs on.
	b.run(chromedp.SetValue(chromedp.CSS(pay+" textarea.args"), `{"n": 10}`),
		chromedp.Click(chromedp.CSS(`#input-panel [data-action="send-approvals"]`)))
	b.waitJS("the end", `document.querySelector('#chat-end [data-stop-reason="max_round"]')`)
	b.checkTranscript(p, c.ID)
	msgs := p.messages(c.ID)
	if last := msgs[len(msgs)-1].Content; last != "pay: pay done with 10\nrefund: Error: Tool call was not approved. Reason: no refunds today" {
		t.Errorf("the summary is %q", last)
	}
	resumed := eval[string](b, `[...document.querySelectorAll('#transcript li[data-event="chat.running"]')].at(-1).textContent`)
	if resumed != "Running: approved pay with edited arguments, rejected refund (no refunds today)." {
		t.Errorf("the decisions are shown as %q", resumed)
	}
	// A fork is offered at the message that ends the turn, not inside it.
	forks := eval[[]string](b, `[...document.querySelectorAll('#transcript li.msg')].map(li => li.dataset.name + (li.querySelector('.fork-here') ? ' fork' : ''))`)
	if want := []string{"user fork", "a", "a", "a fork"}; !slices.Equal(forks, want) {
		t.Errorf("forks offered at messages %q, want %q", forks, want)
	}
	if eval[bool](b, `window.agentdMarkupRan === true`) {
		t.Error("markup in a call's arguments ran in the console")
	}
	mu.Lock()
	if len(calls) != 1 || calls[0] != "pay map[n:10]" {
		t.Errorf("the tool server saw %q, want pay with the edit only", calls)
	}
	mu.Unlock()
	b.sameOrigin(p)
}

// TestConsoleCodeApproval: code held for approval is shown block by block
// and approved or rejected as a whole.
func TestConsoleCodeApproval(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bwrap"); err != nil {
		missing(t, "bwrap sandbox: bubblewrap is not installed (apt-get install bubblewrap)")
	}
	b := newBrowser(t)
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=bwrap", "AGENTD_SANDBOX_WORK_ROOT="+reachableDir(t))
	c := p.create([]byte("{\"task\": \"print twice\", \"max_round\": 4, \"agents\": [" +
		"{\"name\": \"coder\", \"type\": \"assistant\", \"model\": {\"provider\": \"replay\", \"responses\": [" +
		"\"```python\\nprint(6*7)\\n```\", \"```sh\\nrm -rf /tmp/x\\n```\"]}}," +
		"{\"name\": \"runner\", \"type\": \"user_proxy\", \"human_input_mode\": \"NEVER\", \"code_execution\": {}, \"code_approval\": true}]}"))
	b.openChat(p.base, c.ID)
	block := func(code string) string {
		return fmt.Sprintf(`[...document.querySelectorAll('#input-panel[data-kind="approval"] .approval[data-code] pre.code code')].map(e => e.textContent.trimEnd()).join() === %q`, code)
	}
	b.waitJS("the held code", block("print(6*7)"))
	b.run(chromedp.Click(chromedp.CSS(`#input-panel input[value="approve"]`)),
		chromedp.Click(chromedp.CSS(`#input-panel [data-action="send-approvals"]`)))
	b.waitJS("the next held code", block("rm -rf /tmp/x"))
	b.screenshot("code-approval")
	b.run(chromedp.Click(chromedp.CSS(`#input-panel input[value="reject"]`)),
		chromedp.SetValue(chromedp.CSS(`#input-panel .reason`), "no deleting"),
		chromedp.Click(chromedp.CSS(`#input-panel [data-action="send-approvals"]`)))
	b.waitJS("the end", `document.querySelector('#chat-end:not([hidden])')`)
	b.checkTranscript(p, c.ID)
	var got []string
	for _, m := range p.messages(c.ID) {
		if m.Name == "runner" {
			got = append(got, m.Content)
		}
	}
	want := []string{"exitcode: 0 (execution succeeded)\nCode output: 42\n",
		"exitcode: 1 (execution failed)\nCode output: Code execution was not approved. Reason: no deleting"}
	if !slices.Equal(got, want) {
		t.Errorf("runner said %q, want %q", got, want)
	}
	resumed := eval[[]string](b, `[...document.querySelectorAll('#transcript li[data-event="chat.running"]')].map(e => e.textContent).filter(t => t !== 'Running.')`)
	if !slices.Equal(resumed, []string{"Running: approved the code.", "Running: rejected the code (no deleting)."}) {
		t.Errorf("the decisions are shown as %q", resumed)
	}
}

// fullScreenshot saves the whole page, not only what the window shows.
func (b *browser) fullScreenshot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// shows checks what the chat view shows of its runs (see runsShown),
// waiting a while for it to settle on want.
func (b *browser) shows(what string, want []string) {
	b.t.Helper()
	js, _ := json.Marshal(want)
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := eval[[]string](b, runsShown)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s: the console shows\n%s\nwant\n%s", what, strings.Join(got, "\n"), js)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
