// Package tool runs the tools a chat spec defines (docs/tools.md, docs/autogen.md): http
// tools (a POST to an operator-allowed URL), sandbox tools (a script run in
// the chat's sandbox), mcp tools (the tools of an MCP server reached over
// streamable HTTP or SSE), python_function and python_code tools
// (AgentChat's FunctionTool and PythonCodeExecutionTool, run in the
// sandbox) and http_api tools (AgentChat's HttpTool: a REST API called
// directly). It implements chat.Tools.
//
// Everything a tool call can get wrong — arguments that are not JSON or do
// not satisfy the tool's schema, timeouts, refused addresses, failing
// servers — comes back as a chat.ToolResult with IsError set and content
// starting "Error: ", never as a Go error, so a tool failure never fails a
// chat.
//
// This is the only package that imports the MCP SDK.
package tool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/netguard"
	"github.com/agentd/agentd/internal/spec"
)

// Defaults for Config's zero values.
const (
	DefaultTimeout          = 30 * time.Second
	DefaultMaxTimeout       = 120 * time.Second
	DefaultMaxResponseBytes = 1 << 20 // 1 MiB
	// DefaultMCPListTTL is how long the tool list of an MCP server is reused
	// for one chat before it is asked again: the chat describes its tools on
	// every model call, and the server should not see a listing each time.
	DefaultMCPListTTL = time.Minute
	// DefaultMCPIdleTimeout is how long an unused MCP session is kept open.
	DefaultMCPIdleTimeout = 5 * time.Minute
)

// Implementation types, the values of a tool's implementation.type and of
// the type label of the metrics.
const (
	TypeHTTP    = "http"
	TypeSandbox = "sandbox"
	TypeMCP     = "mcp"
	// TypePythonFunction runs a Python function (AgentChat's FunctionTool)
	// in the chat's sandbox; TypePythonCode runs the model's Python code
	// there (AgentChat's PythonCodeExecutionTool).
	TypePythonFunction = "python_function"
	TypePythonCode     = "python_code"
	// TypeHTTPAPI calls a REST API as AgentChat's HttpTool does.
	TypeHTTPAPI = "http_api"
)

// MCP transports, the values of an mcp tool's transport.
const (
	MCPStreamableHTTP = "streamable_http"
	MCPSSE            = "sse"
)

// Config configures a Runner. It is filled in by cmd/agentd; this package
// reads no environment.
type Config struct {
	// HTTPAllowHosts is the operator's allow-list of the hosts that http and
	// mcp tools may reach. Each entry is one of:
	//   - a host name ("tools.example.com"), any port;
	//   - a wildcard "*.example.com": every subdomain (not example.com itself),
	//     any port, or "*.example.com:443": that port only;
	//   - host:port ("tools.example.com:8443", "10.1.2.3:9000", "[fd00::1]:80");
	//   - an IP address or a CIDR ("10.1.2.3", "10.0.0.0/8", "fd00::/8").
	// Empty means any host, but then only public addresses (see AllowPrivate).
	//
	// Entries that name addresses (IP, IP:port, CIDR) also exempt those
	// addresses from the private-address rule: the operator has named them
	// explicitly, so "127.0.0.1:9000" reaches a tool server on the loopback
	// interface while the rest of the loopback range stays refused. Host
	// name entries never do: a name can be made to resolve anywhere (DNS
	// rebinding), so it only passes the host check and its addresses must
	// still be public or covered by an address entry.
	HTTPAllowHosts []string
	// AllowPrivate lets tools reach loopback, private (RFC 1918, fc00::/7),
	// link-local and CGNAT addresses: for tests and on-premises setups whose
	// tool servers live on internal networks. Unspecified, multicast and
	// reserved addresses stay refused.
	AllowPrivate bool
	// DefaultTimeout bounds a call whose implementation sets no timeout_s
	// (default 30s, or MaxTimeout if that is lower); MaxTimeout caps every
	// timeout_s (default 120s).
	DefaultTimeout time.Duration
	MaxTimeout     time.Duration
	// MaxResponseBytes caps the content of one call: the body of an http
	// tool's response and the text of an mcp tool's result (default 1 MiB).
	MaxResponseBytes int64
	// Sandboxes runs sandbox tools; nil means the server has no sandbox
	// backend, and CheckTool rejects sandbox tools.
	Sandboxes chat.Sandboxes
	// MCPListTTL (default 1m) and MCPIdleTimeout (default 5m): see
	// DefaultMCPListTTL and DefaultMCPIdleTimeout.
	MCPListTTL     time.Duration
	MCPIdleTimeout time.Duration
	// Logger receives call failures; nil discards them.
	Logger *slog.Logger
	// Registerer is where the metrics go; nil registers nothing.
	Registerer prometheus.Registerer
	// TracerProvider traces tool calls; nil: no spans.
	TracerProvider trace.TracerProvider
	// Secrets are values a tool's headers may name ({"secret": "NAME"})
	// without a spec ever holding them: API keys of MCP and tool servers.
	Secrets map[string]string
}

// withDefaults returns c with zero values replaced by the defaults.
func (c Config) withDefaults() Config {
	c.MaxTimeout = cmp.Or(c.MaxTimeout, DefaultMaxTimeout)
	// An operator who only lowers the maximum lowers the default with it.
	c.DefaultTimeout = cmp.Or(c.DefaultTimeout, min(DefaultTimeout, c.MaxTimeout))
	c.MaxResponseBytes = cmp.Or(c.MaxResponseBytes, DefaultMaxResponseBytes)
	c.MCPListTTL = cmp.Or(c.MCPListTTL, DefaultMCPListTTL)
	c.MCPIdleTimeout = cmp.Or(c.MCPIdleTimeout, DefaultMCPIdleTimeout)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem of the configuration at once, joined.
func (c Config) Validate() error {
	var errs []error
	for name, d := range map[string]time.Duration{"default timeout": c.DefaultTimeout, "max timeout": c.MaxTimeout,
		"mcp list TTL": c.MCPListTTL, "mcp idle timeout": c.MCPIdleTimeout} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("tool %s %v: must not be negative", name, d))
		}
	}
	if c.MaxResponseBytes < 0 {
		errs = append(errs, fmt.Errorf("tool max response bytes %d: must not be negative", c.MaxResponseBytes))
	}
	if d := c.withDefaults(); c.DefaultTimeout >= 0 && c.MaxTimeout >= 0 && d.DefaultTimeout > d.MaxTimeout {
		errs = append(errs, fmt.Errorf("tool default timeout %v is above the max timeout %v", d.DefaultTimeout, d.MaxTimeout))
	}
	if _, err := netguard.ParseAllowList(c.HTTPAllowHosts); err != nil {
		errs = append(errs, err)
	}
	for _, name := range sortedKeys(c.Secrets) {
		switch v := c.Secrets[name]; {
		case !secretNamePattern.MatchString(name):
			errs = append(errs, fmt.Errorf("tool secret %q: a name is 1 to 64 letters, digits, '_', '-' or '.'", name))
		case v == "" || strings.ContainsAny(v, "\r\n\x00"):
			errs = append(errs, fmt.Errorf("tool secret %q: the value must be non-empty, without CR, LF or NUL", name))
		}
	}
	return errors.Join(errs...)
}

// secretNamePattern is what a secret's name may be.
var secretNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Runner is the chat.Tools of agentd. It is safe for concurrent use; Close
// releases its MCP sessions and idle connections.
type Runner struct {
	cfg     Config
	allow   *netguard.AllowList
	log     *slog.Logger
	metrics *metrics
	tracer  trace.Tracer
	schemas *schemaCache
	// functions holds parsed python_function sources.
	functions functions

	// transport is shared by http and mcp tools. Its dialer refuses
	// addresses the policy does not allow (see internal/netguard).
	transport  *http.Transport
	httpClient *http.Client // http tools
	apiClient  *http.Client // http_api tools: no redirects, as httpx
	mcpClient  *http.Client // mcp sessions

	// ctx is cancelled by Close; MCP connects run under it rather than under
	// one caller's context, since several callers may wait for one connect.
	ctx    context.Context
	cancel context.CancelFunc

	mcp mcpPool
}

var _ chat.Tools = (*Runner)(nil)

// New validates cfg and returns a Runner.
func New(cfg Config) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("tool config: %w", err)
	}
	cfg = cfg.withDefaults()
	allow, _ := netguard.ParseAllowList(cfg.HTTPAllowHosts) // checked by Validate
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("tool metrics: %w", err)
	}
	r := &Runner{
		cfg:     cfg,
		allow:   allow,
		log:     cfg.Logger,
		metrics: m,
		schemas: newSchemaCache(schemaCacheSize),
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	r.tracer = tp.Tracer(tracerName)
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.transport = newTransport(netguard.Policy{AllowPrivate: cfg.AllowPrivate, Allow: allow})
	r.httpClient = &http.Client{Transport: traceparent{next: r.transport}, CheckRedirect: r.checkRedirect}
	r.apiClient = &http.Client{Transport: traceparent{next: r.transport},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	r.mcpClient = &http.Client{
		Transport:     capBodies{next: traceparent{next: r.transport}, max: mcpMaxBody(cfg.MaxResponseBytes)},
		CheckRedirect: r.checkRedirect,
	}
	r.mcp.init(r)
	return r, nil
}

// Close closes the MCP sessions and idle connections; MCP calls still
// running fail with an error result. Close is safe to call twice.
func (r *Runner) Close() error {
	r.cancel()
	err := r.mcp.closeAll()
	r.transport.CloseIdleConnections()
	return err
}

// ReleaseChat closes the MCP sessions of a chat that ended, rather than
// leaving them to the idle timeout. Releasing a chat with none is a no-op.
func (r *Runner) ReleaseChat(chatID string) {
	r.mcp.releaseChat(chatID)
}

// Describe returns the functions a tool offers a model: the tool itself for
// http and sandbox tools, the server's (filtered) list for an mcp tool. An
// error means the tool cannot be offered at all (an invalid definition, an
// MCP server that cannot be listed); the chat surfaces it.
func (r *Runner) Describe(ctx context.Context, chatID string, t *spec.Tool) ([]chat.ToolDef, error) {
	if t == nil {
		return nil, errors.New("describe tool: no tool given")
	}
	impl, probs := r.parseImplementation(t.Implementation)
	if len(probs) > 0 {
		return nil, fmt.Errorf("tool %q: %s", t.Name, problemsText(probs))
	}
	if impl.Type == TypeMCP {
		defs, err := r.describeMCP(ctx, chatID, impl)
		if err != nil {
			return nil, fmt.Errorf("tool %q: %w", t.Name, err)
		}
		return defs, nil
	}
	if impl.Type == TypeHTTPAPI {
		def, err := describeHTTPAPI(t)
		if err != nil {
			return nil, fmt.Errorf("tool %q: %w", t.Name, err)
		}
		return []chat.ToolDef{def}, nil
	}
	if impl.Type == TypePythonFunction || impl.Type == TypePythonCode {
		def, err := r.describeFunction(t, impl)
		if err != nil {
			return nil, fmt.Errorf("tool %q: %w", t.Name, err)
		}
		return []chat.ToolDef{def}, nil
	}
	return []chat.ToolDef{{Name: t.Name, Description: t.Description, Parameters: t.Parameters}}, nil
}

// Call runs one function call. It never returns an error and never panics:
// every failure is a result with IsError set and content starting "Error: ".
func (r *Runner) Call(ctx context.Context, req *chat.ToolRequest) (res chat.ToolResult) {
	start := time.Now()
	typ := "unknown"
	var o outcome
	ctx, span := r.tracer.Start(ctx, "tool.call", trace.WithSpanKind(trace.SpanKindClient))
	defer func() {
		if p := recover(); p != nil {
			o = failed(outcomeFailed, fmt.Errorf("panic: %v\n%s", p, debug.Stack()), "internal error in the tool runner")
		}
		r.metrics.observe(typ, o.kind, time.Since(start))
		endSpan(span, req, typ, o)
		if o.kind != outcomeOK {
			r.logFailure(req, typ, o)
		}
		res = o.result
	}()
	if req == nil || req.Tool == nil {
		o = failed(outcomeFailed, errors.New("no tool in the request"), "no tool was given for this call")
		return
	}
	impl, probs := r.parseImplementation(req.Tool.Implementation)
	if len(probs) > 0 {
		o = failed(outcomeFailed, errors.New(problemsText(probs)), "tool %s is misconfigured: %s", req.Tool.Name, problemsText(probs))
		return
	}
	typ = impl.Type
	args, msg := parseArguments(req.Arguments)
	if msg != "" {
		o = failed(outcomeInvalidArguments, errors.New(msg), "%s", msg)
		return
	}
	if impl.Type != TypePythonFunction && impl.Type != TypeHTTPAPI { // checked as pydantic checks them, in their calls
		if msg := r.validateArguments(req, impl, args); msg != "" {
			o = failed(outcomeInvalidArguments, errors.New(msg), "%s", msg)
			return
		}
	}
	timeout := r.timeout(impl)
	cctx, cancel := context.WithTimeoutCause(ctx, timeout+impl.grace(), &timeoutError{d: timeout})
	defer cancel()
	switch impl.Type {
	case TypeHTTP:
		o = r.callHTTP(cctx, req, impl, args)
	case TypeSandbox:
		o = r.callSandbox(cctx, req, impl, args, timeout)
	case TypeMCP:
		o = r.callMCP(cctx, req, impl, args)
	case TypePythonFunction:
		o = r.callPythonFunction(cctx, req, impl, args, timeout)
	case TypePythonCode:
		o = r.callPythonCode(cctx, req, args, timeout)
	case TypeHTTPAPI:
		o = r.callHTTPAPI(cctx, req, impl, args)
	}
	if o.kind != outcomeOK && o.kind != outcomeTimeout {
		// A failure caused by the deadline is a timeout, whatever layer
		// noticed it first; one caused by the caller is a cancellation.
		var te *timeoutError
		switch cause := context.Cause(cctx); {
		case errors.As(cause, &te):
			o = failed(outcomeTimeout, o.err, "timed out after %s", te.seconds())
		case ctx.Err() != nil:
			o = failed(outcomeCancelled, o.err, "the call was cancelled: %v", context.Cause(ctx))
		}
	}
	return
}

// endSpan ends a tool call's span with what the call was and how it went.
func endSpan(span trace.Span, req *chat.ToolRequest, typ string, o outcome) {
	span.SetAttributes(attribute.String("agentd.tool.type", typ), attribute.String("agentd.tool.outcome", o.kind))
	if req != nil {
		span.SetAttributes(attribute.String("chat_id", req.ChatID), attribute.String("gen_ai.tool.name", req.Function.Name),
			attribute.String("gen_ai.tool.call.id", req.CallID))
	}
	if o.kind != outcomeOK {
		span.SetStatus(codes.Error, o.kind)
		if o.err != nil {
			span.RecordError(o.err)
		}
	}
	span.End()
}

// timeout is the time a call of impl may take: its timeout_s or the
// default, capped by the operator's maximum.
func (r *Runner) timeout(impl *implementation) time.Duration {
	def := r.cfg.DefaultTimeout
	if impl.Type == TypePythonCode {
		def = codeTimeout // DockerCommandLineCodeExecutor's default
	}
	return min(cmp.Or(impl.Timeout, def), r.cfg.MaxTimeout)
}

// logFailure records a failed call with what an operator needs to find it.
func (r *Runner) logFailure(req *chat.ToolRequest, typ string, o outcome) {
	level := slog.LevelInfo // the model's or the tool's fault, not ours
	if o.kind == outcomeFailed || o.kind == outcomeTimeout {
		level = slog.LevelWarn
	}
	attrs := []any{"type", typ, "outcome", o.kind, "error", o.err}
	if req != nil {
		attrs = append(attrs, "chat_id", req.ChatID, "function", req.Function.Name, "call_id", req.CallID)
		if req.Tool != nil {
			attrs = append(attrs, "tool", req.Tool.Name)
		}
	}
	r.log.Log(context.Background(), level, "tool call failed", attrs...)
}

// Outcomes of a call, the values of the outcome label of
// agentd_tool_calls_total.
const (
	outcomeOK               = "ok"                // the tool ran and succeeded
	outcomeToolError        = "tool_error"        // the tool ran and reported failure (non-2xx, exit code, isError)
	outcomeInvalidArguments = "invalid_arguments" // not JSON, or not valid against the schema
	outcomeTimeout          = "timeout"           // the call's timeout expired
	outcomeRefused          = "refused"           // the host or address is not allowed
	outcomeFailed           = "failed"            // the tool could not be run or reached
	outcomeCancelled        = "cancelled"         // the caller gave up (chat cancelled, shutdown)
)

// outcome is a call's result plus what the metrics and the log need.
type outcome struct {
	result chat.ToolResult
	kind   string
	err    error // the detail for the log; nil when kind is ok
}

// succeeded is the outcome of a call that worked.
func succeeded(content string) outcome {
	return outcome{result: chat.ToolResult{Content: content}, kind: outcomeOK}
}

// failed is an error outcome whose content is "Error: " and the message.
func failed(kind string, err error, format string, args ...any) outcome {
	return outcome{result: chat.ToolResult{Content: "Error: " + fmt.Sprintf(format, args...), IsError: true}, kind: kind, err: err}
}

// timeoutError is the cause of a call's context when its timeout expires; it
// carries the timeout for the message.
type timeoutError struct{ d time.Duration }

func (e *timeoutError) Error() string { return "timed out after " + e.seconds() }

// seconds formats the timeout as the tool spec states it: "30s", "0.5s".
func (e *timeoutError) seconds() string {
	return strconv.FormatFloat(e.d.Seconds(), 'f', -1, 64) + "s"
}

// problemsText joins problems into one line for errors and results.
func problemsText(probs []spec.Problem) string {
	var s string
	for i, p := range probs {
		if i > 0 {
			s += "; "
		}
		if p.Path != "" {
			s += p.Path + ": "
		}
		s += p.Message
	}
	return s
}

// CheckArguments implements chat.Tools: arguments a client gives a call
// (an approval's edit) are checked as Call checks a model's.
func (r *Runner) CheckArguments(t *spec.Tool, fn chat.ToolDef, arguments string) string {
	impl, probs := r.parseImplementation(t.Implementation)
	if len(probs) > 0 {
		return "the tool is misconfigured: " + problemsText(probs)
	}
	args, msg := parseArguments(arguments)
	if msg != "" {
		return msg
	}
	if impl.Type == TypeHTTPAPI {
		if _, err := httpAPIArguments(t, args.raw); err != nil {
			return err.Error()
		}
		return ""
	}
	if impl.Type == TypePythonFunction {
		f, err := r.functions.parse(impl)
		if err == nil {
			_, err = f.Arguments(args.raw)
		}
		if err != nil {
			return err.Error()
		}
		return ""
	}
	return r.validateArguments(&chat.ToolRequest{Tool: t, Function: fn}, impl, args)
}
