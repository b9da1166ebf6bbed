// Package structured reads a structured-output type (AgentChat's
// output_content_type, as its component JSON holds it: the pydantic model's
// JSON Schema) and does with a model's reply what AgentChat does with it:
// the schema the model is asked for (the OpenAI client's strict
// response_format), the reply validated into the model's fields and written
// back as pydantic's model_dump_json writes it, and an optional format
// string filled in as Python's str.format fills it.
//
// Only the schemas whose pydantic behaviour agentd reproduces exactly are
// read: an object whose properties are strings, integers, numbers,
// booleans, lists of those, enums (Literal) and Optional ones, with
// defaults and descriptions. Anything else (nested models, dicts,
// constraints, formats) is refused with the pointer to it, rather than run
// with a different outcome.
package structured

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/spec/problem"
)

// Problem is one reason a schema or a format string is refused; Path is a
// JSON pointer relative to the schema (or "" for the format string).
type Problem = problem.Problem

// OrderPath is the Path of a problem with the property order given to
// Parse rather than with the schema.
const OrderPath = "property_order"

// Schema is a structured-output type read from its JSON Schema.
type Schema struct {
	root   *value // the schema, its properties in field order
	fields []field
}

type field struct {
	name     string
	t        typ
	def      *value // the default, nil without one
	required bool
}

// typ is what a field holds.
type typ struct {
	kind     string // string, integer, number, boolean, array, enum
	items    *typ   // an array's elements
	enum     []*value
	nullable bool
}

// The schema keys pydantic writes for a field of a supported type.
var (
	fieldKeys = []string{"title", "description", "default", "type", "items", "enum", "anyOf", "examples"}
	baseKeys  = []string{"title", "description", "type", "items", "enum"}
	rootKeys  = []string{"type", "properties", "required", "title", "description"}
)

const unsupportedHint = "agentd reproduces AgentChat's validation exactly only for strings, integers, numbers, booleans, lists of them, enums (Literal) and Optional ones"

// Parse reads a schema. order, when not nil, is the order of the
// properties (JSON objects lose the order of their members once stored);
// it must list each property once. Every problem is returned at once.
func Parse(raw []byte, order []string) (*Schema, []Problem) {
	root, err := parseValue(raw)
	if err != nil {
		return nil, []Problem{{Message: "is not valid JSON: " + err.Error()}}
	}
	var probs problem.List
	add := probs.Add
	if root.kind != kindObject {
		return nil, []Problem{{Message: "must be a JSON Schema object"}}
	}
	for _, k := range root.keys {
		if !slices.Contains(rootKeys, k) {
			add("/"+problem.Escape(k), "is not supported: the type must be an object of plain fields (%s)", unsupportedHint)
		}
	}
	if t := root.get("type"); t == nil || t.kind != kindString || t.str != "object" {
		add("/type", `must be "object"`)
	}
	for _, k := range []string{"title", "description"} {
		if v := root.get(k); v != nil && v.kind != kindString {
			add("/"+k, "must be a string")
		}
	}
	props := root.get("properties")
	if props == nil || props.kind != kindObject {
		add("/properties", "must be an object")
		return nil, probs.Items()
	}
	required := map[string]bool{}
	if r := root.get("required"); r != nil {
		if r.kind != kindArray {
			add("/required", "must be a list of property names")
		} else {
			for i, e := range r.elems {
				if e.kind != kindString || props.get(e.str) == nil {
					add("/required/"+strconv.Itoa(i), "must name a property")
					continue
				}
				required[e.str] = true
			}
		}
	}
	s := &Schema{root: root.clone()}
	seen := map[string]bool{}
	for i, name := range props.keys {
		p := "/properties/" + problem.Escape(name)
		if seen[name] {
			add(p, "is repeated")
			continue
		}
		seen[name] = true
		f := field{name: name, required: required[name]}
		fv := props.vals[i]
		if fv.kind != kindObject {
			add(p, "must be an object")
			continue
		}
		for _, k := range fv.keys {
			if !slices.Contains(fieldKeys, k) {
				add(p+"/"+problem.Escape(k), "is not supported (%s)", unsupportedHint)
			}
		}
		f.def = fv.get("default")
		if alts := fv.get("anyOf"); alts != nil {
			f.t = anyOf(p+"/anyOf", alts, add)
			if fv.get("type") != nil || fv.get("items") != nil || fv.get("enum") != nil {
				add(p, "has both anyOf and a type")
			}
		} else {
			f.t = baseType(p, fv, false, add)
		}
		if !f.required && f.def == nil {
			add(p, "is not required and has no default: pydantic writes a default for every optional field")
		}
		s.fields = append(s.fields, f)
	}
	if order != nil {
		if len(order) != len(props.keys) {
			add(OrderPath, "must list each of the %d properties once", len(props.keys))
		}
		pos := map[string]bool{}
		for _, n := range order {
			if props.get(n) == nil || pos[n] {
				add(OrderPath, "must list each property once: %q is not a property or is repeated", n)
			}
			pos[n] = true
		}
	}
	if probs.Len() > 0 {
		return nil, probs.Items()
	}
	if order != nil {
		byName := map[string]field{}
		for _, f := range s.fields {
			byName[f.name] = f
		}
		sp := s.root.get("properties")
		vals := map[string]*value{}
		for i, k := range sp.keys {
			vals[k] = sp.vals[i]
		}
		s.fields = s.fields[:0]
		sp.keys, sp.vals = nil, nil
		for _, n := range order {
			s.fields = append(s.fields, byName[n])
			sp.keys = append(sp.keys, n)
			sp.vals = append(sp.vals, vals[n])
		}
	}
	return s, nil
}

// anyOf reads Optional[X]: X and null, in either order.
func anyOf(path string, v *value, add func(string, string, ...any)) typ {
	if v.kind != kindArray || len(v.elems) != 2 {
		add(path, "is supported only as Optional: a type and null (%s)", unsupportedHint)
		return typ{}
	}
	nulls := 0
	var t typ
	for i, e := range v.elems {
		if tt := e.get("type"); tt != nil && tt.kind == kindString && tt.str == "null" && len(e.keys) == 1 {
			nulls++
			continue
		}
		t = baseType(path+"/"+strconv.Itoa(i), e, true, add)
	}
	if nulls != 1 {
		add(path, "is supported only as Optional: a type and null (%s)", unsupportedHint)
	}
	t.nullable = true
	return t
}

// baseType reads a field's type without null: a scalar, an enum or a list.
// checkKeys says whether to check v's keys (a field's own are checked by
// its caller).
func baseType(path string, v *value, checkKeys bool, add func(string, string, ...any)) typ {
	if v.kind != kindObject {
		add(path, "must be an object")
		return typ{}
	}
	for _, k := range v.keys {
		if checkKeys && !slices.Contains(baseKeys, k) {
			add(path+"/"+problem.Escape(k), "is not supported (%s)", unsupportedHint)
		}
	}
	tv := v.get("type")
	if e := v.get("enum"); e != nil {
		if e.kind != kindArray || len(e.elems) == 0 {
			add(path+"/enum", "must be a non-empty list")
			return typ{}
		}
		for i, x := range e.elems {
			if x.kind != kindString && !(x.kind == kindNumber && isIntLiteral(x.str)) {
				add(path+"/enum/"+strconv.Itoa(i), "must be a string or an integer (%s)", unsupportedHint)
			}
		}
		if tv != nil && (tv.kind != kindString || (tv.str != "string" && tv.str != "integer")) {
			add(path+"/type", `must be "string" or "integer" for an enum`)
		}
		return typ{kind: "enum", enum: e.elems}
	}
	if tv == nil || tv.kind != kindString {
		add(path+"/type", "must be one of string, integer, number, boolean, array (%s)", unsupportedHint)
		return typ{}
	}
	switch tv.str {
	case "string", "integer", "number", "boolean":
		if v.get("items") != nil {
			add(path+"/items", "is only for arrays")
		}
		return typ{kind: tv.str}
	case "array":
		it := v.get("items")
		if it == nil {
			add(path+"/items", "is required: a list of any type is not supported (%s)", unsupportedHint)
			return typ{}
		}
		et := baseType(path+"/items", it, true, add)
		if et.kind == "array" {
			add(path+"/items", "lists of lists are not supported (%s)", unsupportedHint)
		}
		if it.get("default") != nil || it.get("anyOf") != nil {
			add(path+"/items", "must be a plain type (%s)", unsupportedHint)
		}
		return typ{kind: "array", items: &et}
	}
	add(path+"/type", "%q is not supported (%s)", tv.str, unsupportedHint)
	return typ{}
}

// Properties returns the properties in field order.
func (s *Schema) Properties() []string {
	out := make([]string, len(s.fields))
	for i, f := range s.fields {
		out[i] = f.name
	}
	return out
}

// JSON returns the schema with its properties in field order.
func (s *Schema) JSON() json.RawMessage {
	return json.RawMessage(s.root.String())
}

// Strict returns the schema as AgentChat's OpenAI client sends it in a
// strict json_schema response_format: the openai library's
// to_strict_json_schema of the model (additionalProperties false on
// objects, every property required, null defaults dropped).
func (s *Schema) Strict() json.RawMessage {
	r := s.root.clone()
	ensureStrict(r)
	return json.RawMessage(r.String())
}

// ensureStrict is the openai library's _ensure_strict_json_schema for the
// schemas Parse accepts (no $defs, $ref or allOf).
func ensureStrict(v *value) {
	if v.kind != kindObject {
		return
	}
	if t := v.get("type"); t != nil && t.kind == kindString && t.str == "object" && v.get("additionalProperties") == nil {
		v.set("additionalProperties", &value{kind: kindBool})
	}
	if props := v.get("properties"); props != nil && props.kind == kindObject {
		req := &value{kind: kindArray}
		for _, k := range props.keys {
			req.elems = append(req.elems, &value{kind: kindString, str: k})
		}
		v.set("required", req)
		for _, p := range props.vals {
			ensureStrict(p)
		}
	}
	if it := v.get("items"); it != nil && it.kind == kindObject {
		ensureStrict(it)
	}
	if a := v.get("anyOf"); a != nil && a.kind == kindArray {
		for _, e := range a.elems {
			ensureStrict(e)
		}
	}
	if d := v.get("default"); d != nil && d.kind == kindNull {
		v.del("default")
	}
}

func isIntLiteral(s string) bool {
	return !strings.ContainsAny(s, ".eE")
}
