package llm

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image/color"
	"image/png"
	"os"
	"testing"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
)

// TestWebPGoesAsAgentChatSendsIt: a WebP image is accepted and sent as
// AgentChat's Image sends it, an RGB PNG of its pixels, checked against
// the pixels AgentChat sent for the same files (testdata/webp.py), which
// must be equal: lossless, and lossy of odd and even sizes, whose chroma
// is upsampled and converted as libwebp does it.
func TestWebPGoesAsAgentChatSendsIt(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/webp.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases map[string]struct {
		WebP   string  `json:"webp"`
		Width  int     `json:"width"`
		Height int     `json:"height"`
		RGB    [][]int `json:"rgb"`
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) != 5 {
		t.Fatalf("%d cases", len(cases))
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			data, _ := base64.StdEncoding.DecodeString(c.WebP)
			mt, cfg, err := spec.ImageConfig(data)
			if err != nil || mt != "image/webp" || cfg.Width != c.Width || cfg.Height != c.Height {
				t.Fatalf("ImageConfig = %q %dx%d, %v", mt, cfg.Width, cfg.Height, err)
			}
			out, err := imagePNG(&chat.Image{Data: data, MediaType: mt})
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(bytes.NewReader(out))
			if err != nil {
				t.Fatal(err)
			}
			worst := 0
			for i, want := range c.RGB {
				x, y := i%c.Width, i/c.Width
				got := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
				if got.A != 255 {
					t.Errorf("pixel (%d,%d) keeps alpha %d", x, y, got.A)
				}
				for k, g := range []uint8{got.R, got.G, got.B} {
					d := int(g) - want[k]
					worst = max(worst, d, -d)
				}
			}
			if worst > 0 {
				t.Errorf("pixels differ from AgentChat's by up to %d levels", worst)
			}
		})
	}
}
