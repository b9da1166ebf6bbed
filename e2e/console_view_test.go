package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// longChat is a chat whose transcript is many screens long.
func longChat(name string, replies int) string {
	var rs []string
	for i := range replies {
		rs = append(rs, fmt.Sprintf("%q", fmt.Sprintf("Reply %d.\nIt has a second line,\nand a third.", i+1)))
	}
	return fmt.Sprintf(`{"name": %q, "task": "Talk at length.", "max_round": %d, "agents": [{"name": "talker", "type": "assistant",
		"model": {"provider": "replay", "responses": [%s]}}]}`, name, replies, strings.Join(rs, ", "))
}

// inView is a JavaScript check that the element sel is wholly inside the
// window.
func inView(sel string) string { return elemInView(fmt.Sprintf("document.querySelector(%q)", sel)) }

// elemInView is inView of the element a JavaScript expression gives.
func elemInView(elem string) string {
	return `(() => { const e = ` + elem + `; if (!e) return false;
		const r = e.getBoundingClientRect(); return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight; })()`
}

// lastMessage is the transcript's last message element.
const lastMessage = `[...document.querySelectorAll('#transcript li.msg')].at(-1)`

// checkChatHeadInView checks that a chat's page keeps the bar, the chat's
// head with its actions and the top of the chat list on the screen, the
// window unscrolled, while its newest message is in view too.
func (b *browser) checkChatHeadInView(what string) {
	b.t.Helper()
	if y := eval[float64](b, `window.scrollY`); y != 0 {
		b.t.Errorf("%s: the window is scrolled by %v px", what, y)
	}
	for _, sel := range []string{".top", "#new-chat-link", "#chat-name", "#fork", "#erase", "#status-filter", "#chat-list li"} {
		if !eval[bool](b, inView(sel)) {
			b.t.Errorf("%s: %s is off the screen", what, sel)
		}
	}
	if !eval[bool](b, elemInView(lastMessage)) {
		b.t.Errorf("%s: the newest message is not in view", what)
	}
}

// TestConsoleView: a chat opens with its head, the bar and the list in
// view (the transcript scrolls in the main pane); leaving a chat clears its
// connection label; a 422 lists every problem first, each a jump to its
// mark in the spec; Run again goes on with the debate; an open tab's polls
// are no INFO log lines; and /openapi.yaml opens as text.
func TestConsoleView(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none", "AGENTD_LOG_FORMAT=json", "AGENTD_LOG_LEVEL=info")

	// A direct link to a long chat that has ended.
	long := p.create([]byte(longChat("long", 40)))
	p.waitTerminal(long.ID, 30*time.Second)
	b.openChat(p.base, long.ID)
	b.checkTranscript(p, long.ID)
	b.waitJS("the transcript scrolled to its end", elemInView(lastMessage))
	b.checkChatHeadInView("a long chat opened by its link")
	b.screenshot("long-chat")

	// The same after Create chat, while the chat arrives.
	b.run(chromedp.Navigate(p.base + "/#/new"))
	b.waitJS("the new chat form", `document.querySelector('#spec')`)
	b.run(chromedp.SetValue(chromedp.CSS("#spec"), longChat("long-created", 40)), chromedp.Click(chromedp.CSS("#create")))
	b.waitJS("the created chat's end", `document.querySelector('#chat-end [data-stop-reason="max_round"]')`)
	created := strings.TrimPrefix(eval[string](b, `location.hash`), "#/chats/")
	b.checkTranscript(p, created)
	b.waitJS("the transcript scrolled to its end", elemInView(lastMessage))
	b.checkChatHeadInView("a long chat after Create chat")

	// Leaving a chat whose stream is live: the label goes, and stays gone.
	b.waitJS("the live stream", `document.querySelector('#connection').textContent === '● live'`)
	b.run(chromedp.Click(chromedp.CSS("#new-chat-link")))
	b.waitJS("the new chat form", `document.querySelector('#spec')`)
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if label := eval[string](b, `document.querySelector('#connection').textContent`); label != "" {
			t.Fatalf("after leaving the chat the bar says %q", label)
		}
	}

	// A 422 for a long spec: every problem first, in view, pointer and
	// message; each one jumps to its mark below the spec.
	var spec map[string]any
	mustUnmarshal(t, readExample(t, "debate.json"), &spec)
	spec["max_round"] = 0
	spec["agents"].([]any)[2].(map[string]any)["name"] = "1x"
	spec["termination"] = map[string]any{"max_messages": -1}
	bad, _ := json.MarshalIndent(spec, "", "  ")
	b.run(chromedp.SetValue(chromedp.CSS("#spec"), string(bad)), chromedp.Click(chromedp.CSS("#create")))
	b.waitJS("the problems", `document.querySelector('#create-error .problem-list')`)
	_, _, body := p.do("POST", "/v1/chats", bad)
	var problem struct {
		Errors []struct{ Path, Message string }
	}
	mustUnmarshal(t, body, &problem)
	listed := eval[[]string](b, `[...document.querySelectorAll('#create-error .problem-list li')].map(e => e.innerText)`)
	if len(problem.Errors) < 3 || len(listed) != len(problem.Errors) {
		t.Fatalf("the console lists the problems %q, the API answers %+v", listed, problem.Errors)
	}
	for i, x := range problem.Errors {
		if listed[i] != x.Path+" "+x.Message {
			t.Errorf("problem %d is listed as %q, want %q", i, listed[i], x.Path+" "+x.Message)
		}
		if !eval[bool](b, inView(fmt.Sprintf("#create-error .problem-list li:nth-child(%d)", i+1))) {
			t.Errorf("the problem at %s is listed off the screen", x.Path)
		}
	}
	b.screenshot("problem-list")
	for i, x := range problem.Errors {
		mark := fmt.Sprintf(`#create-error .at[data-path=%q]`, x.Path)
		b.run(chromedp.Click(chromedp.CSS(fmt.Sprintf("#create-error .problem-list li:nth-child(%d) button", i+1))))
		b.waitJS("the mark of "+x.Path+" in view", inView(mark)+` && document.querySelector('`+mark+`').classList.contains('flash')`)
	}

	// Run again on the debate: its second run, in French, to its end.
	debate := p.create(readExample(t, "debate.json"))
	p.waitTerminal(debate.ID, 30*time.Second)
	b.openChat(p.base, debate.ID)
	b.waitJS("the run form", `document.querySelector('#run-form .run-task')`)
	// The click lands where the button is when it is computed: wait for
	// the whole first run to be shown, so that no message coming in moves
	// the button from under it.
	b.checkTranscript(p, debate.ID)
	b.run(chromedp.SetValue(chromedp.CSS("#run-form .run-task"), "Now in French."), chromedp.Click(chromedp.CSS("#run-submit")))
	b.waitJS("the second run's end", `document.querySelector('#chat-end:not([hidden]) strong')?.textContent === 'run 2 completed: text_mention'`)
	if r := p.getRun(debate.ID); r.Run != 2 || r.Status != "completed" {
		t.Errorf("after Run again the debate's run is %+v", r)
	}
	b.checkTranscript(p, debate.ID)

	// An open tab polls the list every 2 s: two polls, and no INFO line.
	listPolls := func() int {
		b.mu.Lock()
		defer b.mu.Unlock()
		n := 0
		for _, u := range b.requests {
			if strings.HasPrefix(u, p.base+"/v1/chats?") {
				n++
			}
		}
		return n
	}
	logged := len(p.logs.String())
	for polls := listPolls(); listPolls() < polls+2; time.Sleep(100 * time.Millisecond) {
	}
	sc := bufio.NewScanner(strings.NewReader(p.logs.String()[logged:]))
	for sc.Scan() {
		var l struct{ Level, Msg, Method, Route string }
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Level == "INFO" && l.Msg == "http request" {
			t.Errorf("an open console tab is logged at INFO: %s", sc.Text())
		}
	}
	// What operators need stays at INFO: the writes of this test.
	if !strings.Contains(p.logs.String(), `"level":"INFO","msg":"http request","request_id"`) ||
		!strings.Contains(p.logs.String(), `"method":"POST","path":"/v1/chats/`+debate.ID+`/runs"`) {
		t.Errorf("the run's POST has no INFO access line:\n%s", grep(p.logs.String(), `"http request"`))
	}

	// /openapi.yaml opened in the browser is shown, as text.
	b.run(chromedp.Navigate(p.base + "/openapi.yaml"))
	b.waitJS("the document", `document.body && document.body.innerText.startsWith('openapi: 3.1')`)
	if ct := eval[string](b, `document.contentType`); ct != "text/plain" {
		t.Errorf("/openapi.yaml opens as %s", ct)
	}
	if code, h, _ := p.do(http.MethodGet, "/openapi.yaml", nil); code != 200 || h.Get("Content-Type") != "application/yaml" {
		t.Errorf("/openapi.yaml for tools: %d %s", code, h.Get("Content-Type"))
	}
}
