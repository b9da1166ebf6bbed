package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/llm/openaitest"
)

// testPNG is a w×h 8-bit RGB PNG of a colour gradient.
func testPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		for y := range h {
			img.SetNRGBA(x, y, color.NRGBA{R: uint8(x * 255 / w), G: uint8(y * 255 / h), B: 128, A: 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// noisePNG is a w×h PNG of random pixels, which do not compress.
func noisePNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range img.Pix {
		img.Pix[i] = uint8(rng.Uint32())
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestImagesThroughTheBinary: a run's MultiModalMessage reaches the model
// as image parts, comes back in GET /messages (conforming to the OpenAPI
// file), survives a kill -9 in the log, and an image over
// AGENTD_MAX_IMAGE_BYTES is a 422 naming it.
func TestImagesThroughTheBinary(t *testing.T) {
	t.Parallel()
	fake := openaitest.New(openaitest.WithAPIKey("sk-test-key"))
	defer fake.Close()
	fake.Reply(openaitest.Text("hello"), openaitest.Text("a gradient"), openaitest.Text("still a gradient"))
	dir := t.TempDir()
	env := []string{"AGENTD_DATA_DIR=" + dir, "AGENTD_SANDBOX=none", "AGENTD_MAX_IMAGE_BYTES=20000",
		"OPENAI_API_KEY=sk-test-key", "OPENAI_BASE_URL=" + fake.URL()}
	p := startAgentd(t, env...)
	c := p.create([]byte(`{"task": "hi", "max_round": 1,
		"agents": [{"name": "seer", "type": "assistant", "model": {"provider": "openai", "model": "gpt-4o"}}]}`))
	p.waitRun(c.ID, 1, 30*time.Second)

	data := testPNG(t, 16, 8)
	b64 := base64.StdEncoding.EncodeToString(data)
	p.mustPostRun(c.ID, `{"task": {"type": "MultiModalMessage", "content": ["Describe", {"image": {"data": "`+b64+`"}}]}}`, 2)
	p.waitRun(c.ID, 2, 30*time.Second)
	want := `{"role":"user","content":[{"type":"text","text":"Describe"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` +
		b64 + `","detail":"auto"}}],"name":"user"}`
	if reqs := fake.Requests(); len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), want) {
		t.Fatalf("model requests: %d, last %s", len(reqs), reqs[len(reqs)-1].Body)
	}

	big := base64.StdEncoding.EncodeToString(noisePNG(t, 100, 100)) // about 30 kB
	code, body := p.postRun(c.ID, `{"task": {"type": "MultiModalMessage", "content": ["x", {"data": "`+big+`"}]}}`)
	if code != http.StatusUnprocessableEntity || !strings.Contains(string(body), `"/task/content/1/data"`) || !strings.Contains(string(body), "AGENTD_MAX_IMAGE_BYTES") {
		t.Errorf("a large image: %d %s", code, body)
	}

	// The log keeps the image: after a kill -9 the next turn sends it again.
	p.kill9()
	p = startAgentd(t, env...)
	p.mustPostRun(c.ID, `{"task": "and now?"}`, 3)
	p.waitRun(c.ID, 3, 30*time.Second)
	if reqs := fake.Requests(); len(reqs) != 3 || !strings.Contains(string(reqs[2].Body), want) {
		t.Fatalf("after a restart, model requests: %d, last %s", len(reqs), reqs[len(reqs)-1].Body)
	}
	code, _, raw := p.do("GET", "/v1/chats/"+c.ID+"/messages", nil)
	if code != http.StatusOK {
		t.Fatalf("messages: %d %s", code, raw)
	}
	conforms(t, "MessageList", raw)
	var page struct {
		Messages []struct {
			Type    string          `json:"type"`
			Content string          `json:"content"`
			Parts   json.RawMessage `json:"parts"`
		} `json:"messages"`
	}
	mustUnmarshal(t, raw, &page)
	found := false
	for _, m := range page.Messages {
		if m.Type == "MultiModalMessage" {
			found = true
			if m.Content != "Describe\n<image>" || string(m.Parts) != fmt.Sprintf(`["Describe",{"image":{"data":"%s","media_type":"image/png"}}]`, b64) {
				t.Errorf("message = %q, parts %s", m.Content, m.Parts)
			}
		}
	}
	if !found {
		t.Errorf("no MultiModalMessage in %s", raw)
	}
}

// TestSpecTaskWithImages: a chat's own task may be what a run's task may
// be (AgentChat's first team.run with a MultiModalMessage or a list): the
// chat starts with those messages, the model sees the image, the chat's
// spec keeps the task as given, and a task that is not right is a 422
// with each problem at its place.
func TestSpecTaskWithImages(t *testing.T) {
	t.Parallel()
	fake := openaitest.New(openaitest.WithAPIKey("sk-test-key"))
	defer fake.Close()
	fake.Reply(openaitest.Text("a gradient"))
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none", "AGENTD_MAX_IMAGE_BYTES=20000",
		"OPENAI_API_KEY=sk-test-key", "OPENAI_BASE_URL="+fake.URL())
	b64 := base64.StdEncoding.EncodeToString(testPNG(t, 16, 8))
	task := `[{"type": "MultiModalMessage", "content": ["Describe", {"image": {"data": "` + b64 + `"}}]},
		{"type": "TextMessage", "source": "ticket_system", "content": "Ticket 42."}]`
	spec := func(task string) []byte {
		return []byte(`{"task": ` + task + `, "max_round": 1,
			"agents": [{"name": "seer", "type": "assistant", "model": {"provider": "openai", "model": "gpt-4o"}}]}`)
	}
	c := p.create(spec(task))
	if final := p.waitTerminal(c.ID, 30*time.Second); final.Status != "completed" {
		t.Fatalf("chat = %+v", final)
	}
	want := `{"role":"user","content":[{"type":"text","text":"Describe"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` +
		b64 + `","detail":"auto"}}],"name":"user"},{"role":"user","content":"Ticket 42.","name":"ticket_system"}`
	if reqs := fake.Requests(); len(reqs) != 1 || !strings.Contains(string(reqs[0].Body), want) {
		t.Fatalf("model requests: %+v", reqs)
	}
	var got []string
	for _, m := range p.typedMessages(c.ID) {
		got = append(got, m.Type+":"+m.Name+":"+m.Content)
	}
	if strings.Join(got, "|") != "MultiModalMessage:user:Describe\n<image>|TextMessage:ticket_system:Ticket 42.|TextMessage:seer:a gradient" {
		t.Errorf("messages = %q", got)
	}
	code, _, raw := p.do("GET", "/v1/chats/"+c.ID+"?include=spec", nil)
	conforms(t, "Chat", raw)
	var view struct {
		Spec struct {
			Task []struct{ Type, Source string }
		}
	}
	mustUnmarshal(t, raw, &view)
	if code != http.StatusOK || len(view.Spec.Task) != 2 || view.Spec.Task[1].Source != "ticket_system" {
		t.Errorf("the chat's spec: %d %s", code, raw)
	}

	code, _, body := p.do("POST", "/v1/chats", spec(`[{"type": "MultiModalMessage", "content": ["x", {"image": {"data": "bm90IGFuIGltYWdl"}}]},
		{"type": "TextMessage", "source": "seer", "content": "I am an agent"}, {"type": "Note", "content": "?"}]`))
	if code != http.StatusUnprocessableEntity ||
		!problemSays(t, body, "/task/0/content/1/image/data", "") ||
		!problemSays(t, body, "/task/1/source", "is an agent of the chat") ||
		!problemSays(t, body, "/task/2/type", "must be TextMessage, MultiModalMessage or HandoffMessage") {
		t.Errorf("a task with three problems: %d %s", code, body)
	}
	for _, bad := range []string{`7`, `true`, `[]`} {
		if code, _, body := p.do("POST", "/v1/chats", spec(bad)); code != http.StatusUnprocessableEntity || !strings.Contains(string(body), `"/task"`) {
			t.Errorf("task %s: %d %s", bad, code, body)
		}
	}
}

// TestConsoleShowsImages: the console shows a MultiModalMessage's text and
// its image, decoded by the browser and bounded in size.
func TestConsoleShowsImages(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none")
	c := p.create([]byte(`{"task": "hi", "max_round": 1,
		"agents": [{"name": "seer", "type": "assistant", "model": {"provider": "replay", "responses": ["hello", "a gradient"]}}]}`))
	p.waitRun(c.ID, 1, 30*time.Second)
	b64 := base64.StdEncoding.EncodeToString(testPNG(t, 900, 700))
	p.mustPostRun(c.ID, `{"task": {"type": "MultiModalMessage", "content": ["What is this?", {"image": {"data": "`+b64+`"}}]}}`, 2)
	p.waitRun(c.ID, 2, 30*time.Second)
	b.openChat(p.base, c.ID)
	sel := `#transcript li.msg[data-name="user"] img.part-image`
	b.waitJS("the image", `(() => { const i = document.querySelector('`+sel+`'); return i && i.complete && i.naturalWidth > 0 })()`)
	if w := eval[int](b, `document.querySelector('`+sel+`').naturalWidth`); w != 900 {
		t.Errorf("the image decodes %d pixels wide, want 900", w)
	}
	if w := eval[float64](b, `document.querySelector('`+sel+`').getBoundingClientRect().width`); w > 480 || w < 1 {
		t.Errorf("the image is shown %.0f pixels wide, want at most 480", w)
	}
	text := eval[string](b, `Array.from(document.querySelectorAll('#transcript li.msg[data-name="user"]')).map((e) => e.innerText).join('\n')`)
	if !strings.Contains(text, "What is this?") || !strings.Contains(text, "text and images") || strings.Contains(text, "<image>") {
		t.Errorf("the task shows %q", text)
	}
	b.screenshot("image-message")
}
