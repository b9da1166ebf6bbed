package tool

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/chat"
)

// callSandbox runs a sandbox tool's code in the chat's sandbox with the
// arguments as JSON on stdin. Tools of one chat share its work dir, so they
// can keep state in files (docs/tools.md).
func (r *Runner) callSandbox(ctx context.Context, req *chat.ToolRequest, impl *implementation, args arguments, timeout time.Duration) outcome {
	if r.cfg.Sandboxes == nil { // CheckTool refuses these; a persisted spec may predate a config change
		return failed(outcomeFailed, errors.New("no sandbox backend"), "this server has no code sandbox to run tool %s", req.Tool.Name)
	}
	res, err := r.cfg.Sandboxes.Exec(ctx, &chat.ExecRequest{
		ChatID:   req.ChatID,
		Language: impl.Language,
		Code:     impl.Code,
		Stdin:    args.raw,
		Timeout:  timeout,
		Limits:   req.Limits,
	})
	switch {
	case err != nil:
		return failed(outcomeFailed, err, "the sandbox could not run the tool: %v", err)
	case res == nil:
		return failed(outcomeFailed, errors.New("sandbox returned no result"), "the sandbox returned no result")
	case res.TimedOut:
		return failed(outcomeTimeout, errors.New("program timed out"), "timed out after %s%s",
			(&timeoutError{d: timeout}).seconds(), outputSuffix(res.Output))
	case res.ExitCode != 0:
		return failed(outcomeToolError, errors.New("non-zero exit"), "exit code %d%s", res.ExitCode, outputSuffix(res.Output))
	}
	return succeeded(strings.TrimSuffix(res.Output, "\n"))
}

// outputSuffix is ": " and a failed program's output, or "" when it wrote
// nothing.
func outputSuffix(out string) string {
	out = strings.TrimSuffix(out, "\n")
	if out == "" {
		return ""
	}
	return ": " + out
}
