package runtime

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/chat/engine"

	"github.com/agentd/agentd/internal/spec"
)

// defaultCodeTimeout bounds one code block when neither code_execution nor
// sandbox sets timeout_s (AutoGen's default is 60 s).
const defaultCodeTimeout = 60

// executeBlocks runs blocks in order in the chat's sandbox and stops at the
// first that fails, as AutoGen's executors do; the outputs are joined.
func (w *worker) executeBlocks(ctx context.Context, a *spec.Agent, blocks []engine.CodeBlock) (*chat.CodeResult, error) {
	if w.rt.sandboxes == nil {
		return nil, fmt.Errorf("agent %s executes code, but this server has no sandbox", a.Name)
	}
	timeout := engine.DerefOr(a.CodeExecution.TimeoutS, 0)
	if timeout == 0 && w.spec.Sandbox != nil {
		timeout = engine.DerefOr(w.spec.Sandbox.TimeoutS, 0)
	}
	if timeout == 0 {
		timeout = defaultCodeTimeout
	}
	var out strings.Builder
	res := &chat.CodeResult{}
	for _, b := range blocks {
		r, err := w.rt.sandboxes.Exec(ctx, &chat.ExecRequest{ChatID: w.id, Language: b.Language, Code: b.Code,
			Timeout: engine.Seconds(float64(timeout)), Limits: engine.SandboxLimits(w.spec)})
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("run code of %s in the %s sandbox: %w", a.Name, w.rt.sandboxes.Backend(), err)
		}
		out.WriteString(r.Output)
		res.ExitCode = r.ExitCode
		if r.ExitCode != 0 {
			break
		}
	}
	res.Output = out.String()
	return res, nil
}
