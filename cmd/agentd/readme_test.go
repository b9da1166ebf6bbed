package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestREADMEIsCurrent checks what the README and the guide say against the
// code, where a test can: the README stays a landing page that starts with
// the two commands, each guide page says what it is for, the sections they
// refer to by name exist, the handoff tool names they show are the ones
// agentd generates, and the go install command names this module.
// (docs_test.go checks the configuration reference and the links;
// e2e/docs_test.go the examples and the tours.)
func TestREADMEIsCurrent(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("landing page", func(t *testing.T) {
		lines := strings.Split(string(readme), "\n")
		if len(lines) >= 200 {
			t.Errorf("the README has %d lines; a landing page has fewer than 200 (the rest goes to docs/)", len(lines))
		}
		if len(lines) < 5 || lines[2] != "```sh" || !strings.HasPrefix(lines[3], "go run ./cmd/agentd ") || !strings.HasPrefix(lines[4], "make test ") {
			t.Errorf("the README does not start with the two commands (go run ./cmd/agentd, make test): %q", lines[:min(5, len(lines))])
		}
	})

	t.Run("pages say what they are for", func(t *testing.T) {
		for _, f := range docFiles(t) {
			// The README is the landing page, docs/README.md the guide's
			// index; docs/architecture.md describes the code, not a task.
			if !strings.HasPrefix(f, "docs/") || f == "docs/README.md" || f == "docs/architecture.md" {
				continue
			}
			b, err := os.ReadFile("../../" + f)
			if err != nil {
				t.Fatal(err)
			}
			title, rest, _ := strings.Cut(string(b), "\n\n")
			if !strings.HasPrefix(title, "# ") || !strings.HasPrefix(rest, "What this page is for: ") {
				t.Errorf("%s does not start with its title and what it is for (\"What this page is for: …\")", f)
			}
		}
	})

	for _, f := range docFiles(t) {
		b, err := os.ReadFile("../../" + f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		t.Run(f, func(t *testing.T) {
			headings := []string{}
			for line := range strings.Lines(prose(text)) {
				if heading.MatchString(line) {
					headings = append(headings, strings.TrimSpace(strings.TrimLeft(line, "#")))
				}
			}
			for _, m := range regexp.MustCompile(`(?:see|See) "([^"]+)"|"([^"]+)" (?:below|above)`).FindAllStringSubmatch(text, -1) {
				if name := m[1] + m[2]; !slices.Contains(headings, name) {
					t.Errorf("%s refers to a section %q; its sections are %q", f, name, headings)
				}
			}
			// The engine names handoff tools as AgentChat's Handoff does,
			// lower-cased (internal/chat: handoffTool).
			for _, name := range regexp.MustCompile(`transfer_to_[A-Za-z0-9_-]+`).FindAllString(text, -1) {
				if name != strings.ToLower(name) {
					t.Errorf("%s shows the handoff tool %s; agentd names it %s", f, name, strings.ToLower(name))
				}
			}
		})
	}

	t.Run("go install", func(t *testing.T) {
		mod, err := os.ReadFile("../../go.mod")
		if err != nil {
			t.Fatal(err)
		}
		guide, err := os.ReadFile("../../docs/getting-started.md")
		if err != nil {
			t.Fatal(err)
		}
		path, _, _ := strings.Cut(strings.TrimPrefix(strings.SplitN(string(mod), "\n", 2)[0], "module "), " ")
		want := "go install " + path + "/cmd/agentd@"
		if !strings.Contains(string(guide), want) {
			t.Errorf("docs/getting-started.md has no %q: go install must name this module's path", want)
		}
	})
}

// heading is a Markdown heading line (outside code fences).
var heading = regexp.MustCompile(`^#{1,6} \S`)

// githubAnchor is the fragment GitHub gives a heading: lower case, spaces
// to hyphens, punctuation other than hyphens and underscores dropped.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}
