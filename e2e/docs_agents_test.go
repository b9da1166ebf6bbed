package e2e

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// fencedBlocks returns the fenced code blocks of a markdown file of one
// language ("" for blocks without one), in order.
func fencedBlocks(t *testing.T, file, lang string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur *strings.Builder
	keep := false // the open block is of the language asked for
	for line := range strings.Lines(string(b)) {
		fence, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "```")
		switch {
		case ok && cur == nil:
			cur, keep = &strings.Builder{}, fence == lang
		case ok:
			if keep {
				blocks = append(blocks, cur.String())
			}
			cur = nil
		case cur != nil:
			cur.WriteString(line)
		}
	}
	return blocks
}

// trimLines drops trailing blanks of every line (editors do).
func trimLines(s string) string {
	var out []string
	for line := range strings.Lines(strings.TrimSpace(s)) {
		out = append(out, strings.TrimRight(line, " \n"))
	}
	return strings.Join(out, "\n")
}

// TestAgentDocsExamplesRun runs the examples of docs/a2a.md and
// docs/mcp.md as they are written, with the official clients, against
// the real binary, and checks they print what the docs say.
func TestAgentDocsExamplesRun(t *testing.T) {
	needA2AJS(t)
	t.Parallel()
	p := startA2A(t, "AGENTD_DATA_DIR="+t.TempDir())
	team := fencedBlocks(t, "../docs/a2a.md", "json team")
	if len(team) != 1 {
		t.Fatalf("docs/a2a.md has %d json team blocks, want the team's", len(team))
	}
	if code, _, body := p.do("PUT", "/v1/teams/notes", []byte(team[0])); code != http.StatusCreated {
		t.Fatalf("PUT the docs' team: %d %s", code, body)
	}
	for _, doc := range []string{"../docs/a2a.md", "../docs/mcp.md"} {
		code := fencedBlocks(t, doc, "js")
		output := fencedBlocks(t, doc, "")
		if len(code) != 1 || len(output) != 1 {
			t.Fatalf("%s: %d js blocks and %d output blocks, want one of each", doc, len(code), len(output))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, "node", "--input-type=module", "-")
		cmd.Dir = "js" // where the pinned clients are installed
		cmd.Stdin = strings.NewReader(code[0])
		cmd.Env = append(os.Environ(), "AGENTD_URL="+p.base, "AGENTD_API_KEY="+a2aKey)
		var stderr syncBuffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		cancel()
		if err != nil {
			t.Fatalf("%s's example: %v\n%s", doc, err, stderr.String())
		}
		if got, want := trimLines(string(out)), trimLines(output[0]); got != want {
			t.Errorf("%s's example printed\n%s\nthe doc says\n%s", doc, got, want)
		}
	}
}
