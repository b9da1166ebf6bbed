package e2e

import (
	"cmp"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sandboxes runs a test once per code sandbox backend: docker (Podman's or
// Docker's Engine API with the sandbox image) and bwrap. A missing backend
// skips, and fails with CI=true.
func sandboxes(t *testing.T, f func(t *testing.T, env []string)) {
	t.Run("docker", func(t *testing.T) {
		t.Parallel()
		host := cmp.Or(os.Getenv("DOCKER_HOST"), "unix:///run/podman/podman.sock")
		if conn, err := net.DialTimeout("unix", strings.TrimPrefix(host, "unix://"), 2*time.Second); err != nil {
			missing(t, "docker sandbox: no Docker Engine API answers at "+host+" (.ci/run starts Podman's)")
		} else {
			conn.Close()
		}
		if out, err := exec.Command("podman", "image", "exists", "agentd-sandbox:latest").CombinedOutput(); err != nil {
			missing(t, "docker sandbox: the agentd-sandbox image is needed ("+strings.TrimSpace(string(out))+"; deploy/sandbox/build-rootfs.sh)")
		}
		f(t, []string{"AGENTD_SANDBOX=docker"})
	})
	t.Run("bwrap", func(t *testing.T) {
		t.Parallel()
		if _, err := exec.LookPath("bwrap"); err != nil {
			missing(t, "bwrap sandbox: bubblewrap is not installed (apt-get install bubblewrap)")
		}
		f(t, []string{"AGENTD_SANDBOX=bwrap", "AGENTD_SANDBOX_WORK_ROOT=" + reachableDir(t)})
	})
}

func missing(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(what)
	}
	t.Skip(what)
}

// reachableDir is a fresh work root the bwrap sandbox user can reach (t.TempDir
// is private to root), unmounted and removed when the test ends.
func reachableDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "agentd-e2e-sbx-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// After agentd stopped (its cleanup, registered later, runs first):
		// the tmpfs mounts of the chats' work dirs are left to the test.
		if err := unmountUnder(dir); err != nil {
			t.Errorf("unmount the sandbox work dirs: %v", err)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove the sandbox work root: %v", err)
		}
	})
	return filepath.Join(dir, "root")
}

type codeMessage struct {
	Name       string `json:"name"`
	Content    string `json:"content"`
	CodeResult *struct {
		ExitCode int    `json:"exit_code"`
		Output   string `json:"output"`
	} `json:"code_result"`
}

func TestCodeExecutionExampleInEachSandbox(t *testing.T) {
	t.Parallel()
	sandboxes(t, func(t *testing.T, env []string) {
		p := startAgentd(t, append(env, "AGENTD_DATA_DIR="+t.TempDir())...)
		c := p.create(readExample(t, "code-execution.json"))
		final := p.waitTerminal(c.ID, 60*time.Second)
		if final.Status != "completed" || *final.StopReason != "text_mention" {
			t.Fatalf("chat = %+v", final)
		}
		_, _, b := p.do("GET", "/v1/chats/"+c.ID+"/messages", nil)
		var page struct{ Messages []codeMessage }
		mustUnmarshal(t, b, &page)
		m := page.Messages[2]
		if m.Name != "executor" || m.Content != "exitcode: 0 (execution succeeded)\nCode output: 385\n" || m.CodeResult == nil || m.CodeResult.Output != "385\n" {
			t.Fatalf("executor message = %+v", m)
		}
		events, stop := p.stream(c.ID, 0)
		defer stop()
		found := false
		for _, e := range collect(t, events, 10*time.Second) {
			var em codeMessage
			if e.Type == "message" && json.Unmarshal(e.Data, &em) == nil && em.CodeResult != nil {
				found = em.CodeResult.ExitCode == 0 && em.CodeResult.Output == "385\n"
			}
		}
		if !found {
			t.Fatal("no code_result on the SSE message event")
		}
	})
}

func TestToolExamplesWithSandboxTools(t *testing.T) {
	t.Parallel()
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=bwrap", "AGENTD_SANDBOX_WORK_ROOT="+reachableDir(t))
	if _, err := exec.LookPath("bwrap"); err != nil {
		missing(t, "bubblewrap is not installed")
	}
	for name, want := range map[string][]string{
		"tic-tac-toe.json":     {"player_x", "X wins! GAME OVER", "Cell 0 is not free"},
		"caller-executor.json": {"executor", "Saved haiku.txt.", `"status": "success"`},
	} {
		c := p.create(readExample(t, name))
		final := p.waitTerminal(c.ID, 60*time.Second)
		_, _, b := p.do("GET", "/v1/chats/"+c.ID+"/messages", nil)
		if final.Status != "completed" || *final.StopReason != "text_mention" {
			t.Fatalf("%s: chat = %+v\n%s", name, final, b)
		}
		for _, w := range want {
			if !strings.Contains(string(b), strings.ReplaceAll(w, `"`, `\"`)) {
				t.Errorf("%s: the messages lack %q:\n%s", name, w, b)
			}
		}
	}
}

// TestSandboxIsGoneAfterKill9AndRestart kills agentd while code runs in a
// chat's sandbox; the restarted server finishes the chat and its sandbox is
// removed.
func TestSandboxIsGoneAfterKill9AndRestart(t *testing.T) {
	t.Parallel()
	sandboxes(t, func(t *testing.T, env []string) {
		env = append(env, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_LEASE_TTL=1s")
		p := startAgentd(t, env...)
		spec := []byte(`{"task": "wait", "max_round": 3,
			"agents": [{"name": "coder", "type": "assistant", "model": {"provider": "replay", "responses": [
			             "` + "```python\\nimport time\\nopen('started', 'w').write('1')\\ntime.sleep(2)\\nprint('slept')\\n```" + `", "done"]}},
			           {"name": "executor", "type": "user_proxy", "human_input_mode": "NEVER", "code_execution": {"timeout_s": 30}}]}`)
		c := p.create(spec)
		// Wait until the executor's turn has begun, then kill.
		for deadline := time.Now().Add(30 * time.Second); ; {
			if v := p.get(c.ID); v.Turns >= 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the coder never spoke")
			}
			p.do("GET", "/v1/chats/"+c.ID+"/messages?after=4&wait_s=1", nil)
		}
		time.Sleep(500 * time.Millisecond) // let the execution start inside the sandbox
		p.kill9()
		if sandboxLeft(t, env, c.ID) == "" {
			t.Fatal("no sandbox of the chat found while it ran: the check below would prove nothing")
		}
		p2 := startAgentd(t, env...)
		final := p2.waitTerminal(c.ID, 60*time.Second)
		msgs := p2.messages(c.ID)
		if final.Status != "completed" || len(msgs) != 4 || !strings.Contains(msgs[2].Content, "slept") {
			t.Fatalf("chat = %+v, messages %+v", final, msgs)
		}
		// The sandbox is released right after the terminal event is written.
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			left := sandboxLeft(t, env, c.ID)
			if left == "" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the chat's sandbox is still there: %s", left)
			}
		}
	})
}

// sandboxLeft describes what is left of a chat's sandbox ("" if nothing).
func sandboxLeft(t *testing.T, env []string, chatID string) string {
	if strings.Contains(strings.Join(env, " "), "AGENTD_SANDBOX=docker") {
		out, err := exec.Command("podman", "ps", "-a", "-q", "--filter", "label=agentd.chat="+chatID).Output()
		if err != nil {
			t.Fatalf("podman ps: %v", err)
		}
		if s := strings.TrimSpace(string(out)); s != "" {
			return "container " + s
		}
		return ""
	}
	var root string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "AGENTD_SANDBOX_WORK_ROOT="); ok {
			root = v
		}
	}
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if strings.Contains(e.Name(), chatID) {
			return "work dir " + e.Name()
		}
	}
	return ""
}
