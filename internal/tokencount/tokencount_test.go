package tokencount

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
)

// TestCountsAreTiktokens compares counts with Python tiktoken's
// (testdata/counts.json, written by e2e/autogen/tokencounts.py).
func TestCountsAreTiktokens(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/counts.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Encodings map[string]*string `json:"encodings"`
		Counts    []struct {
			Encoding, Text string
			Tokens         int
		} `json:"counts"`
	}
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatal(err)
	}
	if len(fx.Counts) == 0 {
		t.Fatal("no counts")
	}
	for model, enc := range fx.Encodings {
		want := Cl100kBase // AgentChat's fallback for a model tiktoken does not know
		if enc != nil {
			want = *enc
		}
		if got := EncodingForModel(model); got != want {
			t.Errorf("EncodingForModel(%q) = %s, want %s", model, got, want)
		}
	}
	c := New()
	for _, x := range fx.Counts {
		got, err := c.Count(x.Encoding, x.Text)
		if err != nil {
			t.Fatal(err)
		}
		if got != x.Tokens {
			t.Errorf("%s %q: %d tokens, tiktoken's %d", x.Encoding, x.Text, got, x.Tokens)
		}
	}
}

// TestEmbeddedFilesAreTiktokens checks the embedded BPE files against the
// SHA-256 that tiktoken expects of each (tiktoken_ext/openai_public.py).
func TestEmbeddedFilesAreTiktokens(t *testing.T) {
	t.Parallel()
	for enc, sum := range map[string]string{
		O200kBase:  "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
		Cl100kBase: "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
		P50kBase:   "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
		R50kBase:   "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
	} {
		b, err := EncodingFile(enc)
		if err != nil {
			t.Fatal(err)
		}
		got := sha256.Sum256(b)
		if hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s: sha256 %x, tiktoken's %s", enc, got, sum)
		}
	}
}

// BenchmarkCount prints what counting a message-sized text costs once the
// encoding is loaded.
func BenchmarkCount(b *testing.B) {
	c := New()
	text := "The weather in Paris is sunny, 21 C, with a light breeze from the west. Bring sunglasses."
	if _, err := c.Count(O200kBase, text); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Count(O200kBase, text); err != nil {
			b.Fatal(err)
		}
	}
}
