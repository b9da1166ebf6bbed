// Package tokencount counts tokens as OpenAI's tiktoken does, with the
// encodings shipped inside the binary: nothing is downloaded at run time.
// It is the only package that imports the tokenizer
// (github.com/pkoukk/tiktoken-go) and its embedded BPE files
// (github.com/pkoukk/tiktoken-go-loader, byte for byte the files tiktoken
// downloads: TestEmbeddedFilesAreTiktokens checks their SHA-256 against
// tiktoken's).
package tokencount

import (
	"fmt"
	"strings"
	"sync"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
	"github.com/pkoukk/tiktoken-go-loader/assets"
)

// Encoding names.
const (
	O200kBase  = "o200k_base"
	Cl100kBase = "cl100k_base"
	P50kBase   = "p50k_base"
	P50kEdit   = "p50k_edit"
	R50kBase   = "r50k_base"
)

// modelEncodings and modelPrefixes are tiktoken 0.9.0's tables
// (tiktoken/model.py), the version AgentChat 0.7.5 runs with in the
// recorder: an exact name first, then the first prefix that matches, in
// this order. gpt2 is r50k_base's ranks and pattern under another name.
var modelEncodings = map[string]string{
	"o1": O200kBase, "o3": O200kBase, "gpt-4o": O200kBase,
	"gpt-4": Cl100kBase, "gpt-3.5-turbo": Cl100kBase, "gpt-3.5": Cl100kBase, "gpt-35-turbo": Cl100kBase,
	"davinci-002": Cl100kBase, "babbage-002": Cl100kBase,
	"text-embedding-ada-002": Cl100kBase, "text-embedding-3-small": Cl100kBase, "text-embedding-3-large": Cl100kBase,
	"text-davinci-003": P50kBase, "text-davinci-002": P50kBase,
	"text-davinci-001": R50kBase, "text-curie-001": R50kBase, "text-babbage-001": R50kBase, "text-ada-001": R50kBase,
	"davinci": R50kBase, "curie": R50kBase, "babbage": R50kBase, "ada": R50kBase,
	"code-davinci-002": P50kBase, "code-davinci-001": P50kBase, "code-cushman-002": P50kBase, "code-cushman-001": P50kBase,
	"davinci-codex": P50kBase, "cushman-codex": P50kBase,
	"text-davinci-edit-001": P50kEdit, "code-davinci-edit-001": P50kEdit,
	"text-similarity-davinci-001": R50kBase, "text-similarity-curie-001": R50kBase,
	"text-similarity-babbage-001": R50kBase, "text-similarity-ada-001": R50kBase,
	"text-search-davinci-doc-001": R50kBase, "text-search-curie-doc-001": R50kBase,
	"text-search-babbage-doc-001": R50kBase, "text-search-ada-doc-001": R50kBase,
	"code-search-babbage-code-001": R50kBase, "code-search-ada-code-001": R50kBase,
	"gpt2": R50kBase, "gpt-2": R50kBase,
}

var modelPrefixes = []struct{ prefix, encoding string }{
	{"o1-", O200kBase}, {"o3-", O200kBase}, {"chatgpt-4o-", O200kBase}, {"gpt-4o-", O200kBase},
	{"gpt-4-", Cl100kBase}, {"gpt-3.5-turbo-", Cl100kBase}, {"gpt-35-turbo-", Cl100kBase},
	{"ft:gpt-4o", O200kBase}, {"ft:gpt-4", Cl100kBase}, {"ft:gpt-3.5-turbo", Cl100kBase},
	{"ft:davinci-002", Cl100kBase}, {"ft:babbage-002", Cl100kBase},
}

// EncodingForModel is the encoding tiktoken's encoding_for_model gives a
// model, and cl100k_base for a model it does not know, as AgentChat's
// OpenAI client falls back (count_tokens_openai).
func EncodingForModel(model string) string {
	if e, ok := modelEncodings[model]; ok {
		return e
	}
	for _, p := range modelPrefixes {
		if strings.HasPrefix(model, p.prefix) {
			return p.encoding
		}
	}
	return Cl100kBase
}

// files are the embedded BPE files of each encoding (p50k_edit shares
// p50k_base's).
var files = map[string]string{
	O200kBase: "o200k_base.tiktoken", Cl100kBase: "cl100k_base.tiktoken",
	P50kBase: "p50k_base.tiktoken", P50kEdit: "p50k_base.tiktoken", R50kBase: "r50k_base.tiktoken",
}

// EncodingFile is the embedded BPE file of an encoding, as tiktoken
// downloads it: what a tiktoken cache is filled with so that Python's
// tiktoken needs no network either (e2e/autogen/tiktoken-cache).
func EncodingFile(encoding string) ([]byte, error) {
	f, ok := files[encoding]
	if !ok {
		return nil, fmt.Errorf("no encoding %q", encoding)
	}
	return assets.Assets.ReadFile(f)
}

// EncodingURL is where tiktoken downloads an encoding's file from; its
// cache names the file by the SHA-1 of this URL.
func EncodingURL(encoding string) string {
	return "https://openaipublic.blob.core.windows.net/encodings/" + files[encoding]
}

// Counter counts tokens. Loading an encoding (its BPE ranks, a few hundred
// thousand entries) takes a while and some tens of MB, so each is loaded
// once, on first use, and kept.
type Counter struct {
	mu   sync.Mutex
	encs map[string]*loaded
}

type loaded struct {
	once sync.Once
	enc  *tiktoken.Tiktoken
	err  error
}

// New returns a Counter.
func New() *Counter {
	return &Counter{encs: map[string]*loaded{}}
}

// setLoader makes tiktoken-go read the embedded files: its default loader
// downloads them. The loader is a package variable of tiktoken-go, so it
// is set once for the process.
var setLoader sync.Once

func (c *Counter) encoding(name string) (*tiktoken.Tiktoken, error) {
	setLoader.Do(func() { tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader()) })
	c.mu.Lock()
	l, ok := c.encs[name]
	if !ok {
		l = &loaded{}
		c.encs[name] = l
	}
	c.mu.Unlock()
	l.once.Do(func() {
		if _, known := files[name]; !known {
			l.err = fmt.Errorf("no encoding %q", name)
			return
		}
		l.enc, l.err = tiktoken.GetEncoding(name)
	})
	return l.enc, l.err
}

// Count is the number of tokens of text in the encoding, special tokens
// such as <|endoftext|> counted as the plain text they are.
func (c *Counter) Count(encoding, text string) (int, error) {
	if text == "" {
		return 0, nil
	}
	enc, err := c.encoding(encoding)
	if err != nil {
		return 0, err
	}
	return len(enc.EncodeOrdinary(text)), nil
}
