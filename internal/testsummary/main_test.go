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
		"FAILED (2):\n  example/b TestBroken\n  example/b\n",
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
