package component

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/agentd/agentd/internal/spec"
)

// Tool providers translated here: they run in agentd's sandbox.
const (
	provFunctionTool = "autogen_core.tools.FunctionTool"
	provCodeTool     = "autogen_ext.tools.code_execution.PythonCodeExecutionTool"

	// codeToolName and codeToolDescription are what PythonCodeExecutionTool
	// calls itself, whatever its config says.
	codeToolName        = "CodeExecutor"
	codeToolDescription = "Execute Python code blocks."
)

// toolProviders are the tools an agent (or a static workbench) may hold.
var toolProviders = []string{provFunctionTool, provCodeTool, provMcpHTTPAdapter}

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
				ec.cfg.ignoreWarn("code runs in agentd's sandbox, whose image and limits are the server's (and the spec's sandbox options)",
					"image", "work_dir", "bind_dir", "extra_volumes", "extra_hosts", "init_command", "functions_module")
				ec.cfg.ignore("container_name", "auto_remove", "stop_container", "delete_tmp_files")
				ec.cfg.refuse("functions are Python code and are not supported", "functions")
				ec.cfg.done()
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
		if existing.Description != t.Description || !bytes.Equal(existing.Implementation, t.Implementation) {
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

// exportTools writes an agent's python_function and python_code tools as
// AgentChat holds them: one StaticStreamWorkbench with a FunctionTool or a
// PythonCodeExecutionTool each.
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
	}
	e.r.problem(path, "tool %q is a %s tool, which AgentChat has no component for", t.Name, impl.Type)
	return Component{}, false
}

// toolImpl is the part of a tool implementation an export reads.
type toolImpl struct {
	Type          string            `json:"type"`
	URL           string            `json:"url"`
	TimeoutS      *float64          `json:"timeout_s"`
	Tools         []string          `json:"tools"`
	SourceCode    string            `json:"source_code"`
	GlobalImports []json.RawMessage `json:"global_imports"`
}
