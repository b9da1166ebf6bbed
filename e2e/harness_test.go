// Package e2e tests the real agentd binary over HTTP and SSE: every test
// builds nothing but talks to processes started from the binary built in
// TestMain, with a real SQLite file or a real Postgres behind them.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/store/pgtest"
)

var binPath string

// ownerSuffix tells this test binary's sandboxes from another run's.
var ownerSuffix = strconv.Itoa(os.Getpid())

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agentd-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "agentd")
	args := []string{"build", "-o", binPath}
	if raceEnabled {
		args = append(args, "-race") // the binary under test is raced too
	}
	build := exec.Command("go", append(args, "../cmd/agentd")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build agentd:", err)
		os.Exit(1)
	}
	// Wrap stops the throwaway Postgres that pgtest may have started.
	code := pgtest.Wrap(m).Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one running agentd process.
type proc struct {
	t       *testing.T
	cmd     *exec.Cmd
	base    string // http://host:port
	logs    *syncBuffer
	exited  chan struct{}
	waitErr error
	// auth, when set, is the Authorization header of requests that do
	// not give their own (a server with API keys).
	auth string
}

// syncBuffer collects a process's log lines for failure messages.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startHelper starts a program a test needs beside agentd (a load
// balancer, a Prometheus), collecting its output. It is killed when the
// test ends, and its output is logged if the test failed.
func startHelper(t *testing.T, name string, cmd *exec.Cmd) {
	t.Helper()
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s log:\n%s", name, logs.String())
		}
	})
}

// refusesToStart runs cmd, an agentd that must refuse to start: exit with
// status 1 within 30 s. It returns what agentd wrote to stderr, which
// should say why.
func refusesToStart(t *testing.T, what string, cmd *exec.Cmd) string {
	t.Helper()
	var stderr syncBuffer
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("%s: %v, want exit status 1\n%s", what, err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s: still running after 30 s:\n%s", what, stderr.String())
	}
	return stderr.String()
}

var workRoots sync.Map // test name → bwrap work root

// workRoot is a work root for the bwrap sandboxes of one test, reachable by
// the sandbox user and removed with the test.
func workRoot(t *testing.T) string {
	if v, ok := workRoots.Load(t.Name()); ok {
		return v.(string)
	}
	dir := reachableDir(t)
	workRoots.Store(t.Name(), dir)
	return dir
}

// addrRE finds the listen address in the text or the JSON log format.
var addrRE = regexp.MustCompile(`msg="agentd serving" addr=(\S+)|"msg":"agentd serving","addr":"([^"]+)"`)

// startAgentd runs the binary with the given environment on a free loopback
// port and returns once it serves. Variables of the test's own environment
// that configure agentd are dropped so that only env counts.
func startAgentd(t *testing.T, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(binPath)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTD_") && !strings.HasPrefix(kv, "OPENAI_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// Each test labels its sandboxes with an owner of its own, so that one
	// test's reaper never takes another's containers (a deployment shares
	// one owner; these processes are separate deployments).
	owner := "agentd-test-" + ownerSuffix + "-" + strings.NewReplacer("/", "-", "_", "-").Replace(strings.ToLower(t.Name()))
	cmd.Env = append(cmd.Env, "AGENTD_ADDR=127.0.0.1:0", "AGENTD_SHUTDOWN_GRACE=10s", "AGENTD_SHUTDOWN_DRAIN=0s", "AGENTD_SANDBOX_OWNER="+owner)
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "AGENTD_SANDBOX_WORK_ROOT=") }) {
		// Where auto picks bwrap, its work dirs go below the test's own
		// directory (the same for every process of one test).
		cmd.Env = append(cmd.Env, "AGENTD_SANDBOX_WORK_ROOT="+workRoot(t))
	}
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "AGENTD_RATE_LIMIT=") }) {
		// Tests drive many chats from one address and poll them fast; the
		// rate limit has tests of its own (guard_test.go).
		cmd.Env = append(cmd.Env, "AGENTD_RATE_LIMIT=0")
	}
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, logs: &syncBuffer{}, exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.logs.Write([]byte(line + "\n"))
			if m := addrRE.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1] + m[2]:
				default:
				}
			}
		}
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		if closeBrowser, ok := browsers.Load(t); ok {
			closeBrowser.(func())()
		}
		p.stop()
		if t.Failed() {
			t.Logf("agentd log:\n%s", p.logs.String())
		}
	})
	select {
	case a := <-addr:
		p.base = "http://" + a
	case <-p.exited:
		t.Fatalf("agentd exited before serving: %v\n%s", p.waitErr, p.logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("agentd did not serve within 60s:\n%s", p.logs.String())
	}
	return p
}

// stop sends SIGTERM and waits for a clean exit (SIGKILL after 20 s).
func (p *proc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		p.t.Errorf("agentd did not stop within 20s of SIGTERM")
	}
}

// kill9 ends the process without any chance to clean up.
func (p *proc) kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// do sends a request and returns the status and body.
func (p *proc) do(method, path string, body []byte, header ...string) (int, http.Header, []byte) {
	p.t.Helper()
	req, err := http.NewRequest(method, p.base+path, bytes.NewReader(body))
	if err != nil {
		p.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if p.auth != "" {
		req.Header.Set("Authorization", p.auth)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// chatView is the part of the chat object the tests look at.
type chatView struct {
	ID           string          `json:"id"`
	Status       string          `json:"status"`
	StopReason   *string         `json:"stop_reason"`
	StopDetail   *string         `json:"stop_detail"`
	Error        *string         `json:"error"`
	Turns        int             `json:"turns"`
	MessageCount int             `json:"message_count"`
	LastSeq      int64           `json:"last_seq"`
	Usage        map[string]int  `json:"usage"`
	Metadata     json.RawMessage `json:"metadata"`
	CreatedAt    time.Time       `json:"created_at"`
	// ContextVariables are in the answers about one chat.
	ContextVariables json.RawMessage `json:"context_variables"`
}

type messageView struct {
	Seq           int64  `json:"seq"`
	Role          string `json:"role"`
	Name          string `json:"name"`
	Content       string `json:"content"`
	Team          string `json:"team"`
	ToolResponses []struct {
		Content string `json:"content"`
	} `json:"tool_responses"`
}

func (p *proc) create(spec []byte, header ...string) chatView {
	p.t.Helper()
	code, _, body := p.do("POST", "/v1/chats", spec, header...)
	if code != http.StatusCreated {
		p.t.Fatalf("create: %d %s", code, body)
	}
	conforms(p.t, "Chat", body)
	var c chatView
	mustUnmarshal(p.t, body, &c)
	return c
}

func (p *proc) get(id string) chatView {
	p.t.Helper()
	code, _, body := p.do("GET", "/v1/chats/"+id, nil)
	if code != http.StatusOK {
		p.t.Fatalf("get %s: %d %s", id, code, body)
	}
	conforms(p.t, "Chat", body)
	var c chatView
	mustUnmarshal(p.t, body, &c)
	return c
}

// waitTerminal long-polls the messages of a chat until it is terminal.
func (p *proc) waitTerminal(id string, within time.Duration) chatView {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for {
		c := p.get(id)
		if c.Status == "completed" || c.Status == "failed" || c.Status == "cancelled" {
			return c
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("chat %s still %s after %v", id, c.Status, within)
		}
		// Blocks until the chat has something after its last seq (or 5 s).
		p.do("GET", fmt.Sprintf("/v1/chats/%s/messages?after=%d&wait_s=5", id, c.LastSeq), nil)
	}
}

func (p *proc) messages(id string) []messageView {
	p.t.Helper()
	var all []messageView
	after := int64(0)
	for {
		code, _, body := p.do("GET", fmt.Sprintf("/v1/chats/%s/messages?after=%d&limit=100", id, after), nil)
		if code != http.StatusOK {
			p.t.Fatalf("messages: %d %s", code, body)
		}
		conforms(p.t, "MessageList", body)
		var page struct {
			Messages []messageView `json:"messages"`
		}
		mustUnmarshal(p.t, body, &page)
		if len(page.Messages) == 0 {
			return all
		}
		all = append(all, page.Messages...)
		after = page.Messages[len(page.Messages)-1].Seq
	}
}

// sseEvent is one event read from the stream.
type sseEvent struct {
	ID   int64
	Type string
	Data json.RawMessage
}

// stream opens the SSE stream of a chat and sends its events on the
// returned channel until the server closes the stream or stop is called.
func (p *proc) stream(id string, lastEventID int64) (events <-chan sseEvent, stop func()) {
	p.t.Helper()
	return p.streamQuery(id, "", lastEventID)
}

// streamQuery is stream with a query string ("follow=true").
func (p *proc) streamQuery(id, query string, lastEventID int64) (events <-chan sseEvent, stop func()) {
	p.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	url := p.base + "/v1/chats/" + id + "/events"
	if query != "" {
		url += "?" + query
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	if lastEventID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastEventID, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		p.t.Fatalf("open stream: %v", err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		cancel()
		p.t.Fatalf("stream: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	ch := make(chan sseEvent)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Type != "" {
					select {
					case ch <- ev:
					case <-ctx.Done():
						return
					}
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "id: "):
				ev.ID, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
			case strings.HasPrefix(line, "event: "):
				ev.Type = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.Data = json.RawMessage(strings.TrimPrefix(line, "data: "))
			}
		}
	}()
	return ch, cancel
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

func readExample(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
