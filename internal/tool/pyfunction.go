package tool

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/pyfunc"
	"github.com/agentd/agentd/internal/spec"
)

// pyfuncHarness runs one call of a python_function tool in the sandbox
// (see the file's own comment).
//
//go:embed pyfunc_harness.py
var pyfuncHarness string

// codeExecutionSchema is the parameters schema of a python_code tool:
// AgentChat's PythonCodeExecutionTool's CodeExecutionInput as pydantic
// writes it.
const codeExecutionSchema = `{"type":"object","properties":{"code":{"description":"The contents of the Python code block that should be executed","title":"Code","type":"string"}},"required":["code"],"additionalProperties":false}`

// Defaults of the implementation types that mirror AgentChat's tools.
const (
	// DefaultCodeDescription is PythonCodeExecutionTool's description,
	// which AgentChat sets whatever its config says.
	DefaultCodeDescription = "Execute Python code blocks."
	// codeTimeout is DockerCommandLineCodeExecutor's default timeout.
	codeTimeout = 60 * time.Second
	// dockerTimeoutText is what DockerCommandLineCodeExecutor appends to
	// the output of code that ran out of time.
	dockerTimeoutText = "\n Timeout"
	// sandboxTimeoutMarker ends the output of a program the sandbox cut
	// off (internal/sandbox's TimeoutMarker, AutoGen 0.2's text).
	sandboxTimeoutMarker = "\nTimeout"
)

// functions caches parsed python_function sources: a chat describes its
// tools on every model call, and parsing is cheaper than not, but not
// free.
type functions struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]functionEntry
}

type functionEntry struct {
	fn  *pyfunc.Function
	err error
}

// parse returns the parsed function of impl.
func (c *functions) parse(impl *implementation) (*pyfunc.Function, error) {
	h := sha256.New()
	for _, s := range []string{impl.SourceCode} {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	for _, im := range impl.GlobalImports {
		fmt.Fprintf(h, "%d:%s", len(im), im)
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return e.fn, e.err
	}
	e.fn, e.err = pyfunc.Parse(impl.SourceCode, impl.GlobalImports)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= schemaCacheSize {
		c.m = map[[sha256.Size]byte]functionEntry{}
	}
	c.m[key] = e
	return e.fn, e.err
}

// checkFunction reports the problems of a python_function implementation
// that only parsing its source finds: as AgentChat reads it, or as OpenAI
// Swarm does (swarm).
func (r *Runner) checkFunction(impl *implementation, swarm bool) []spec.Problem {
	if impl.SourceCode == "" {
		return nil
	}
	var err error
	if swarm {
		_, err = pyfunc.ParseSwarm(impl.SourceCode, impl.GlobalImports)
	} else {
		_, err = r.functions.parse(impl)
	}
	if err == nil {
		return nil
	}
	d := decoder{base: "/implementation"}
	key := "source_code"
	if strings.HasPrefix(err.Error(), "global_imports") {
		key = "global_imports"
	}
	d.add(key, "%v", err)
	return d.probs.Items()
}

// pythonFunctionRequest is what the harness reads on stdin.
type pythonFunctionRequest struct {
	SourceCode    string            `json:"source_code"`
	GlobalImports []json.RawMessage `json:"global_imports"`
	Function      string            `json:"function"`
	Arguments     json.RawMessage   `json:"arguments"`
	// Swarm: the result is made as OpenAI Swarm's handle_function_result
	// makes it (str(), not AgentChat's return_value_as_string).
	Swarm bool `json:"swarm"`
	// ContextVariables, when the function takes them, are passed as its
	// context_variables argument (null: it does not).
	ContextVariables json.RawMessage `json:"context_variables"`
}

// harnessResult is what the harness writes.
type harnessResult struct {
	Content *string `json:"content"`
	IsError bool    `json:"is_error"`
	// Handoff is the name of an agent the function returned.
	Handoff string `json:"handoff"`
	// ContextSet and ContextRemoved are the function's changes to the
	// context variables.
	ContextSet     json.RawMessage `json:"context_set"`
	ContextRemoved []string        `json:"context_removed"`
}

// callPythonFunction runs a python_function tool's function in the chat's
// sandbox with the arguments as pydantic would have validated them.
func (r *Runner) callPythonFunction(ctx context.Context, req *chat.ToolRequest, impl *implementation, args arguments, timeout time.Duration) outcome {
	if r.cfg.Sandboxes == nil {
		return failed(outcomeFailed, errors.New("no sandbox backend"), "this server has no code sandbox to run tool %s", req.Tool.Name)
	}
	call, err := r.functionCall(req, impl, args)
	if err != nil {
		if _, misconfigured := errors.AsType[*pyfunc.Error](err); misconfigured {
			return failed(outcomeFailed, err, "tool %s is misconfigured: %v", req.Tool.Name, err)
		}
		return failed(outcomeInvalidArguments, err, "%v", err)
	}
	stdin, err := json.Marshal(call)
	if err != nil {
		return failed(outcomeFailed, err, "could not encode the call: %v", err)
	}
	res, err := r.cfg.Sandboxes.Exec(ctx, &chat.ExecRequest{
		ChatID: req.ChatID, Language: langPython, Code: pyfuncHarness, Stdin: stdin, Timeout: timeout, Limits: req.Limits,
	})
	switch {
	case err != nil:
		return failed(outcomeFailed, err, "the sandbox could not run the function: %v", err)
	case res == nil:
		return failed(outcomeFailed, errors.New("sandbox returned no result"), "the sandbox returned no result")
	case res.TimedOut:
		return failed(outcomeTimeout, errors.New("function timed out"), "timed out after %s", (&timeoutError{d: timeout}).seconds())
	}
	// The harness writes one JSON line last; anything before it came from
	// outside the function's control (the interpreter's own warnings).
	out := strings.TrimRight(res.Output, "\n")
	if i := strings.LastIndexByte(out, '\n'); i >= 0 {
		out = out[i+1:]
	}
	var hr harnessResult
	if res.ExitCode != 0 || json.Unmarshal([]byte(out), &hr) != nil || hr.Content == nil {
		detail := strings.TrimSpace(strings.TrimSuffix(res.Output, sandboxTimeoutMarker))
		if res.ExitCode != 0 {
			return failed(outcomeToolError, fmt.Errorf("function process ended with exit code %d", res.ExitCode),
				"the function's process ended with exit code %d%s", res.ExitCode, excerptSuffix([]byte(detail), excerptBytes))
		}
		return failed(outcomeToolError, errors.New("no result from the harness"), "the function ended without a result%s", excerptSuffix([]byte(detail), excerptBytes))
	}
	if hr.IsError {
		// AgentChat's error text for a raising function is the exception's
		// own, not "Error: …".
		return outcome{result: chat.ToolResult{Content: *hr.Content, IsError: true}, kind: outcomeToolError, err: errors.New("the function raised")}
	}
	o := succeeded(*hr.Content)
	o.result.Handoff, o.result.ContextRemoved = hr.Handoff, hr.ContextRemoved
	if len(hr.ContextSet) > 0 && string(hr.ContextSet) != "null" && string(hr.ContextSet) != "{}" {
		o.result.ContextSet = hr.ContextSet
	}
	return o
}

// functionCall is the harness's request for one call: under the
// openai_swarm protocol the function as Swarm calls it (the model's
// arguments as they are), else as AgentChat's FunctionTool does (the
// arguments as pydantic validated them). A function with a
// context_variables parameter is given the chat's variables.
func (r *Runner) functionCall(req *chat.ToolRequest, impl *implementation, args arguments) (*pythonFunctionRequest, error) {
	call := &pythonFunctionRequest{SourceCode: impl.SourceCode, GlobalImports: impl.GlobalImports, Swarm: req.Protocol == spec.ProtocolOpenAISwarm}
	if call.GlobalImports == nil {
		call.GlobalImports = []json.RawMessage{}
	}
	takesContext := false
	if call.Swarm {
		fn, err := pyfunc.ParseSwarm(impl.SourceCode, impl.GlobalImports)
		if err != nil {
			return nil, err
		}
		call.Function, call.Arguments, takesContext = fn.Name, args.raw, fn.TakesContext()
	} else {
		fn, err := r.functions.parse(impl)
		if err != nil {
			return nil, err
		}
		if call.Arguments, err = fn.Arguments(args.raw); err != nil {
			return nil, err
		}
		call.Function, takesContext = fn.Name, fn.TakesContext
	}
	if takesContext {
		call.ContextVariables = req.ContextVariables
		if len(call.ContextVariables) == 0 {
			call.ContextVariables = json.RawMessage("{}")
		}
	}
	return call, nil
}

// callPythonCode runs a python_code tool (PythonCodeExecutionTool): the
// model's code in the chat's sandbox; the result is the program's output,
// whatever its exit code, as DockerCommandLineCodeExecutor reports it.
func (r *Runner) callPythonCode(ctx context.Context, req *chat.ToolRequest, args arguments, timeout time.Duration) outcome {
	if r.cfg.Sandboxes == nil {
		return failed(outcomeFailed, errors.New("no sandbox backend"), "this server has no code sandbox to run tool %s", req.Tool.Name)
	}
	var in struct {
		Code *string `json:"code"`
	}
	if err := json.Unmarshal(args.raw, &in); err != nil || in.Code == nil {
		return failed(outcomeInvalidArguments, errors.New("no code"), "arguments do not match the schema: code: is required and must be a string")
	}
	res, err := r.cfg.Sandboxes.Exec(ctx, &chat.ExecRequest{
		ChatID: req.ChatID, Language: langPython, Code: *in.Code, Timeout: timeout, Limits: req.Limits,
	})
	switch {
	case err != nil:
		return failed(outcomeFailed, err, "the sandbox could not run the code: %v", err)
	case res == nil:
		return failed(outcomeFailed, errors.New("sandbox returned no result"), "the sandbox returned no result")
	case res.TimedOut:
		return outcome{result: chat.ToolResult{Content: strings.TrimSuffix(res.Output, sandboxTimeoutMarker) + dockerTimeoutText}, kind: outcomeOK}
	}
	return succeeded(res.Output)
}

// describeFunction is the function a python_function or python_code tool
// offers a model.
func (r *Runner) describeFunction(t *spec.Tool, impl *implementation) (chat.ToolDef, error) {
	if impl.Type == TypePythonCode {
		return chat.ToolDef{Name: t.Name, Description: t.Description, Parameters: json.RawMessage(codeExecutionSchema)}, nil
	}
	fn, err := r.functions.parse(impl)
	if err != nil {
		return chat.ToolDef{}, err
	}
	return chat.ToolDef{Name: t.Name, Description: t.Description, Parameters: bytes.Clone(fn.Schema())}, nil
}

// DescribeSwarm implements chat.Tools: a python_function as OpenAI Swarm's
// function_to_json describes its function (the docstring, not the tool's
// description), every other tool as Describe does.
func (r *Runner) DescribeSwarm(ctx context.Context, chatID string, t *spec.Tool) ([]chat.ToolDef, error) {
	if t == nil {
		return nil, errors.New("describe tool: no tool given")
	}
	impl, probs := r.parseImplementation(t.Implementation)
	if len(probs) > 0 || impl.Type != TypePythonFunction {
		return r.Describe(ctx, chatID, t)
	}
	fn, err := pyfunc.ParseSwarm(impl.SourceCode, impl.GlobalImports)
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", t.Name, err)
	}
	return []chat.ToolDef{{Name: t.Name, Description: fn.Doc, Parameters: fn.Schema()}}, nil
}
