package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentd/agentd/internal/chat"
)

func TestCappedBuffer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		limit  int
		writes []string
		want   string
		trunc  bool
	}{
		{"under", 10, []string{"abc", "def"}, "abcdef", false},
		{"exact", 6, []string{"abc", "def"}, "abcdef", false},
		{"over in one write", 4, []string{"abcdef"}, "abcd" + truncationMarker(4), true},
		{"over across writes", 4, []string{"abc", "def", "ghi"}, "abcd" + truncationMarker(4), true},
		// "é" is two bytes; the cap falls between them.
		{"cut rune dropped", 2, []string{"aé"}, "a" + truncationMarker(2), true},
		{"three-byte rune cut after two", 3, []string{"a€"}, "a" + truncationMarker(3), true},
		{"complete rune at the cap kept", 3, []string{"aéx"}, "aé" + truncationMarker(3), true},
		{"invalid utf-8 replaced", 10, []string{"a\xffb"}, "a\uFFFDb", false},
		{"nul replaced", 10, []string{"a\x00b"}, "a\uFFFDb", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newCappedBuffer(tc.limit)
			for _, w := range tc.writes {
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(w))
				}
			}
			if got := b.String(); got != tc.want {
				t.Errorf("String = %q, want %q", got, tc.want)
			}
			if b.Truncated() != tc.trunc {
				t.Errorf("Truncated = %v, want %v", b.Truncated(), tc.trunc)
			}
		})
	}
}

func TestFinishAppendsTimeout(t *testing.T) {
	t.Parallel()
	b := newCappedBuffer(100)
	b.Write([]byte("partial\n"))
	res := finish(b, 137, true)
	want := chat.ExecResult{ExitCode: 124, Output: "partial\n\nTimeout", TimedOut: true}
	if *res != want {
		t.Errorf("finish = %+v, want %+v", *res, want)
	}
}

func TestOutcome(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		res  chat.ExecResult
		want string
	}{
		{chat.ExecResult{ExitCode: 0}, outcomeOK},
		{chat.ExecResult{ExitCode: 1}, outcomeError},
		{chat.ExecResult{ExitCode: 124, TimedOut: true}, outcomeTimeout},
		{chat.ExecResult{ExitCode: 137}, outcomeKilled},
		{chat.ExecResult{ExitCode: 255}, outcomeError},
	} {
		if got := outcome(&tc.res); got != tc.want {
			t.Errorf("outcome(%+v) = %s, want %s", tc.res, got, tc.want)
		}
	}
}

func TestInterpreter(t *testing.T) {
	t.Parallel()
	for lang, want := range map[string]string{"python": "python3", "sh": "sh", "bash": "bash", "Python": "python3"} {
		if got, err := interpreter(lang); got != want || err != nil {
			t.Errorf("interpreter(%q) = %q, %v; want %q", lang, got, err, want)
		}
	}
	for _, lang := range []string{"", "javascript", "python; rm -rf /"} {
		if _, err := interpreter(lang); err == nil {
			t.Errorf("interpreter(%q) accepted", lang)
		}
	}
}

func TestCheckChatID(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"0b5f7c1e-2d3a-4b5c-8d9e-0f1a2b3c4d5e", "chat_1", "a"} {
		if err := checkChatID(id); err != nil {
			t.Errorf("checkChatID(%q): %v", id, err)
		}
	}
	for _, id := range []string{"", "../etc", "a/b", ".hidden", "-rf", "a b", strings.Repeat("x", 129)} {
		if err := checkChatID(id); err == nil {
			t.Errorf("checkChatID(%q) accepted", id)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero Config: %v", err)
	}
	bad := Config{Backend: "chroot", DefaultMemoryMB: 4, DefaultCPUs: -1, DefaultTimeout: -time.Second,
		PidsLimit: 2, OutputLimit: -1, BwrapUID: -5}
	err := bad.Validate()
	if err == nil {
		t.Fatal("bad Config accepted")
	}
	// Every problem is reported at once.
	for _, want := range []string{"chroot", "memory", "cpus", "timeout", "pids", "output", "uid"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if err := (Config{Backend: BackendBwrap}).Validate(); err == nil {
		t.Error("bwrap without a work root accepted")
	}
}

func TestOpenWithoutBackend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nowhere := "unix:///nonexistent/agentd-test.sock"
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"none", Config{Backend: BackendNone}, "disabled"},
		{"docker without an engine", Config{Backend: BackendDocker, DockerHost: nowhere}, "no engine answers"},
		{"auto without engine or work root", Config{DockerHost: nowhere}, "to enable code execution"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := Open(ctx, tc.cfg)
			if m != nil || !errors.Is(err, ErrNoSandbox) {
				t.Fatalf("Open = %v, %v; want ErrNoSandbox", m, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q lacks %q", err, tc.want)
			}
		})
	}
}

func TestOpenAutoPrefersDocker(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, BackendAuto)
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	m := open(t, cfg)
	// With an engine and the image, auto is docker; CI has both. Without
	// them, bwrap.
	t.Logf("auto picked %s", m.Backend())
	chatID := newChat(t, m)
	res := run(t, m, &chat.ExecRequest{ChatID: chatID, Language: "python", Code: "print(6 * 7)"})
	if res.ExitCode != 0 || res.Output != "42\n" {
		t.Fatalf("exit %d, output %q", res.ExitCode, res.Output)
	}
	if got := counterValue(t, reg, "agentd_sandbox_executions_total",
		map[string]string{"backend": m.Backend(), "language": "python", "outcome": outcomeOK}); got != 1 {
		t.Errorf("executions{outcome=ok} = %v, want 1", got)
	}
	if got := counterValue(t, reg, "agentd_sandboxes_alive", map[string]string{"backend": m.Backend()}); got < 1 {
		t.Errorf("sandboxes alive = %v, want at least 1", got)
	}
	if n, err := testutil.GatherAndCount(reg, "agentd_sandbox_executions_total", "agentd_sandbox_execution_duration_seconds", "agentd_sandboxes_alive"); err != nil || n < 3 {
		t.Errorf("gathered %d series (%v)", n, err)
	}
}

// counterValue returns the value of the series of metric name with labels
// (a counter or gauge) in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue series
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}
