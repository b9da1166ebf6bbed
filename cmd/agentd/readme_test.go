package main

import (
	"flag"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestREADMEIsCurrent checks what the README says against the code, where
// a test can: its section references name sections that exist, every
// setting the server reads is documented, the handoff tool names it shows
// are the ones agentd generates, and its go install command names this
// module.
func TestREADMEIsCurrent(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)

	t.Run("section references", func(t *testing.T) {
		var headings, anchors []string
		fenced := false
		for line := range strings.Lines(readme) {
			if strings.HasPrefix(line, "```") {
				fenced = !fenced
			}
			if !fenced && heading.MatchString(line) {
				h := strings.TrimSpace(strings.TrimLeft(line, "#"))
				headings = append(headings, h)
				anchors = append(anchors, githubAnchor(h))
			}
		}
		for _, m := range regexp.MustCompile(`(?:see|See) "([^"]+)"|"([^"]+)" (?:below|above)`).FindAllStringSubmatch(readme, -1) {
			name := m[1] + m[2]
			if !slices.Contains(headings, name) {
				t.Errorf("the README refers to a section %q; its sections are %q", name, headings)
			}
		}
		for _, m := range regexp.MustCompile(`\]\(#([^)]+)\)`).FindAllStringSubmatch(readme, -1) {
			if !slices.Contains(anchors, m[1]) {
				t.Errorf("the README links to #%s, which no heading makes", m[1])
			}
		}
	})

	t.Run("settings", func(t *testing.T) {
		var keys []string
		var cfg Config
		cfg.RegisterFlags(flag.NewFlagSet("agentd", flag.ContinueOnError), func(k string) string {
			keys = append(keys, k)
			return ""
		})
		for _, k := range keys {
			switch {
			case k == "AGENTD_MODELS_FILE": // refused at start: not a setting yet
			case strings.HasPrefix(k, "OTEL_"):
				if !strings.Contains(readme, "`OTEL_*`") {
					t.Errorf("%s: the README does not document the OTEL_* variables", k)
				}
			case !strings.Contains(readme, "`"+k+"`"):
				t.Errorf("the server reads %s; the README does not say what it does", k)
			}
		}
		if len(keys) < 20 {
			t.Fatalf("only %d settings read: %v", len(keys), keys)
		}
	})

	t.Run("handoff tool names", func(t *testing.T) {
		// The engine names them as AgentChat's Handoff does, lower-cased
		// (internal/chat: handoffTool).
		for _, name := range regexp.MustCompile(`transfer_to_[A-Za-z0-9_-]+`).FindAllString(readme, -1) {
			if name != strings.ToLower(name) {
				t.Errorf("the README shows the handoff tool %s; agentd names it %s", name, strings.ToLower(name))
			}
		}
	})

	t.Run("go install", func(t *testing.T) {
		mod, err := os.ReadFile("../../go.mod")
		if err != nil {
			t.Fatal(err)
		}
		path, _, _ := strings.Cut(strings.TrimPrefix(strings.SplitN(string(mod), "\n", 2)[0], "module "), " ")
		want := "go install " + path + "/cmd/agentd@"
		if !strings.Contains(readme, want) {
			t.Errorf("the README has no %q: go install must name this module's path", want)
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
