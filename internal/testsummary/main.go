// Command testsummary reads `go test -json` on stdin, prints what a person
// needs from it — one line per package, the output of failed tests — and
// ends with the list of skipped tests and why they were skipped, so that a
// run without Postgres or a container engine says what it did not test
// instead of a column of "ok". Each failed test is listed again at the very
// end with the first lines of what it reported (its t.Error and t.Fatal
// messages): a CI log that shows only its last lines still says why the run
// failed. It exits 1 when a test or a package failed (or the input held no
// result at all), so `make test` fails with it.
//
// In a CI run (CI=true) a skipped test fails the run too, unless it is on
// the allow-list, allowed-skips.txt beside this file, which says for each
// entry why that test may be skipped in CI. The test helpers that need a
// component (Postgres, a container engine, bwrap, a browser) fail instead
// of skipping when CI=true; this catches a helper that forgot to.
//
//	go test -json ./... | go run ./internal/testsummary
package main

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// allowListFile is the allow-list of tests that may be skipped in CI.
//
//go:embed allowed-skips.txt
var allowListFile string

// allowListName is where allowListFile lives, for messages.
const allowListName = "internal/testsummary/allowed-skips.txt"

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// skip is one skipped test and the reason it gave.
type skip struct {
	pkg, test, reason string
}

// summary accumulates a run.
type summary struct {
	out     io.Writer
	output  map[string][]string // package/test → its output lines so far
	skipped []skip
	failed  []string
	// reasons are the message heads of each failed test (see reasons).
	reasons map[string][]string
	results int
	// ci: the run is a CI run, where only the tests in allowed (package and
	// test name → why) may be skipped.
	ci      bool
	allowed map[string]string
}

func main() {
	allowed, err := parseAllowList(allowListFile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testsummary: %s: %v\n", allowListName, err)
		os.Exit(1)
	}
	s := &summary{out: os.Stdout, output: map[string][]string{}, ci: os.Getenv("CI") == "true", allowed: allowed}
	if err := s.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(1)
	}
	os.Exit(s.finish())
}

// read consumes the event stream. Lines that are not JSON (go vet or build
// errors printed before the tests run) are passed through.
func (s *summary) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(s.out, sc.Text())
			continue
		}
		s.handle(e)
	}
	return sc.Err()
}

func (s *summary) handle(e event) {
	key := e.Package + " " + e.Test
	switch e.Action {
	case "output", "build-output":
		s.output[key] = append(s.output[key], e.Output)
	case "skip":
		s.results++
		if e.Test == "" {
			// A package without test files; nothing was skipped in it.
			delete(s.output, key)
			return
		}
		s.skipped = append(s.skipped, skip{pkg: e.Package, test: e.Test, reason: skipReason(s.output[key])})
		delete(s.output, key)
	case "pass":
		s.results++
		if e.Test == "" {
			fmt.Fprintf(s.out, "ok   %s %.1fs\n", e.Package, e.Elapsed)
		}
		delete(s.output, key)
	case "fail", "build-fail":
		s.results++
		name := strings.TrimSpace(e.Package + " " + e.Test)
		s.failed = append(s.failed, name)
		if r := reasons(s.output[key]); len(r) > 0 {
			if s.reasons == nil {
				s.reasons = map[string][]string{}
			}
			s.reasons[name] = r
		}
		for _, l := range s.output[key] {
			fmt.Fprint(s.out, l)
		}
		if e.Test == "" {
			fmt.Fprintf(s.out, "FAIL %s %.1fs\n", e.Package, e.Elapsed)
		}
		delete(s.output, key)
	}
}

// skipReason is what a skipped test printed, without the framing lines.
func skipReason(lines []string) string {
	var parts []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		parts = append(parts, t)
	}
	if len(parts) == 0 {
		return "(no reason given)"
	}
	return strings.Join(parts, " ")
}

// Limits of what reasons keeps of a failed test's output.
const (
	maxReasons      = 4   // messages
	maxReasonLines  = 5   // lines of one message, its head included
	maxReasonLength = 300 // bytes of one line
)

// reasons picks out of a failed test's output the messages it reported: a
// message starts with "file_test.go:N: " (as t.Log, t.Error and t.Fatal
// write it) and goes on with the lines indented below it. A message that
// introduces a log (its head ends with "log:", such as a server's log
// dumped on failure) is left out: it is long and says what happened, not
// what went wrong. Only the first few messages and lines are kept, each
// line cut to a readable length.
func reasons(lines []string) []string {
	var out []string
	msgs, inMsg, keep := 0, false, 0
	indent := ""
	for _, l := range lines {
		l = strings.TrimRight(l, "\n")
		t := strings.TrimLeft(l, " \t")
		if isMessageHead(t) {
			inMsg, indent = false, l[:len(l)-len(t)]
			if strings.HasSuffix(t, "log:") || msgs == maxReasons {
				continue
			}
			msgs++
			inMsg, keep = true, maxReasonLines-1
			out = append(out, cut(t))
			continue
		}
		if inMsg && keep > 0 && strings.HasPrefix(l, indent+" ") && t != "" {
			keep--
			out = append(out, "  "+cut(t))
		}
	}
	return out
}

// isMessageHead reports whether a line starts a test's message:
// "name_test.go:123: …".
func isMessageHead(t string) bool {
	file, rest, ok := strings.Cut(t, ":")
	if !ok || !strings.HasSuffix(file, "_test.go") || strings.ContainsAny(file, " \t") {
		return false
	}
	num, _, ok := strings.Cut(rest, ":")
	if !ok || num == "" {
		return false
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func cut(s string) string {
	if len(s) <= maxReasonLength {
		return s
	}
	return s[:maxReasonLength] + "…"
}

// parseAllowList reads the allow-list: one test a line, as "package test
// # why" (a subtest by its full name, parent/sub), with blank lines and
// lines starting with # between entries. An entry that does not say why
// is an error, as is one named twice.
func parseAllowList(text string) (map[string]string, error) {
	allowed := map[string]string{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, why, _ := strings.Cut(line, "#")
		fields, why := strings.Fields(name), strings.TrimSpace(why)
		switch {
		case len(fields) != 2:
			return nil, fmt.Errorf("line %d: want \"package test # why\", got %q", i+1, line)
		case why == "":
			return nil, fmt.Errorf("line %d: %s %s does not say why it may be skipped in CI", i+1, fields[0], fields[1])
		}
		key := fields[0] + " " + fields[1]
		if _, dup := allowed[key]; dup {
			return nil, fmt.Errorf("line %d: %s is listed twice", i+1, key)
		}
		allowed[key] = why
	}
	return allowed, nil
}

// finish prints the skipped and failed tests and returns the exit code.
func (s *summary) finish() int {
	fmt.Fprintln(s.out)
	var refused []string // skipped in CI and not allowed
	if len(s.skipped) == 0 {
		fmt.Fprintln(s.out, "Skipped tests: none")
	} else {
		sort.Slice(s.skipped, func(i, j int) bool {
			a, b := s.skipped[i], s.skipped[j]
			return a.pkg < b.pkg || a.pkg == b.pkg && a.test < b.test
		})
		fmt.Fprintf(s.out, "Skipped tests (%d):\n", len(s.skipped))
		for _, k := range s.skipped {
			fmt.Fprintf(s.out, "  %s %s: %s\n", k.pkg, k.test, k.reason)
			if !s.ci {
				continue
			}
			if why, ok := s.allowed[k.pkg+" "+k.test]; ok {
				fmt.Fprintf(s.out, "    allowed in CI: %s\n", why)
			} else {
				refused = append(refused, k.pkg+" "+k.test)
			}
		}
	}
	switch {
	case len(s.failed) > 0 || len(refused) > 0:
		if len(s.failed) > 0 {
			fmt.Fprintf(s.out, "FAILED (%d):\n", len(s.failed))
			for _, f := range s.failed {
				fmt.Fprintf(s.out, "  %s\n", f)
				for _, r := range s.reasons[f] {
					fmt.Fprintf(s.out, "      %s\n", r)
				}
			}
		}
		if len(refused) > 0 {
			fmt.Fprintf(s.out, "FAILED: skipped in a CI run (CI=true) and not on the allow-list, %s (%d):\n", allowListName, len(refused))
			for _, r := range refused {
				fmt.Fprintf(s.out, "  %s\n", r)
			}
		}
		return 1
	case s.results == 0:
		fmt.Fprintln(s.out, "FAILED: no test results (did go test run?)")
		return 1
	}
	return 0
}
