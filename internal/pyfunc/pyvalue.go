package pyfunc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/pytext"
)

// Value is a Python value that JSON can hold (None, bool, int, float, str,
// list, dict), as Python's json module decodes it.
type Value struct{ v value }

// ParseJSON decodes one JSON document as Python's json.loads does: an
// integer literal is an int (of any size), one with a fraction or an
// exponent a float, an object keeps its keys' order (a repeated key keeps
// its first place and its last value).
func ParseJSON(b []byte) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeOrdered(dec, 0)
	if err != nil {
		return Value{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Value{}, errors.New("extra data after the JSON value")
	}
	pv, err := valueOf(v)
	return Value{pv}, err
}

// valueOf converts a decodeOrdered value.
func valueOf(v any) (value, error) {
	switch x := v.(type) {
	case nil:
		return value{kind: vNone}, nil
	case bool:
		return value{kind: vBool, b: x}, nil
	case string:
		return value{kind: vStr, s: x}, nil
	case json.Number:
		s := x.String()
		if strings.ContainsAny(s, ".eE") {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				return value{}, fmt.Errorf("invalid number %s", s)
			}
			return value{kind: vFloat, f: f}, nil
		}
		i, ok := new(big.Int).SetString(s, 10)
		if !ok {
			return value{}, fmt.Errorf("invalid number %s", s)
		}
		return value{kind: vInt, i: i}, nil
	case []any:
		out := value{kind: vList, items: make([]value, 0, len(x))}
		for _, it := range x {
			iv, err := valueOf(it)
			if err != nil {
				return value{}, err
			}
			out.items = append(out.items, iv)
		}
		return out, nil
	case *object:
		out := value{kind: vDict, keys: x.keys, vals: make([]value, 0, len(x.vals))}
		for _, it := range x.vals {
			iv, err := valueOf(it)
			if err != nil {
				return value{}, err
			}
			out.vals = append(out.vals, iv)
		}
		return out, nil
	}
	return value{}, fmt.Errorf("unexpected JSON value %v", v)
}

// ModelDump validates a call's arguments as Arguments does and returns
// them as the model's model_dump() holds them: every field in the
// schema's order, those left out with their defaults.
func (f *Function) ModelDump(raw []byte) ([]Field, error) {
	b, err := f.arguments(raw, true)
	if err != nil {
		return nil, err
	}
	v, err := ParseJSON(b)
	if err != nil {
		return nil, fmt.Errorf("the validated arguments: %w", err)
	}
	fields := make([]Field, len(v.v.keys))
	for i, k := range v.v.keys {
		fields[i] = Field{Name: k, Value: Value{v.v.vals[i]}}
	}
	return fields, nil
}

// Field is one field of a model_dump().
type Field struct {
	Name  string
	Value Value
}

// IsNone reports whether v is None.
func (v Value) IsNone() bool { return v.v.kind == vNone }

// Bool returns v's value if it is a bool.
func (v Value) Bool() (b, ok bool) { return v.v.b, v.v.kind == vBool }

// Items returns the items of a list.
func (v Value) Items() ([]Value, bool) {
	if v.v.kind != vList {
		return nil, false
	}
	out := make([]Value, len(v.v.items))
	for i, it := range v.v.items {
		out[i] = Value{it}
	}
	return out, true
}

// Str is Python's str(v): a string itself, anything else its repr.
func (v Value) Str() string {
	if v.v.kind == vStr {
		return v.v.s
	}
	return v.Repr()
}

// Repr is Python's repr(v).
func (v Value) Repr() string {
	var b strings.Builder
	v.v.writeRepr(&b)
	return b.String()
}

// DumpJSON is json.dumps(v, ensure_ascii=False, separators=(",", ":")),
// the body httpx sends for json=v.
func (v Value) DumpJSON() string {
	var b strings.Builder
	v.v.writeDump(&b)
	return b.String()
}

func (v value) writeRepr(b *strings.Builder) {
	switch v.kind {
	case vNone:
		b.WriteString("None")
	case vBool:
		b.WriteString(map[bool]string{true: "True", false: "False"}[v.b])
	case vInt:
		b.WriteString(v.i.String())
	case vFloat:
		switch {
		case math.IsNaN(v.f):
			b.WriteString("nan")
		case math.IsInf(v.f, 1):
			b.WriteString("inf")
		case math.IsInf(v.f, -1):
			b.WriteString("-inf")
		default:
			b.WriteString(floatRepr(v.f))
		}
	case vStr:
		pytext.WriteStrRepr(b, v.s)
	case vList:
		b.WriteByte('[')
		for i, it := range v.items {
			if i > 0 {
				b.WriteString(", ")
			}
			it.writeRepr(b)
		}
		b.WriteByte(']')
	case vDict:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			pytext.WriteStrRepr(b, k)
			b.WriteString(": ")
			v.vals[i].writeRepr(b)
		}
		b.WriteByte('}')
	}
}

func (v value) writeDump(b *strings.Builder) {
	switch v.kind {
	case vNone:
		b.WriteString("null")
	case vBool:
		b.WriteString(strconv.FormatBool(v.b))
	case vInt:
		b.WriteString(v.i.String())
	case vFloat:
		b.WriteString(floatRepr(v.f))
	case vStr:
		pytext.WriteJSONString(b, v.s, false)
	case vList:
		b.WriteByte('[')
		for i, it := range v.items {
			if i > 0 {
				b.WriteByte(',')
			}
			it.writeDump(b)
		}
		b.WriteByte(']')
	case vDict:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			pytext.WriteJSONString(b, k, false)
			b.WriteByte(':')
			v.vals[i].writeDump(b)
		}
		b.WriteByte('}')
	}
}
