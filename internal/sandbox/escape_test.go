//go:build linux

package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/agentd/agentd/internal/chat"
)

// backends are the sandboxes the escape suite runs against: every test
// below holds for each of them (docs/tools.md).
var backends = []string{BackendDocker, BackendBwrap}

// TestEscape is the escape suite: what hostile code tries, and that it
// fails.
func TestEscape(t *testing.T) {
	// A descriptor agentd might have inherited from its parent (without
	// close-on-exec): no sandbox may get it.
	leak, err := syscall.Dup(int(os.Stderr.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(leak)
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			cfg := testConfig(t, backend)
			m := open(t, cfg)
			// The fork bomb runs alone (it is not parallel), so that its
			// check of the host's responsiveness is not muddled by the
			// other tests' load; the rest run in parallel after it.
			t.Run("ForkBombContained", func(t *testing.T) { testForkBomb(t, m) })
			t.Run("NetworkUnreachable", func(t *testing.T) { t.Parallel(); testNetwork(t, m) })
			t.Run("HostFilesInvisible", func(t *testing.T) { t.Parallel(); testHostFiles(t, m) })
			t.Run("EnvironmentEmpty", func(t *testing.T) { t.Parallel(); testEnvironment(t, m) })
			t.Run("MemoryLimitKills", func(t *testing.T) { t.Parallel(); testMemory(t, m) })
			t.Run("InfiniteLoopTimesOut", func(t *testing.T) { t.Parallel(); testTimeout(t, m) })
			t.Run("OutputCapped", func(t *testing.T) { t.Parallel(); testOutputCap(t, m, cfg.OutputLimit) })
			t.Run("FilesPersistPerChat", func(t *testing.T) { t.Parallel(); testPersistence(t, m) })
			t.Run("ReleaseRemoves", func(t *testing.T) { t.Parallel(); testRelease(t, m) })
			t.Run("ReapRemovesLeftovers", func(t *testing.T) { t.Parallel(); testReap(t, cfg) })
			t.Run("PidsLimit", func(t *testing.T) { t.Parallel(); testPidsLimit(t, m, cfg.PidsLimit) })
			t.Run("CancelKills", func(t *testing.T) { t.Parallel(); testCancel(t, m) })
			t.Run("ConcurrentFirstUse", func(t *testing.T) { t.Parallel(); testConcurrent(t, m) })
			t.Run("LargeCodeAndStdin", func(t *testing.T) { t.Parallel(); testLarge(t, m) })
			t.Run("NoInheritedDescriptors", func(t *testing.T) { t.Parallel(); testDescriptors(t, m) })
			t.Run("NoPrivileges", func(t *testing.T) { t.Parallel(); testPrivileges(t, m) })
			t.Run("DangerousSyscallsDenied", func(t *testing.T) { t.Parallel(); testSyscalls(t, m) })
		})
	}
}

func testNetwork(t *testing.T, m Manager) {
	// A listener on the host's loopback stands in for agentd's own port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	defer wg.Wait()
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	// The non-local address is only ever tried over TCP after a UDP
	// connect (a route lookup, which sends nothing) found no route: should
	// the sandbox have a network after all, no packet leaves the machine.
	code := fmt.Sprintf(`import socket
def tcp(host, port):
    try:
        socket.create_connection((host, port), timeout=1).close()
        return "CONNECTED"
    except OSError as e:
        return "failed: %%s" %% e
print("loopback", tcp("127.0.0.1", %d))
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.connect(("10.255.255.1", 80))
    print("remote ROUTE-EXISTS")
except OSError as e:
    print("remote route:", e)
    print("remote", tcp("10.255.255.1", 80))
print("interfaces", sorted(name for _, name in socket.if_nameindex()))
`, port)
	res := run(t, m, &chat.ExecRequest{ChatID: newChat(t, m), Language: "python", Code: code})
	t.Logf("sandbox says:\n%s", res.Output)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Output)
	}
	for _, bad := range []string{"CONNECTED", "ROUTE-EXISTS"} {
		if strings.Contains(res.Output, bad) {
			t.Errorf("the sandbox has a network: %s", bad)
		}
	}
	for _, want := range []string{"loopback failed", "remote failed", "interfaces ['lo']"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the host listener accepted %d connections from the sandbox", n)
	}
}

func testHostFiles(t *testing.T, m Manager) {
	// A file in a directory like agentd's data dir.
	dataDir := t.TempDir()
	token := "agentd-data-" + randomID()
	secretPath := filepath.Join(dataDir, "secret.txt")
	if err := os.WriteFile(secretPath, []byte(token), 0o644); err != nil {
		t.Fatal(err)
	}
	hostname, _ := os.ReadFile("/etc/hostname")
	var rootNames []string
	if entries, err := os.ReadDir("/root"); err == nil {
		for _, e := range entries {
			if len(rootNames) < 8 {
				rootNames = append(rootNames, e.Name())
			}
		}
	}
	names, _ := json.Marshal(rootNames)
	code := fmt.Sprintf(`import os
for p in [%q, %q]:
    try:
        print("READ", p, open(p).read())
    except OSError as e:
        print("denied", p, e)
try:
    print("HOSTNAME=" + open("/etc/hostname").read().strip())
except OSError as e:
    print("no hostname file", e)
for n in %s:
    try:
        os.lstat("/root/" + n)
        print("ROOT-VISIBLE", n)
    except OSError:
        pass
`, secretPath, dataDir+"/", names)
	res := run(t, m, &chat.ExecRequest{ChatID: newChat(t, m), Language: "python", Code: code})
	t.Logf("sandbox says:\n%s", res.Output)
	if strings.Contains(res.Output, token) || strings.Contains(res.Output, "READ") {
		t.Errorf("the sandbox read the host's data dir")
	}
	if h := strings.TrimSpace(string(hostname)); h != "" && h != "sandbox" &&
		strings.Contains(res.Output, "HOSTNAME="+h+"\n") {
		t.Errorf("the sandbox read the host's /etc/hostname (%q)", h)
	}
	if strings.Contains(res.Output, "ROOT-VISIBLE") {
		t.Errorf("the sandbox sees the host's /root")
	}
}

func testEnvironment(t *testing.T, m Manager) {
	if os.Getenv("OPENAI_API_KEY") != envSecret {
		t.Fatal("TestMain did not set OPENAI_API_KEY")
	}
	res := run(t, m, &chat.ExecRequest{ChatID: newChat(t, m), Language: "python",
		Code: "import json, os\nprint(json.dumps(dict(os.environ)))"})
	if strings.Contains(res.Output, envSecret) {
		t.Fatalf("the sandbox sees agentd's secret: %s", res.Output)
	}
	var env map[string]string
	if err := json.Unmarshal([]byte(strings.TrimSpace(res.Output)), &env); err != nil {
		t.Fatalf("%v: %s", err, res.Output)
	}
	// What the sandbox may hold: ours (sandboxEnv), what the interpreter
	// or shell adds, and what an engine always adds to a container.
	allowed := map[string]bool{"PWD": true, "LC_CTYPE": true, "SHLVL": true, "_": true,
		"HOSTNAME": true, "TERM": true, "container": true,
		// From the image (deploy/sandbox): Python's and pip's settings.
		"PYTHONDONTWRITEBYTECODE": true, "PIP_BREAK_SYSTEM_PACKAGES": true, "PIP_NO_CACHE_DIR": true,
		"PIP_DISABLE_PIP_VERSION_CHECK": true}
	for _, kv := range sandboxEnv {
		k, _, _ := strings.Cut(kv, "=")
		allowed[k] = true
	}
	for k, v := range env {
		if !allowed[k] {
			t.Errorf("unexpected variable in the sandbox: %s=%s", k, v)
		}
	}
	if _, ok := env["OPENAI_API_KEY"]; ok {
		t.Error("OPENAI_API_KEY is set in the sandbox")
	}
}

func testMemory(t *testing.T, m Manager) {
	// Twice the 128 MB limit, every page touched.
	code := `n = 256 << 20
a = bytearray(n)
for i in range(0, n, 4096):
    a[i] = 1
print("ALLOCATED")`
	res := run(t, m, &chat.ExecRequest{ChatID: newChat(t, m), Language: "python", Code: code,
		Timeout: 20 * time.Second, Limits: chat.SandboxLimits{MemoryMB: 128}})
	t.Logf("exit %d: %.300s", res.ExitCode, res.Output)
	if res.ExitCode == 0 || strings.Contains(res.Output, "ALLOCATED") {
		t.Fatalf("allocating twice the memory limit succeeded (exit %d)", res.ExitCode)
	}
	if res.TimedOut {
		t.Fatal("the allocation ran into the timeout instead of the memory limit")
	}
}

func testForkBomb(t *testing.T, m Manager) {
	// A timer in this process must still fire on time while the bomb runs.
	const period = 250 * time.Millisecond
	var worst atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(period)
		defer tk.Stop()
		last := time.Now()
		for {
			select {
			case <-stop:
				return
			case now := <-tk.C:
				if late := now.Sub(last) - period; late > time.Duration(worst.Load()) {
					worst.Store(int64(late))
				}
				last = now
			}
		}
	}()
	chatID := newChat(t, m)
	code := `import os
while True:
    try:
        os.fork()
    except OSError:
        pass`
	start := time.Now()
	res := run(t, m, &chat.ExecRequest{ChatID: chatID, Language: "python", Code: code, Timeout: 3 * time.Second})
	took := time.Since(start)
	close(stop)
	wg.Wait()
	t.Logf("fork bomb: exit %d, timed out %v, took %s, worst timer lateness %s, output %.200q",
		res.ExitCode, res.TimedOut, took, time.Duration(worst.Load()), res.Output)
	if res.ExitCode == 0 {
		t.Errorf("the fork bomb exited 0")
	}
	if took > 3*time.Second+killGrace+drainAfterKill+5*time.Second {
		t.Errorf("the fork bomb took %s to end", took)
	}
	if late := time.Duration(worst.Load()); late > 2*time.Second {
		t.Errorf("the host was unresponsive: a %s timer fired %s late", period, late)
	}
	// The chat's sandbox is usable again: the bomb is gone.
	res = run(t, m, &chat.ExecRequest{ChatID: chatID, Language: "python", Code: `print("alive")`})
	if res.ExitCode != 0 || strings.TrimSpace(res.Output) != "alive" {
		t.Errorf("after the fork bomb: exit %d, output %q", res.ExitCode, res.Output)
	}
}

func testTimeout(t *testing.T, m Manager) {
	for _, tc := range []struct{ language, code string }{
		{"python", "print('start', flush=True)\nwhile True:\n    pass"},
		{"sh", "echo start; while :; do :; done"},
	} {
		start := time.Now()
		res := run(t, m, &chat.ExecRequest{ChatID: newChat(t, m), Language: tc.language, Code: tc.code,
			Timeout: 2 * time.Second})
		took := time.Since(start)
		if res.ExitCode != TimeoutExitCode || !res.TimedOut {
			t.Errorf("%s: exit %d, timed out %v; want %d, true", tc.language, res.ExitCode, res.TimedOut, TimeoutExitCode)
		}
		if want := "start\n" + TimeoutMarker; res.Output != want {
			t.Errorf("%s: output %q, want %q", tc.language, res.Output, want)
		}
		if took < 2*time.Second || took > 2*time.Second+killGrace+drainAfterKill {
			t.Errorf("%s: took %s for a 2s timeout", tc.language, took)
		}
	}
}

func testOutputCap(t *testing.T, m Manager, limit int) {
	// 100 MB of output, far past the limit; it must not be kept, and the
	// program must still run to its end (exit 0), not block on the pipe.
	code := `import sys
chunk = b"x" * (1 << 20)
for _ in range(100):
    sys.stdout.buffer.write(chunk)
sys.stdout.flush()
sys.stderr.write("done\n")`
	start := time.Now()
	res := run(t, m, &chat.ExecRequest{ChatID: newChat(t, m), Language: "python", Code: code,
		Timeout: 60 * time.Second})
	t.Logf("100 MB of output took %s", time.Since(start))
	if res.ExitCode != 0 || res.TimedOut {
		t.Fatalf("exit %d, timed out %v", res.ExitCode, res.TimedOut)
	}
	marker := truncationMarker(limit)
	if !res.Truncated || !strings.HasSuffix(res.Output, marker) {
		t.Errorf("truncated %v, output ends %q; want the marker %q", res.Truncated, res.Output[max(0, len(res.Output)-80):], marker)
	}
	if want := limit + len(marker); len(res.Output) != want {
		t.Errorf("output is %d bytes, want %d", len(res.Output), want)
	}
}

func testPersistence(t *testing.T, m Manager) {
	a, b := newChat(t, m), newChat(t, m)
	token := "state-" + randomID()
	res := run(t, m, &chat.ExecRequest{ChatID: a, Language: "python",
		Code: fmt.Sprintf("open('state.txt', 'w').write(%q)\nimport os\nprint(os.getcwd(), os.getuid())", token)})
	if res.ExitCode != 0 || strings.TrimSpace(res.Output) != fmt.Sprintf("/work %d", sandboxUID) {
		t.Fatalf("write: exit %d, output %q", res.ExitCode, res.Output)
	}
	// Another language, another program: the file is still there.
	res = run(t, m, &chat.ExecRequest{ChatID: a, Language: "sh", Code: "cat /work/state.txt; echo; exit 3"})
	if res.ExitCode != 3 || strings.TrimSpace(res.Output) != token {
		t.Errorf("read in the same chat: exit %d, output %q; want 3, %q", res.ExitCode, res.Output, token)
	}
	// A module written to the work dir can be imported, as with AutoGen.
	run(t, m, &chat.ExecRequest{ChatID: a, Language: "python",
		Code: "open('helper.py', 'w').write('def f(): return 42\\n')"})
	res = run(t, m, &chat.ExecRequest{ChatID: a, Language: "python", Code: "import helper\nprint(helper.f())"})
	if strings.TrimSpace(res.Output) != "42" {
		t.Errorf("import from the work dir: exit %d, output %q", res.ExitCode, res.Output)
	}
	// Tool mode: arguments on stdin, and state kept in the work dir.
	res = run(t, m, &chat.ExecRequest{ChatID: a, Language: "python",
		Code:  "import json, sys\nargs = json.load(sys.stdin)\nprint(json.dumps({'sum': args['x'] + args['y'], 'state': open('state.txt').read()}))",
		Stdin: []byte(`{"x": 2, "y": 40}`)})
	if want := fmt.Sprintf(`{"sum": 42, "state": %q}`, token); strings.TrimSpace(res.Output) != want {
		t.Errorf("tool call: exit %d, output %q, want %q", res.ExitCode, res.Output, want)
	}
	// stdout and stderr interleaved as written; a failure is a result.
	res = run(t, m, &chat.ExecRequest{ChatID: a, Language: "python",
		Code: "import sys\nprint('out1')\nprint('err1', file=sys.stderr)\nprint('out2')\n1/0"})
	if res.ExitCode != 1 || !strings.HasPrefix(res.Output, "out1\nerr1\nout2\nTraceback") ||
		!strings.HasSuffix(res.Output, "ZeroDivisionError: division by zero\n") {
		t.Errorf("failing program: exit %d, output %q", res.ExitCode, res.Output)
	}
	// Another chat sees none of it.
	res = run(t, m, &chat.ExecRequest{ChatID: b, Language: "sh", Code: "ls -A /work; cat /work/state.txt"})
	if res.ExitCode == 0 || strings.Contains(res.Output, token) || strings.Contains(res.Output, "helper.py") {
		t.Errorf("another chat sees the first chat's files: exit %d, output %q", res.ExitCode, res.Output)
	}
}

func testRelease(t *testing.T, m Manager) {
	chatID := newChat(t, m)
	run(t, m, &chat.ExecRequest{ChatID: chatID, Language: "sh", Code: "echo x > f"})
	if !sandboxExists(t, m, chatID) {
		t.Fatal("no sandbox after an execution")
	}
	ctx := context.Background()
	if err := m.Release(ctx, chatID); err != nil {
		t.Fatal(err)
	}
	if sandboxExists(t, m, chatID) {
		t.Error("the sandbox is still there after Release")
	}
	if err := m.Release(ctx, chatID); err != nil {
		t.Errorf("a second Release: %v", err)
	}
	if err := m.Release(ctx, "never-ran"); err != nil {
		t.Errorf("Release of a chat without a sandbox: %v", err)
	}
}

func testReap(t *testing.T, cfg Config) {
	// An owner and work root of its own: this Reap must not see the
	// sandboxes of the tests running beside it.
	fresh := testConfig(t, cfg.Backend)
	cfg.Owner, cfg.WorkRoot = fresh.Owner, fresh.WorkRoot
	// Manager a plays an agentd that was killed: its sandboxes stay.
	a := open(t, cfg)
	gone, kept := "reap-gone-"+randomID(), "reap-kept-"+randomID()
	for _, id := range []string{gone, kept} {
		run(t, a, &chat.ExecRequest{ChatID: id, Language: "sh", Code: "echo x > f"})
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// The restarted agentd reaps what no running chat needs.
	b := open(t, cfg)
	t.Cleanup(func() { _ = b.Release(context.Background(), kept) })
	n, err := b.Reap(context.Background(), func(id string) bool { return id == kept })
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("reaped %d sandboxes, want 1", n)
	}
	if sandboxExists(t, b, gone) {
		t.Error("the crashed chat's sandbox survived Reap")
	}
	if !sandboxExists(t, b, kept) {
		t.Error("Reap removed a sandbox that keep asked to keep")
	}
	// The kept chat's sandbox is reused, files and all.
	res := run(t, b, &chat.ExecRequest{ChatID: kept, Language: "sh", Code: "cat f"})
	if strings.TrimSpace(res.Output) != "x" {
		t.Errorf("the kept sandbox lost its files: exit %d, output %q", res.ExitCode, res.Output)
	}
}

// sandboxExists reports whether anything of a chat's sandbox is left: a
// container or volume (docker), a work dir (bwrap).
func sandboxExists(t *testing.T, m Manager, chatID string) bool {
	t.Helper()
	ctx := context.Background()
	switch m := m.(type) {
	case *dockerManager:
		found, err := m.list(ctx, chatID)
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.cli.VolumeInspect(ctx, m.name(chatID))
		if err != nil && !cerrdefs.IsNotFound(err) {
			t.Fatal(err)
		}
		return len(found) > 0 || err == nil
	case *bwrapManager:
		_, err := os.Lstat(m.dir(chatID))
		return err == nil
	}
	t.Fatalf("unknown manager %T", m)
	return false
}

func testPidsLimit(t *testing.T, m Manager, limit int) {
	// Sleeping children until fork fails: the count stops below the limit.
	code := `import os, signal, time
pids = []
try:
    while len(pids) < 1000:
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        pids.append(pid)
except OSError as e:
    print("fork failed:", e)
for p in pids:
    os.kill(p, signal.SIGKILL)
    os.waitpid(p, 0)
print("forked", len(pids))`
	res := run(t, m, &chat.ExecRequest{ChatID: newChat(t, m), Language: "python", Code: code, Timeout: 20 * time.Second})
	var n int
	if i := strings.LastIndex(res.Output, "forked "); i >= 0 {
		fmt.Sscanf(res.Output[i:], "forked %d", &n)
	}
	t.Logf("exit %d: %s", res.ExitCode, res.Output)
	if !strings.Contains(res.Output, "fork failed") || n == 0 || n >= limit {
		t.Errorf("forked %d processes with a limit of %d", n, limit)
	}
}

func testCancel(t *testing.T, m Manager) {
	chatID := newChat(t, m)
	// The sandbox exists first, so that the second before the cancel is
	// the program's own, not a container's creation on a busy host.
	run(t, m, &chat.ExecRequest{ChatID: chatID, Language: "sh", Code: "true"})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(2*time.Second, cancel)
	start := time.Now()
	res, err := m.Exec(ctx, &chat.ExecRequest{ChatID: chatID, Language: "python",
		Code: "import os\nopen('pid', 'w').write(str(os.getpid()))\nwhile True:\n    pass", Timeout: time.Minute})
	took := time.Since(start)
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled exec returned %+v, %v; want context.Canceled", res, err)
	}
	if took > 10*time.Second {
		t.Errorf("cancel took %s to end the exec", took)
	}
	if _, ok := m.(*dockerManager); !ok {
		return // a bwrap sandbox's processes die with its pid namespace
	}
	// The container outlives the exec; the program must not.
	res = run(t, m, &chat.ExecRequest{ChatID: chatID, Language: "sh",
		Code: `p=$(cat pid); test -n "$p" && test ! -e /proc/$p && echo gone`})
	if strings.TrimSpace(res.Output) != "gone" {
		t.Errorf("the cancelled program still runs: %q", res.Output)
	}
}

func testConcurrent(t *testing.T, m Manager) {
	// Parallel tool calls of a chat's first turn share one sandbox.
	chatID := newChat(t, m)
	var wg sync.WaitGroup
	outs := make([]string, 4)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := m.Exec(context.Background(), &chat.ExecRequest{ChatID: chatID, Language: "sh",
				Code: fmt.Sprintf("echo %d > f%d; echo ok", i, i)})
			if err != nil {
				t.Error(err)
				return
			}
			outs[i] = res.Output
		}()
	}
	wg.Wait()
	res := run(t, m, &chat.ExecRequest{ChatID: chatID, Language: "sh", Code: "cat f0 f1 f2 f3"})
	if res.Output != "0\n1\n2\n3\n" {
		t.Errorf("files of concurrent first executions: %q (outputs %q)", res.Output, outs)
	}
	if d, ok := m.(*dockerManager); ok {
		found, err := d.list(context.Background(), chatID)
		if err != nil || len(found) != 1 {
			t.Errorf("%d containers for one chat (%v)", len(found), err)
		}
	}
}

func testLarge(t *testing.T, m Manager) {
	chatID := newChat(t, m)
	// Code past the 128 KiB argv limit, stdin past any pipe buffer.
	code := strings.Repeat("# padding\n", 30000) + "import sys\nprint(len(sys.stdin.buffer.read()))"
	stdin := []byte(strings.Repeat("y", 3<<20))
	res := run(t, m, &chat.ExecRequest{ChatID: chatID, Language: "python", Code: code, Stdin: stdin})
	if strings.TrimSpace(res.Output) != fmt.Sprint(len(stdin)) {
		t.Errorf("large code and stdin: exit %d, output %q", res.ExitCode, res.Output)
	}
	// A program that never reads its stdin still ends.
	res = run(t, m, &chat.ExecRequest{ChatID: chatID, Language: "python", Code: "print('ignored')", Stdin: stdin})
	if strings.TrimSpace(res.Output) != "ignored" || res.ExitCode != 0 {
		t.Errorf("unread stdin: exit %d, output %q", res.ExitCode, res.Output)
	}
}

func testDescriptors(t *testing.T, m Manager) {
	// Only stdin, stdout, stderr, and the one listdir opens.
	res := run(t, m, &chat.ExecRequest{ChatID: newChat(t, m), Language: "python",
		Code: "import os\nprint(sorted(int(f) for f in os.listdir('/proc/self/fd')))"})
	if strings.TrimSpace(res.Output) != "[0, 1, 2, 3]" {
		t.Errorf("descriptors in the sandbox: %s", res.Output)
	}
}

func testPrivileges(t *testing.T, m Manager) {
	// No capabilities, no way to gain any (no_new_privs), not root.
	res := run(t, m, &chat.ExecRequest{ChatID: newChat(t, m), Language: "sh",
		Code: "id -u; grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs)' /proc/self/status"})
	want := "1000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\n"
	if res.Output != want {
		t.Errorf("privileges in the sandbox:\n%s\nwant:\n%s", res.Output, want)
	}
}

func testSyscalls(t *testing.T, m Manager) {
	type call struct {
		name string
		nr   int
		arg  int
	}
	// Denied by the engines' default seccomp profiles and by ours.
	calls := []call{{"bpf", unix.SYS_BPF, 0}, {"perf_event_open", unix.SYS_PERF_EVENT_OPEN, 0}}
	if _, ok := m.(*bwrapManager); ok {
		// Ours denies more; Podman 4's default profile, for one, allows
		// keyctl and unprivileged user namespaces.
		calls = append(calls, call{"io_uring_setup", unix.SYS_IO_URING_SETUP, 0}, call{"keyctl", unix.SYS_KEYCTL, 0},
			call{"unshare(CLONE_NEWUSER)", unix.SYS_UNSHARE, unix.CLONE_NEWUSER}, call{"ptrace", unix.SYS_PTRACE, 0},
			call{"mount", unix.SYS_MOUNT, 0})
	}
	var code strings.Builder
	code.WriteString("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n")
	for _, c := range calls {
		fmt.Fprintf(&code, "ctypes.set_errno(0)\nr = libc.syscall(%d, %d, 0, 0, 0, 0)\nprint(%q, r, ctypes.get_errno())\n", c.nr, c.arg, c.name)
	}
	res := run(t, m, &chat.ExecRequest{ChatID: newChat(t, m), Language: "python", Code: code.String()})
	var want strings.Builder
	for _, c := range calls {
		fmt.Fprintf(&want, "%s -1 %d\n", c.name, int(unix.EPERM))
	}
	if res.Output != want.String() {
		t.Errorf("syscalls in the sandbox:\n%s\nwant:\n%s", res.Output, want.String())
	}
}
