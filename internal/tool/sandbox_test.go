package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/tool"
)

func sandboxTool(impl string) *spec.Tool {
	return &spec.Tool{
		Name:           "write_file",
		Parameters:     json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		Implementation: json.RawMessage(impl),
	}
}

func TestSandboxCall(t *testing.T) {
	t.Parallel()
	got := make(chan *chat.ExecRequest, 1)
	sb := &fakeSandboxes{exec: func(ctx context.Context, req *chat.ExecRequest) (*chat.ExecResult, error) {
		got <- req
		return &chat.ExecResult{ExitCode: 0, Output: "{\"status\":\"success\"}\n\n"}, nil
	}}
	r := newRunner(t, tool.Config{Sandboxes: sb})
	spec := sandboxTool(`{"type":"sandbox","language":"python","code":"import sys\nprint(sys.stdin.read())","timeout_s":7}`)
	if probs := r.CheckTool(spec); len(probs) != 0 {
		t.Fatalf("CheckTool: %+v", probs)
	}
	req := request(spec, `{ "path": "a.txt" }`)
	req.Limits = chat.SandboxLimits{MemoryMB: 256, CPUs: 0.5, AllowHosts: []string{"pypi.org"}}
	res := r.Call(context.Background(), req)
	if res.IsError || res.Content != "{\"status\":\"success\"}\n" {
		t.Errorf("result = %+v, want stdout less one trailing newline", res)
	}
	e := <-got
	if e.ChatID != "chat-1" || e.Language != "python" || e.Code != "import sys\nprint(sys.stdin.read())" {
		t.Errorf("exec request = %+v", e)
	}
	if string(e.Stdin) != `{"path":"a.txt"}` {
		t.Errorf("stdin = %q, want the arguments as JSON", e.Stdin)
	}
	// The chat's sandbox settings, network policy included, reach the run.
	if e.Timeout != 7*time.Second || !reflect.DeepEqual(e.Limits, req.Limits) {
		t.Errorf("timeout %v, limits %+v", e.Timeout, e.Limits)
	}
}

func TestSandboxCallFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		res  *chat.ExecResult
		err  error
		want string
	}{
		{"exit code", &chat.ExecResult{ExitCode: 3, Output: "Traceback: boom\n"}, nil, "Error: exit code 3: Traceback: boom"},
		{"exit code, no output", &chat.ExecResult{ExitCode: 1}, nil, "Error: exit code 1"},
		{"timeout", &chat.ExecResult{ExitCode: -1, TimedOut: true, Output: "started\n"}, nil, "Error: timed out after 30s: started"},
		{"sandbox error", nil, errors.New("engine unreachable"), "Error: the sandbox could not run the tool: engine unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sb := &fakeSandboxes{exec: func(ctx context.Context, req *chat.ExecRequest) (*chat.ExecResult, error) {
				if req.Timeout != tool.DefaultTimeout || req.Language != "sh" {
					t.Errorf("timeout %v, language %q", req.Timeout, req.Language)
				}
				return tt.res, tt.err
			}}
			r := newRunner(t, tool.Config{Sandboxes: sb})
			res := r.Call(context.Background(), request(sandboxTool(`{"type":"sandbox","language":"sh","code":"cat"}`), `{"path":"p"}`))
			if !res.IsError || res.Content != tt.want {
				t.Errorf("result = %+v, want error %q", res, tt.want)
			}
		})
	}
}

// TestSandboxCallCancelled: a backend that does not return is cut off by
// the call's context, and a cancellation by the caller is reported as such.
func TestSandboxCallCancelled(t *testing.T) {
	t.Parallel()
	sb := &fakeSandboxes{exec: func(ctx context.Context, req *chat.ExecRequest) (*chat.ExecResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	r := newRunner(t, tool.Config{Sandboxes: sb})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := r.Call(ctx, request(sandboxTool(`{"type":"sandbox","language":"sh","code":"sleep 1000"}`), `{"path":"p"}`))
	if !res.IsError || res.Content != "Error: the call was cancelled: context canceled" {
		t.Errorf("result = %+v", res)
	}
}
