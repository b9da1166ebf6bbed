package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The documentation cannot rot: every JSON example of the README and of
// docs/ is validated by a running agentd, and the README's tours are run
// against one.

// docBlock is a fenced ```json block of the README or of docs/. Its info
// string says what it holds: "json" is a request body of POST /v1/chats
// (a spec, a team form, a team_ref); "json team" a body of PUT
// /v1/teams/{name}; "json agent", "json tool" and "json message" are one
// agent, one tool or a task message, and "json members" top-level members
// of a spec, which the test puts into a small spec of its own.
type docBlock struct {
	where string // file:line
	kind  string
	body  string
}

var jsonFence = regexp.MustCompile("^```json(?: ([a-z]+))?\\s*$")

// docJSONBlocks reads every json block of README.md and docs/*.md.
func docJSONBlocks(t *testing.T) []docBlock {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []docBlock
	for _, f := range append([]string{filepath.Join("..", "README.md")}, files...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		for i := 0; i < len(lines); i++ {
			m := jsonFence.FindStringSubmatch(lines[i])
			if m == nil {
				continue
			}
			start := i
			var body []string
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
				body = append(body, lines[i])
			}
			blocks = append(blocks, docBlock{where: fmt.Sprintf("%s:%d", strings.TrimPrefix(filepath.ToSlash(f), "../"), start+1),
				kind: m[1], body: strings.Join(body, "\n")})
		}
	}
	return blocks
}

// request is the dry run that checks the block: method, path and body.
func (b docBlock) request() (string, string, []byte, error) {
	writer := map[string]any{"name": "writer", "type": "assistant", "model": "gpt"}
	base := map[string]any{
		"task":      "Check this example.",
		"agents":    []any{writer},
		"models":    map[string]any{"gpt": map[string]any{"provider": "openai", "model": "gpt-4o"}},
		"max_round": 2,
	}
	var v any
	raw := b.body
	if b.kind == "members" {
		raw = "{" + raw + "}"
	}
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return "", "", nil, fmt.Errorf("not one JSON value: %v", err)
	}
	switch b.kind {
	case "":
		return "POST", "/v1/chats?dry_run=true", []byte(raw), nil
	case "team":
		return "PUT", "/v1/teams/docs-example?dry_run=true", []byte(raw), nil
	case "agent":
		base["agents"] = []any{v, writer}
	case "tool":
		name, _ := v.(map[string]any)["name"].(string)
		base["tools"] = []any{v}
		base["agents"] = []any{map[string]any{"name": "caller", "type": "assistant", "model": "gpt", "tools": []any{name}}}
	case "message":
		base["task"] = v
	case "members":
		for k, m := range v.(map[string]any) {
			base[k] = m
		}
	default:
		return "", "", nil, fmt.Errorf("unknown kind %q (json, json team, json agent, json tool, json message, json members)", b.kind)
	}
	body, err := json.Marshal(base)
	return "POST", "/v1/chats?dry_run=true", body, err
}

// check validates the block with a dry run: nil when the server takes it.
func (b docBlock) check(p *proc) error {
	method, path, body, err := b.request()
	if err != nil {
		return err
	}
	code, _, resp := p.do(method, path, body)
	if code != 200 {
		return fmt.Errorf("%s %s answered %d: %s", method, path, code, resp)
	}
	conforms(p.t, "DryRun", resp)
	return nil
}

// docsServer is an agentd configured as the docs describe: the model
// endpoints of docs/models.md's file, a sandbox, hosts a sandbox may
// reach, a tool secret and a webhook secret.
func docsServer(t *testing.T) *proc {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		missing(t, "bwrap sandbox: bubblewrap is not installed (apt-get install bubblewrap); the docs' tools run code")
	}
	md, err := os.ReadFile(filepath.Join("..", "docs", "models.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindSubmatch(md)
	if m == nil {
		t.Fatal("docs/models.md has no yaml block: the models file")
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "azure-key")
	if err := os.WriteFile(keyFile, []byte("azure-test-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	models := strings.ReplaceAll(string(m[1]), "/run/secrets/azure-openai-key", keyFile)
	modelsFile := filepath.Join(dir, "models.yaml")
	if err := os.WriteFile(modelsFile, []byte(models), 0o600); err != nil {
		t.Fatal(err)
	}
	return startAgentd(t, "AGENTD_DATA_DIR="+filepath.Join(dir, "data"), "AGENTD_SANDBOX=bwrap", "AGENTD_SANDBOX_WORK_ROOT="+reachableDir(t),
		"AGENTD_MODELS_FILE="+modelsFile, "OPENAI_API_KEY=sk-docs-test", "ANTHROPIC_API_KEY=docs-test",
		"AGENTD_SANDBOX_ALLOW_HOSTS=pypi.org,files.pythonhosted.org",
		`AGENTD_TOOL_SECRETS={"github": "Bearer docs-test"}`,
		"AGENTD_WEBHOOK_SECRET=whsec_"+strings.Repeat("QUJD", 8))
}

// TestDocsJSONExamplesValidate: every JSON example of the README and of
// docs/ is a request the server takes (a 422 fails the test), and the dry
// runs create nothing. A deliberately broken example must fail the check.
func TestDocsJSONExamplesValidate(t *testing.T) {
	t.Parallel()
	blocks := docJSONBlocks(t)
	if len(blocks) < 12 {
		t.Fatalf("only %d json blocks found", len(blocks))
	}
	p := docsServer(t)
	for _, b := range blocks {
		if err := b.check(p); err != nil {
			t.Errorf("%s (json %s): %v", b.where, b.kind, err)
		}
	}

	// The check can fail: the first spec with a misspelt field is refused.
	broken := blocks[0]
	for _, b := range blocks {
		if b.kind == "" && strings.Contains(b.body, `"max_round"`) {
			broken = b
			break
		}
	}
	broken.body = strings.Replace(broken.body, `"max_round"`, `"max_rounds"`, 1)
	if err := broken.check(p); err == nil || !strings.Contains(err.Error(), "422") || !strings.Contains(err.Error(), "/max_rounds") {
		t.Errorf("a broken example (%s with max_rounds) passed the check: %v", broken.where, err)
	}

	// Dry runs leave nothing behind.
	for _, path := range []string{"/v1/chats", "/v1/teams"} {
		code, _, body := p.do("GET", path, nil)
		if code != 200 || bytes.Contains(body, []byte(`"name"`)) {
			t.Errorf("after the dry runs, GET %s: %d %s", path, code, body)
		}
	}
}

// readmeShellBlocks are the README's ```sh blocks after the first (the two
// commands that start the server and the tests): its tours.
func readmeShellBlocks(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(b), -1)
	if len(blocks) < 3 {
		t.Fatalf("the README has %d sh blocks", len(blocks))
	}
	var out []string
	for _, m := range blocks[1:] {
		out = append(out, m[1])
	}
	return out
}

// TestREADMETours runs the README's curl and command-line tours, as a
// reader would, against the real binary: each command as written (the
// address and the go run replaced by the server's and the binary), and
// each output the README shows in a comment (`#   …`, its parts split at
// "…") must be in what the tour printed.
func TestREADMETours(t *testing.T) {
	t.Parallel()
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none")
	host := strings.TrimPrefix(p.base, "http://")
	tmp := t.TempDir()
	for i, script := range readmeShellBlocks(t) {
		run := strings.NewReplacer("localhost:8080", host, "/tmp/chat.json", filepath.Join(tmp, "chat.json"),
			"go run ./cmd/agentd", binPath).Replace(script)
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", run)
		cmd.Dir = ".." // the README's commands run in the repository's root
		cmd.Env = append(os.Environ(), "AGENTD_URL="+p.base)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("tour %d failed: %v\n%s\noutput:\n%s", i+1, err, run, out)
			continue
		}
		shown := 0
		for line := range strings.Lines(script) {
			// An output is "#   " and then the output; a comment's
			// continuation lines are indented further.
			expect, ok := strings.CutPrefix(strings.TrimSpace(line), "#   ")
			if !ok || strings.HasPrefix(expect, " ") {
				continue
			}
			shown++
			for part := range strings.SplitSeq(expect, "…") {
				if part = strings.TrimSpace(part); part != "" && !strings.Contains(string(out), part) {
					t.Errorf("tour %d: the README shows %q; the output has no %q:\n%s", i+1, expect, part, out)
				}
			}
		}
		if strings.Contains(script, "curl") && shown < 4 {
			t.Errorf("tour %d checks only %d outputs", i+1, shown)
		}
		if strings.Contains(script, "chat run") && !strings.Contains(string(out), "TERMINATE") {
			t.Errorf("tour %d: the CLI printed no transcript:\n%s", i+1, out)
		}
	}
}
