package pyfunc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/agentd/agentd/internal/spec/problem"
)

// SchemaError says why a JSON Schema cannot be translated into the model
// AgentChat's HttpTool builds from it. Pointer is the JSON pointer of the
// part, relative to the schema.
type SchemaError struct {
	Pointer string
	Message string
}

func (e *SchemaError) Error() string {
	if e.Pointer == "" {
		return e.Message
	}
	return e.Pointer + ": " + e.Message
}

// FromJSONSchema reads an HttpTool's json_schema as AgentChat 0.7.5 reads
// it: json_schema_to_pydantic (0.4) makes a pydantic model of it, whose own
// JSON Schema the model is shown and which validates a call's arguments.
// The Function returned stands for that model: its Schema is the one
// AgentChat shows, its Arguments and ModelDump validate as the model does.
//
// What the translation keeps (recorded from AgentChat, see
// internal/tool/testdata): each property's type (string, integer, number,
// boolean, null, array with items, object), description, default, enum and
// const (a Literal), and title (dropped, as json_schema_to_pydantic drops
// it); a property that is not required and has no default defaults to
// None without becoming nullable; a required one with a default is not
// required. Anything else — constraints, formats, nested objects with
// properties, $ref, combinators — is refused with its pointer, since
// agentd could not show or check it exactly as AgentChat does.
func FromJSONSchema(schema []byte) (*Function, error) {
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	v, err := decodeOrdered(dec, 0)
	top, ok := v.(*object)
	if err != nil || !ok {
		return nil, &SchemaError{Message: "must be a JSON Schema object"}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &SchemaError{Message: "must be one JSON object"}
	}
	var props *object
	var required []string
	for i, k := range top.keys {
		val := top.vals[i]
		ptr := "/" + problem.Escape(k)
		switch k {
		case "type":
			if val != "object" {
				return nil, &SchemaError{ptr, `must be "object"`}
			}
		case "properties":
			if props, ok = val.(*object); !ok {
				return nil, &SchemaError{ptr, "must be an object of property schemas"}
			}
		case "required":
			list, ok := val.([]any)
			if !ok {
				return nil, &SchemaError{ptr, "must be a list of property names"}
			}
			for j, it := range list {
				s, ok := it.(string)
				if !ok {
					return nil, &SchemaError{fmt.Sprintf("%s/%d", ptr, j), "must be a property name"}
				}
				required = append(required, s)
			}
		case "additionalProperties":
			if val != false {
				return nil, &SchemaError{ptr, "may only be false: the model AgentChat builds ignores arguments it does not define"}
			}
		case "title", "description", "$schema":
			// The model's name and docstring: not part of the parameters.
		default:
			return nil, &SchemaError{ptr, "is not translated: agentd reads type, properties, required, additionalProperties (false), title and description here, as AgentChat's HttpTool does"}
		}
	}
	f := &Function{fromSchema: true}
	if props != nil {
		if len(props.keys) > maxParams {
			return nil, &SchemaError{"/properties", fmt.Sprintf("more than %d properties", maxParams)}
		}
		for i, name := range props.keys {
			ptr := "/properties/" + problem.Escape(name)
			switch {
			case !isIdentifier(name):
				return nil, &SchemaError{ptr, "agentd translates property names that are ASCII identifiers (letters, digits, '_')"}
			case strings.HasPrefix(name, "_"):
				return nil, &SchemaError{ptr, "pydantic does not take a field name with a leading underscore"}
			}
			t, desc, def, err := schemaType(props.vals[i], ptr, 0)
			if err != nil {
				return nil, err
			}
			p := Param{Name: name, typ: t, def: def, noDescription: desc == nil}
			if desc != nil {
				p.Description = *desc
			}
			if p.def == nil && !slices.Contains(required, name) {
				p.def = &value{kind: vNone}
			}
			f.Params = append(f.Params, p)
		}
	}
	for j, r := range required {
		if !slices.ContainsFunc(f.Params, func(p Param) bool { return p.Name == r }) {
			return nil, &SchemaError{fmt.Sprintf("/required/%d", j), fmt.Sprintf("names no property: %q", r)}
		}
	}
	return f, nil
}

// schemaType translates one property's (or array items') schema.
func schemaType(v any, ptr string, depth int) (t *typ, desc *string, def *value, err error) {
	if depth > maxDepth {
		return nil, nil, nil, &SchemaError{ptr, "is nested too deeply"}
	}
	obj, ok := v.(*object)
	if !ok {
		return nil, nil, nil, &SchemaError{ptr, "must be a JSON Schema object"}
	}
	var typeName string
	var items any
	var literal []value
	hasType, hasItems := false, false
	for i, k := range obj.keys {
		val := obj.vals[i]
		kptr := ptr + "/" + problem.Escape(k)
		switch k {
		case "type":
			s, ok := val.(string)
			if !ok {
				return nil, nil, nil, &SchemaError{kptr, "must be one type name (agentd does not translate a list of types)"}
			}
			typeName, hasType = s, true
		case "description":
			s, ok := val.(string)
			if !ok {
				return nil, nil, nil, &SchemaError{kptr, "must be a string"}
			}
			desc = &s
		case "title":
			// json_schema_to_pydantic does not pass it on: the title is
			// pydantic's, from the property's name.
		case "default":
			d, err := valueOf(val)
			if err != nil {
				return nil, nil, nil, &SchemaError{kptr, err.Error()}
			}
			def = &d
		case "items":
			items, hasItems = val, true
		case "enum", "const":
			if literal != nil {
				return nil, nil, nil, &SchemaError{kptr, "enum and const together are not translated"}
			}
			members := []any{val}
			if k == "enum" {
				list, ok := val.([]any)
				if !ok || len(list) == 0 {
					return nil, nil, nil, &SchemaError{kptr, "must be a non-empty list"}
				}
				members = list
			}
			for _, m := range members {
				lv, err := valueOf(m)
				if err != nil || lv.kind == vList || lv.kind == vDict {
					return nil, nil, nil, &SchemaError{kptr, "members must be strings, numbers, booleans or null (a Literal's)"}
				}
				if !slices.ContainsFunc(literal, lv.equal) {
					literal = append(literal, lv)
				}
			}
		default:
			return nil, nil, nil, &SchemaError{kptr, "is not translated: agentd reads type, description, default, enum, const, items and title of a property, " +
				"and could not show or check this keyword as AgentChat's HttpTool does"}
		}
	}
	if literal != nil {
		return &typ{kind: tLiteral, values: literal}, desc, def, nil
	}
	if !hasType {
		return nil, nil, nil, &SchemaError{ptr, "needs a type (AgentChat's HttpTool refuses a property without one)"}
	}
	switch typeName {
	case "string":
		t = &typ{kind: tStr}
	case "integer":
		t = &typ{kind: tInt}
	case "number":
		t = &typ{kind: tFloat}
	case "boolean":
		t = &typ{kind: tBool}
	case "null":
		t = &typ{kind: tNone}
	case "object":
		t = &typ{kind: tDict}
	case "array":
		if !hasItems {
			return nil, nil, nil, &SchemaError{ptr, "an array needs items (AgentChat's HttpTool refuses one without)"}
		}
		elem, _, _, err := schemaType(items, ptr+"/items", depth+1)
		if err != nil {
			return nil, nil, nil, err
		}
		t = &typ{kind: tList, elem: elem}
	default:
		return nil, nil, nil, &SchemaError{ptr + "/type", fmt.Sprintf("%q is not a JSON Schema type agentd translates (string, integer, number, boolean, null, array, object)", typeName)}
	}
	if hasItems && typeName != "array" {
		return nil, nil, nil, &SchemaError{ptr + "/items", "is only translated for an array"}
	}
	return t, desc, def, nil
}
