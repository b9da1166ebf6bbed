package pyfunc

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// env maps the names an annotation may use to what they are: "typing" for
// a module alias of typing or typing_extensions, "typing.Optional" for a
// name imported from one, "other:<module>" for anything else imported.
type env map[string]string

// typingModules are the modules whose typing names agentd understands.
var typingModules = map[string]bool{"typing": true, "typing_extensions": true}

// newEnv reads the global imports and the source's own top-level import
// statements.
func newEnv(imports []Import, source string) (env, error) {
	e := env{}
	for i, raw := range imports {
		if err := e.addImport(raw); err != nil {
			return nil, &Error{Message: fmt.Sprintf("global_imports[%d]: %v", i, err)}
		}
	}
	for _, line := range strings.Split(source, "\n") {
		line = strings.TrimRight(strings.SplitN(line, "#", 2)[0], " \t\r")
		switch {
		case strings.HasPrefix(line, "import "):
			for _, part := range strings.Split(strings.TrimPrefix(line, "import "), ",") {
				f := strings.Fields(part)
				switch {
				case len(f) == 1:
					e.module(f[0], strings.Split(f[0], ".")[0])
				case len(f) == 3 && f[1] == "as":
					e.module(f[0], f[2])
				}
			}
		case strings.HasPrefix(line, "from ") && !strings.ContainsAny(line, "()\\"):
			f := strings.Fields(line)
			if len(f) < 4 || f[2] != "import" {
				continue
			}
			for _, part := range strings.Split(strings.Join(f[3:], " "), ",") {
				pf := strings.Fields(part)
				switch {
				case len(pf) == 1:
					e.from(f[1], pf[0], pf[0])
				case len(pf) == 3 && pf[1] == "as":
					e.from(f[1], pf[0], pf[2])
				}
			}
		}
	}
	return e, nil
}

// addImport reads one global import of a FunctionTool config.
func (e env) addImport(raw json.RawMessage) error {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		e.module(s, strings.Split(s, ".")[0])
		return nil
	}
	var obj struct {
		Name    *string           `json:"name"`
		Alias   *string           `json:"alias"`
		Module  *string           `json:"module"`
		Imports []json.RawMessage `json:"imports"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return errors.New(`must be a module name, {"name", "alias"} or {"module", "imports"}`)
	}
	switch {
	case obj.Name != nil && obj.Alias != nil:
		e.module(*obj.Name, *obj.Alias)
	case obj.Module != nil:
		for _, imp := range obj.Imports {
			var name string
			var alias struct{ Name, Alias string }
			switch {
			case json.Unmarshal(imp, &name) == nil:
				e.from(*obj.Module, name, name)
			case json.Unmarshal(imp, &alias) == nil && alias.Name != "" && alias.Alias != "":
				e.from(*obj.Module, alias.Name, alias.Alias)
			default:
				return errors.New(`an import of a module must be a name or {"name", "alias"}`)
			}
		}
	default:
		return errors.New(`must be a module name, {"name", "alias"} or {"module", "imports"}`)
	}
	return nil
}

func (e env) module(mod, as string) {
	if typingModules[mod] {
		e[as] = "typing"
		return
	}
	e[as] = "other:" + mod
}

func (e env) from(mod, name, as string) {
	if typingModules[mod] {
		e[as] = "typing." + name
		return
	}
	e[as] = "other:" + mod + "." + name
}

// parser reads a def statement's header from the lexer.
type parser struct {
	lx    lexer
	env   env
	tok   token
	depth int
}

func (p *parser) advance() error {
	t, err := p.lx.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

func (p *parser) is(text string) bool { return p.tok.kind == tokOp && p.tok.text == text }

func (p *parser) expect(text string) error {
	if !p.is(text) {
		return fmt.Errorf("expected %q, found %q", text, p.tok.text)
	}
	return p.advance()
}

// signature reads "(params) [-> annotation]:" after "def NAME".
func (p *parser) signature(name string) (*Function, error) {
	f := &Function{Name: name}
	fail := func(param string, err error) (*Function, error) {
		var pe *Error
		if errors.As(err, &pe) {
			return nil, pe
		}
		return nil, &Error{Param: param, Message: err.Error()}
	}
	if err := p.advance(); err != nil {
		return fail("", fmt.Errorf("the signature of %s cannot be read: %v", name, err))
	}
	if err := p.expect("("); err != nil {
		return fail("", fmt.Errorf("the signature of %s cannot be read: %v", name, err))
	}
	var positionalOnly []string
	seen := map[string]bool{}
	for !p.is(")") {
		if p.tok.kind == tokEOF {
			return fail("", fmt.Errorf("the signature of %s does not end", name))
		}
		switch {
		case p.is("/"):
			for _, n := range positionalOnly {
				return fail(n, errors.New("is positional-only, and AgentChat passes every argument by name"))
			}
			if err := p.advance(); err != nil {
				return fail("", err)
			}
		case p.is("*") || p.is("**"):
			star := p.tok.text
			if err := p.advance(); err != nil {
				return fail("", err)
			}
			if p.tok.kind == tokName {
				return fail(p.tok.text, fmt.Errorf("%s%s parameters cannot be described to a model exactly; name each parameter", star, p.tok.text))
			}
		case p.tok.kind == tokName && p.tok.text == ContextParam:
			// Given the chat's context variables by the harness, never by
			// the model: not part of the schema or the arguments.
			if err := p.advance(); err != nil {
				return fail(ContextParam, err)
			}
			for _, sep := range []string{":", "="} {
				if !p.is(sep) {
					continue
				}
				if err := p.advance(); err != nil {
					return fail(ContextParam, err)
				}
				if _, err := p.skipExpr(); err != nil {
					return fail(ContextParam, err)
				}
			}
			if f.TakesContext {
				return fail(ContextParam, errors.New("is defined twice"))
			}
			f.TakesContext = true
		case p.tok.kind == tokName:
			prm, err := p.param()
			if err != nil {
				return fail(p.tok.text, err)
			}
			if seen[prm.Name] {
				return fail(prm.Name, errors.New("is defined twice"))
			}
			seen[prm.Name] = true
			positionalOnly = append(positionalOnly, prm.Name)
			f.Params = append(f.Params, prm)
			if len(f.Params) > maxParams {
				return fail("", fmt.Errorf("more than %d parameters", maxParams))
			}
		default:
			return fail("", fmt.Errorf("the signature of %s cannot be read at %q", name, p.tok.text))
		}
		if p.is(",") {
			if err := p.advance(); err != nil {
				return fail("", err)
			}
		} else if !p.is(")") {
			return fail("", fmt.Errorf("the signature of %s cannot be read at %q", name, p.tok.text))
		}
	}
	// The return annotation does not change the schema; it is not read,
	// only skipped up to the header's colon.
	return f, nil
}

// param reads one "name [: annotation] [= default]" and translates it.
func (p *parser) param() (Param, error) {
	name := p.tok.text
	pe := func(msg string, args ...any) error { return &Error{Param: name, Message: fmt.Sprintf(msg, args...)} }
	if err := p.advance(); err != nil {
		return Param{}, pe("%v", err)
	}
	if !isIdentifier(name) {
		return Param{}, pe("agentd takes ASCII parameter names only")
	}
	if strings.HasPrefix(name, "_") {
		return Param{}, pe("pydantic refuses field names with a leading underscore, so AgentChat cannot describe this parameter")
	}
	if name == "cancellation_token" {
		return Param{}, pe("a CancellationToken cannot be passed into the sandbox the function runs in")
	}
	prm := Param{Name: name, Description: name}
	var ann *node
	if p.is(":") {
		if err := p.advance(); err != nil {
			return Param{}, pe("%v", err)
		}
		n, err := p.expr()
		if err != nil {
			return Param{}, pe("the annotation cannot be read: %v", err)
		}
		ann = n
	}
	if p.is("=") {
		if err := p.advance(); err != nil {
			return Param{}, pe("%v", err)
		}
		n, err := p.expr()
		if err != nil {
			return Param{}, pe("the default cannot be read: %v", err)
		}
		v, err := n.literal()
		if err != nil {
			return Param{}, pe("the default %s: %v", n.text(), err)
		}
		prm.def = &v
	}
	if ann == nil {
		return Param{}, pe("has no type annotation, and AgentChat needs one for every parameter")
	}
	t, desc, err := p.annotation(ann)
	if err != nil {
		return Param{}, pe("%v", err)
	}
	prm.typ = t
	if desc != nil {
		prm.Description = *desc
	}
	return prm, nil
}

// node is an expression of a signature: an annotation or a default.
type node struct {
	kind  string // name, attr, sub, str, num, const, neg, pos, union, tuple, list, dict, call, other
	s     string // name, attribute, string value, number text, constant
	base  *node
	items []*node // sub: the subscript's items; tuple/list/dict items (dict: key, value pairs); union members
	src   string  // the source text, for messages
}

func (n *node) text() string { return n.src }

// expr reads an expression: a union of primaries joined by "|".
func (p *parser) expr() (*node, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxDepth {
		return nil, errors.New("nested too deeply")
	}
	start := p.tok.pos
	first, err := p.unary()
	if err != nil {
		return nil, err
	}
	if !p.is("|") {
		return first, nil
	}
	u := &node{kind: "union", items: []*node{first}}
	for p.is("|") {
		if err := p.advance(); err != nil {
			return nil, err
		}
		n, err := p.unary()
		if err != nil {
			return nil, err
		}
		u.items = append(u.items, n)
	}
	u.src = strings.TrimSpace(p.lx.src[start:p.tok.pos])
	return u, nil
}

// unary reads a primary with an optional sign.
func (p *parser) unary() (*node, error) {
	start := p.tok.pos
	if p.is("-") || p.is("+") {
		kind := map[string]string{"-": "neg", "+": "pos"}[p.tok.text]
		if err := p.advance(); err != nil {
			return nil, err
		}
		n, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &node{kind: kind, base: n, src: strings.TrimSpace(p.lx.src[start:p.tok.pos])}, nil
	}
	return p.primary()
}

// primary reads an atom and its trailers (.attr, [subscript], (call)).
func (p *parser) primary() (*node, error) {
	start := p.tok.pos
	n, err := p.atom()
	if err != nil {
		return nil, err
	}
	for {
		switch {
		case p.is("."):
			if err := p.advance(); err != nil {
				return nil, err
			}
			if p.tok.kind != tokName {
				return nil, fmt.Errorf("expected a name after '.', found %q", p.tok.text)
			}
			n = &node{kind: "attr", base: n, s: p.tok.text}
			if err := p.advance(); err != nil {
				return nil, err
			}
		case p.is("["):
			items, err := p.list("[", "]")
			if err != nil {
				return nil, err
			}
			n = &node{kind: "sub", base: n, items: items}
		case p.is("("):
			if _, err := p.list("(", ")"); err != nil {
				return nil, err
			}
			n = &node{kind: "call", base: n}
		default:
			n.src = strings.TrimSpace(p.lx.src[start:p.tok.pos])
			return n, nil
		}
	}
}

// atom reads a name, a literal or a bracketed expression.
func (p *parser) atom() (*node, error) {
	start := p.tok.pos
	done := func(n *node) (*node, error) {
		n.src = strings.TrimSpace(p.lx.src[start:p.tok.pos])
		return n, nil
	}
	switch {
	case p.tok.kind == tokName:
		n := &node{kind: "name", s: p.tok.text}
		switch p.tok.text {
		case "None", "True", "False":
			n.kind = "const"
		case "lambda", "not", "await", "yield":
			return nil, fmt.Errorf("%s expressions are not supported", p.tok.text)
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		return done(n)
	case p.tok.kind == tokNumber:
		n := &node{kind: "num", s: p.tok.text}
		if err := p.advance(); err != nil {
			return nil, err
		}
		return done(n)
	case p.tok.kind == tokString:
		// Adjacent literals are one string ('a' 'b').
		var parts []string
		for p.tok.kind == tokString {
			s, err := parseString(p.tok.text)
			if err != nil {
				return nil, err
			}
			parts = append(parts, s)
			if err := p.advance(); err != nil {
				return nil, err
			}
		}
		return done(&node{kind: "str", s: strings.Join(parts, "")})
	case p.is("("):
		items, trailing, err := p.seq("(", ")")
		if err != nil {
			return nil, err
		}
		if len(items) == 1 && !trailing && items[0].kind != "pair" {
			return items[0], nil
		}
		return done(&node{kind: "tuple", items: items})
	case p.is("["):
		items, err := p.list("[", "]")
		if err != nil {
			return nil, err
		}
		return done(&node{kind: "list", items: items})
	case p.is("{"):
		items, err := p.list("{", "}")
		if err != nil {
			return nil, err
		}
		return done(&node{kind: "dict", items: items})
	}
	return nil, fmt.Errorf("unexpected %q", p.tok.text)
}

// list reads a bracketed, comma-separated sequence.
func (p *parser) list(open, close string) ([]*node, error) {
	items, _, err := p.seq(open, close)
	return items, err
}

// seq reads open item, item ... close; an item may be "key: value" (a
// dict's pair, kept as a node of kind pair). trailing reports a comma
// before close.
func (p *parser) seq(open, close string) ([]*node, bool, error) {
	if err := p.expect(open); err != nil {
		return nil, false, err
	}
	var items []*node
	trailing := false
	for !p.is(close) {
		if p.tok.kind == tokEOF {
			return nil, false, fmt.Errorf("%q is not closed", open)
		}
		if p.is("*") || p.is("**") {
			return nil, false, errors.New("unpacking is not supported")
		}
		n, err := p.expr()
		if err != nil {
			return nil, false, err
		}
		if p.is(":") && open == "{" {
			if err := p.advance(); err != nil {
				return nil, false, err
			}
			v, err := p.expr()
			if err != nil {
				return nil, false, err
			}
			n = &node{kind: "pair", items: []*node{n, v}}
		}
		items = append(items, n)
		trailing = false
		if p.is(",") {
			trailing = true
			if err := p.advance(); err != nil {
				return nil, false, err
			}
		} else if !p.is(close) {
			return nil, false, fmt.Errorf("expected ',' or %q, found %q", close, p.tok.text)
		}
	}
	return items, trailing, p.advance()
}

// literal evaluates a default: numbers, strings, True, False, None, and
// lists, tuples and dicts of them. Anything else would need the file's
// code to run.
func (n *node) literal() (value, error) {
	switch n.kind {
	case "const":
		switch n.s {
		case "None":
			return value{kind: vNone}, nil
		case "True":
			return value{kind: vBool, b: true}, nil
		}
		return value{kind: vBool}, nil
	case "num":
		return parseNumber(n.s)
	case "str":
		return value{kind: vStr, s: n.s}, nil
	case "neg", "pos":
		v, err := n.base.literal()
		if err != nil {
			return value{}, err
		}
		switch v.kind {
		case vInt:
			if n.kind == "neg" {
				v.i.Neg(v.i)
			}
			return v, nil
		case vFloat:
			if n.kind == "neg" {
				v.f = -v.f
			}
			return v, nil
		case vBool:
			// -True is -1 in Python: an int.
			i := value{kind: vInt}
			i.i = bigInt(map[bool]int64{true: 1, false: 0}[v.b])
			if n.kind == "neg" {
				i.i.Neg(i.i)
			}
			return i, nil
		}
		return value{}, errors.New("a sign applies to numbers only")
	case "list", "tuple":
		v := value{kind: vList}
		for _, it := range n.items {
			iv, err := it.literal()
			if err != nil {
				return value{}, err
			}
			v.items = append(v.items, iv)
		}
		return v, nil
	case "dict":
		v := value{kind: vDict}
		for _, it := range n.items {
			if it.kind != "pair" {
				return value{}, errors.New("sets are not supported")
			}
			k, err := it.items[0].literal()
			if err != nil {
				return value{}, err
			}
			if k.kind != vStr {
				return value{}, errors.New("only dicts with string keys are supported")
			}
			val, err := it.items[1].literal()
			if err != nil {
				return value{}, err
			}
			replaced := false
			for i, existing := range v.keys {
				if existing == k.s {
					v.vals[i], replaced = val, true
				}
			}
			if !replaced {
				v.keys = append(v.keys, k.s)
				v.vals = append(v.vals, val)
			}
		}
		return v, nil
	}
	return value{}, errors.New("cannot be evaluated without running the file's code: a default must be a literal (a number, a string, True, False, None, or a list, tuple or dict of them)")
}
