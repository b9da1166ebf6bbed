// Package pyfunc reads the signature of a Python function from its source
// and derives what AutoGen AgentChat 0.7.5 derives from it for a
// FunctionTool: the JSON Schema of its parameters that the model is shown
// (autogen_core's args_base_model_from_signature and BaseTool.schema, that
// is pydantic's model_json_schema of a model with one field per
// parameter), and the arguments a call passes after pydantic validated
// them.
//
// It never runs the source. The signature is parsed as Python's own
// grammar reads a def statement's header, annotations are resolved against
// the function's global imports (typing's Optional, Union, List, Dict,
// Literal, Annotated and Any; the builtins str, int, float, bool, list,
// dict and None), and defaults must be literals. Whatever cannot be
// translated exactly — another type, a default computed by a call, a
// decorator, *args — is an *Error naming the parameter, never a guess.
package pyfunc

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Error says why a function's signature cannot be translated. Param names
// the parameter it is about ("" when it is about the function).
type Error struct {
	Param   string
	Message string
}

func (e *Error) Error() string {
	if e.Param == "" {
		return e.Message
	}
	return fmt.Sprintf("parameter %q: %s", e.Param, e.Message)
}

// Import is one of a FunctionTool's global_imports as its component config
// holds it: a module name ("json"), {"name", "alias"} (import numpy as np)
// or {"module", "imports": [name | {"name", "alias"}]} (from typing import
// Optional).
type Import = json.RawMessage

// Function is a parsed function.
type Function struct {
	// Name is the function AgentChat calls: the name after the first "def "
	// of the source (FunctionTool._from_config's rule).
	Name string
	// Async is true for an async def.
	Async bool
	// TakesContext: the function has a context_variables parameter, which
	// is given the chat's context variables (OpenAI Swarm's rule) and is
	// neither in the schema nor in the arguments.
	TakesContext bool
	Params       []Param
	// fromSchema: made by FromJSONSchema, not from a function.
	fromSchema bool
}

// Param is one parameter of the function.
type Param struct {
	Name        string
	Description string
	typ         *typ
	def         *value // nil: required
	// noDescription: the schema shows no description (a JSON Schema
	// property without one); a function's parameter always has one.
	noDescription bool
}

// Required reports whether the parameter has no default.
func (p Param) Required() bool { return p.def == nil }

// Limits on what Parse reads, so that a hostile source costs little.
const (
	maxSourceBytes = 1 << 20
	maxDepth       = 32
	maxParams      = 256
)

// Parse finds the function that AgentChat would call in source and reads
// its signature, resolving annotations against imports and the source's
// own top-level import statements.
func Parse(source string, imports []Import) (*Function, error) {
	return ParseNamed(source, imports, "")
}

// FirstDef is the function AgentChat calls for a FunctionTool's source:
// the name after its first "def " (FunctionTool._from_config), or "" when
// there is none.
func FirstDef(source string) string {
	at := strings.Index(source, "def ")
	if at < 0 {
		return ""
	}
	open := strings.IndexByte(source[at+4:], '(')
	if open < 0 {
		return ""
	}
	return source[at+4 : at+4+open]
}

// ParseNamed is Parse for the top-level function name, or for the one
// AgentChat would call when name is "".
func ParseNamed(source string, imports []Import, name string) (*Function, error) {
	if len(source) > maxSourceBytes {
		return nil, &Error{Message: fmt.Sprintf("the source is larger than %d bytes", maxSourceBytes)}
	}
	if name != "" {
		if !isIdentifier(name) {
			return nil, &Error{Message: fmt.Sprintf("%q is not a function name", name)}
		}
		return parseDef(source, imports, name)
	}
	at := strings.Index(source, "def ")
	if at < 0 {
		return nil, &Error{Message: `the source has no "def ": AgentChat calls the function named after its first "def "`}
	}
	open := strings.IndexByte(source[at+4:], '(')
	if open < 0 {
		return nil, &Error{Message: `the source has no "(" after its first "def "`}
	}
	name = source[at+4 : at+4+open]
	if !isIdentifier(name) {
		return nil, &Error{Message: fmt.Sprintf("AgentChat calls the function named after the source's first \"def \", and %q is not a name", name)}
	}
	return parseDef(source, imports, name)
}

// parseDef reads the signature of the top-level function name.
func parseDef(source string, imports []Import, name string) (*Function, error) {
	env, err := newEnv(imports, source)
	if err != nil {
		return nil, err
	}
	start, async, err := findDef(source, name)
	if err != nil {
		return nil, err
	}
	p := &parser{lx: lexer{src: source, pos: start}, env: env}
	f, err := p.signature(name)
	if err != nil {
		return nil, err
	}
	f.Async = async
	return f, nil
}

// findDef returns the position just after "def NAME" of the top-level
// definition of name, and whether it is async. The first "def " of the
// source gives the name; the function is the one defined at the top level
// under that name, as exec() leaves it in the module's globals.
func findDef(source, name string) (int, bool, error) {
	var found []int
	var async []bool
	lines := strings.SplitAfter(source, "\n")
	off := 0
	for i, line := range lines {
		rest, isAsync := line, false
		if r, ok := strings.CutPrefix(rest, "async "); ok {
			rest, isAsync = strings.TrimLeft(r, " \t"), true
		}
		if r, ok := strings.CutPrefix(rest, "def "); ok {
			r = strings.TrimLeft(r, " \t")
			if n, ok := strings.CutPrefix(r, name); ok && strings.HasPrefix(strings.TrimLeft(n, " \t"), "(") {
				if decorated(lines[:i]) {
					return 0, false, &Error{Message: fmt.Sprintf("function %s is decorated: a decorator may change what is called, so agentd takes only undecorated functions", name)}
				}
				found = append(found, off+len(line)-len(n))
				async = append(async, isAsync)
			}
		}
		off += len(line)
	}
	switch len(found) {
	case 0:
		return 0, false, &Error{Message: fmt.Sprintf("no top-level definition of %s, the function AgentChat would call (the name after the source's first \"def \")", name)}
	case 1:
		return found[0], async[0], nil
	}
	return 0, false, &Error{Message: fmt.Sprintf("function %s is defined more than once at the top level", name)}
}

// decorated reports whether the last code line of before is a decorator.
func decorated(before []string) bool {
	for i := len(before) - 1; i >= 0; i-- {
		l := strings.TrimSpace(before[i])
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		return strings.HasPrefix(before[i], "@")
	}
	return false
}

// isIdentifier reports whether s is an ASCII Python identifier.
func isIdentifier(s string) bool {
	return IsASCIIName(s) && !keywords[s]
}

// IsASCIIName reports whether s has the shape of a Python identifier in
// ASCII: letters, digits and '_', not starting with a digit. Keywords pass:
// a name used as a key (a str.format field, say) may be one.
func IsASCIIName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range []byte(s) {
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// keywords are Python's hard keywords: never a function's or parameter's
// name.
var keywords = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range strings.Fields("False None True and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield") {
		m[k] = true
	}
	return m
}()
