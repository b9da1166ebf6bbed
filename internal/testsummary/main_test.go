package main

import (
	"bytes"
	"strings"
	"testing"
)

// A recorded stream of `go test -json`, shortened: one package passes with
// a skipped test and a skipped subtest, one fails, one has no tests.
const stream = `{"Action":"start","Package":"example/a"}
{"Action":"run","Package":"example/a","Test":"TestStore"}
{"Action":"output","Package":"example/a","Test":"TestStore","Output":"=== RUN   TestStore\n"}
{"Action":"output","Package":"example/a","Test":"TestStore","Output":"    pgtest.go:80: no Postgres: set AGENTD_TEST_DATABASE_URL\n"}
{"Action":"output","Package":"example/a","Test":"TestStore","Output":"--- SKIP: TestStore (0.00s)\n"}
{"Action":"skip","Package":"example/a","Test":"TestStore","Elapsed":0}
{"Action":"output","Package":"example/a","Test":"TestSandbox/bwrap","Output":"    sandbox_test.go:9: bwrap is not installed\n"}
{"Action":"skip","Package":"example/a","Test":"TestSandbox/bwrap","Elapsed":0}
{"Action":"output","Package":"example/a","Test":"TestOK","Output":"chatter of a passing test\n"}
{"Action":"pass","Package":"example/a","Test":"TestOK","Elapsed":0}
{"Action":"pass","Package":"example/a","Elapsed":1.5}
{"Action":"output","Package":"example/b","Test":"TestBroken","Output":"    b_test.go:3: got 1, want 2\n"}
{"Action":"fail","Package":"example/b","Test":"TestBroken","Elapsed":0}
{"Action":"fail","Package":"example/b","Elapsed":0.2}
{"Action":"output","Package":"example/c","Output":"?   \texample/c\t[no test files]\n"}
{"Action":"skip","Package":"example/c","Elapsed":0}
`

func TestSummaryListsSkipsAndFailures(t *testing.T) {
	var out bytes.Buffer
	s := &summary{out: &out, output: map[string][]string{}}
	if err := s.read(strings.NewReader("# vet output that is not JSON\n" + stream)); err != nil {
		t.Fatal(err)
	}
	if code := s.finish(); code != 1 {
		t.Fatalf("exit code %d, want 1 (a test failed)", code)
	}
	got := out.String()
	for _, want := range []string{
		"# vet output that is not JSON\n",
		"ok   example/a 1.5s\n",
		"    b_test.go:3: got 1, want 2\n",
		"FAIL example/b 0.2s\n",
		"Skipped tests (2):\n",
		"  example/a TestSandbox/bwrap: sandbox_test.go:9: bwrap is not installed\n",
		"  example/a TestStore: pgtest.go:80: no Postgres: set AGENTD_TEST_DATABASE_URL\n",
		"FAILED (2):\n  example/b TestBroken\n      b_test.go:3: got 1, want 2\n  example/b\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "chatter of a passing test") || strings.Contains(got, "example/c") {
		t.Errorf("summary shows what nobody needs:\n%s", got)
	}
}

func TestSummaryPassesWithoutSkips(t *testing.T) {
	var out bytes.Buffer
	s := &summary{out: &out, output: map[string][]string{}}
	_ = s.read(strings.NewReader(`{"Action":"pass","Package":"example/a","Test":"TestOK"}` + "\n" + `{"Action":"pass","Package":"example/a","Elapsed":1}` + "\n"))
	if code := s.finish(); code != 0 || !strings.Contains(out.String(), "Skipped tests: none") {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
	out.Reset()
	s = &summary{out: &out, output: map[string][]string{}}
	if code := s.finish(); code != 1 {
		t.Fatalf("an empty stream passed")
	}
}

// In a CI run a skipped test fails the run unless the allow-list names it;
// outside CI skips are only listed.
func TestCISkipsMustBeAllowed(t *testing.T) {
	const passing = `{"Action":"output","Package":"example/a","Test":"TestStore","Output":"    pgtest.go:80: no Postgres\n"}
{"Action":"skip","Package":"example/a","Test":"TestStore","Elapsed":0}
{"Action":"output","Package":"example/a","Test":"TestSandbox/bwrap","Output":"    sandbox_test.go:9: bwrap is not installed\n"}
{"Action":"skip","Package":"example/a","Test":"TestSandbox/bwrap","Elapsed":0}
{"Action":"pass","Package":"example/a","Test":"TestSandbox","Elapsed":0}
{"Action":"pass","Package":"example/a","Elapsed":1.5}
`
	allowed := map[string]string{"example/a TestStore": "the store is tested in example/b"}
	for _, c := range []struct {
		name    string
		ci      bool
		allowed map[string]string
		code    int
		want    []string
		not     []string
	}{
		{"outside CI skips are listed", false, nil, 0,
			[]string{"Skipped tests (2):\n", "  example/a TestSandbox/bwrap: sandbox_test.go:9: bwrap is not installed\n"},
			[]string{"FAILED", "allowed in CI"}},
		{"in CI a skip fails the run", true, nil, 1,
			[]string{"FAILED: skipped in a CI run (CI=true) and not on the allow-list, internal/testsummary/allowed-skips.txt (2):\n  example/a TestSandbox/bwrap\n  example/a TestStore\n"},
			nil},
		{"in CI an allowed skip says why", true, allowed, 1,
			[]string{"  example/a TestStore: pgtest.go:80: no Postgres\n    allowed in CI: the store is tested in example/b\n",
				"not on the allow-list, internal/testsummary/allowed-skips.txt (1):\n  example/a TestSandbox/bwrap\n"},
			[]string{"  example/a TestStore\n"}},
		{"in CI skips that are all allowed pass", true, map[string]string{
			"example/a TestStore": "why", "example/a TestSandbox/bwrap": "why"}, 0,
			[]string{"allowed in CI: why"}, []string{"FAILED"}},
	} {
		var out bytes.Buffer
		s := &summary{out: &out, output: map[string][]string{}, ci: c.ci, allowed: c.allowed}
		if err := s.read(strings.NewReader(passing)); err != nil {
			t.Fatal(err)
		}
		if code := s.finish(); code != c.code {
			t.Errorf("%s: exit code %d, want %d:\n%s", c.name, code, c.code, out.String())
		}
		got := out.String()
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: summary lacks %q:\n%s", c.name, w, got)
			}
		}
		for _, n := range c.not {
			if strings.Contains(got, n) {
				t.Errorf("%s: summary has %q:\n%s", c.name, n, got)
			}
		}
	}
}

func TestAllowListEntriesSayWhy(t *testing.T) {
	got, err := parseAllowList("# a comment\n\n  example/a TestStore # no Postgres in this job\nexample/a TestX/sub#a subtest\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["example/a TestStore"] != "no Postgres in this job" || got["example/a TestX/sub"] != "a subtest" {
		t.Fatalf("allow-list = %v", got)
	}
	for _, bad := range []string{
		"example/a TestStore\n",
		"example/a TestStore #   \n",
		"example/a TestStore TestOther # two tests\n",
		"TestStore # no package\n",
		"example/a TestStore # one\nexample/a TestStore # twice\n",
	} {
		if _, err := parseAllowList(bad); err == nil {
			t.Errorf("allow-list %q accepted", bad)
		}
	}
	// The allow-list testsummary is built with.
	if _, err := parseAllowList(allowListFile); err != nil {
		t.Errorf("%s: %v", allowListName, err)
	}
}

// TestReasonsAreTheTestsMessages: the end of the summary repeats what a
// failed test reported, without the server log it dumped, so that the
// last lines of a CI log say why it failed.
func TestReasonsAreTheTestsMessages(t *testing.T) {
	out := []string{
		"=== RUN   TestConsole\n",
		"    console_test.go:120: screenshots in /tmp/x\n",
		"    console_test.go:139: waiting for the chat: timed out; the page shows:\n",
		"        Chat\n",
		"        running\n",
		"\n",
		"        \n",
		"    harness_test.go:203: agentd log:\n",
		"        time=2026 level=INFO msg=serving\n",
		"        time=2026 level=INFO msg=\"http request\"\n",
		"    other_test.go:7: " + strings.Repeat("x", 400) + "\n",
		"--- FAIL: TestConsole (98.81s)\n",
	}
	got := reasons(out)
	want := []string{
		"console_test.go:120: screenshots in /tmp/x",
		"console_test.go:139: waiting for the chat: timed out; the page shows:",
		"  Chat",
		"  running",
		"other_test.go:7: " + strings.Repeat("x", 283) + "…",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("reasons:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
