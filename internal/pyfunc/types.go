package pyfunc

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// typeKind is a kind of parameter type agentd translates.
type typeKind int

const (
	tStr typeKind = iota
	tInt
	tFloat
	tBool
	tNone
	tAny
	tList
	tDict
	tUnion
	tLiteral
)

// typ is a parameter's type.
type typ struct {
	kind    typeKind
	elem    *typ    // tList items, tDict values; nil: untyped
	members []*typ  // tUnion, flattened and deduplicated as typing.Union does
	values  []value // tLiteral, deduplicated as typing.Literal does
}

// equal reports whether two types are the same, as typing.Union compares
// its members when it deduplicates them.
func (t *typ) equal(u *typ) bool {
	if t == nil || u == nil {
		return t == u
	}
	if t.kind != u.kind || !t.elem.equal(u.elem) || len(t.members) != len(u.members) || len(t.values) != len(u.values) {
		return false
	}
	for i := range t.members {
		if !t.members[i].equal(u.members[i]) {
			return false
		}
	}
	for i := range t.values {
		if !t.values[i].equal(u.values[i]) {
			return false
		}
	}
	return true
}

// supportedTypes is said when a type cannot be translated.
const supportedTypes = "agentd translates str, int, float, bool, None, Any, list, dict (with str keys), Optional, Union, Literal and Annotated"

// annotation translates a parameter's annotation: its type and, for
// Annotated, its description (the first metadata item, which must be a
// string, as AgentChat's type2description requires).
func (p *parser) annotation(n *node) (*typ, *string, error) {
	if n.kind == "str" {
		inner, err := p.forwardRef(n)
		if err != nil {
			return nil, nil, err
		}
		n = inner
	}
	if n.kind == "sub" && p.resolve(n.base) == "typing.Annotated" {
		if len(n.items) < 2 {
			return nil, nil, fmt.Errorf("%s: Annotated needs a type and a description", n.text())
		}
		inner, desc, err := p.annotation(n.items[0])
		if err != nil {
			return nil, nil, err
		}
		if desc == nil {
			// Annotated[Annotated[T, a], b] is Annotated[T, a, b]: the
			// inner metadata comes first.
			if n.items[1].kind != "str" {
				return nil, nil, fmt.Errorf("the description %s of Annotated must be a string (AgentChat refuses anything else)", n.items[1].text())
			}
			d := n.items[1].s
			desc = &d
		}
		return inner, desc, nil
	}
	t, err := p.typeOf(n)
	return t, nil, err
}

// forwardRef parses a string annotation ('int', 'Optional[str]') as the
// expression it holds, as typing.get_type_hints evaluates it.
func (p *parser) forwardRef(n *node) (*node, error) {
	sub := &parser{lx: lexer{src: n.s}, env: p.env, depth: p.depth}
	if err := sub.advance(); err != nil {
		return nil, err
	}
	inner, err := sub.expr()
	if err != nil {
		return nil, fmt.Errorf("the annotation %q cannot be read: %v", n.s, err)
	}
	if sub.tok.kind != tokEOF {
		return nil, fmt.Errorf("the annotation %q cannot be read", n.s)
	}
	return inner, nil
}

// resolve names what an annotation's head refers to: "builtins.str",
// "typing.Optional", "typing" (the module), "other:…", or "" for an
// unknown name.
func (p *parser) resolve(n *node) string {
	switch n.kind {
	case "name":
		if r, ok := p.env[n.s]; ok {
			return r
		}
		switch n.s {
		case "str", "int", "float", "bool", "list", "dict", "tuple", "set", "frozenset", "bytes", "bytearray", "complex", "object", "type":
			return "builtins." + n.s
		}
		return ""
	case "const":
		if n.s == "None" {
			return "builtins.None"
		}
	case "attr":
		base := p.resolve(n.base)
		if base == "typing" {
			return "typing." + n.s
		}
		if base != "" {
			return base + "." + n.s
		}
	}
	return ""
}

// typeOf translates a type expression (Annotated's metadata is dropped
// below the top level, as pydantic ignores a string there).
func (p *parser) typeOf(n *node) (*typ, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxDepth {
		return nil, errors.New("the annotation is nested too deeply")
	}
	switch n.kind {
	case "str":
		inner, err := p.forwardRef(n)
		if err != nil {
			return nil, err
		}
		return p.typeOf(inner)
	case "union":
		var members []*typ
		for _, it := range n.items {
			t, err := p.typeOf(it)
			if err != nil {
				return nil, err
			}
			members = append(members, t)
		}
		return union(members), nil
	case "name", "attr", "const":
		switch r := p.resolve(n); r {
		case "builtins.str":
			return &typ{kind: tStr}, nil
		case "builtins.int":
			return &typ{kind: tInt}, nil
		case "builtins.float":
			return &typ{kind: tFloat}, nil
		case "builtins.bool":
			return &typ{kind: tBool}, nil
		case "builtins.None":
			return &typ{kind: tNone}, nil
		case "typing.Any":
			return &typ{kind: tAny}, nil
		case "builtins.list", "typing.List":
			return &typ{kind: tList}, nil
		case "builtins.dict", "typing.Dict":
			return &typ{kind: tDict}, nil
		case "":
			return nil, fmt.Errorf("name %s is not defined (AgentChat fails to load the function): import it with global_imports", n.text())
		default:
			return nil, fmt.Errorf("type %s cannot be translated to a JSON Schema exactly; %s", n.text(), supportedTypes)
		}
	case "sub":
		head := p.resolve(n.base)
		switch head {
		case "typing.Optional":
			if len(n.items) != 1 {
				return nil, fmt.Errorf("%s: Optional takes one type", n.text())
			}
			t, err := p.typeOf(n.items[0])
			if err != nil {
				return nil, err
			}
			return union([]*typ{t, {kind: tNone}}), nil
		case "typing.Union":
			var members []*typ
			for _, it := range n.items {
				t, err := p.typeOf(it)
				if err != nil {
					return nil, err
				}
				members = append(members, t)
			}
			return union(members), nil
		case "builtins.list", "typing.List":
			if len(n.items) != 1 {
				return nil, fmt.Errorf("%s: a list takes one item type", n.text())
			}
			t, err := p.typeOf(n.items[0])
			if err != nil {
				return nil, err
			}
			return &typ{kind: tList, elem: t}, nil
		case "builtins.dict", "typing.Dict":
			if len(n.items) != 2 {
				return nil, fmt.Errorf("%s: a dict takes a key and a value type", n.text())
			}
			k, err := p.typeOf(n.items[0])
			if err != nil {
				return nil, err
			}
			if k.kind != tStr {
				return nil, fmt.Errorf("%s: only str keys are supported (the arguments come as JSON, whose keys are strings)", n.text())
			}
			v, err := p.typeOf(n.items[1])
			if err != nil {
				return nil, err
			}
			return &typ{kind: tDict, elem: v}, nil
		case "typing.Literal":
			t := &typ{kind: tLiteral}
			for _, it := range n.items {
				v, err := it.literal()
				if err != nil || v.kind == vList || v.kind == vDict {
					return nil, fmt.Errorf("%s: a Literal's members must be strings, numbers, booleans or None", n.text())
				}
				if !slices.ContainsFunc(t.values, v.equal) {
					t.values = append(t.values, v)
				}
			}
			if len(t.values) == 0 {
				return nil, fmt.Errorf("%s: Literal needs a member", n.text())
			}
			return t, nil
		case "typing.Annotated":
			if len(n.items) < 1 {
				return nil, fmt.Errorf("%s: Annotated needs a type", n.text())
			}
			return p.typeOf(n.items[0])
		case "":
			return nil, fmt.Errorf("name %s is not defined (AgentChat fails to load the function): import it with global_imports", n.base.text())
		}
		return nil, fmt.Errorf("type %s cannot be translated to a JSON Schema exactly; %s", n.text(), supportedTypes)
	}
	return nil, fmt.Errorf("%s is not a type that can be translated to a JSON Schema exactly; %s", n.text(), supportedTypes)
}

// union builds typing.Union of members: nested unions flattened,
// duplicates removed, a single member standing for itself.
func union(members []*typ) *typ {
	var flat []*typ
	for _, m := range members {
		var add []*typ
		if m.kind == tUnion {
			add = m.members
		} else {
			add = []*typ{m}
		}
		for _, a := range add {
			if !slices.ContainsFunc(flat, a.equal) {
				flat = append(flat, a)
			}
		}
	}
	if len(flat) == 1 {
		return flat[0]
	}
	return &typ{kind: tUnion, members: flat}
}

// schemaKV is one key of a JSON Schema object and its encoded value.
type schemaKV struct {
	key string
	val []byte
}

// schema returns the JSON Schema of t as pydantic writes it, its keys
// unsorted (the caller sorts them).
func (t *typ) schema() []schemaKV {
	simple := func(name string) []schemaKV { return []schemaKV{{"type", quote(name)}} }
	switch t.kind {
	case tStr:
		return simple("string")
	case tInt:
		return simple("integer")
	case tFloat:
		return simple("number")
	case tBool:
		return simple("boolean")
	case tNone:
		return simple("null")
	case tAny:
		return nil
	case tList:
		items := []byte("{}")
		if t.elem != nil {
			items = encodeSchema(t.elem.schema())
		}
		return []schemaKV{{"items", items}, {"type", quote("array")}}
	case tDict:
		kv := []schemaKV{{"type", quote("object")}}
		if t.elem != nil && t.elem.kind != tAny {
			kv = append(kv, schemaKV{"additionalProperties", encodeSchema(t.elem.schema())})
		}
		return kv
	case tLiteral:
		var b bytes.Buffer
		key := "const"
		if len(t.values) == 1 {
			t.values[0].writeJSON(&b, "const")
		} else {
			key = "enum"
			b.WriteByte('[')
			for i, v := range t.values {
				if i > 0 {
					b.WriteByte(',')
				}
				v.writeJSON(&b, "enum")
			}
			b.WriteByte(']')
		}
		kv := []schemaKV{{key, b.Bytes()}}
		kind := t.values[0].kind
		same := true
		for _, v := range t.values {
			same = same && v.kind == kind
		}
		if same {
			kv = append(kv, schemaKV{"type", quote(t.values[0].typeName())})
		}
		return kv
	case tUnion:
		// pydantic makes a union with None nullable: the other members,
		// then {"type": "null"}, wherever None stood.
		var choices [][]byte
		nullable := false
		for _, m := range t.members {
			if m.kind == tNone {
				nullable = true
				continue
			}
			s := encodeSchema(m.schema())
			if !slices.ContainsFunc(choices, func(c []byte) bool { return bytes.Equal(c, s) }) {
				choices = append(choices, s)
			}
		}
		if nullable {
			choices = append(choices, []byte(`{"type":"null"}`))
		}
		var b bytes.Buffer
		b.WriteByte('[')
		b.Write(bytes.Join(choices, []byte(",")))
		b.WriteByte(']')
		return []schemaKV{{"anyOf", b.Bytes()}}
	}
	return nil
}

// encodeSchema writes kv as a JSON object with its keys sorted, as
// pydantic sorts every schema's keys.
func encodeSchema(kv []schemaKV) []byte {
	slices.SortStableFunc(kv, func(a, b schemaKV) int { return strings.Compare(a.key, b.key) })
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range kv {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(&b, e.key)
		b.WriteByte(':')
		b.Write(e.val)
	}
	b.WriteByte('}')
	return b.Bytes()
}

func quote(s string) []byte {
	var b bytes.Buffer
	writeString(&b, s)
	return b.Bytes()
}

func bigInt(i int64) *big.Int { return big.NewInt(i) }

// title is pydantic's default title of a field: the name title-cased as
// Python's str.title does (a letter after a non-letter is upper case, the
// others lower case) with underscores as spaces.
func title(name string) string {
	b := []byte(name)
	prevCased := false
	for i, c := range b {
		isUpper, isLower := c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z'
		switch {
		case isLower && !prevCased:
			b[i] = c - 'a' + 'A'
		case isUpper && prevCased:
			b[i] = c - 'A' + 'a'
		}
		prevCased = isUpper || isLower
	}
	return strings.ReplaceAll(string(b), "_", " ")
}

// Schema is the JSON Schema of the function's parameters as AgentChat
// sends it to the model: {"type": "object", "properties", "required",
// "additionalProperties": false}, each property with pydantic's keys
// (default, description, title and the type's) in pydantic's order.
func (f *Function) Schema() []byte {
	var b bytes.Buffer
	b.WriteString(`{"type":"object","properties":{`)
	var required []string
	for i, prm := range f.Params {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(&b, prm.Name)
		b.WriteByte(':')
		kv := prm.typ.schema()
		if prm.def != nil {
			var d bytes.Buffer
			prm.def.writeJSON(&d, "default")
			kv = append(kv, schemaKV{"default", d.Bytes()})
		} else {
			required = append(required, prm.Name)
		}
		if !prm.noDescription {
			kv = append(kv, schemaKV{"description", quote(prm.Description)})
		}
		kv = append(kv, schemaKV{"title", quote(title(prm.Name))})
		b.Write(encodeSchema(kv))
	}
	b.WriteString(`},"required":[`)
	for i, r := range required {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(&b, r)
	}
	b.WriteString(`],"additionalProperties":false}`)
	return b.Bytes()
}
