package pyfunc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// Arguments checks a call's arguments (a JSON object) against the
// signature and returns them as pydantic's validation hands them to the
// function, written as JSON that Python's json module reads back to the
// same values: a float parameter given 3 gets 3.0, an int parameter given
// 2.0 gets 2, "7" becomes 7 for an int, "yes" True for a bool (pydantic's
// lax mode), unknown names are dropped (pydantic ignores extra fields),
// and a missing required parameter or a value of the wrong type is an
// error listing what is wrong. Parameters left out keep the function's
// own defaults.
func (f *Function) Arguments(raw []byte) ([]byte, error) {
	return f.arguments(raw, false)
}

// arguments is Arguments; with defaults, the parameters left out are
// written with their defaults, as a pydantic model's model_dump() holds
// them.
func (f *Function) arguments(raw []byte, defaults bool) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	decoded, err := decodeOrdered(dec, 0)
	obj, isObj := decoded.(*object)
	if err != nil || !isObj {
		return nil, errors.New("arguments must be a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("arguments must be one JSON object")
	}
	args := map[string]any{}
	for i, k := range obj.keys {
		args[k] = obj.vals[i]
	}
	var b bytes.Buffer
	var problems []string
	b.WriteByte('{')
	n := 0
	for _, p := range f.Params {
		v, ok := args[p.Name]
		if !ok {
			if p.Required() {
				problems = append(problems, fmt.Sprintf("%s: is required", p.Name))
			} else if defaults {
				if n > 0 {
					b.WriteByte(',')
				}
				n++
				writeString(&b, p.Name)
				b.WriteByte(':')
				p.def.writeJSON(&b, "default")
			}
			continue
		}
		var vb bytes.Buffer
		if msg := coerce(&vb, p.typ, v, false); msg != "" {
			if msg2 := coerceLax(p.typ, v, &vb); msg2 != "" {
				problems = append(problems, fmt.Sprintf("%s: %s", p.Name, msg))
				continue
			}
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		writeString(&b, p.Name)
		b.WriteByte(':')
		b.Write(vb.Bytes())
	}
	b.WriteByte('}')
	if len(problems) > 0 {
		if len(problems) > 10 {
			problems = append(problems[:10], "…")
		}
		what := "the function's signature"
		if f.fromSchema {
			what = "the tool's parameters"
		}
		return nil, fmt.Errorf("arguments do not match %s: %s", what, strings.Join(problems, "; "))
	}
	return b.Bytes(), nil
}

// coerceLax retries a value that strict validation refused in lax mode.
func coerceLax(t *typ, v any, out *bytes.Buffer) string {
	out.Reset()
	return coerce(out, t, v, true)
}

// coerce writes v as type t accepts it and returns "" or why it does not
// fit. Strict mode takes the JSON type the Python type maps to (an int for
// a float too); lax mode adds pydantic's conversions. A union tries every
// member strictly first, then every member in lax mode, as pydantic's
// smart union does.
func coerce(out *bytes.Buffer, t *typ, v any, lax bool) string {
	switch t.kind {
	case tAny:
		writeAny(out, v)
		return ""
	case tNone:
		if v == nil {
			out.WriteString("null")
			return ""
		}
		return "must be null"
	case tStr:
		if s, ok := v.(string); ok {
			writeString(out, s)
			return ""
		}
		return "must be a string"
	case tBool:
		switch x := v.(type) {
		case bool:
			out.WriteString(strconv.FormatBool(x))
			return ""
		case json.Number:
			if lax {
				if f, err := x.Float64(); err == nil && (f == 0 || f == 1) {
					out.WriteString(strconv.FormatBool(f == 1))
					return ""
				}
			}
		case string:
			if lax {
				switch strings.ToLower(strings.TrimSpace(x)) {
				case "0", "off", "f", "false", "n", "no":
					out.WriteString("false")
					return ""
				case "1", "on", "t", "true", "y", "yes":
					out.WriteString("true")
					return ""
				}
			}
		}
		return "must be a boolean"
	case tInt:
		num, isNum := v.(json.Number)
		switch x := v.(type) {
		case string:
			if lax {
				num, isNum = json.Number(strings.TrimSpace(x)), true
			}
		case bool:
			if lax {
				out.WriteString(map[bool]string{true: "1", false: "0"}[x])
				return ""
			}
		}
		if !isNum {
			return "must be an integer"
		}
		s := num.String()
		if i, ok := new(big.Int).SetString(s, 10); ok {
			out.WriteString(i.String())
			return ""
		}
		if !lax {
			return "must be an integer"
		}
		f, ok := new(big.Float).SetPrec(2048).SetString(s)
		if !ok || f.IsInf() || math.Abs(float64(f.MantExp(nil))) > 4096 {
			return "must be an integer"
		}
		if i, acc := f.Int(nil); acc == big.Exact {
			out.WriteString(i.String())
			return ""
		}
		return "must be an integer, not a number with a fractional part"
	case tFloat:
		num, isNum := v.(json.Number)
		switch x := v.(type) {
		case string:
			if lax {
				num, isNum = json.Number(strings.TrimSpace(x)), true
			}
		case bool:
			if lax {
				out.WriteString(map[bool]string{true: "1.0", false: "0.0"}[x])
				return ""
			}
		}
		if !isNum {
			return "must be a number"
		}
		f, err := strconv.ParseFloat(num.String(), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return "must be a finite number"
		}
		out.WriteString(floatRepr(f))
		return ""
	case tList:
		items, ok := v.([]any)
		if !ok {
			return "must be an array"
		}
		out.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				out.WriteByte(',')
			}
			if t.elem == nil {
				writeAny(out, it)
				continue
			}
			if msg := coerce(out, t.elem, it, lax); msg != "" {
				return fmt.Sprintf("item %d %s", i, msg)
			}
		}
		out.WriteByte(']')
		return ""
	case tDict:
		obj, ok := v.(*object)
		if !ok {
			return "must be an object"
		}
		out.WriteByte('{')
		for i, k := range obj.keys {
			if i > 0 {
				out.WriteByte(',')
			}
			writeString(out, k)
			out.WriteByte(':')
			if t.elem == nil {
				writeAny(out, obj.vals[i])
				continue
			}
			if msg := coerce(out, t.elem, obj.vals[i], lax); msg != "" {
				return fmt.Sprintf("value of %q %s", k, msg)
			}
		}
		out.WriteByte('}')
		return ""
	case tLiteral:
		for _, want := range t.values {
			if literalMatches(want, v) {
				want.writeJSON(out, "")
				return ""
			}
		}
		var b bytes.Buffer
		for i, want := range t.values {
			if i > 0 {
				b.WriteString(", ")
			}
			want.writeJSON(&b, "")
		}
		return "must be one of " + b.String()
	case tUnion:
		for _, mode := range []bool{false, true} {
			if mode && !lax {
				break
			}
			for _, m := range t.members {
				var mb bytes.Buffer
				if coerce(&mb, m, v, mode) == "" {
					out.Write(mb.Bytes())
					return ""
				}
			}
		}
		return "matches none of the union's types"
	}
	return "cannot be checked"
}

// literalMatches reports whether a decoded JSON value is the literal want.
func literalMatches(want value, v any) bool {
	switch x := v.(type) {
	case nil:
		return want.kind == vNone
	case bool:
		return want.kind == vBool && want.b == x
	case string:
		return want.kind == vStr && want.s == x
	case json.Number:
		switch want.kind {
		case vInt:
			i, ok := new(big.Int).SetString(x.String(), 10)
			return ok && i.Cmp(want.i) == 0
		case vFloat:
			f, err := x.Float64()
			return err == nil && f == want.f
		}
	}
	return false
}

// writeAny writes a decoded JSON value as it came (numbers as written).
func writeAny(out *bytes.Buffer, v any) {
	switch x := v.(type) {
	case nil:
		out.WriteString("null")
	case bool:
		out.WriteString(strconv.FormatBool(x))
	case json.Number:
		out.WriteString(x.String())
	case string:
		writeString(out, x)
	case []any:
		out.WriteByte('[')
		for i, it := range x {
			if i > 0 {
				out.WriteByte(',')
			}
			writeAny(out, it)
		}
		out.WriteByte(']')
	case *object:
		out.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				out.WriteByte(',')
			}
			writeString(out, k)
			out.WriteByte(':')
			writeAny(out, x.vals[i])
		}
		out.WriteByte('}')
	}
}

// object is a decoded JSON object that keeps its keys' order, as Python's
// json module does (a duplicate key keeps its first place and its last
// value).
type object struct {
	keys []string
	vals []any
}

// maxArgDepth bounds the nesting of arguments decodeOrdered reads.
const maxArgDepth = 64

// decodeOrdered decodes the next JSON value with objects as *object.
func decodeOrdered(dec *json.Decoder, depth int) (any, error) {
	if depth > maxArgDepth {
		return nil, errors.New("nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('['):
		items := []any{}
		for dec.More() {
			v, err := decodeOrdered(dec, depth+1)
			if err != nil {
				return nil, err
			}
			items = append(items, v)
		}
		_, err := dec.Token()
		return items, err
	case json.Delim('{'):
		obj := &object{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			v, err := decodeOrdered(dec, depth+1)
			if err != nil {
				return nil, err
			}
			if i := slices.Index(obj.keys, k); i >= 0 {
				obj.vals[i] = v
				continue
			}
			obj.keys = append(obj.keys, k)
			obj.vals = append(obj.vals, v)
		}
		_, err := dec.Token()
		return obj, err
	}
	return tok, nil
}
