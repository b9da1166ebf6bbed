package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The documentation is checked against the code where a test can: this file
// holds the checks that need no server (the configuration reference and the
// links); e2e/docs_test.go runs the specs and tours against the binary.

// settingRow is a row of docs/configuration.md's tables: | `VAR` | default | what |.
var settingRow = regexp.MustCompile("^\\| `([A-Z][A-Z0-9_]*)` \\| ([^|]*) \\|(.*)\\|$")

// TestConfigurationReference checks docs/configuration.md against what the
// server reads: every variable has a row, every row is a variable the server
// reads, and each default is the one the code has (a duration may be
// written shorter: `5m` for 5m0s).
func TestConfigurationReference(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for line := range strings.Lines(string(b)) {
		m := settingRow.FindStringSubmatch(strings.TrimRight(line, "\n"))
		if m == nil {
			continue
		}
		if _, dup := rows[m[1]]; dup {
			t.Errorf("%s has two rows", m[1])
		}
		rows[m[1]] = strings.TrimSpace(m[2])
		if strings.TrimSpace(m[3]) == "" {
			t.Errorf("%s: the row does not say what it does", m[1])
		}
	}

	read := map[string]bool{}
	defaults := map[string]string{}
	// Twice: the OTLP protocol variables are read only when traces are on.
	for _, env := range []map[string]string{{}, {"OTEL_TRACES_EXPORTER": "otlp"}} {
		fs := flag.NewFlagSet("agentd", flag.ContinueOnError)
		var cfg Config
		cfg.RegisterFlags(fs, func(k string) string {
			read[k] = true
			return env[k]
		})
		fs.VisitAll(func(f *flag.Flag) {
			m := regexp.MustCompile(`\(([A-Z][A-Z0-9_]+)\)$`).FindStringSubmatch(f.Usage)
			if m == nil {
				t.Errorf("flag -%s names no variable at the end of its usage: %q", f.Name, f.Usage)
				return
			}
			defaults[m[1]] = f.DefValue
		})
	}
	if len(read) < 40 {
		t.Fatalf("only %d variables read: %v", len(read), read)
	}
	for k := range read {
		doc, ok := rows[k]
		if !ok {
			t.Errorf("the server reads %s; docs/configuration.md has no row for it", k)
			continue
		}
		def, isFlag := defaults[k]
		if !isFlag {
			continue // OTEL_*: read by the exporter too, no flag default
		}
		if def == "" {
			if !strings.HasPrefix(doc, "empty") {
				t.Errorf("%s: the default is empty; the reference says %q", k, doc)
			}
			continue
		}
		m := regexp.MustCompile("^`([^`]*)`").FindStringSubmatch(doc)
		if m == nil {
			t.Errorf("%s: the default column %q does not start with the default in backticks (%s)", k, doc, def)
			continue
		}
		if !sameDefault(m[1], def) {
			t.Errorf("%s: the reference says the default is %s; the code has %s", k, m[1], def)
		}
	}
	for k := range rows {
		if !read[k] {
			t.Errorf("docs/configuration.md documents %s, which the server does not read", k)
		}
	}
}

// sameDefault reports whether a documented default is the flag's.
func sameDefault(doc, def string) bool {
	if doc == def {
		return true
	}
	a, errA := time.ParseDuration(doc)
	b, errB := time.ParseDuration(def)
	return errA == nil && errB == nil && a == b
}

// docFiles are README.md and every Markdown file of docs/, relative to the
// repository's root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	ms, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		files = append(files, strings.TrimPrefix(filepath.ToSlash(m), "../../"))
	}
	if len(files) < 10 {
		t.Fatalf("only %v", files)
	}
	return files
}

// mdLink is a Markdown link or image: [text](target) or ![alt](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinksResolve checks every relative link of the README and docs/:
// the file exists in the repository, and a #fragment names a heading of
// the file it points into.
func TestDocsLinksResolve(t *testing.T) {
	checked := 0
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range mdLink.FindAllStringSubmatch(prose(string(b)), -1) {
			u := target[1]
			if strings.Contains(u, "://") || strings.HasPrefix(u, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(u, "#")
			dest := f
			if path != "" {
				dest = filepath.ToSlash(filepath.Join(filepath.Dir(f), path))
				if _, err := os.Stat(filepath.Join("../..", dest)); err != nil {
					t.Errorf("%s links to %s: no such file", f, u)
					continue
				}
			}
			checked++
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s links to %s: a fragment of a file that is not Markdown", f, u)
				continue
			}
			db, err := os.ReadFile(filepath.Join("../..", dest))
			if err != nil {
				t.Errorf("%s links to %s: %v", f, u, err)
				continue
			}
			if !slices.Contains(anchors(string(db)), frag) {
				t.Errorf("%s links to %s: %s has no heading with that anchor (it has %v)", f, u, dest, anchors(string(db)))
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d relative links checked", checked)
	}
}

// prose is a Markdown text without its fenced code blocks.
func prose(md string) string {
	var b strings.Builder
	fenced := false
	for line := range strings.Lines(md) {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			b.WriteString(line)
		}
	}
	return b.String()
}

// anchors are the fragments GitHub gives the headings of a Markdown text.
func anchors(md string) []string {
	var out []string
	for line := range strings.Lines(prose(md)) {
		if heading.MatchString(line) {
			out = append(out, githubAnchor(strings.TrimSpace(strings.TrimLeft(line, "#"))))
		}
	}
	return out
}
