package component

import (
	"bytes"
	"cmp"
	"encoding/json"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/spec/problem"
)

// Tool providers translated here: they run in agentd's sandbox.
const (
	provFunctionTool = "autogen_core.tools.FunctionTool"
	provCodeTool     = "autogen_ext.tools.code_execution.PythonCodeExecutionTool"
	provHTTPTool     = "autogen_ext.tools.http.HttpTool"

	// codeToolName and codeToolDescription are what PythonCodeExecutionTool
	// calls itself, whatever its config says.
	codeToolName        = "CodeExecutor"
	codeToolDescription = "Execute Python code blocks."
)

// toolProviders are the tools an agent (or a static workbench) may hold.
var toolProviders = []string{provFunctionTool, provCodeTool, provHTTPTool, provMcpHTTPAdapter, provMcpSseAdapter}

// HttpToolConfig's defaults (AgentChat 0.7.5).
const (
	httpToolTimeout     = 5.0
	httpToolDescription = "HTTP tool"
)

// httpTool translates an HttpTool into an http_api tool: agentd calls the
// REST API as HttpTool does. Its json_schema is the tool's parameters; the
// runner checks both (with the paths mapped back here).
func (tr *translator) httpTool(c *comp, a *spec.Agent) {
	cfg := c.cfg
	name := cfg.required("name")
	// A description left out is HttpTool's default; one given as null is
	// none (AgentChat passes the None on).
	desc := httpToolDescription
	if _, given := cfg.m["description"]; given {
		desc = ""
	}
	if d := cfg.str("description"); d != nil {
		desc = *d
	}
	scheme := "http"
	if s := cfg.str("scheme"); s != nil {
		scheme = *s
	}
	if scheme != "http" && scheme != "https" {
		tr.r.problem(cfg.at("scheme"), "must be http or https")
	}
	host := cfg.required("host")
	port := cfg.integer("port")
	if port == nil && !cfg.has("port") {
		tr.r.problem(cfg.at("port"), "is required")
	}
	path := "/"
	if p := cfg.str("path"); p != nil {
		path = *p
	}
	if !strings.HasPrefix(path, "/") {
		tr.r.problem(cfg.at("path"), "must begin with '/' (httpx refuses a path without one)")
	}
	impl := map[string]any{"type": "http_api", "method": "POST", "return_type": "text", "timeout_s": httpToolTimeout}
	if m := cfg.str("method"); m != nil {
		impl["method"] = *m
	}
	if rt := cfg.str("return_type"); rt != nil {
		impl["return_type"] = *rt
	}
	if t := cfg.number("timeout"); t != nil {
		impl["timeout_s"] = *t
	}
	// No headers and none ({}) are the same; an export writes {} since
	// AgentChat 0.7.5 cannot load an HttpTool without the field (which its
	// own dump leaves out when it is None).
	if h := cfg.rawJSON("headers"); h != nil && string(h) != "{}" {
		tr.warnLiteralHeaders(cfg.at("headers"), h)
		impl["headers"] = h
	}
	if port != nil && host != "" {
		impl["url"] = scheme + "://" + net.JoinHostPort(host, strconv.Itoa(*port)) + path
	}
	var schema json.RawMessage
	if cfg.rawJSON("json_schema") != nil {
		schema = tr.rawAt(cfg.at("json_schema")) // the properties' order is the parameters'
	}
	if schema == nil {
		tr.r.problem(cfg.at("json_schema"), "is required")
	}
	tr.addTool(c.path, spec.Tool{Name: name, Description: desc, Parameters: schema}, impl, a, map[string]string{
		"/implementation": c.path + "/config", "/implementation/url": cfg.at("path"), "/implementation/headers": cfg.at("headers"),
		"/parameters": cfg.at("json_schema"), "/name": cfg.at("name"), "/description": cfg.at("description"),
	})
}

// warnLiteralHeaders warns of header values written in a file: they are
// kept in the chat's spec and written back in its exports, where a
// credential does not belong.
func (tr *translator) warnLiteralHeaders(path string, raw json.RawMessage) {
	var h map[string]json.RawMessage
	if json.Unmarshal(raw, &h) != nil {
		return // the tool runner reports it
	}
	for _, k := range slices.Sorted(maps.Keys(h)) {
		var s string
		if json.Unmarshal(h[k], &s) == nil {
			tr.r.warn(problem.Key(path, k), "is kept in the chat's spec and its exports as written: for a credential, name a secret of the server instead ({\"secret\": \"NAME\"}, AGENTD_TOOL_SECRETS)")
		}
	}
}

// functionTool translates a FunctionTool into a python_function tool: its
// source runs in the chat's sandbox, never on the server. The signature is
// checked (and its schema derived) with the spec's tools, so a signature
// agentd cannot translate is a problem at the source with the parameter's
// name.
func (tr *translator) functionTool(c *comp, a *spec.Agent) {
	cfg := c.cfg
	name := cfg.required("name")
	desc := cfg.required("description")
	impl := map[string]any{"type": "python_function", "source_code": cfg.required("source_code")}
	if imports := cfg.rawJSON("global_imports"); imports != nil {
		var list []json.RawMessage
		if json.Unmarshal(imports, &list) != nil {
			tr.r.problem(cfg.at("global_imports"), "must be a list of imports")
		} else if len(list) > 0 {
			impl["global_imports"] = list
		}
	}
	if b := cfg.boolean("has_cancellation_support"); b != nil && *b {
		tr.r.problem(cfg.at("has_cancellation_support"), "provider %q: a CancellationToken cannot be passed into the sandbox the function runs in", c.raw)
	}
	tr.addTool(c.path, spec.Tool{Name: name, Description: desc}, impl, a, map[string]string{
		"/implementation": c.path + "/config", "/name": cfg.at("name"), "/description": cfg.at("description"),
	})
}

// codeTool translates a PythonCodeExecutionTool into a python_code tool:
// the model's code runs in the chat's sandbox. Its executor must be a
// DockerCommandLineCodeExecutor, whose timeout it keeps.
func (tr *translator) codeTool(c *comp, a *spec.Agent) {
	cfg := c.cfg
	if d := cfg.str("description"); d != nil && *d != codeToolDescription {
		tr.r.warn(cfg.at("description"), "ignored: AgentChat's PythonCodeExecutionTool describes itself as %q whatever its config says", codeToolDescription)
	}
	impl := map[string]any{"type": "python_code"}
	if ex := cfg.raw("executor"); ex != nil {
		if ec := readComponent(&tr.r, cfg.at("executor"), ex); ec != nil {
			if ec.provider != provDockerExecutor {
				ec.unsupported(&tr.r, "code executor", provDockerExecutor)
			} else {
				if t := ec.cfg.integer("timeout"); t != nil {
					impl["timeout_s"] = *t
				}
				sandboxedExecutor(ec.cfg)
			}
		}
	} else {
		tr.r.problem(cfg.at("executor"), "is required")
	}
	tr.addTool(c.path, spec.Tool{Name: codeToolName, Description: codeToolDescription}, impl, a, map[string]string{"/implementation": c.path + "/config"})
}

// addTool adds a tool of the agent. Tools are shared by name in a spec: an
// agent whose tool has the name of another agent's identical tool shares
// it; a different tool of the same name is a problem (the model would see
// one name for two things).
func (tr *translator) addTool(path string, t spec.Tool, impl map[string]any, a *spec.Agent, paths map[string]string) {
	b, err := marshal(impl)
	if err != nil {
		tr.r.problem(path, "cannot be encoded: %v", err)
		return
	}
	t.Implementation = bytes.TrimSpace(b)
	if slices.Contains(a.Tools, t.Name) {
		tr.r.problem(path, "agent %q has two tools named %q", a.Name, t.Name)
		return
	}
	for i, existing := range tr.t.Tools {
		if existing.Name != t.Name {
			continue
		}
		if existing.Description != t.Description || !bytes.Equal(existing.Implementation, t.Implementation) || !bytes.Equal(existing.Parameters, t.Parameters) {
			tr.r.problem(path, "another agent has a different tool named %q (see %s); give them different names", t.Name, tr.t.paths[idx("/tools", i)])
			return
		}
		a.Tools = append(a.Tools, t.Name)
		return
	}
	at := idx("/tools", len(tr.t.Tools))
	tr.mapPath(at, path)
	for from, to := range paths {
		tr.mapPath(at+from, to)
	}
	tr.t.Tools = append(tr.t.Tools, t)
	a.Tools = append(a.Tools, t.Name)
}

// exportTool writes an agent's python_function, python_code and http_api
// tool as AgentChat holds it in its static workbench: a FunctionTool, a
// PythonCodeExecutionTool, an HttpTool.
func (e *exporter) exportTool(path string, t *spec.Tool, impl toolImpl) (Component, bool) {
	switch impl.Type {
	case "python_function":
		if impl.TimeoutS != nil {
			e.r.problem(path, "tool %q has a timeout_s, which AgentChat's FunctionTool has not", t.Name)
			return Component{}, false
		}
		imports := impl.GlobalImports
		if imports == nil {
			imports = []json.RawMessage{}
		}
		return newComponent(provFunctionTool, "Create custom tools by wrapping standard Python functions.", map[string]any{
			"source_code": impl.SourceCode, "name": t.Name, "description": t.Description,
			"global_imports": imports, "has_cancellation_support": false,
		}), true
	case "python_code":
		if t.Name != codeToolName || t.Description != codeToolDescription {
			e.r.problem(path, "tool %q: AgentChat's PythonCodeExecutionTool is always named %q and described %q", t.Name, codeToolName, codeToolDescription)
			return Component{}, false
		}
		exec := map[string]any{"image": "python:3-slim", "timeout": 60, "auto_remove": true, "stop_container": true,
			"functions_module": "functions", "extra_volumes": map[string]any{}, "extra_hosts": map[string]any{}, "delete_tmp_files": false}
		if impl.TimeoutS != nil {
			if *impl.TimeoutS != float64(int(*impl.TimeoutS)) {
				e.r.problem(path, "tool %q: DockerCommandLineCodeExecutor's timeout is whole seconds", t.Name)
				return Component{}, false
			}
			exec["timeout"] = int(*impl.TimeoutS)
		}
		return newComponent(provCodeTool, "A tool that executes Python code in a code executor and returns output.", map[string]any{
			"executor":    newComponent(provDockerExecutor, "Executes code through a command line environment in a Docker container.", exec),
			"description": codeToolDescription,
		}), true
	case "http_api":
		return e.exportHTTPTool(path, t, impl)
	}
	e.r.problem(path, "tool %q is a %s tool, which AgentChat has no component for", t.Name, impl.Type)
	return Component{}, false
}

// exportHTTPTool writes an http_api tool as AgentChat's HttpTool.
func (e *exporter) exportHTTPTool(path string, t *spec.Tool, impl toolImpl) (Component, bool) {
	u, err := url.Parse(impl.URL)
	if err != nil {
		e.r.problem(path, "tool %q: its url cannot be read: %v", t.Name, err)
		return Component{}, false
	}
	port := 80
	if u.Scheme == "https" {
		port = 443
	}
	if p, err := strconv.Atoi(u.Port()); err == nil {
		port = p
	}
	p := "/"
	if _, rest, ok := strings.Cut(impl.URL, "://"); ok {
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			p = rest[i:]
		}
	}
	headers := impl.Headers
	if headers == nil {
		headers = json.RawMessage(`{}`)
	}
	cfg := map[string]any{"name": t.Name, "description": t.Description, "scheme": u.Scheme, "host": u.Hostname(), "port": port,
		"path": p, "method": cmp.Or(impl.Method, "POST"), "headers": headers, "json_schema": t.Parameters,
		"return_type": cmp.Or(impl.ReturnType, "text")}
	if impl.TimeoutS != nil {
		cfg["timeout"] = *impl.TimeoutS
	}
	return newComponent(provHTTPTool, "A wrapper for using an HTTP server as a tool.", cfg), true
}

// toolImpl is the part of a tool implementation an export reads.
type toolImpl struct {
	Type          string            `json:"type"`
	URL           string            `json:"url"`
	Transport     string            `json:"transport"`
	Headers       json.RawMessage   `json:"headers"`
	Method        string            `json:"method"`
	ReturnType    string            `json:"return_type"`
	TimeoutS      *float64          `json:"timeout_s"`
	Tools         []string          `json:"tools"`
	SourceCode    string            `json:"source_code"`
	GlobalImports []json.RawMessage `json:"global_imports"`
}
