package llm

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/gif"
	"image/png"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/llm/anthropictest"
	"github.com/agentd/agentd/internal/llm/openaitest"
)

// pngOf encodes img as PNG.
func pngOf(t *testing.T, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// rgbPNG is an opaque 3x2 image (8-bit RGB PNG), rgbaPNG the same with a
// half-transparent pixel (RGBA PNG).
func testImages(t *testing.T) (rgb, rgba []byte) {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 3, 2))
	for x := range 3 {
		for y := range 2 {
			img.SetNRGBA(x, y, color.NRGBA{R: uint8(40 * x), G: uint8(100 * y), B: 200, A: 255})
		}
	}
	rgb = pngOf(t, img)
	img.SetNRGBA(1, 1, color.NRGBA{R: 10, G: 20, B: 30, A: 128})
	return rgb, pngOf(t, img)
}

// sentParts are the content parts of the request's user message.
func sentParts(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	var parts []map[string]any
	if err := json.Unmarshal(req.Messages[len(req.Messages)-1].Content, &parts); err != nil {
		t.Fatalf("content %s: %v", req.Messages[len(req.Messages)-1].Content, err)
	}
	return parts
}

func TestOpenAISendsImagesAsAgentChatDoes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.srv.Reply(openaitest.Text("a gradient"))
	rgb, rgba := testImages(t)
	_, err := f.c.Complete(t.Context(), openaiRequest(
		chat.ModelMessage{Role: "system", Content: "Describe images."},
		chat.ModelMessage{Role: "user", Name: "user", Content: "What is this?\n<image>\n<image>", More: chat.MoreParts([]chat.ContentPart{
			{Text: "What is this?"},
			{Image: &chat.Image{Data: rgb, MediaType: "image/png", Width: 3, Height: 2}},
			{Image: &chat.Image{Data: rgba, MediaType: "image/png", Width: 3, Height: 2}},
		})},
	))
	if err != nil {
		t.Fatal(err) // the fake checks image parts as the API does
	}
	body := f.srv.Requests()[0].Body
	if want := `{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` +
		base64.StdEncoding.EncodeToString(rgb) + `","detail":"auto"}},`; !strings.Contains(string(body), want) {
		t.Errorf("request body %s\nlacks %s", body, want)
	}
	parts := sentParts(t, body)
	if len(parts) != 3 {
		t.Fatalf("parts = %v", parts)
	}
	url := parts[2]["image_url"].(map[string]any)["url"].(string)
	data, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(url, "data:image/png;base64,"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	// AgentChat's Image converts to RGB: the alpha is dropped, the colour kept.
	if c := color.NRGBAModel.Convert(got.At(1, 1)).(color.NRGBA); c != (color.NRGBA{R: 10, G: 20, B: 30, A: 255}) {
		t.Errorf("pixel (1,1) = %v, want the colour without its alpha", c)
	}
	if c := color.NRGBAModel.Convert(got.At(2, 0)).(color.NRGBA); c != (color.NRGBA{R: 80, G: 0, B: 200, A: 255}) {
		t.Errorf("pixel (2,0) = %v", c)
	}
	if cfg, _ := png.DecodeConfig(bytes.NewReader(data)); cfg.ColorModel != color.RGBAModel {
		t.Errorf("re-encoded image is not 8-bit RGB: %v", cfg.ColorModel)
	}
}

func TestOpenAIImagesAsJPEGAndGIFGoAsPNG(t *testing.T) {
	t.Parallel()
	img := image.NewPaletted(image.Rect(0, 0, 2, 2), color.Palette{color.NRGBA{R: 255, A: 255}, color.NRGBA{B: 255, A: 255}})
	img.SetColorIndex(1, 1, 1)
	var g bytes.Buffer
	if err := encodeGIF(&g, img); err != nil {
		t.Fatal(err)
	}
	data, err := imagePNG(&chat.Image{Data: g.Bytes()})
	if err != nil {
		t.Fatal(err)
	}
	got, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if c := color.NRGBAModel.Convert(got.At(1, 1)).(color.NRGBA); c != (color.NRGBA{B: 255, A: 255}) {
		t.Errorf("pixel (1,1) = %v", c)
	}
	if _, err := imagePNG(&chat.Image{Data: []byte("not an image")}); err == nil {
		t.Error("bytes that are no image were sent")
	}
}

func TestOpenAITestServerRefusesBadImageParts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for _, tc := range []struct{ name, part, want string }{
		{"not an image", `{"type":"image_url","image_url":{"url":"data:image/png;base64,aGVsbG8="}}`, "unsupported image"},
		{"bad detail", `{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"max"}}`, "'auto', 'low', and 'high'"},
		{"no url", `{"type":"image_url","image_url":{}}`, "image_url.url"},
		{"not a data url", `{"type":"image_url","image_url":{"url":"ftp://x"}}`, "Invalid image URL"},
		{"unknown type", `{"type":"picture"}`, "Supported values"},
	} {
		body := `{"model":"m","messages":[{"role":"user","content":[` + tc.part + `]}]}`
		resp, err := postJSON(f.srv.URL()+"/chat/completions", testKey, body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.status != 400 || !strings.Contains(resp.body, tc.want) {
			t.Errorf("%s: %d %s, want 400 with %q", tc.name, resp.status, resp.body, tc.want)
		}
	}
	resp, err := postJSON(f.srv.URL()+"/chat/completions", testKey,
		`{"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.status != 400 || !strings.Contains(resp.body, "'text'") {
		t.Errorf("image on a system message: %d %s", resp.status, resp.body)
	}
}

func encodeGIF(w *bytes.Buffer, img *image.Paletted) error { return gif.Encode(w, img, nil) }

type httpResult struct {
	status int
	body   string
}

// postJSON posts body to url with the bearer key, as any client would.
func postJSON(url, key, body string) (httpResult, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return httpResult{}, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return httpResult{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return httpResult{resp.StatusCode, string(b)}, err
}

// TestAnthropicSendsImagesAsAgentChatDoes: a text block per text and an
// image block with a base64 PNG source per image, in order.
func TestAnthropicSendsImagesAsAgentChatDoes(t *testing.T) {
	t.Parallel()
	srv, c, _ := anthropicFixture(t)
	srv.Reply(anthropictest.Reply{Text: "A gradient."})
	rgb, _ := testImages(t)
	_, err := c.Complete(t.Context(), anthropicReq(
		chat.ModelMessage{Role: chat.RoleUser, Name: "user", Content: "What is this?\n<image>", More: chat.MoreParts([]chat.ContentPart{
			{Text: "What is this?"}, {Image: &chat.Image{Data: rgb, MediaType: "image/png", Width: 3, Height: 2}}, {Text: " "}})},
	))
	if err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[0]
	want := `[{"text":"What is this?","type":"text"},{"source":{"data":"` + base64.StdEncoding.EncodeToString(rgb) +
		`","media_type":"image/png","type":"base64"},"type":"image"}]`
	if r.Status != 200 || !strings.Contains(string(r.Body), want) {
		t.Errorf("request %d %s: %s\nwant content %s", r.Status, r.Error, r.Body, want)
	}
}
