package runtime_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/runtime/runtimetest"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/llm/openaitest"
	"github.com/agentd/agentd/internal/spec"
)

// opaquePNG is a 2x2 8-bit RGB PNG, which goes to the model as it is.
func opaquePNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 2, 2))
	for i := range img.Pix {
		img.Pix[i] = 255
	}
	img.SetNRGBA(1, 0, color.NRGBA{R: 9, G: 8, B: 7, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestMultiModalTaskReachesTheModelAsImageParts: a run's MultiModalMessage
// task is kept in the log as given (texts and images, AgentChat's form
// read too) and reaches an OpenAI model as AgentChat's client sends it; a
// later turn sends it again from the log.
func TestMultiModalTaskReachesTheModelAsImageParts(t *testing.T) {
	fake, start := streamingRuntimes(t)
	// A lease that a loaded machine cannot miss: a lost one redoes a
	// model call, and the test counts them.
	rt := start(func(c *runtime.Config) { c.LeaseDuration = 10 * time.Second })
	fake.Reply(openaitest.Text("first"), openaitest.Text("a white square"), openaitest.Text("still white"))
	c := create(t, rt, `{"task": "t", "max_round": 1,
		"agents": [{"name": "seer", "type": "assistant", "model": {"provider": "openai", "model": "gpt-4o"}}]}`)
	waitRun(t, rt, c.ID, 1)
	data := opaquePNG(t)
	b64 := base64.StdEncoding.EncodeToString(data)
	submitRun(t, rt, c.ID, `{"task": {"type": "MultiModalMessage", "content": ["What is", {"data": "`+b64+`"}, "this?"]}}`)
	waitRun(t, rt, c.ID, 2)
	submitRun(t, rt, c.ID, `{"task": "and now?"}`)
	waitRun(t, rt, c.ID, 3)

	reqs := fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("model saw %d requests, want 3", len(reqs))
	}
	want := `{"role":"user","content":[{"type":"text","text":"What is"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` +
		b64 + `","detail":"auto"}},{"type":"text","text":"this?"}],"name":"user"}`
	for _, i := range []int{1, 2} {
		if !strings.Contains(string(reqs[i].Body), want) {
			t.Errorf("request %d: %s\nlacks %s", i+1, reqs[i].Body, want)
		}
	}
	evs, err := rt.Events(context.Background(), "", c.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var got []chat.Message
	for _, e := range evs {
		if m, ok := chat.MessageFromEvent(e); ok && m.Type == chat.TypeMultiModalMessage {
			got = append(got, m)
		}
	}
	if len(got) != 1 || got[0].Content != "What is\n<image>\nthis?" || got[0].Name != "user" || len(got[0].Parts) != 3 ||
		!bytes.Equal(got[0].Parts[1].Image.Data, data) || got[0].Parts[1].Image.MediaType != "image/png" {
		t.Fatalf("multimodal messages = %+v", got)
	}
	b, err := json.Marshal(got[0].Parts)
	if err != nil {
		t.Fatal(err)
	}
	if w := `["What is",{"image":{"data":"` + b64 + `","media_type":"image/png"}},"this?"]`; string(b) != w {
		t.Errorf("parts = %s, want %s", b, w)
	}
}

// TestMultiModalTaskProblems: every problem of a multimodal task is named
// with its pointer.
func TestMultiModalTaskProblems(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db, func(c *runtime.Config) { c.Limits.MaxImageBytes = 100 })
	c := create(t, rt, threeAgents(1, ""))
	waitRun(t, rt, c.ID, 1)
	big := base64.StdEncoding.EncodeToString(append(opaquePNG(t), make([]byte, 100)...))
	_, _, err := rt.SubmitRun(context.Background(), "", c.ID, "", spec.DecodeRunRequest([]byte(`{"task": [
		{"type": "MultiModalMessage", "content": "not a list"},
		{"type": "MultiModalMessage", "content": ["x", {"image": {"data": "aGVsbG8="}}, {"data": "`+big+`"}, 7]},
		{"type": "MultiModalMessage", "content": []}]}`)))
	var ve *spec.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want a validation error", err)
	}
	var paths []string
	for _, p := range ve.Problems {
		paths = append(paths, p.Path)
	}
	want := []string{"/task/0/content", "/task/1/content/3", "/task/2/content"}
	if !slices.Equal(paths, want) {
		t.Errorf("problems = %+v, want paths %q", ve.Problems, want)
	}
	_, _, err = rt.SubmitRun(context.Background(), "", c.ID, "", spec.DecodeRunRequest([]byte(`{"task": {"type": "MultiModalMessage", "content": ["x", {"image": {"data": "aGVsbG8="}}, {"data": "`+big+`"}]}}`)))
	paths = nil
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			paths = append(paths, p.Path+" "+p.Message)
		}
	}
	if len(paths) != 2 || !strings.HasPrefix(paths[0], "/task/content/1/image/data is not an image") ||
		!strings.HasPrefix(paths[1], "/task/content/2/data is ") || !strings.Contains(paths[1], "at most 100") {
		t.Errorf("problems = %q", paths)
	}
}

// TestMultiModalHistoryReachesTheModel: a user's MultiModalMessage in a
// spec's history is in the agent's model context as image parts.
func TestMultiModalHistoryReachesTheModel(t *testing.T) {
	fake, start := streamingRuntimes(t)
	rt := start()
	fake.Reply(openaitest.Text("ok"))
	b64 := base64.StdEncoding.EncodeToString(opaquePNG(t))
	c := create(t, rt, `{"task": "and?", "max_round": 1,
		"messages": [{"role": "user", "name": "ann", "type": "MultiModalMessage", "content": [{"image": {"data": "`+b64+`", "media_type": "image/png"}}, "mine"]}],
		"agents": [{"name": "seer", "type": "assistant", "model": {"provider": "openai", "model": "gpt-4o"}}]}`)
	waitRun(t, rt, c.ID, 1)
	reqs := fake.Requests()
	want := `{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,` + b64 +
		`","detail":"auto"}},{"type":"text","text":"mine"}],"name":"ann"},{"role":"user","content":"and?","name":"user"}`
	if len(reqs) != 1 || !strings.Contains(string(reqs[0].Body), want) {
		t.Fatalf("requests %d: %s\nwant %s", len(reqs), reqs[0].Body, want)
	}
}

// TestSelectorHistoryShowsImagesAsPlaceholders: the auto selector's
// history writes a MultiModalMessage's content list as Python does, each
// image as <image> (AgentChat's shows the image object's repr, with an
// address no run reproduces).
func TestSelectorHistoryShowsImagesAsPlaceholders(t *testing.T) {
	fake, start := streamingRuntimes(t)
	rt := start()
	fake.Reply(openaitest.Text("seer"), openaitest.Text("a dot"))
	b64 := base64.StdEncoding.EncodeToString(opaquePNG(t))
	c := create(t, rt, `{"task": "go", "max_round": 1,
		"messages": [{"role": "user", "type": "MultiModalMessage", "content": ["It's", {"data": "`+b64+`"}]}],
		"speaker_selection": {"method": "auto", "model": {"provider": "openai", "model": "gpt-4o"}},
		"agents": [{"name": "seer", "type": "assistant", "description": "Sees.", "model": {"provider": "openai", "model": "gpt-4o"}},
		           {"name": "scribe", "type": "assistant", "description": "Writes.", "model": {"provider": "openai", "model": "gpt-4o"}}]}`)
	waitRun(t, rt, c.ID, 1)
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model saw %d requests, want 2", len(reqs))
	}
	var sel struct {
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[0].Body, &sel); err != nil {
		t.Fatal(err)
	}
	if want := "user: [\"It's\", <image>]\n\n\nuser: go\n\n"; len(sel.Messages) == 0 || !strings.Contains(sel.Messages[0].Content, want) {
		t.Errorf("selector prompt %q lacks %q", sel.Messages, want)
	}
}

// TestHumanSendsImages: a human's /input may be a MultiModalMessage; its
// images are checked as a task's are.
func TestHumanSendsImages(t *testing.T) {
	db := runtimetest.OpenSQLite(t)
	rt := runtimetest.New(t, db)
	c := create(t, rt, fmt.Sprintf(reviewSpec, ""))
	c = waitFor(t, rt, c.ID, 5*time.Second, chat.StatusAwaitingInput)
	p := pending(t, c)
	bad := &chat.Input{RequestID: p.RequestID, Parts: []spec.Part{{Text: "see"}, {Image: &spec.ImagePart{Data: []byte("no image")}}}}
	var ve *spec.ValidationError
	if err := answerInput(rt, context.Background(), c.ID, bad); !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Path != "/content/1/image/data" {
		t.Fatalf("a part that is no image: %v", err)
	}
	good := &chat.Input{RequestID: p.RequestID, Parts: []spec.Part{{Text: "see"}, {Image: &spec.ImagePart{Data: opaquePNG(t)}}}}
	if err := answerInput(rt, context.Background(), c.ID, good); err != nil {
		t.Fatal(err)
	}
	waitFor(t, rt, c.ID, 5*time.Second, chat.StatusAwaitingInput)
	evs, err := rt.Events(context.Background(), "", c.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		if m, ok := chat.MessageFromEvent(e); ok && m.Type == chat.TypeMultiModalMessage {
			got = append(got, fmt.Sprintf("%s:%q:%d:%s", m.Name, m.Content, len(m.Parts), m.Parts[1].Image.MediaType))
		}
	}
	if want := []string{`human:"see\n<image>":2:image/png`}; !slices.Equal(got, want) {
		t.Errorf("multimodal messages %q, want %q", got, want)
	}
}
