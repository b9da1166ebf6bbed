package chat

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentd/agentd/internal/spec"
)

// Sandboxes runs code in one isolated sandbox per chat (docs/tools.md).
// internal/sandbox implements it with a Docker-API engine or bubblewrap.
// Code from a model is hostile input: an implementation never runs it on the
// host directly.
type Sandboxes interface {
	// Backend names the isolation in use ("docker", "bwrap").
	Backend() string
	// Exec runs one program in the chat's sandbox, creating the sandbox on
	// first use; files in the work dir persist between calls of one chat.
	// A program that fails, times out or is killed is a result, not an
	// error: err is for a sandbox that could not run it at all.
	Exec(ctx context.Context, req *ExecRequest) (*ExecResult, error)
	// Release removes the chat's sandbox and work dir (the chat ended).
	// Releasing a chat that has none is not an error.
	Release(ctx context.Context, chatID string) error
}

// ExecRequest is one program to run in a chat's sandbox.
type ExecRequest struct {
	ChatID string
	// Language is a canonical language: "python" or "sh".
	Language string
	Code     string
	// Stdin is given to the program (the sandbox tool's JSON arguments).
	Stdin   []byte
	Timeout time.Duration
	Limits  SandboxLimits
}

// SandboxLimits are the spec's sandbox settings; zero means the server default.
type SandboxLimits struct {
	MemoryMB int
	CPUs     float64
	DiskMB   int
	// AllowHosts are the hosts the program may reach through the egress
	// proxy (the spec's sandbox.network.allow, checked against the
	// operator's list at create time); empty: no network at all. Every
	// sandboxed run of a chat (code blocks, sandbox tools) gets the same.
	AllowHosts []string
}

// ExecResult is what a program did: AutoGen's CodeExecutionResult plus
// whether it was cut short.
type ExecResult struct {
	ExitCode int
	// Output is stdout and stderr interleaved as written, capped; a capped
	// output ends with a marker saying so.
	Output    string
	TimedOut  bool
	Truncated bool
}

// Tools runs the tools a spec defines (docs/tools.md). internal/tool
// implements it for http, mcp and sandbox tools.
type Tools interface {
	// CheckTool validates one tool definition at create time: its
	// parameters schema and implementation. Paths are JSON pointers
	// relative to the tool ("/parameters", "/implementation/url").
	CheckTool(t *spec.Tool) []spec.Problem
	// CheckSwarmTool is CheckTool under the openai_swarm protocol.
	CheckSwarmTool(t *spec.Tool) []spec.Problem
	// Describe returns the functions a tool offers a model: the tool itself
	// for http and sandbox tools, the server's list for an mcp tool.
	Describe(ctx context.Context, chatID string, t *spec.Tool) ([]ToolDef, error)
	// DescribeSwarm is Describe under the openai_swarm protocol: a
	// python_function is described as OpenAI Swarm's function_to_json
	// describes the function (docs/openai-swarm.md).
	DescribeSwarm(ctx context.Context, chatID string, t *spec.Tool) ([]ToolDef, error)
	// Call runs one function call. It never fails the chat: unparsable
	// arguments, arguments that fail the schema, timeouts and execution
	// errors all come back as a result with IsError set and content
	// starting "Error: ".
	Call(ctx context.Context, req *ToolRequest) ToolResult
	// CheckArguments checks arguments a client gives a call (an approval's
	// edit) as Call would, against the function fn of tool t; it returns
	// what is wrong, or "".
	CheckArguments(t *spec.Tool, fn ToolDef, arguments string) string
	// ReleaseChat drops what the tools keep for a chat that ended (open
	// MCP sessions).
	ReleaseChat(chatID string)
}

// ToolRequest is one call of one function of a tool.
type ToolRequest struct {
	ChatID string
	// Tool is the spec entry that provides the function.
	Tool *spec.Tool
	// Function is what Describe returned for the called name; its
	// Parameters are the schema the arguments must satisfy.
	Function ToolDef
	// CallID is the model's tool_call id; with ChatID it makes the
	// Idempotency-Key of http tools, so a call redone after a crash can be
	// recognised by the tool server.
	CallID    string
	Arguments string
	// Limits are the chat's sandbox settings, for sandbox tools.
	Limits SandboxLimits
	// Protocol is spec.ProtocolOpenAISwarm when a python_function is
	// called as OpenAI Swarm calls it: the model's arguments as they are,
	// the result as str() makes it.
	Protocol string
	// ContextVariables are the chat's context variables (a JSON object),
	// given to a python_function that takes them.
	ContextVariables json.RawMessage
}

// ToolResult is the outcome of a tool call.
type ToolResult struct {
	Content string
	IsError bool
	// Handoff is the agent a python_function returned (Swarm's Agent, or
	// a Result's agent), by name.
	Handoff string
	// ContextSet and ContextRemoved are the changes a python_function
	// made to the context variables: a Result's context_variables and what
	// it changed in the dict it was given.
	ContextSet     json.RawMessage
	ContextRemoved []string
}
