package pyfunc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ContextParam is the parameter through which a function is given the
// chat's context variables (OpenAI Swarm's __CTX_VARS_NAME__). It is never
// shown to a model.
const ContextParam = "context_variables"

// SwarmFunction is a function as OpenAI Swarm's function_to_json describes
// it (openai/swarm, swarm/util.py): every parameter, typed by a map of six
// builtins and "string" for anything else, required when it has no
// default, and the function's docstring as its description. Swarm reads
// the live function; this reads its source, and refuses nothing that
// Python would define.
type SwarmFunction struct {
	// Name is the function called: the name after the source's first
	// "def " (as for Parse).
	Name string
	// Doc is the function's __doc__ as CPython 3.13 compiles it (its
	// common indentation removed), "" without a docstring.
	Doc    string
	Params []SwarmParam
}

// SwarmParam is one parameter: its name, its JSON type in
// function_to_json's map, and whether it has no default.
type SwarmParam struct {
	Name     string
	Type     string
	Required bool
}

// swarmTypes is function_to_json's type map, by the builtin an annotation
// names. An annotation that is anything else (Optional[int], a string, a
// class, None itself) is "string".
var swarmTypes = map[string]string{
	"builtins.str": "string", "builtins.int": "integer", "builtins.float": "number",
	"builtins.bool": "boolean", "builtins.list": "array", "builtins.dict": "object",
}

// ParseSwarm reads the function AgentChat would call in source (the name
// after its first "def ") as function_to_json sees it.
func ParseSwarm(source string, imports []Import) (*SwarmFunction, error) {
	if len(source) > maxSourceBytes {
		return nil, &Error{Message: fmt.Sprintf("the source is larger than %d bytes", maxSourceBytes)}
	}
	name := FirstDef(source)
	if !isIdentifier(name) {
		return nil, &Error{Message: `the source has no "def NAME(": the function called is the one named after its first "def "`}
	}
	env, err := newEnv(imports, source)
	if err != nil {
		return nil, err
	}
	start, _, err := findDef(source, name)
	if err != nil {
		return nil, err
	}
	// With postponed evaluation every annotation is a string: "string".
	future := strings.Contains(source, "from __future__ import annotations")
	p := &parser{lx: lexer{src: source, pos: start}, env: env}
	f := &SwarmFunction{Name: name}
	if err := p.swarmSignature(f, future); err != nil {
		return nil, &Error{Message: fmt.Sprintf("the signature of %s cannot be read: %v", name, err)}
	}
	doc, err := p.docstring()
	if err != nil {
		return nil, &Error{Message: fmt.Sprintf("the docstring of %s cannot be read: %v", name, err)}
	}
	f.Doc = cleanDoc(doc)
	return f, nil
}

// swarmSignature reads the parameters up to the header's colon.
func (p *parser) swarmSignature(f *SwarmFunction, future bool) error {
	if err := p.advance(); err != nil {
		return err
	}
	if err := p.expect("("); err != nil {
		return err
	}
	for !p.is(")") {
		switch {
		case p.tok.kind == tokEOF:
			return errors.New("it does not end")
		case p.is("/") || p.is("*") || p.is("**"):
			if err := p.advance(); err != nil {
				return err
			}
			if p.is(",") { // a bare / or *
				if err := p.advance(); err != nil {
					return err
				}
			}
			continue // a star's name, if any, is read as a parameter next
		case p.tok.kind != tokName:
			return fmt.Errorf("unexpected %q", p.tok.text)
		}
		prm := SwarmParam{Name: p.tok.text, Type: "string", Required: true}
		if err := p.advance(); err != nil {
			return err
		}
		if p.is(":") {
			if err := p.advance(); err != nil {
				return err
			}
			n, err := p.skipExpr()
			if err != nil {
				return err
			}
			if n != nil && !future {
				// The builtins module is "other" to AgentChat's reading.
				if t, ok := swarmTypes[strings.Replace(p.resolve(n), "other:builtins.", "builtins.", 1)]; ok {
					prm.Type = t
				}
			}
		}
		if p.is("=") {
			if err := p.advance(); err != nil {
				return err
			}
			if _, err := p.skipExpr(); err != nil {
				return err
			}
			prm.Required = false
		}
		if len(f.Params) >= maxParams {
			return fmt.Errorf("more than %d parameters", maxParams)
		}
		f.Params = append(f.Params, prm)
		if p.is(",") {
			if err := p.advance(); err != nil {
				return err
			}
		}
	}
	// The return annotation, up to the header's colon.
	for depth := 0; ; {
		if err := p.advance(); err != nil {
			return err
		}
		switch {
		case p.tok.kind == tokEOF:
			return errors.New("the header does not end")
		case p.is("(") || p.is("[") || p.is("{"):
			depth++
		case p.is(")") || p.is("]") || p.is("}"):
			depth--
		case p.is(":") && depth == 0:
			return nil
		}
	}
}

// skipExpr reads an annotation or a default up to the "," "=" or ")" that
// ends it: as an expression when it is one the parser knows (n), else
// token by token (n nil; a default's value never matters here).
func (p *parser) skipExpr() (*node, error) {
	save, tok := p.lx, p.tok
	if n, err := p.expr(); err == nil && (p.is(",") || p.is("=") || p.is(")")) {
		return n, nil
	}
	p.lx, p.tok = save, tok
	for depth := 0; ; {
		switch {
		case p.tok.kind == tokEOF:
			return nil, errors.New("an expression does not end")
		case depth == 0 && (p.is(",") || p.is("=") || p.is(")")):
			return nil, nil
		case p.is("(") || p.is("[") || p.is("{"):
			depth++
		case p.is(")") || p.is("]") || p.is("}"):
			depth--
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
}

// docstring is the value of the string literal (adjacent literals joined)
// that is the first statement of the body, or "". A literal that is part
// of a longer expression, an f-string or bytes is no docstring.
func (p *parser) docstring() (string, error) {
	if err := p.advance(); err != nil {
		return "", err
	}
	var parts []string
	for p.tok.kind == tokString {
		prefix := strings.ToLower(p.tok.text[:strings.IndexAny(p.tok.text, `'"`)])
		if strings.ContainsAny(prefix, "bf") {
			return "", nil
		}
		s, err := parseString(p.tok.text)
		if err != nil {
			return "", err
		}
		parts = append(parts, s)
		end := p.lx.pos
		if err := p.advance(); err != nil {
			return "", err
		}
		if p.tok.kind != tokString && !statementEnds(p.lx.src[end:]) {
			return "", nil
		}
	}
	return strings.Join(parts, ""), nil
}

// statementEnds reports whether rest (the source after an expression)
// ends the statement: a newline, ";" or the end, after blanks and a
// comment.
func statementEnds(rest string) bool {
	rest = strings.TrimLeft(rest, " \t\f")
	if strings.HasPrefix(rest, "#") {
		return true
	}
	return rest == "" || strings.HasPrefix(rest, "\n") || strings.HasPrefix(rest, "\r") || strings.HasPrefix(rest, ";")
}

// cleanDoc is what CPython 3.13's compiler makes of a docstring
// (_PyCompile_CleanDoc): tabs expanded, the first line's leading spaces
// removed, and from every later line the indentation common to the later
// lines that are not blank.
func cleanDoc(doc string) string {
	lines := strings.Split(expandTabs(doc), "\n")
	margin := -1
	for _, l := range lines[1:] {
		trimmed := strings.TrimLeft(l, " ")
		if trimmed == "" {
			continue
		}
		if n := len(l) - len(trimmed); margin < 0 || n < margin {
			margin = n
		}
	}
	margin = max(margin, 0)
	lines[0] = strings.TrimLeft(lines[0], " ")
	for i := 1; i < len(lines); i++ {
		n := 0
		for n < margin && n < len(lines[i]) && lines[i][n] == ' ' {
			n++
		}
		lines[i] = lines[i][n:]
	}
	return strings.Join(lines, "\n")
}

// expandTabs is str.expandtabs(8).
func expandTabs(s string) string {
	if !strings.Contains(s, "\t") {
		return s
	}
	var b strings.Builder
	col := 0
	for _, r := range s {
		switch r {
		case '\t':
			n := 8 - col%8
			b.WriteString(strings.Repeat(" ", n))
			col += n
		case '\n', '\r':
			b.WriteRune(r)
			col = 0
		default:
			b.WriteRune(r)
			col++
		}
	}
	return b.String()
}

// TakesContext reports whether the function is given the context
// variables (it has a parameter named context_variables).
func (f *SwarmFunction) TakesContext() bool {
	for _, p := range f.Params {
		if p.Name == ContextParam {
			return true
		}
	}
	return false
}

// Schema is the parameters object function_to_json writes, with
// context_variables hidden (Swarm's get_chat_completion takes it out).
func (f *SwarmFunction) Schema() json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"type":"object","properties":{`)
	required := []string{}
	n := 0
	for _, p := range f.Params {
		if p.Name == ContextParam {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		writeString(&b, p.Name)
		b.WriteString(`:{"type":"` + p.Type + `"}`)
		if p.Required {
			required = append(required, p.Name)
		}
	}
	b.WriteString(`},"required":`)
	req, _ := json.Marshal(required)
	b.Write(req)
	b.WriteByte('}')
	return b.Bytes()
}
