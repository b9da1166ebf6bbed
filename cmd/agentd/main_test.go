package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func envMap(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func parse(t *testing.T, getenv func(string) string, args ...string) Config {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	var c Config
	c.RegisterFlags(fs, getenv)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConfigDefaultsAreValid(t *testing.T) {
	c := parse(t, envMap())
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:8080" || c.DataDir != "./agentd-data" || c.DatabaseURL != "" || !c.Migrate {
		t.Fatalf("defaults = %+v", c)
	}
}

func TestConfigFlagsWinOverEnvironment(t *testing.T) {
	c := parse(t, envMap("AGENTD_ADDR", "127.0.0.1:1", "AGENTD_MAX_ACTIVE_CHATS", "7"), "-addr", "127.0.0.1:2")
	if c.Addr != "127.0.0.1:2" || c.MaxActiveChats != 7 {
		t.Fatalf("config = %+v", c)
	}
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	c := parse(t, envMap(
		"AGENTD_ADDR", "0.0.0.0:8080", // not loopback, and no keys
		"AGENTD_DATABASE_URL", "mysql://x",
		"AGENTD_SANDBOX", "chroot",
		"AGENTD_MAX_ACTIVE_CHATS", "0",
		"AGENTD_SHUTDOWN_GRACE", "soon",
		"AGENTD_LOG_FORMAT", "xml",
		"AGENTD_GC_HEAP_FLOOR_BYTES", "-1",
	))
	err := c.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"not a loopback address", "AGENTD_DATABASE_URL", "AGENTD_SANDBOX", "AGENTD_MAX_ACTIVE_CHATS", `AGENTD_SHUTDOWN_GRACE="soon"`, "AGENTD_LOG_FORMAT", "AGENTD_GC_HEAP_FLOOR_BYTES"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s:\n%v", want, err)
		}
	}
}

// TestConfigToolSecrets: AGENTD_TOOL_SECRETS is a JSON object of names to
// values; a malformed one, or a bad name or value, is reported without the
// value.
func TestConfigToolSecrets(t *testing.T) {
	c := parse(t, envMap("AGENTD_TOOL_SECRETS", `{"github": "Bearer ghp_x", "mcp.token-1": "k"}`))
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if m, err := c.toolSecrets(); err != nil || m["github"] != "Bearer ghp_x" || len(m) != 2 {
		t.Fatalf("secrets = %v, %v", m, err)
	}
	for _, bad := range []string{`github=ghp_x`, `{"bad name": "v"}`, `{"ok": ""}`, `{"ok": "a\nb"}`, `["x"]`} {
		bc := parse(t, envMap("AGENTD_TOOL_SECRETS", bad))
		err := bc.Validate()
		if err == nil || !strings.Contains(err.Error(), "AGENTD_TOOL_SECRETS") || strings.Contains(err.Error(), "ghp_x") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestConfigAPIKeys(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "keys")
	if err := os.WriteFile(file, []byte("# comment\nkey-from-file-0123456789:team-b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := parse(t, envMap("AGENTD_ADDR", "0.0.0.0:8080", "AGENTD_API_KEYS", "key-from-env-0123456789:team-a", "AGENTD_API_KEYS_FILE", file))
	if err := c.Validate(); err != nil {
		t.Fatal(err) // with keys, a non-loopback address is fine
	}
	keys, _ := c.apiKeys()
	if keys["key-from-env-0123456789"] != "team-a" || keys["key-from-file-0123456789"] != "team-b" || len(keys) != 2 {
		t.Fatalf("keys = %v", keys)
	}
	c = parse(t, envMap("AGENTD_API_KEYS", "short:team,nocolon"))
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "shorter than 16") || !strings.Contains(err.Error(), "not key:tenant") || strings.Contains(err.Error(), "nocolon") {
		t.Fatalf("err = %v (keys must not be echoed whole)", err)
	}
}

func TestSubcommands(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"version"}, envMap(), &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "agentd ") {
		t.Fatalf("version: %d %q %q", code, out.String(), errOut.String())
	}
	if code := run(context.Background(), []string{"frobnicate"}, envMap(), &out, &errOut); code != 2 {
		t.Fatalf("unknown command exit %d", code)
	}
	errOut.Reset()
	if code := run(context.Background(), []string{"serve"}, envMap("AGENTD_SANDBOX", "x", "AGENTD_LOG_LEVEL", "loud"), &out, &errOut); code != 2 ||
		!strings.Contains(errOut.String(), "AGENTD_SANDBOX") || !strings.Contains(errOut.String(), "AGENTD_LOG_LEVEL") {
		t.Fatalf("invalid config: exit %d, %s", code, errOut.String())
	}
	dir := t.TempDir()
	if code := run(context.Background(), []string{"migrate", "-data-dir", dir}, envMap(), &out, &errOut); code != 0 {
		t.Fatalf("migrate: exit %d, %s", code, errOut.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "agentd.db")); err != nil {
		t.Fatal(err)
	}
	if code := run(context.Background(), []string{"health", "-addr", "127.0.0.1:1"}, envMap(), &out, &errOut); code != 1 {
		t.Fatalf("health of nothing: exit %d", code)
	}
}

// TestHelpListsEverySubcommand: agentd --help names every command of
// agentd chat and agentd team, as their own help lists them, in that order;
// and each of those is a command they run (not "unknown command").
func TestHelpListsEverySubcommand(t *testing.T) {
	var top, errOut bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, envMap(), &top, &errOut); code != 0 {
		t.Fatalf("agentd --help: exit %d %s", code, errOut.String())
	}
	for _, group := range []string{"chat", "team"} {
		var help bytes.Buffer
		if code := run(context.Background(), []string{group, "--help"}, envMap(), &help, &errOut); code != 0 {
			t.Fatalf("agentd %s --help: exit %d", group, code)
		}
		_, cmds, _ := strings.Cut(help.String(), "\ncommands:\n")
		cmds, _, _ = strings.Cut(cmds, "\n\n")
		var want []string
		for line := range strings.Lines(cmds) {
			if f := strings.Fields(line); strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") && len(f) > 0 && !slices.Contains(want, f[0]) {
				want = append(want, f[0])
			}
		}
		if len(want) < 3 {
			t.Fatalf("agentd %s --help lists %q", group, want)
		}
		// The group's entry in the top-level help: "  chat      what: a, b, c (…)"
		// over as many lines as it takes.
		_, entry, _ := strings.Cut(top.String(), "\n  "+group+" ")
		var lines []string
		for i, line := range strings.Split(entry, "\n") {
			if i > 0 && !strings.HasPrefix(line, "            ") {
				break
			}
			lines = append(lines, strings.TrimSpace(line))
		}
		joined := strings.Join(lines, " ")
		_, list, _ := strings.Cut(joined, ": ")
		list, _, _ = strings.Cut(list, " (")
		if got := strings.Split(list, ", "); !slices.Equal(got, want) {
			t.Errorf("agentd --help lists the %s commands %q, want %q (agentd %s --help)", group, got, want, group)
		}
		for _, cmd := range want {
			var out, stderr bytes.Buffer
			run(context.Background(), []string{group, cmd, "--url", "http://127.0.0.1:1"}, envMap(), &out, &stderr)
			if strings.Contains(stderr.String(), "unknown command") {
				t.Errorf("agentd %s %s: %s", group, cmd, stderr.String())
			}
		}
	}
}

// TestMainServesAndShutsDownInOrder runs the whole program in-process on a
// free port: it serves a chat to completion, answers health for `agentd
// health`, and on Close turns readiness off and ends open streams.
func TestMainServesAndShutsDownInOrder(t *testing.T) {
	// A sandbox owner of its own: the reaper must not touch the sandboxes
	// of a real deployment on this machine.
	root, err := os.MkdirTemp("", "agentd-main-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	_ = os.Chmod(root, 0o711)
	cfg := parse(t, envMap("AGENTD_ADDR", "127.0.0.1:0", "AGENTD_DATA_DIR", t.TempDir(), "AGENTD_LOG_LEVEL", "error",
		"AGENTD_SANDBOX_OWNER", "agentd-test-main-"+strconv.Itoa(os.Getpid()), "AGENTD_SANDBOX_WORK_ROOT", filepath.Join(root, "sbx"),
		"AGENTD_SHUTDOWN_DRAIN", "1s"))
	cfg.ShutdownGrace = 10 * time.Second
	m := NewMain(cfg, newTestLogger(t))
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr()

	if code := health(context.Background(), m.Addr(), io.Discard); code != 0 {
		t.Fatalf("health: exit %d", code)
	}
	spec, err := os.ReadFile("../../examples/debate.json")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(base+"/v1/chats?wait_s=30", "application/json", bytes.NewReader(spec))
	if err != nil {
		t.Fatal(err)
	}
	var c struct{ ID, Status, StopReason string }
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	_ = json.Unmarshal(bytes.ReplaceAll(b, []byte(`"stop_reason"`), []byte(`"StopReason"`)), &c)
	if resp.StatusCode != http.StatusCreated || c.Status != "completed" || c.StopReason != "text_mention" {
		t.Fatalf("create with wait_s: %d %s", resp.StatusCode, b)
	}

	// An open stream of a finished chat replays and closes; a long poll of
	// it would block, so open one on a chat that waits a minute.
	slow := `{"task": "t", "agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": [{"content": "x", "delay_ms": 60000}]}}]}`
	resp, err = http.Post(base+"/v1/chats", "application/json", strings.NewReader(slow))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	_ = json.Unmarshal(b, &c)
	stream, err := http.Get(base + "/v1/chats/" + c.ID + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()

	// A load balancer polls readiness; without that Close would not drain.
	if resp, err := http.Get(base + "/readyz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	// During the drain delay readiness is 503 while requests are served.
	for {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatalf("readyz during drain: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			break
		}
	}
	if resp, err := http.Get(base + "/v1/chats/" + c.ID); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("API during drain: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("Close did not end an open SSE stream and a running chat promptly")
	}
	// The stream was cut short: it must read as aborted (no final chunk),
	// which makes clients reconnect, not as a cleanly finished stream.
	if b, err := io.ReadAll(stream.Body); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("stream ended with %v, want an aborted stream (unexpected EOF); body %q", err, b)
	} else if !strings.HasPrefix(string(b), "retry: ") {
		t.Fatalf("stream does not start with a retry hint: %q", b)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func newTestLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// TestConfigTracesFromOTELVariables: traces are off by default and follow
// the standard OpenTelemetry variables.
func TestConfigTracesFromOTELVariables(t *testing.T) {
	for _, tc := range []struct {
		env     []string
		on      bool
		problem string
	}{
		{nil, false, ""},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"}, true, ""},
		{[]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector:4318/v1/traces"}, true, ""},
		{[]string{"OTEL_TRACES_EXPORTER", "otlp"}, true, ""},
		{[]string{"OTEL_TRACES_EXPORTER", "none", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"}, false, ""},
		{[]string{"OTEL_SDK_DISABLED", "true", "OTEL_TRACES_EXPORTER", "otlp"}, false, ""},
		{[]string{"OTEL_TRACES_EXPORTER", "zipkin"}, false, "OTEL_TRACES_EXPORTER"},
		{[]string{"OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}, true, "http/protobuf"},
	} {
		c := parse(t, envMap(tc.env...))
		err := c.Validate()
		if c.Traces != tc.on || (tc.problem == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.problem)) {
			t.Errorf("%v: traces %v, error %v; want %v, %q", tc.env, c.Traces, err, tc.on, tc.problem)
		}
	}
}

// TestPickVersion: a binary from `go install …/cmd/agentd@v1.2.3` says
// v1.2.3, one from make build (ldflags) its git describe, and a plain build
// in a checkout "dev".
func TestPickVersion(t *testing.T) {
	info := func(v string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "github.com/agentd/agentd", Version: v}}
	}
	for _, tc := range []struct {
		name, set string
		info      *debug.BuildInfo
		ok        bool
		want      string
	}{
		{"go install of a tag", "dev", info("v1.2.3"), true, "v1.2.3"},
		{"ldflags win", "v1.2.3-4-gabcdef", info("v1.2.3"), true, "v1.2.3-4-gabcdef"},
		{"a build in a checkout", "dev", info("(devel)"), true, "dev"},
		{"no build info", "dev", nil, false, "dev"},
	} {
		if got := pickVersion(tc.set, tc.info, tc.ok); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestSandboxWorkRoot: a configured work root is used as is; the default
// is in the data dir, which is made searchable for the sandbox uid; with
// no sandbox nothing is made (a replica on Postgres leaves no directory
// behind in its working directory).
func TestSandboxWorkRoot(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if got := sandboxWorkRoot("none", "", data); got != filepath.Join(data, "sandboxes") {
		t.Errorf("none: %q", got)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("with no sandbox the data dir was made (stat: %v)", err)
	}
	if got := sandboxWorkRoot("auto", "/srv/work", data); got != "/srv/work" {
		t.Errorf("configured: %q", got)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("with a configured work root the data dir was made (stat: %v)", err)
	}
	if got := sandboxWorkRoot("auto", "", data); got != filepath.Join(data, "sandboxes") {
		t.Errorf("auto: %q", got)
	}
	fi, err := os.Stat(data)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o701 {
		t.Errorf("the data dir for a sandbox is %o, want 701", perm)
	}
}
