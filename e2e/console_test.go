package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// browser is a headless Chromium driven over the DevTools protocol, with a
// record of every request its pages made.
type browser struct {
	t   *testing.T
	ctx context.Context
	mu  sync.Mutex
	// requests are the URLs requested; statuses the status of each /v1
	// response in order.
	requests []string
	statuses []apiResponse
	shots    string
}

type apiResponse struct {
	url    string
	status int64
}

// chromiumPath finds Debian's chromium; without it the test is skipped,
// except with CI=true, where a missing browser is a failure.
func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on the PATH (apt-get install chromium); CI=true makes this a failure")
	}
	t.Skip("no chromium on the PATH")
	return ""
}

// screenshotDir is where the browser tests save their screenshots:
// AGENTD_TEST_ARTIFACTS if set (CI keeps it), else a temp dir of the test.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("AGENTD_TEST_ARTIFACTS"); d != "" {
		d = filepath.Join(d, strings.ReplaceAll(t.Name(), "/", "-"))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// browsers holds each test's browser's close, which the test's agentd
// calls before it stops: a page left open would otherwise reconnect its
// event streams to the freed port, which another test's server may take
// next.
var browsers sync.Map // *testing.T → func()

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	// No timeout on this context: it is the browser's lifetime; every wait
	// of the test has a deadline of its own.
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	b := &browser{t: t, ctx: ctx, shots: screenshotDir(t)}
	closeBrowser := sync.OnceFunc(func() {
		cancelCtx()
		cancelAlloc()
	})
	t.Cleanup(func() {
		browsers.Delete(t)
		closeBrowser()
	})
	browsers.Store(t, closeBrowser)
	// The tab records its requests (chromedp enables the network domain).
	err := chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			b.requests = append(b.requests, e.Request.URL)
		case *network.EventResponseReceived:
			if strings.Contains(e.Response.URL, "/v1/") {
				b.statuses = append(b.statuses, apiResponse{e.Response.URL, e.Response.Status})
			}
		}
	})
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Logf("screenshots in %s", b.shots)
	return b
}

func (b *browser) run(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, js string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// openChat shows chat id in the console and waits until its view is the
// page's: from one chat to another only the URL's fragment changes, and
// the console swaps its views on the hashchange event that follows, so
// until then the page still shows the previous chat (its end, its
// transcript), which a check right after the navigation would read.
func (b *browser) openChat(base, id string) {
	b.t.Helper()
	b.run(chromedp.Navigate(base + "/#/chats/" + id))
	b.waitJS("the chat's view", fmt.Sprintf(`document.querySelector('#main > [data-chat=%q]')`, id))
}

// waitJS waits until a JavaScript expression is true.
func (b *browser) waitJS(what, js string) {
	b.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		if ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool]("!!("+js+")")); err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			html, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector('main').innerText`))
			b.t.Fatalf("waiting for %s: timed out; the page shows:\n%s", what, html)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *browser) screenshot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// transcriptSeqs are the seqs of the events the chat view shows, in order.
const transcriptSeqs = `[...document.querySelectorAll('#transcript li[data-seq]')].map(e => +e.dataset.seq)`

// messageSeqs are the seqs of the messages it shows.
const messageSeqs = `[...document.querySelectorAll('#transcript li.msg[data-seq]')].map(e => +e.dataset.seq)`

// shownMessages are the messages the chat view shows: each one's seq, the
// name it carries and shows, the text of its content (a code block by its
// code), and the tags of any element in the content that is not a code
// block's: content is text, never markup.
const shownMessages = `[...document.querySelectorAll('#transcript li.msg[data-seq]')].map(li => {
	const c = li.querySelector(':scope > .content');
	let text = '';
	const markup = [];
	for (const n of c ? c.childNodes : []) {
		if (n.nodeType === Node.TEXT_NODE) {
			text += n.textContent;
		} else if (n.matches('pre.code') && n.querySelector(':scope > code')) {
			text += n.querySelector(':scope > code').textContent;
			for (const e of n.querySelectorAll('*')) if (!e.matches('pre.code > span.lang, pre.code > code')) markup.push(e.tagName);
		} else {
			markup.push(n.nodeName);
		}
	}
	return {seq: +li.dataset.seq, name: li.dataset.name, shown_name: li.querySelector('.who .name')?.textContent ?? null, text, markup};
})`

// shownMessage is one element of shownMessages.
type shownMessage struct {
	Seq       int64    `json:"seq"`
	Name      string   `json:"name"`
	ShownName *string  `json:"shown_name"`
	Text      string   `json:"text"`
	Markup    []string `json:"markup"`
}

// codeFence is a fenced code block as the console renders it: its code.
var codeFence = regexp.MustCompile("```[\\w+-]*[^\\n]*\\n((?s:.*?))```")

// shownText is a message's content as the console shows it: text, with
// each fenced code block shown as its code.
func shownText(content string) string { return codeFence.ReplaceAllString(content, "$1") }

// slowed returns an example with every replay reply delayed, so that a
// browser can watch it run.
func slowed(t *testing.T, spec []byte, delayMS int) string {
	t.Helper()
	var doc map[string]any
	mustUnmarshal(t, spec, &doc)
	for _, m := range doc["models"].(map[string]any) {
		rs := m.(map[string]any)["responses"].([]any)
		for i, r := range rs {
			if s, ok := r.(string); ok {
				r = map[string]any{"content": s}
			}
			r.(map[string]any)["delay_ms"] = delayMS
			rs[i] = r
		}
	}
	b, _ := json.Marshal(doc)
	return string(b)
}

func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none")

	// A new chat from the debate example, picked in the console.
	b.run(chromedp.Navigate(p.base + "/#/new"))
	b.waitJS("the examples", `document.querySelector('#example option[value="debate.json"]')`)
	b.run(chromedp.SetValue(chromedp.CSS("#example"), "debate.json"))
	eval[any](b, `document.querySelector('#example').dispatchEvent(new Event('change'))`)
	b.waitJS("the example's spec", `document.querySelector('#spec').value.includes('tabs-vs-spaces-debate')`)
	b.run(chromedp.Click(chromedp.CSS("#create")))
	b.waitJS("the debate to end", `document.querySelector('#chat-end [data-stop-reason="text_mention"]')`)
	loc := eval[string](b, `location.hash`)
	debateID := strings.TrimPrefix(loc, "#/chats/")
	b.checkTranscript(p, debateID)
	b.waitJS("the chat in the list", fmt.Sprintf(`document.querySelector('#chat-list li[data-id="%s"][data-status="completed"]')`, debateID))
	b.offers("the completed debate", "#fork", "#erase")

	// The same debate, slowed down: messages appear one by one, in order,
	// while it runs; a reload in the middle loses and doubles nothing.
	b.run(chromedp.Navigate(p.base + "/#/new"))
	b.waitJS("the new chat form", `document.querySelector('#spec')`)
	b.run(chromedp.SetValue(chromedp.CSS("#spec"), slowed(t, readExample(t, "debate.json"), 700)))
	b.run(chromedp.Click(chromedp.CSS("#create")))
	b.waitJS("the slow debate's page", `location.hash.startsWith('#/chats/')`)
	loc = eval[string](b, `location.hash`)
	slowID := strings.TrimPrefix(loc, "#/chats/")
	var seen [][]int64
	reloaded := false
	for deadline := time.Now().Add(60 * time.Second); ; {
		seqs := eval[[]int64](b, messageSeqs)
		if len(seen) == 0 || !slices.Equal(seqs, seen[len(seen)-1]) {
			seen = append(seen, seqs)
		}
		if !reloaded && len(seqs) >= 4 {
			b.offers("the running debate", "#stop", "#cancel")
			b.screenshot("debate-running")
			b.run(chromedp.Reload())
			b.waitJS("the reloaded transcript", `document.querySelector('#transcript li[data-seq]')`)
			reloaded = true
		}
		ended := eval[bool](b, `!!document.querySelector('#chat-end:not([hidden])')`)
		if ended {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slow debate did not end in the console; saw %v", seen)
		}
		time.Sleep(100 * time.Millisecond)
	}
	final := b.checkTranscript(p, slowID)
	// Every state shown was a prefix of the final transcript (in order, no
	// doubles), and the messages arrived over several states, not at once.
	for _, s := range seen {
		if len(s) > len(final) || !slices.Equal(s, final[:len(s)]) {
			t.Errorf("the console showed messages %v, not a prefix of %v", s, final)
		}
	}
	if len(seen) < 4 {
		t.Errorf("messages did not appear while the chat ran: states %v", seen)
	}
	b.screenshot("debate-completed")

	// A human answers the review in place, then ends the chat.
	human := p.create(readExample(t, "human-review.json"))
	b.openChat(p.base, human.ID)
	b.waitJS("the input panel", `document.querySelector('#input-panel:not([hidden]) textarea')`)
	b.offers("a chat waiting for a human", "#stop", "#cancel")
	b.screenshot("human-input")
	b.run(chromedp.SetValue(chromedp.CSS("#input-panel textarea"), "Mention Last-Event-ID."),
		chromedp.Click(chromedp.CSS(`#input-panel [data-action="send"]`)))
	b.waitJS("the human's message", `[...document.querySelectorAll('#transcript li.msg[data-name="editor"]')].some(e => e.innerText.includes('Mention Last-Event-ID.'))`)
	b.waitJS("the next input request", `document.querySelector('#input-panel:not([hidden]) [data-action="exit"]')`)
	b.run(chromedp.Click(chromedp.CSS(`#input-panel [data-action="exit"]`)))
	b.waitJS("the human exit", `document.querySelector('#chat-end [data-stop-reason="human_exit"]')`)
	b.offers("the ended review", "#fork", "#erase")
	b.checkTranscript(p, human.ID)

	// Cancel stops a running chat, and is gone once the chat has ended.
	doomed := p.create([]byte(slowed(t, readExample(t, "debate.json"), 5000)))
	b.openChat(p.base, doomed.ID)
	b.waitJS("the Cancel button", `document.querySelector('#cancel:not([hidden]):not(:disabled)')`)
	b.run(chromedp.Click(chromedp.CSS("#cancel")))
	b.waitJS("the cancelled end", `document.querySelector('#chat-end [data-stop-reason="cancelled"]')`)
	b.offers("the cancelled chat", "#fork", "#erase")
	if got := p.get(doomed.ID); got.Status != "cancelled" {
		t.Errorf("after Cancel in the console the chat is %s", got.Status)
	}

	// Manual selection: the speaker of every turn is picked in place.
	manual := p.create(readExample(t, "manual-selection.json"))
	b.openChat(p.base, manual.ID)
	for i, speaker := range []string{"colours", "fruits", "colours", "fruits"} {
		sel := fmt.Sprintf(`#input-panel button[data-speaker="%s"]`, speaker)
		b.waitJS("the candidates", fmt.Sprintf(`document.querySelector('%s') && document.querySelectorAll('#transcript li.msg').length === %d`, sel, i+1))
		if i == 0 {
			b.screenshot("manual-selection")
		}
		b.run(chromedp.Click(chromedp.CSS(sel)))
	}
	b.waitJS("the end of the manual chat", `document.querySelector('#chat-end [data-stop-reason="max_round"]')`)
	// The list follows: a chat created elsewhere appears, and its status
	// changes, without a reload.
	b.waitJS("the list to follow", fmt.Sprintf(`document.querySelector('#chat-list li[data-id="%s"][data-status="completed"]') && document.querySelector('#chat-list li[data-id="%s"][data-status="completed"]')`, manual.ID, human.ID))
	msgs := b.checkTranscript(p, manual.ID)
	if len(msgs) != 5 {
		t.Errorf("manual chat: %d messages, want the task and 4 replies", len(msgs))
	}

	// Messages that hold HTML are shown as the text they are: escaped, in
	// a reply, in the task and inside a code block, and none of it runs.
	markup := p.create([]byte(`{"name": "markup", "task": "Is <b>bold</b> & <i>x</i> < y?", "max_round": 2,
		"agents": [{"name": "writer", "type": "assistant", "model": {"provider": "replay", "responses": [
			"<img src=\"/nothing\" onerror=\"window.agentdMarkupRan = true\"> <script>window.agentdMarkupRan = true</script>&amp; done",
			"Use this:\n` + "```html\\n<b onclick=\\\"x()\\\">hi</b>\\n```" + `\nthen <em>stop</em>."]}}]}`))
	b.openChat(p.base, markup.ID)
	b.waitJS("the chat with markup to end", `document.querySelector('#chat-end [data-stop-reason="max_round"]')`)
	if got := b.checkTranscript(p, markup.ID); len(got) != 3 {
		t.Errorf("chat with markup: %d messages, want the task and 2 replies", len(got))
	}
	if eval[bool](b, `window.agentdMarkupRan === true`) {
		t.Error("markup of a message ran in the console")
	}

	// An invalid spec: each problem is shown under the line its JSON
	// pointer names.
	b.run(chromedp.Navigate(p.base + "/#/new"))
	b.waitJS("the new chat form", `document.querySelector('#spec')`)
	b.run(chromedp.SetValue(chromedp.CSS("#spec"), `{"task": "", "agents": [{"name": "1x", "type": "robot"}], "max_round": 0}`),
		chromedp.Click(chromedp.CSS("#create")))
	b.waitJS("the problems", `document.querySelector('#create-error .at[data-path="/agents/0/name"]')`)
	above := eval[string](b, `document.querySelector('#create-error .at[data-path="/agents/0/name"]').previousElementSibling.textContent`)
	if !strings.Contains(above, `"name": "1x"`) {
		t.Errorf("the problem at /agents/0/name is shown under %q", above)
	}
	above = eval[string](b, `document.querySelector('#create-error .at[data-path="/max_round"]').previousElementSibling.textContent`)
	if !strings.Contains(above, `"max_round": 0`) {
		t.Errorf("the problem at /max_round is shown under %q", above)
	}
	head := eval[string](b, `document.querySelector('#create-error strong').textContent`)
	if !strings.HasPrefix(head, "422") {
		t.Errorf("problem heading %q", head)
	}
	b.screenshot("validation-problems")
	b.sameOrigin(p)

	// For the README: the debate, whole. AGENTD_CONSOLE_SCREENSHOT names the file.
	if out := os.Getenv("AGENTD_CONSOLE_SCREENSHOT"); out != "" {
		b.run(chromedp.EmulateViewport(1200, 760))
		b.openChat(p.base, debateID)
		b.waitJS("the debate", `document.querySelector('#chat-end:not([hidden])')`)
		time.Sleep(500 * time.Millisecond) // the view's last refresh
		eval[any](b, `document.querySelector('#main').scrollTop = 0`)
		png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// offers checks that the chat view shows exactly these action buttons (by
// id), enabled, and no other, enabled or not: a chat's page offers only what
// can be done with the chat as it stands.
func (b *browser) offers(what string, want ...string) {
	b.t.Helper()
	got := eval[[]string](b, `[...document.querySelectorAll('.chat-head button')]
		.filter(e => e.offsetParent !== null).map(e => '#' + e.id + (e.disabled ? ' (disabled)' : ''))`)
	if got == nil {
		got = []string{}
	}
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(got, want) {
		b.t.Errorf("%s offers %v, want %v", what, got, want)
	}
}

// checkTranscript checks that the chat view shows every event of the log
// once, in order, and every message the API lists, each with the API's
// name and text and no markup; it returns the message seqs.
func (b *browser) checkTranscript(p *proc, id string) []int64 {
	b.t.Helper()
	c := p.get(id)
	b.waitJS("the whole log", fmt.Sprintf(`(%s).at(-1) === %d`, transcriptSeqs, c.LastSeq))
	events := eval[[]int64](b, transcriptSeqs)
	for i, s := range events {
		if s != int64(i+1) {
			b.t.Fatalf("chat %s: the console shows events %v, want 1…%d each once", id, events, c.LastSeq)
		}
	}
	shown := eval[[]shownMessage](b, shownMessages)
	api := p.messages(id)
	var seqs, want []int64
	for _, m := range shown {
		seqs = append(seqs, m.Seq)
	}
	for _, m := range api {
		want = append(want, m.Seq)
	}
	if !slices.Equal(seqs, want) {
		b.t.Errorf("chat %s: the console shows messages %v, the API lists %v", id, seqs, want)
		return seqs
	}
	for i, m := range api {
		got := shown[i]
		if got.Name != m.Name || got.ShownName == nil || *got.ShownName != m.Name {
			b.t.Errorf("chat %s, message %d: the console shows it as %q (data-name %q), the API's name is %q", id, m.Seq, deref(got.ShownName), got.Name, m.Name)
		}
		if got.Text != shownText(m.Content) {
			b.t.Errorf("chat %s, message %d: the console shows the text\n%q\nthe API's content is\n%q", id, m.Seq, got.Text, m.Content)
		}
		if len(got.Markup) > 0 {
			b.t.Errorf("chat %s, message %d: the content %q became elements %v", id, m.Seq, m.Content, got.Markup)
		}
	}
	return seqs
}

func deref(s *string) string {
	if s == nil {
		return "(none)"
	}
	return *s
}

// sameOrigin checks that no page made a request anywhere but agentd.
func (b *browser) sameOrigin(p *proc) {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.requests) == 0 {
		b.t.Error("no requests were recorded")
	}
	for _, u := range b.requests {
		if !strings.HasPrefix(u, p.base+"/") && !strings.HasPrefix(u, "data:") {
			b.t.Errorf("a request left the agentd origin: %s", u)
		}
	}
}

// With API keys, the console asks for one, keeps it in sessionStorage only,
// and no API request succeeds without it.
func TestConsoleWithAPIKeys(t *testing.T) {
	t.Parallel()
	const key = "console-key-0123456789abcdef"
	b := newBrowser(t)
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none", "AGENTD_API_KEYS="+key+":team")
	p.auth = "Bearer " + key
	c := p.create(readExample(t, "debate.json"))

	b.run(chromedp.Navigate(p.base + "/"))
	b.waitJS("the key dialog", `document.querySelector('#key-dialog[open]')`)
	b.screenshot("key-dialog")
	listed := eval[int](b, `document.querySelectorAll('#chat-list li').length`)
	if listed != 0 {
		t.Errorf("%d chats listed without a key", listed)
	}
	b.mu.Lock()
	before := slices.Clone(b.statuses)
	b.mu.Unlock()
	if len(before) == 0 {
		t.Error("the console made no API request")
	}
	for _, r := range before {
		if r.status != 401 {
			t.Errorf("without a key, %s answered %d", r.url, r.status)
		}
	}

	// A wrong key is refused and not kept.
	b.run(chromedp.SetValue(chromedp.CSS("#key-input"), "wrong-key-0123456789abcdef"), chromedp.Click(chromedp.CSS("#key-submit")))
	b.waitJS("the refusal", `!document.querySelector('#key-error').hidden`)
	// The right one opens the console.
	b.run(chromedp.SetValue(chromedp.CSS("#key-input"), key), chromedp.Click(chromedp.CSS("#key-submit")))
	b.waitJS("the chat list", fmt.Sprintf(`document.querySelector('#chat-list li[data-id="%s"]')`, c.ID))
	b.openChat(p.base, c.ID)
	b.waitJS("the streamed chat", `document.querySelector('#chat-end:not([hidden])')`)
	b.checkTranscript(p, c.ID)
	session := eval[string](b, `sessionStorage.getItem('agentd.apiKey') || ''`)
	local := eval[string](b, `JSON.stringify(localStorage)`)
	if session != key || strings.Contains(local, key) || strings.Contains(b.cookies(), key) {
		t.Errorf("the key is not kept in sessionStorage only: session %q, local %s", session, local)
	}
	b.mu.Lock()
	for _, u := range b.requests {
		if strings.Contains(u, key) {
			t.Errorf("the key is in a URL: %s", u)
		}
	}
	b.mu.Unlock()
	b.sameOrigin(p)
}

func (b *browser) cookies() string {
	return eval[string](b, `document.cookie`)
}

// TestConsoleShowsStructuredMessages: a structured reply shows its format
// string's text and a table of its object's fields.
func TestConsoleShowsStructuredMessages(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none")
	c := p.createTeam(teamBody(t, "Plan the release.", teamFixture(t, "structured"), ""))
	p.waitTerminal(c.ID, 30*time.Second)
	b.openChat(p.base, c.ID)
	b.waitJS("the structured reply", `document.querySelector('#transcript li.msg[data-name="planner"] table.structured')`)
	text := eval[string](b, `document.querySelector('#transcript li.msg[data-name="planner"]').innerText`)
	for _, want := range []string{"structured", "Ship (priority 1): ['build']", "title", "steps", `["build"]`, "confidence", "0.5", "note", "null"} {
		if !strings.Contains(text, want) {
			t.Errorf("the planner's message shows %q, without %q", text, want)
		}
	}
	rows := eval[int](b, `document.querySelectorAll('#transcript li.msg[data-name="planner"] table.structured tr').length`)
	if rows != 7 {
		t.Errorf("%d rows in the structured table, want 7 (one per field)", rows)
	}
	b.screenshot("structured-message")
}
