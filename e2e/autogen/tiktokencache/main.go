// Command tiktokencache fills a tiktoken cache directory with the BPE files
// agentd embeds, so that Python's tiktoken (which the AgentChat recorder
// runs with no network) reads the very files agentd counts with:
//
//	go run ./e2e/autogen/tiktokencache e2e/autogen/.tiktoken-cache
//
// tiktoken looks a file up in TIKTOKEN_CACHE_DIR under the SHA-1 of its
// download URL and checks its SHA-256, so a file that is not tiktoken's
// own is refused there too.
package main

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentd/agentd/internal/tokencount"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: tiktokencache DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, enc := range []string{tokencount.O200kBase, tokencount.Cl100kBase, tokencount.P50kBase, tokencount.R50kBase} {
		b, err := tokencount.EncodingFile(enc)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		key := sha1.Sum([]byte(tokencount.EncodingURL(enc)))
		if err := os.WriteFile(filepath.Join(dir, hex.EncodeToString(key[:])), b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
