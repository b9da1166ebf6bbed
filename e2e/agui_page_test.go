package e2e

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentd/agentd/internal/llm/openaitest"
)

// aguiPageTeam is the team the README's page runs in the test: a poet
// (replayed) and a critic whose model streams its reply slowly, so the
// page shows a reply while it is typed.
const aguiPageTeam = `{"max_round": 2, "agents": [
	{"name": "poet", "type": "assistant", "model": {"provider": "replay", "responses": ["Logs scroll, nights are long."]}},
	{"name": "critic", "type": "assistant", "model": {"provider": "openai", "model": "gpt-test"}}]}`

// bundleAGUIClient bundles @ag-ui/client for the browser with the pinned
// esbuild of e2e/js, as the README tells a page's author to, into dir.
func bundleAGUIClient(t *testing.T, dir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node_modules/.bin/esbuild", "--bundle", "--format=esm", "--log-level=warning",
		"--outfile="+filepath.Join(dir, "ag-ui-client.js"), "@ag-ui/client")
	cmd.Dir = "js"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("esbuild @ag-ui/client: %v\n%s", err, out)
	}
}

// TestAGUIPageInChromium serves the README's page (its html block as
// written but for the server's address) from an origin of its own, next
// to @ag-ui/client bundled by esbuild, loads it in headless Chromium and
// checks that it shows the run's transcript: each message of the chat,
// the critic's reply in more than one state while it streamed, and a
// screenshot that is a PNG of the page, not a blank one.
func TestAGUIPageInChromium(t *testing.T) {
	t.Parallel()
	needJS(t, "@ag-ui/client", "esbuild")
	b := newBrowser(t)
	fake := openaitest.New(openaitest.WithAPIKey("sk-test-key"))
	defer fake.Close()
	fake.Respond(func(openaitest.Request) openaitest.Reply {
		return openaitest.Reply{Pieces: []string{"Short", " lines,", " long", " nights:", " it", " scans."}, PieceDelay: 150 * time.Millisecond}
	})

	pages := t.TempDir()
	bundleAGUIClient(t, pages)
	site := httptest.NewServer(http.FileServer(http.Dir(pages)))
	defer site.Close()
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none", "AGENTD_CORS_ORIGINS="+site.URL,
		"OPENAI_API_KEY=sk-test-key", "OPENAI_BASE_URL="+fake.URL())
	if code, _, body := p.do("PUT", "/v1/teams/writer", []byte(aguiPageTeam)); code != http.StatusCreated {
		t.Fatalf("save team: %d %s", code, body)
	}
	html := fencedBlocks(t, "../README.md", "html")
	if len(html) != 1 || !strings.Contains(html[0], "http://127.0.0.1:8080/ag-ui/writer") {
		t.Fatalf("README.md has %d html blocks, want one page running http://127.0.0.1:8080/ag-ui/writer", len(html))
	}
	page := strings.ReplaceAll(html[0], "http://127.0.0.1:8080", p.base)
	if err := os.WriteFile(filepath.Join(pages, "index.html"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}

	// The page's transcript as it changes, read until the run is over:
	// the critic's reply must be seen part-typed.
	b.run(chromedp.Navigate(site.URL + "/"))
	const items = `[...document.querySelectorAll('#transcript li')].map(li => li.textContent)`
	partial := false
	deadline := time.Now().Add(90 * time.Second)
	for !eval[bool](b, `document.body.dataset.done === "true"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the page did not finish its run; it shows %q", eval[[]string](b, items))
		}
		for _, li := range eval[[]string](b, items) {
			if strings.HasPrefix(li, "critic: Short") && !strings.HasSuffix(li, "scans.") {
				partial = true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	shown := eval[[]string](b, items)
	b.screenshot("agui-page")

	id := threadChat(t, p, "writer")
	var want []string
	for _, m := range p.messages(id) {
		who := m.Name
		if m.Role == "user" {
			who = "user" // the page's own message: the client holds no name for it
		}
		want = append(want, who+": "+m.Content)
	}
	if strings.Join(shown, "\n") != strings.Join(want, "\n") || len(want) != 3 {
		t.Errorf("the page shows\n%s\nthe chat's messages are\n%s", strings.Join(shown, "\n"), strings.Join(want, "\n"))
	}
	if !partial {
		t.Errorf("the critic's reply was never shown part-typed: the page did not stream it")
	}
	checkScreenshot(t, filepath.Join(b.shots, "agui-page.png"))
}

// checkScreenshot checks that a screenshot is a PNG of the browser's
// window size with something drawn on it: at least a few hundred pixels
// that are not the background's colour.
func checkScreenshot(t *testing.T, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("screenshot %s is not a PNG: %v", path, err)
	}
	if got := img.Bounds().Size(); got.X < 640 || got.Y < 480 {
		t.Errorf("screenshot %s is %v, smaller than the window", path, got)
	}
	if n := inked(img); n < 300 {
		t.Errorf("screenshot %s is blank: %d pixels differ from the background", path, n)
	}
}

// inked counts the pixels that differ from the top-left one.
func inked(img image.Image) int {
	bg := color.RGBAModel.Convert(img.At(0, 0))
	n := 0
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if color.RGBAModel.Convert(img.At(x, y)) != bg {
				n++
			}
		}
	}
	return n
}
