package e2e

import (
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// TestAPIReferenceInBrowser opens the API reference from the console's
// link: Redoc, embedded in the binary, renders the served OpenAPI file,
// with POST /v1/chats and its request schema, and the page requests
// nothing from anywhere but agentd (an attempt its Content-Security-Policy
// blocks never leaves the browser, and is allowed only for that reason).
func TestAPIReferenceInBrowser(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir())

	var mu sync.Mutex
	urls := map[network.RequestID]string{}
	blocked := map[string]network.BlockedReason{}
	err := chromedp.Listen(b.ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			urls[e.RequestID] = e.Request.URL
		case *network.EventLoadingFailed:
			if e.BlockedReason != "" {
				blocked[urls[e.RequestID]] = e.BlockedReason
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}

	b.run(chromedp.Navigate(p.base + "/"))
	b.waitJS("the console's link to the reference", `document.querySelector('a#docs-link[href="/docs"]')`)
	b.run(chromedp.Click(chromedp.CSS("#docs-link")))
	b.waitJS("Redoc's rendering", `document.body.dataset.rendered === 'yes'`)
	if got := eval[string](b, `document.body.dataset.rendered`); got != "yes" {
		t.Fatalf("rendered = %q", got)
	}

	// The operation: its method, path, summary and request body schema
	// (the three forms of the body, and the spec's fields), read as text:
	// Redoc's style sheet upper-cases some headings, which innerText shows.
	op := `document.getElementById('operation/createChat')`
	// Redoc renders the operations after the first ones a moment later.
	b.waitJS("the createChat operation and its request body", op+` && `+op+`.textContent.includes('Request Body schema')`)
	text := eval[string](b, op+`.textContent`)
	for _, want := range []string{"Create a chat from a spec", "Request Body schema: application/json", "ChatSpec", "TeamChatRequest", "TeamRefChatRequest", "agents", "speaker_selection", "termination", "dry_run"} {
		if !strings.Contains(text, want) {
			t.Errorf("the createChat section does not show %q", want)
		}
	}
	// The endpoint box: the method and the path, in one button.
	endpoint := eval[string](b, `[...`+op+`.querySelectorAll('button')].map(e => e.innerText).find(t => t.includes('/v1/chats')) ?? ''`)
	if !strings.EqualFold(strings.Fields(endpoint + " ")[0], "post") || !strings.Contains(endpoint, "/v1/chats") {
		t.Errorf("the operation's endpoint shows %q, want POST /v1/chats", endpoint)
	}
	// The screenshot shows the request body's schema with the request
	// sample beside it.
	b.run(chromedp.Evaluate[chromedp.Void](`[...` + op + `.querySelectorAll('h5')].find(e => e.textContent.startsWith('Request Body schema')).scrollIntoView()`))
	b.screenshot("api-reference")

	mu.Lock()
	defer mu.Unlock()
	b.mu.Lock()
	requests := slicesClone(b.requests)
	b.mu.Unlock()
	if len(requests) < 4 {
		t.Errorf("only %d requests recorded: %v", len(requests), requests)
	}
	sawSpec := false
	for _, u := range requests {
		switch {
		case u == p.base+"/openapi.yaml":
			sawSpec = true
		case strings.HasPrefix(u, p.base+"/"), strings.HasPrefix(u, "data:"):
		case blocked[u] == network.BlockedReasonCsp:
			t.Logf("blocked by the page's policy, never sent: %s", u)
		default:
			t.Errorf("a request left agentd's origin: %s (blocked: %q)", u, blocked[u])
		}
	}
	if !sawSpec {
		t.Errorf("the page never read /openapi.yaml: %v", requests)
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }
