//go:build linux

package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/agentd/agentd/internal/chat"
)

// TestExhaustion is the exhaustion suite: a program tries to take more
// memory (through processes, tmpfs and /dev/shm), disk, CPU and processes
// than its limits allow, on each backend, while another chat keeps
// running. Every limit must hold, and hold by the sandbox's own accounting
// (its cgroup), not by the host running out.
func TestExhaustion(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			cfg := testConfig(t, backend)
			m := open(t, cfg)
			if b, ok := m.(*bwrapManager); ok && b.cg == nil && ci() {
				t.Fatal("CI=true and bwrap sandboxes get no cgroup: memory and CPU limits would not hold")
			}
			t.Run("MemoryThroughProcesses", func(t *testing.T) { testMemoryProcesses(t, m) })
			t.Run("MemoryThroughTmpfs", func(t *testing.T) { testMemoryTmpfs(t, m) })
			t.Run("DiskStopsAtDiskMB", func(t *testing.T) { testDisk(t, m) })
			t.Run("CPUWithinCPUs", func(t *testing.T) { testCPU(t, m) })
		})
	}
}

// alongside runs a small program in another chat every 300 ms while f
// runs, and fails the test if one of them fails or takes over 20 s:
// one chat's exhaustion must not stop the others.
func alongside(t *testing.T, m Manager, f func()) {
	t.Helper()
	other := newChat(t, m)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var problems []string
	runs := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			res, err := m.Exec(ctx, &chat.ExecRequest{ChatID: other, Language: "sh", Code: "echo alive", Timeout: 30 * time.Second})
			cancel()
			mu.Lock()
			runs++
			switch {
			case err != nil:
				problems = append(problems, err.Error())
			case strings.TrimSpace(res.Output) != "alive":
				problems = append(problems, fmt.Sprintf("exit %d: %q", res.ExitCode, res.Output))
			case time.Since(start) > 20*time.Second:
				problems = append(problems, fmt.Sprintf("took %s", time.Since(start)))
			}
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	f()
	close(stop)
	wg.Wait()
	if runs == 0 || len(problems) > 0 {
		t.Errorf("the other chat, %d runs: %v", runs, problems)
	}
}

// wroteRE finds the progress a filler program prints.
var wroteRE = regexp.MustCompile(`WROTE (\d+)`)

// lastWrote is the last megabyte count a filler printed.
func lastWrote(out string) int {
	all := wroteRE.FindAllStringSubmatch(out, -1)
	if len(all) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(all[len(all)-1][1])
	return n
}

func testMemoryProcesses(t *testing.T, m Manager) {
	// 8 processes of 64 MB each against a 128 MB limit: per-process
	// limits would let every one of them through.
	code := `import os, time
kids = []
for i in range(8):
    pid = os.fork()
    if pid == 0:
        a = bytearray(64 << 20)
        for j in range(0, len(a), 4096):
            a[j] = 1
        time.sleep(5)
        os._exit(0)
    kids.append(pid)
bad = 0
for p in kids:
    _, st = os.waitpid(p, 0)
    if st != 0:
        bad += 1
print("KILLED", bad)
if bad == 0:
    print("ALL-ALLOCATED")
`
	alongside(t, m, func() {
		res := run(t, m, &chat.ExecRequest{ChatID: newChat(t, m), Language: "python", Code: code,
			Timeout: 20 * time.Second, Limits: chat.SandboxLimits{MemoryMB: 128}})
		t.Logf("exit %d: %.300s", res.ExitCode, res.Output)
		if strings.Contains(res.Output, "ALL-ALLOCATED") {
			t.Errorf("8 × 64 MB in processes fit into a 128 MB sandbox")
		}
		if res.TimedOut {
			t.Errorf("the processes ran into the timeout instead of the memory limit")
		}
	})
}

func testMemoryTmpfs(t *testing.T, m Manager) {
	// Fill each writable tmpfs (and try the root) in 1 MB steps, up to
	// 300 MB, against a 48 MB memory limit: smaller than /tmp and /dev/shm
	// (64 MB each), so the memory limit must count their pages.
	for _, path := range []string{"/tmp/big", "/dev/shm/big", "/big", "/dev/big"} {
		code := fmt.Sprintf(`import sys
chunk = b"x" * (1 << 20)
n = 0
try:
    with open(%q, "wb") as f:
        while n < 300:
            f.write(chunk)
            f.flush()
            n += 1
            print("WROTE", n, flush=True)
except OSError as e:
    print("STOPPED", e, flush=True)
`, path)
		alongside(t, m, func() {
			res := run(t, m, &chat.ExecRequest{ChatID: newChat(t, m), Language: "python", Code: code,
				Timeout: 20 * time.Second, Limits: chat.SandboxLimits{MemoryMB: 48}})
			wrote := lastWrote(res.Output)
			t.Logf("%s: exit %d, wrote %d MB, ends %q", path, res.ExitCode, wrote, tail(res.Output, 160))
			if wrote >= 48 {
				t.Errorf("%s: wrote %d MB in a 48 MB sandbox", path, wrote)
			}
			if res.TimedOut {
				t.Errorf("%s: ran into the timeout", path)
			}
		})
	}
}

func testDisk(t *testing.T, m Manager) {
	if b, ok := m.(*bwrapManager); ok && !b.diskQuota {
		if ci() {
			t.Fatal("CI=true and bwrap work dirs have no size limit (agentd must run as root)")
		}
		t.Skip("bwrap work dirs have no size limit unless agentd runs as root")
	}
	chatID := newChat(t, m)
	code := `chunk = b"x" * (1 << 20)
n = 0
try:
    with open("/work/big", "wb") as f:
        while n < 200:
            f.write(chunk)
            f.flush()
            n += 1
            print("WROTE", n, flush=True)
except OSError as e:
    print("STOPPED", e, flush=True)
`
	res := run(t, m, &chat.ExecRequest{ChatID: chatID, Language: "python", Code: code,
		Timeout: 20 * time.Second, Limits: chat.SandboxLimits{MemoryMB: 256, DiskMB: 32}})
	wrote := lastWrote(res.Output)
	t.Logf("exit %d, wrote %d MB, ends %q", res.ExitCode, wrote, tail(res.Output, 160))
	if wrote > 32 || !strings.Contains(res.Output, "STOPPED") {
		t.Errorf("wrote %d MB into a work dir of disk_mb 32", wrote)
	}
	// What was written stays for the chat's next program.
	res = run(t, m, &chat.ExecRequest{ChatID: chatID, Language: "sh", Code: "wc -c < /work/big",
		Limits: chat.SandboxLimits{MemoryMB: 256, DiskMB: 32}})
	if n, _ := strconv.Atoi(strings.TrimSpace(res.Output)); n < 30<<20 || n > 32<<20 {
		t.Errorf("the next program sees %q bytes", res.Output)
	}
}

func testCPU(t *testing.T, m Manager) {
	// Four busy processes for 4 s with cpus 0.5: at most about 2 s of CPU.
	const cpus, busy = 0.5, 4 * time.Second
	chatID := newChat(t, m)
	code := fmt.Sprintf(`import os, time
for i in range(3):
    if os.fork() == 0:
        break
end = time.time() + %g
while time.time() < end:
    pass
`, busy.Seconds())
	// Create the sandbox first, so that the measurement holds only the loop;
	// with the chat's limits, which a container gets when it is created.
	run(t, m, &chat.ExecRequest{ChatID: chatID, Language: "sh", Code: "true", Limits: chat.SandboxLimits{CPUs: cpus}})
	var used time.Duration
	var measure func() time.Duration
	switch b := m.(type) {
	case *bwrapManager:
		var mu sync.Mutex
		b.onStats = func(id string, st runStats) {
			if id == chatID {
				mu.Lock()
				used += st.cpuUsage
				mu.Unlock()
			}
		}
		measure = func() time.Duration { mu.Lock(); defer mu.Unlock(); return used }
	case *dockerManager:
		before := dockerCPU(t, b, chatID)
		measure = func() time.Duration { return dockerCPU(t, b, chatID) - before }
	}
	start := time.Now()
	res := run(t, m, &chat.ExecRequest{ChatID: chatID, Language: "python", Code: code,
		Timeout: 20 * time.Second, Limits: chat.SandboxLimits{CPUs: cpus}})
	wall := time.Since(start)
	got := measure()
	t.Logf("exit %d, wall %s, CPU %s (cpus %g: at most %s)", res.ExitCode, wall, got, cpus, time.Duration(cpus*float64(wall)))
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Output)
	}
	if got <= 0 {
		t.Fatal("no CPU use measured")
	}
	if limit := time.Duration(cpus*float64(wall)*1.2) + 300*time.Millisecond; got > limit {
		t.Errorf("4 busy processes used %s of CPU in %s with cpus %g (limit %s)", got, wall, cpus, limit)
	}
}

// dockerCPU is the CPU time a chat's container has used, from its cgroup
// as the engine reports it.
func dockerCPU(t *testing.T, d *dockerManager, chatID string) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	found, err := d.list(ctx, chatID)
	if err != nil || len(found) == 0 {
		t.Fatalf("container of chat %s: %v", chatID, err)
	}
	resp, err := d.cli.ContainerStatsOneShot(ctx, found[0].ID)
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	defer resp.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("decode stats: %v", err)
	}
	return time.Duration(st.CPUStats.CPUUsage.TotalUsage)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
