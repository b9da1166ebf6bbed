package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/netguard"
	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/spec/problem"
)

// namePattern is what OpenAI accepts as a function name; a tool a model
// cannot call is a mistake better reported at create time.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Sandbox languages a sandbox tool may be written in.
const (
	langPython = "python"
	langShell  = "sh"
)

// sandboxGrace is added to a sandbox tool's timeout for the call's context:
// the sandbox enforces the timeout on the program itself and reports it, and
// the first call of a chat also pays for creating its sandbox. The context
// deadline is only the backstop for a backend that does not return.
const sandboxGrace = 15 * time.Second

// fieldsByType lists the fields each implementation type allows; anything
// else is a problem (strict decoding, as for the rest of the spec).
var fieldsByType = map[string][]string{
	TypeHTTP:    {"type", "url", "timeout_s", "headers"},
	TypeSandbox: {"type", "language", "code", "timeout_s"},
	TypeMCP:     {"type", "url", "timeout_s", "tools", "transport", "headers"},
	// python_function mirrors AgentChat's FunctionToolConfig: source_code,
	// global_imports and name (the tool's name, optional here since the
	// tool has one; its description is the tool's). The function called is
	// the one AgentChat calls: the name after the source's first "def ".
	TypePythonFunction: {"type", "source_code", "global_imports", "name", "timeout_s"},
	TypePythonCode:     {"type", "timeout_s"},
	// http_api mirrors AgentChat's HttpToolConfig: its scheme, host, port
	// and path make the url, json_schema is the tool's parameters.
	TypeHTTPAPI: {"type", "url", "method", "headers", "return_type", "timeout_s"},
}

// reservedHeaders are set by the runner or by net/http; a spec may not
// override them (an Idempotency-Key of its own would defeat deduplication).
var reservedHeaders = []string{"Connection", "Content-Length", "Content-Type", "Expect", "Host",
	"Idempotency-Key", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// mcpReservedHeaders are set by the MCP client on a session's requests.
var mcpReservedHeaders = []string{"Accept", "Last-Event-Id", "Mcp-Protocol-Version", "Mcp-Session-Id"}

// implementation is a decoded and checked tool implementation object.
type implementation struct {
	Type string
	// URL of http and mcp tools.
	URL *url.URL
	// Timeout is timeout_s; zero means the server default.
	Timeout time.Duration
	// Headers are extra request headers of http and mcp tools, and
	// SecretHeaders those whose value is a server-side secret (header name
	// → secret name), resolved when a request is made.
	Headers       map[string]string
	SecretHeaders map[string]string
	// Transport of an mcp tool: "streamable_http" (default) or "sse".
	Transport string
	// Language and Code of sandbox tools.
	Language string
	Code     string
	// Tools is the mcp allow-list of the server's tool names; nil means all.
	Tools []string
	// Method, ReturnType, PathTemplate (the url's path as written, with
	// its {name} parameters) and PathParams of http_api tools.
	Method, ReturnType, PathTemplate string
	PathParams                       []string
	// SourceCode, GlobalImports and Name of python_function tools.
	SourceCode    string
	GlobalImports []json.RawMessage
	Name          string
}

// grace is the time a call may take beyond its timeout (see sandboxGrace).
func (impl *implementation) grace() time.Duration {
	if impl.Type == TypeSandbox || impl.Type == TypePythonFunction || impl.Type == TypePythonCode {
		return sandboxGrace
	}
	return 0
}

// CheckTool validates one tool definition at create time and reports every
// problem, with JSON pointers relative to the tool.
func (r *Runner) CheckTool(t *spec.Tool) []spec.Problem { return r.checkTool(t, false) }

// CheckSwarmTool is CheckTool for a chat of the openai_swarm protocol: a
// python_function's source is read as OpenAI Swarm's function_to_json reads
// the function, which takes any signature.
func (r *Runner) CheckSwarmTool(t *spec.Tool) []spec.Problem { return r.checkTool(t, true) }

func (r *Runner) checkTool(t *spec.Tool, swarm bool) []spec.Problem {
	if t == nil {
		return []spec.Problem{{Path: "", Message: "is required"}}
	}
	var probs problem.List
	if !namePattern.MatchString(t.Name) {
		probs.Add("/name", "must match ^[A-Za-z0-9_-]{1,64}$")
	}
	impl, implProbs := r.parseImplementation(t.Implementation)
	probs.AddAll("", implProbs)
	if impl != nil && impl.Type == TypePythonFunction && impl.Name != "" && impl.Name != t.Name {
		probs.Add("/implementation/name", "is the tool's name (as in AgentChat's FunctionToolConfig) and must be %q, or be omitted", t.Name)
	}
	hasParams := len(bytes.TrimSpace(t.Parameters)) > 0 && string(bytes.TrimSpace(t.Parameters)) != "null"
	switch {
	case impl != nil && impl.Type == TypeMCP:
		if hasParams {
			probs.Add("/parameters", "must be omitted for an mcp tool: the server describes its tools' parameters")
		}
	case impl != nil && impl.Type == TypePythonFunction:
		if hasParams {
			probs.Add("/parameters", "must be omitted for a python_function tool: the function's signature describes its parameters")
		}
		if len(implProbs) == 0 {
			probs.AddAll("", r.checkFunction(impl, swarm))
		}
	case impl != nil && impl.Type == TypePythonCode:
		if hasParams {
			probs.Add("/parameters", "must be omitted for a python_code tool: its one parameter is the code")
		}
	case impl != nil && impl.Type == TypeHTTPAPI:
		if !hasParams {
			probs.Add("/parameters", "is required: the JSON Schema of the API's parameters (HttpTool's json_schema)")
		} else if p := checkSchema(t.Parameters, "/parameters"); len(p) > 0 {
			probs.AddAll("", p)
		} else if len(implProbs) == 0 {
			probs.AddAll("", checkHTTPAPIParameters(t, impl))
		}
	case !hasParams:
		if impl != nil { // an unknown type is already a problem
			probs.Add("/parameters", "is required: a JSON Schema of type object")
		}
	default:
		probs.AddAll("", checkSchema(t.Parameters, "/parameters"))
	}
	return probs.Items()
}

// parseImplementation decodes a tool's implementation strictly and checks it
// against this server's configuration (allow-list, sandbox backend). The
// implementation is nil when its type is unknown; it is only usable when
// there are no problems. Call and Describe run it again, so a spec persisted
// under an older configuration cannot get around a tightened one.
func (r *Runner) parseImplementation(raw json.RawMessage) (*implementation, []spec.Problem) {
	const base = "/implementation"
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, []spec.Problem{{Path: base, Message: "is required: an object with type http, sandbox, mcp, python_function, python_code or http_api"}}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, []spec.Problem{{Path: base, Message: "must be an object with type http, sandbox, mcp, python_function, python_code or http_api"}}
	}
	d := decoder{fields: fields, base: base}
	impl := &implementation{Type: d.str("type", true)}
	allowed, ok := fieldsByType[impl.Type]
	if !ok {
		if _, given := fields["type"]; given && d.probs.Len() == 0 {
			d.add("type", "must be http, sandbox, mcp, python_function, python_code or http_api, not %q", impl.Type)
		}
		return nil, d.probs.Items()
	}
	for _, k := range sortedKeys(fields) {
		if !slices.Contains(allowed, k) {
			d.add(k, "unknown field (an %s implementation has %s)", impl.Type, strings.Join(allowed, ", "))
		}
	}
	impl.Timeout = d.seconds("timeout_s")
	switch impl.Type {
	case TypeHTTP:
		impl.URL = r.checkURL(&d, d.str("url", true))
		impl.Headers, impl.SecretHeaders = d.headers("headers", r.cfg.Secrets, nil)
	case TypeHTTPAPI:
		r.checkHTTPAPI(&d, impl)
	case TypeMCP:
		impl.URL = r.checkURL(&d, d.str("url", true))
		impl.Tools = d.names("tools")
		impl.Headers, impl.SecretHeaders = d.headers("headers", r.cfg.Secrets, mcpReservedHeaders)
		switch impl.Transport = d.str("transport", false); impl.Transport {
		case "", MCPStreamableHTTP, MCPSSE:
		default:
			d.add("transport", "must be %s or %s, not %q", MCPStreamableHTTP, MCPSSE, impl.Transport)
		}
	case TypeSandbox:
		switch impl.Language = d.str("language", true); impl.Language {
		case langPython, langShell, "":
		default:
			d.add("language", "must be python or sh, not %q", impl.Language)
		}
		if impl.Code = d.str("code", true); strings.TrimSpace(impl.Code) == "" {
			if _, given := fields["code"]; given {
				d.add("code", "must not be empty")
			}
		}
		if r.cfg.Sandboxes == nil {
			d.add("type", "sandbox tools need a code sandbox and this server has none: "+
				"the operator enables one with AGENTD_SANDBOX (docker or bwrap)")
		}
	case TypePythonFunction:
		if impl.SourceCode = d.str("source_code", true); strings.TrimSpace(impl.SourceCode) == "" {
			if _, given := fields["source_code"]; given {
				d.add("source_code", "must not be empty")
			}
		}
		if v := d.value("global_imports"); v != nil {
			if err := json.Unmarshal(v, &impl.GlobalImports); err != nil {
				d.add("global_imports", "must be a list of imports: a module name, {\"name\", \"alias\"} or {\"module\", \"imports\"}")
			}
		}
		impl.Name = d.str("name", false)
		if r.cfg.Sandboxes == nil {
			d.add("type", "python_function tools run in a code sandbox and this server has none: "+
				"the operator enables one with AGENTD_SANDBOX (docker or bwrap)")
		}
	case TypePythonCode:
		if r.cfg.Sandboxes == nil {
			d.add("type", "python_code tools run in a code sandbox and this server has none: "+
				"the operator enables one with AGENTD_SANDBOX (docker or bwrap)")
		}
	}
	return impl, d.probs.Items()
}

// checkURL parses the url of an http or mcp tool. Only its form and the
// allow-list are checked here; the address it resolves to is checked when
// it is dialed (DNS can change between create time and call time).
func (r *Runner) checkURL(d *decoder, s string) *url.URL {
	if s == "" {
		return nil
	}
	u, msg := r.CheckURL(s)
	if msg != "" {
		d.add("url", "%s", msg)
	}
	return u
}

// CheckURL parses a URL that the server is to call and applies the
// create-time half of the address rules to it: an absolute http(s) URL
// without credentials, whose host is on the allow-list and is not an
// address (or localhost) that the dialer would refuse. It returns the URL
// without its fragment, or why it is refused. Tools and webhooks share it.
func (r *Runner) CheckURL(s string) (*url.URL, string) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, fmt.Sprintf("is not a valid URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, "must be an absolute http or https URL"
	case u.Hostname() == "":
		return nil, "has no host"
	case u.User != nil:
		// Credentials in a URL end up in logs and error messages; headers
		// do not.
		return nil, "must not contain credentials: use headers"
	case !r.allow.AllowsURL(u):
		return nil, fmt.Sprintf("host %s is not in this server's allow-list of tool hosts", u.Host)
	case r.refusedHost(u) != "":
		return nil, r.refusedHost(u)
	}
	u.Fragment, u.RawFragment = "", ""
	return u, ""
}

// Transport is the transport of tool requests: its dialer refuses every
// address the policy does not allow, after DNS resolution (see internal/netguard).
// Other outbound requests of the server that must obey the same rules
// (webhooks) use it too; they bring their own redirect policy.
func (r *Runner) Transport() http.RoundTripper { return r.transport }

// refusedHost says why a URL can be refused already at create time ("" if it
// cannot): its host is a literal address the dialer would refuse, or
// localhost, which resolves to loopback. Other names are judged when dialed,
// after resolution (see internal/netguard); this only turns a certain failure of every
// call into a 422 at create.
func (r *Runner) refusedHost(u *url.URL) string {
	port := uint16(80)
	if u.Scheme == "https" {
		port = 443
	}
	if p, err := strconv.ParseUint(u.Port(), 10, 16); err == nil {
		port = uint16(p)
	}
	refused := func(a netip.Addr) (string, bool) {
		why, always := netguard.Blocked(a)
		if why == "" || !always && (r.cfg.AllowPrivate || r.allow.Exempts(netip.AddrPortFrom(a.WithZone("").Unmap(), port))) {
			return "", false
		}
		return why, true
	}
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		if why, ok := refused(a); ok {
			return fmt.Sprintf("address %s is %s, and tools may only reach public addresses unless the operator allows it", host, why)
		}
		return ""
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h != "localhost" && !strings.HasSuffix(h, ".localhost") {
		return ""
	}
	_, v4 := refused(netip.MustParseAddr("127.0.0.1"))
	_, v6 := refused(netip.IPv6Loopback())
	if v4 && v6 {
		return fmt.Sprintf("host %s is loopback, and tools may only reach public addresses unless the operator allows it", host)
	}
	return ""
}

// decoder reads fields of one JSON object and collects problems with paths.
type decoder struct {
	fields map[string]json.RawMessage
	base   string
	probs  problem.List
}

// add records a problem at the field key.
func (d *decoder) add(key, format string, args ...any) {
	d.probs.Add(problem.Key(d.base, key), format, args...)
}

// value returns the raw field, or nil when it is absent or null (an
// explicit null is taken as "not set").
func (d *decoder) value(key string) json.RawMessage {
	v, ok := d.fields[key]
	if !ok || string(bytes.TrimSpace(v)) == "null" {
		return nil
	}
	return v
}

// str reads a string field.
func (d *decoder) str(key string, required bool) string {
	v := d.value(key)
	if v == nil {
		if required {
			d.add(key, "is required")
		}
		return ""
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		d.add(key, "must be a string")
	}
	return s
}

// seconds reads a positive number of seconds (fractions allowed). Values
// above the operator's maximum are capped at call time, not refused: the
// maximum is server configuration that may change under a persisted spec.
func (d *decoder) seconds(key string) time.Duration {
	v := d.value(key)
	if v == nil {
		return 0
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil || math.IsNaN(f) || f <= 0 {
		d.add(key, "must be a number of seconds greater than 0")
		return 0
	}
	return time.Duration(min(f, 24*3600) * float64(time.Second))
}

// headers reads an object of extra request headers: each value is a
// string, sent as it is, or {"secret": "NAME"}, the value of the server's
// secret NAME (AGENTD_TOOL_SECRETS), which a spec names but never holds.
func (d *decoder) headers(key string, secrets map[string]string, reserved []string) (literal, secret map[string]string) {
	v := d.value(key)
	if v == nil {
		return nil, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(v, &raw); err != nil {
		d.add(key, `must be an object of header names to string values or {"secret": "NAME"}`)
		return nil, nil
	}
	literal = make(map[string]string, len(raw))
	for _, name := range sortedKeys(raw) {
		path := problem.Key(problem.Key(d.base, key), name)
		var val string
		var ref struct {
			Secret *string `json:"secret"`
		}
		switch {
		case !isToken(name):
			d.probs.Add(path, "is not a valid header name")
		case slices.ContainsFunc(reservedHeaders, func(r string) bool { return strings.EqualFold(r, name) }),
			slices.ContainsFunc(reserved, func(r string) bool { return strings.EqualFold(r, name) }):
			d.probs.Add(path, "is set by the server and cannot be configured")
		case json.Unmarshal(raw[name], &val) == nil:
			if strings.ContainsAny(val, "\r\n\x00") {
				d.probs.Add(path, "must not contain CR, LF or NUL")
				continue
			}
			literal[name] = val
		case strictUnmarshal(raw[name], &ref) == nil && ref.Secret != nil:
			if _, ok := secrets[*ref.Secret]; !ok {
				d.probs.Add(path+"/secret", "names no secret of this server: the operator defines secrets with AGENTD_TOOL_SECRETS (%s)", secretNames(secrets))
				continue
			}
			if secret == nil {
				secret = map[string]string{}
			}
			secret[name] = *ref.Secret
		default:
			d.probs.Add(path, `must be a string or {"secret": "NAME"}`)
		}
	}
	return literal, secret
}

// strictUnmarshal decodes raw into v, refusing unknown fields.
func strictUnmarshal(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// secretNames lists the names of the configured secrets for a message.
func secretNames(secrets map[string]string) string {
	if len(secrets) == 0 {
		return "none is defined"
	}
	return "defined: " + strings.Join(sortedKeys(secrets), ", ")
}

// requestHeaders is every header a request of impl carries: the literal
// ones and the secrets' values.
func (r *Runner) requestHeaders(impl *implementation) map[string]string {
	h := make(map[string]string, len(impl.Headers)+len(impl.SecretHeaders))
	for k, v := range impl.Headers {
		h[k] = v
	}
	for k, name := range impl.SecretHeaders {
		h[k] = r.cfg.Secrets[name]
	}
	return h
}

// names reads a non-empty list of function names (an mcp tool's tools).
func (d *decoder) names(key string) []string {
	v := d.value(key)
	if v == nil {
		return nil
	}
	var names []string
	if err := json.Unmarshal(v, &names); err != nil {
		d.add(key, "must be a list of tool names")
		return nil
	}
	if len(names) == 0 {
		d.add(key, "must name at least one tool, or be omitted to offer all of the server's tools")
	}
	for i, n := range names {
		if !namePattern.MatchString(n) {
			d.probs.Add(problem.Index(problem.Key(d.base, key), i), "must match ^[A-Za-z0-9_-]{1,64}$")
		}
	}
	return names
}

// isToken reports whether s is an HTTP token (RFC 9110 §5.6.2), the syntax
// of a header name.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// sortedKeys returns m's keys in order, so problems come out stable.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
