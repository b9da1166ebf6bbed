//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/agentd/agentd/internal/chat"
)

// benchSamples is how many warm executions each path is timed for.
const benchSamples = 100

// trivial is the program timed: AutoGen's smallest useful code block.
const trivial = "print(1)"

// BenchmarkWarmExec times a trivial Python block in a warm sandbox
// (issue 3 acceptance 3):
//
//   - docker: through the Manager, interleaved with the engine's own exec of
//     the same command in the same container, in the same run. "engine" is
//     the raw Engine API sequence that `docker exec` performs (exec create,
//     attach/start, inspect for the exit code) with `python3 -c 'print(1)'`;
//     when a docker CLI is installed, `docker exec` itself is timed too
//     (cli), process start-up included. ratio is Manager p50 / engine p50
//     (target ≤ 1.5).
//   - bwrap: through the Manager (target p50 ≤ 50 ms).
//
// Run with -benchtime 1x: each run takes benchSamples of every path.
func BenchmarkWarmExec(b *testing.B) {
	b.Run("docker", benchDocker)
	b.Run("bwrap", benchBwrap)
}

func benchDocker(b *testing.B) {
	m := open(b, testConfig(b, BackendDocker)).(*dockerManager)
	chatID := newChat(b, m)
	req := &chat.ExecRequest{ChatID: chatID, Language: "python", Code: trivial}
	for range 3 { // warm: container created, image pages cached
		warmRun(b, m, req)
	}
	box := m.box(chatID)
	cid := box.id
	cli := dockerCLI(m.cfg.DockerHost)

	var ours, engine, cliTimes []time.Duration
	for b.Loop() {
		for range benchSamples {
			start := time.Now()
			warmRun(b, m, req)
			ours = append(ours, time.Since(start))

			start = time.Now()
			if out := rawExec(b, m, cid); out != "1\n" {
				b.Fatalf("engine exec printed %q", out)
			}
			engine = append(engine, time.Since(start))

			if cli != nil {
				start = time.Now()
				out, err := cli(cid).CombinedOutput()
				if err != nil || string(out) != "1\n" {
					b.Fatalf("docker exec: %v: %s", err, out)
				}
				cliTimes = append(cliTimes, time.Since(start))
			}
		}
	}
	b.StopTimer()
	ratio := float64(pct(ours, 50)) / float64(pct(engine, 50))
	report(b, "agentd", ours)
	report(b, "engine", engine)
	b.ReportMetric(ratio, "ratio-p50")
	line := fmt.Sprintf("docker warm exec of %q: agentd p50 %s p99 %s; engine API exec p50 %s p99 %s; ratio %.2f",
		trivial, ms(pct(ours, 50)), ms(pct(ours, 99)), ms(pct(engine, 50)), ms(pct(engine, 99)), ratio)
	if len(cliTimes) > 0 {
		report(b, "cli", cliTimes)
		line += fmt.Sprintf("; `docker exec` CLI p50 %s p99 %s", ms(pct(cliTimes, 50)), ms(pct(cliTimes, 99)))
	}
	b.Log(line)
}

func benchBwrap(b *testing.B) {
	m := open(b, testConfig(b, BackendBwrap))
	req := &chat.ExecRequest{ChatID: newChat(b, m), Language: "python", Code: trivial}
	for range 3 {
		warmRun(b, m, req)
	}
	var ours []time.Duration
	for b.Loop() {
		for range benchSamples {
			start := time.Now()
			warmRun(b, m, req)
			ours = append(ours, time.Since(start))
		}
	}
	b.StopTimer()
	report(b, "agentd", ours)
	b.Logf("bwrap warm exec of %q: p50 %s p99 %s (target p50 ≤ 50ms)", trivial, ms(pct(ours, 50)), ms(pct(ours, 99)))
}

func warmRun(b *testing.B, m Manager, req *chat.ExecRequest) {
	res, err := m.Exec(context.Background(), req)
	if err != nil || res.ExitCode != 0 || res.Output != "1\n" {
		b.Fatalf("exec: %+v, %v", res, err)
	}
}

// rawExec is the engine's own exec of the same command: what `docker exec`
// does over the Engine API, without agentd's wrapper.
func rawExec(b *testing.B, m *dockerManager, cid string) string {
	ctx := context.Background()
	created, err := m.cli.ContainerExecCreate(ctx, cid, container.ExecOptions{
		User: "1000:1000", AttachStdout: true, AttachStderr: true,
		Cmd: []string{"python3", "-c", trivial},
	})
	if err != nil {
		b.Fatal(err)
	}
	hj, err := m.cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var out strings.Builder
	_, err = stdcopy.StdCopy(&out, &out, hj.Reader)
	hj.Close()
	if err != nil {
		b.Fatal(err)
	}
	if code, err := m.exitCode(ctx, created.ID); err != nil || code != 0 {
		b.Fatalf("engine exec: exit %d, %v", code, err)
	}
	return out.String()
}

// dockerCLI returns a `docker exec` command for a container, or nil when
// no docker CLI is installed.
func dockerCLI(host string) func(cid string) *exec.Cmd {
	path, err := exec.LookPath("docker")
	if err != nil {
		return nil
	}
	return func(cid string) *exec.Cmd {
		return exec.Command(path, "-H", host, "exec", "-u", "1000:1000", cid, "python3", "-c", trivial)
	}
}

func report(b *testing.B, name string, d []time.Duration) {
	b.ReportMetric(float64(pct(d, 50))/1e6, name+"-p50-ms")
	b.ReportMetric(float64(pct(d, 99))/1e6, name+"-p99-ms")
}

// pct returns the p-th percentile (nearest rank) of d.
func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

func ms(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }
