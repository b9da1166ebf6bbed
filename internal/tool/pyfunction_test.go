package tool_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/sandbox"
	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/tool"
)

// openSandbox opens a real sandbox backend: a missing one skips the test,
// or fails it with CI=true.
func openSandbox(t *testing.T, backend string) sandbox.Manager {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	cfg := sandbox.Config{
		Backend: backend, DockerHost: sandbox.ResolveDockerHost(os.Getenv("DOCKER_HOST")), Image: os.Getenv("AGENTD_SANDBOX_IMAGE"),
		WorkRoot: root, DefaultMemoryMB: 256, DefaultTimeout: 20 * time.Second, PidsLimit: 64, OutputLimit: 1 << 20,
		Owner: "agentd-tooltest-" + hex.EncodeToString(b),
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := sandbox.Open(ctx, cfg)
	if err != nil {
		if os.Getenv("CI") == "true" || !errors.Is(err, sandbox.ErrNoSandbox) {
			t.Fatalf("the %s sandbox is unavailable: %v", backend, err)
		}
		t.Skipf("%s sandbox unavailable: %v", backend, err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// functionCalls is testdata/agentchat_function_calls.json, recorded by
// e2e/autogen/components/functions.py: two FunctionTools loaded by
// AgentChat 0.7.5 and the result text and error flag of each call.
type functionCalls struct {
	Functions map[string]struct {
		SourceCode    string            `json:"source_code"`
		GlobalImports []json.RawMessage `json:"global_imports"`
	} `json:"functions"`
	Calls []struct {
		Function  string          `json:"function"`
		Arguments json.RawMessage `json:"arguments"`
		Content   string          `json:"content"`
		IsError   bool            `json:"is_error"`
	} `json:"calls"`
}

func functionTool(t *testing.T, name, source string, imports []json.RawMessage) *spec.Tool {
	t.Helper()
	impl, err := json.Marshal(map[string]any{"type": "python_function", "source_code": source, "global_imports": imports})
	if err != nil {
		t.Fatal(err)
	}
	return &spec.Tool{Name: name, Description: "A function.", Implementation: impl}
}

// callFunction describes the tool and calls it as the chat does.
func callFunction(t *testing.T, r *tool.Runner, chatID string, tl *spec.Tool, args string, limits chat.SandboxLimits) chat.ToolResult {
	t.Helper()
	defs, err := r.Describe(context.Background(), chatID, tl)
	if err != nil || len(defs) != 1 {
		t.Fatalf("Describe: %v, %d functions", err, len(defs))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return r.Call(ctx, &chat.ToolRequest{ChatID: chatID, Tool: tl, Function: defs[0], CallID: "call_1", Arguments: args, Limits: limits})
}

// TestPythonFunctionMatchesAgentChat runs the recorded calls in each real
// sandbox backend: every result text and error flag must be AgentChat's.
func TestPythonFunctionMatchesAgentChat(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/agentchat_function_calls.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx functionCalls
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatal(err)
	}
	for _, backend := range []string{sandbox.BackendDocker, sandbox.BackendBwrap} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			sb := openSandbox(t, backend)
			r := newRunner(t, tool.Config{Sandboxes: sb, DefaultTimeout: 30 * time.Second})
			chatID := "fn" + backend
			t.Cleanup(func() { _ = sb.Release(context.Background(), chatID) })
			tools := map[string]*spec.Tool{}
			for name, f := range fx.Functions {
				tools[name] = functionTool(t, name, f.SourceCode, f.GlobalImports)
				if probs := r.CheckTool(tools[name]); len(probs) > 0 {
					t.Fatalf("CheckTool %s: %+v", name, probs)
				}
			}
			for _, c := range fx.Calls {
				res := callFunction(t, r, chatID, tools[c.Function], string(c.Arguments), chat.SandboxLimits{})
				if res.Content != c.Content || res.IsError != c.IsError {
					t.Errorf("%s(%s) = %q (error %v), AgentChat: %q (error %v)", c.Function, c.Arguments, res.Content, res.IsError, c.Content, c.IsError)
				}
			}
		})
	}
}

// TestPythonFunctionContained runs functions that try to leave the
// sandbox or exhaust it: each gets an error result (or a result showing
// it was refused), and the next call in the same chat works.
func TestPythonFunctionContained(t *testing.T) {
	t.Parallel()
	// A file any user of the host may read, in directories any user may
	// pass through: only its absence from the sandbox keeps it out, not
	// the permissions of a private t.TempDir().
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(dir, "host-secret.txt")
	if err := os.WriteFile(secret, []byte("host secret 8d1f"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`def escape(kind: str) -> str:
    import os, socket, subprocess
    if kind == "network":
        s = socket.create_connection(("1.1.1.1", 53), timeout=3)
        return "connected"
    if kind == "dns":
        import urllib.request
        return urllib.request.urlopen("http://example.com", timeout=3).read().decode()
    if kind == "host_file":
        return open(%q).read()
    if kind == "env":
        return " ".join(sorted(k for k in os.environ if "KEY" in k or "SECRET" in k or "DATABASE" in k))
    if kind == "fork_bomb":
        while True:
            os.fork()
    if kind == "memory":
        blocks = []
        for _ in range(10 * 1024):
            blocks.append(bytearray(1024 * 1024))
        return "allocated 10 GB"
    if kind == "sleep":
        import time
        time.sleep(600)
    return "ok"
`, secret)
	for _, backend := range []string{sandbox.BackendDocker, sandbox.BackendBwrap} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			sb := openSandbox(t, backend)
			r := newRunner(t, tool.Config{Sandboxes: sb, DefaultTimeout: 20 * time.Second})
			chatID := "contain" + backend
			t.Cleanup(func() { _ = sb.Release(context.Background(), chatID) })
			tl := functionTool(t, "escape", src, nil)
			limits := chat.SandboxLimits{MemoryMB: 128}
			for _, c := range []struct {
				kind string
				want []string // the result must be an error containing one of these ("": an empty error text)
			}{
				{"network", []string{"Network is unreachable", "network is unreachable", "Errno 101", "Errno 99", "Cannot assign"}},
				{"dns", []string{"urlopen error", "Name or service not known", "Temporary failure in name resolution", "Errno -3", "Errno -2"}},
				{"host_file", []string{"No such file or directory"}},
				{"fork_bomb", []string{"Resource temporarily unavailable", "timed out", "exit code"}},
				{"memory", []string{"exit code 137", "memory limit", ""}}, // "": MemoryError's text, as AgentChat gives it
				{"sleep", []string{"timed out"}},
			} {
				args := fmt.Sprintf(`{"kind": %q}`, c.kind)
				if c.kind == "sleep" {
					tl2 := functionTool(t, "escape", src, nil)
					tl2.Implementation = json.RawMessage(strings.Replace(string(tl2.Implementation), `"type"`, `"timeout_s":2,"type"`, 1))
					res := callFunction(t, r, chatID, tl2, args, limits)
					checkContained(t, c.kind, res, c.want)
					continue
				}
				res := callFunction(t, r, chatID, tl, args, limits)
				checkContained(t, c.kind, res, c.want)
				if ok := callFunction(t, r, chatID, tl, `{"kind": "fine"}`, limits); ok.IsError || ok.Content != "ok" {
					t.Errorf("after %s, a plain call = %+v", c.kind, ok)
				}
			}
			if res := callFunction(t, r, chatID, tl, `{"kind": "env"}`, limits); res.IsError || res.Content != "" {
				t.Errorf("the function sees secrets in its environment: %+v", res)
			}
		})
	}
}

func checkContained(t *testing.T, kind string, res chat.ToolResult, want []string) {
	t.Helper()
	if !res.IsError {
		t.Errorf("%s: not an error: %q", kind, res.Content)
		return
	}
	for _, w := range want {
		if w == "" && res.Content == "" || w != "" && strings.Contains(res.Content, w) {
			t.Logf("%s: %s", kind, res.Content)
			return
		}
	}
	t.Errorf("%s: error %q contains none of %q", kind, res.Content, want)
}
