package spec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"slices"
	"strings"
	"testing"
)

func tinyPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 2, 2))
	img.SetNRGBA(0, 0, color.NRGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestPartJSONReadsBothFormsAndWritesAgentds(t *testing.T) {
	data := tinyPNG(t)
	b64 := base64.StdEncoding.EncodeToString(data)
	var parts []Part
	in := `["Look:", {"image": {"data": "` + b64 + `", "media_type": "image/png"}}, {"data": "` + b64 + `"}]`
	if err := json.Unmarshal([]byte(in), &parts); err != nil {
		t.Fatal(err)
	}
	if len(parts) != 3 || parts[0].Text != "Look:" || parts[0].Image != nil ||
		!bytes.Equal(parts[1].Image.Data, data) || !bytes.Equal(parts[2].Image.Data, data) {
		t.Fatalf("parts = %+v", parts)
	}
	var probs []string
	CheckParts("/content", parts, 0, 100, func(p, f string, a ...any) { probs = append(probs, p+": "+fmt.Sprintf(f, a...)) })
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	out, err := json.Marshal(parts)
	if err != nil {
		t.Fatal(err)
	}
	img := `{"image":{"data":"` + b64 + `","media_type":"image/png"}}`
	if want := `["Look:",` + img + `,` + img + `]`; string(out) != want {
		t.Errorf("marshal = %s\nwant %s", out, want)
	}
	if got := PartsText(parts); got != "Look:\n<image>\n<image>" {
		t.Errorf("PartsText = %q", got)
	}
	for _, bad := range []string{`5`, `{"image": "x"}`, `{"image": {"data": "` + b64 + `", "url": "x"}}`, `{"data": "%%%"}`, `{"data": "` + b64 + `", "x": 1}`, `{}`} {
		var p Part
		if err := json.Unmarshal([]byte(bad), &p); err == nil {
			t.Errorf("%s: accepted as %+v", bad, p)
		}
	}
}

func TestCheckPartsReportsEachProblemWithItsPointer(t *testing.T) {
	data := tinyPNG(t)
	many := make([]Part, MaxImagesPerMessage+1)
	for i := range many {
		many[i] = Part{Image: &ImagePart{Data: data}}
	}
	for _, tc := range []struct {
		name  string
		parts []Part
		max   int
		want  []string
	}{
		{"empty", []Part{}, 0, []string{"/c: a MultiModalMessage holds at least one"}},
		{"not an image", []Part{{Text: "x"}, {Image: &ImagePart{Data: []byte("hello")}}}, 0, []string{"/c/1/image/data: is not an image"}},
		{"AgentChat's form", []Part{{Image: &ImagePart{Data: []byte("hello"), bare: true}}}, 0, []string{"/c/0/data: is not an image"}},
		{"too large", []Part{{Image: &ImagePart{Data: data}}}, 10, []string{"/c/0/image/data: is " + fmt.Sprint(len(data)) + " bytes: an image may have at most 10"}},
		{"wrong media type", []Part{{Image: &ImagePart{Data: data, MediaType: "image/jpeg"}}}, 0, []string{`/c/0/image/media_type: is "image/jpeg", but the data is image/png`}},
		{"too many", many, 0, []string{fmt.Sprintf("/c: holds at most %d images", MaxImagesPerMessage)}},
		{"text too long", []Part{{Text: strings.Repeat("x", 60)}, {Text: strings.Repeat("x", 60)}}, 0, []string{"/c: its text must be at most 100 bytes"}},
		{"NUL", []Part{{Text: "a\x00"}}, 0, []string{"/c/0: must not contain the NUL"}},
	} {
		var probs []string
		CheckParts("/c", tc.parts, tc.max, 100, func(p, f string, a ...any) { probs = append(probs, p+": "+fmt.Sprintf(f, a...)) })
		if len(probs) != len(tc.want) {
			t.Errorf("%s: problems %q, want %q", tc.name, probs, tc.want)
			continue
		}
		for i, w := range tc.want {
			if !strings.HasPrefix(probs[i], w) {
				t.Errorf("%s: problem %q, want %q…", tc.name, probs[i], w)
			}
		}
	}
}

// TestHistoryHoldsMultiModalMessages: a history message's content may be a
// list of texts and images (a user's MultiModalMessage); both decoders read
// it, and each problem is named with its pointer.
func TestHistoryHoldsMultiModalMessages(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString(tinyPNG(t))
	body := `{"task": "go on", "agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]}}],
		"messages": [{"role": "user", "type": "MultiModalMessage", "content": ["see", {"data": "` + b64 + `"}]},
		             {"role": "assistant", "name": "a", "content": "a red dot"}]}`
	s, _, ok := decodeFast([]byte(body))
	if !ok {
		t.Fatal("the fast decoder gave up on a valid history")
	}
	th, probs := thorough([]byte(body))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	for _, sp := range []*Spec{s, th} {
		c := sp.Messages[0].Content
		if len(c.Parts) != 2 || c.Parts[0].Text != "see" || c.Parts[1].Image == nil || c.String() != "see\n<image>" || sp.Messages[1].Content.Text != "a red dot" {
			t.Fatalf("history = %+v", sp.Messages)
		}
	}
	if got := problems(t, body); len(got) > 0 {
		t.Fatal(got)
	}
	bad := `{"task": "go on", "agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]}}],
		"messages": [{"role": "user", "type": "MultiModalMessage", "content": ["see", {"data": "aGVsbG8="}]},
		             {"role": "assistant", "content": ["x"]},
		             {"role": "user", "type": "MultiModalMessage", "content": "text"},
		             {"role": "user", "content": [5]}]}`
	got := problems(t, bad)
	var paths []string
	for _, p := range got {
		paths = append(paths, p.Path)
	}
	if want := []string{"/messages/3/content/0"}; !slices.Equal(paths, want) {
		t.Errorf("shape problems %v, want %v", got, want)
	}
	got = problems(t, strings.Replace(bad, `,
		             {"role": "user", "content": [5]}`, ``, 1))
	paths = nil
	for _, p := range got {
		paths = append(paths, p.Path)
	}
	if want := []string{"/messages/0/content/1/data", "/messages/1/content", "/messages/2/content"}; !slices.Equal(paths, want) {
		t.Errorf("problems %v, want paths %v", got, want)
	}
}
