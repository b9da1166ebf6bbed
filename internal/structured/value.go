package structured

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/pytext"
)

// value is a JSON value that keeps the order of an object's members: a
// structured reply's JSON is written in the order of its type's fields,
// which is the order of the schema's properties, and encoding/json's maps
// have none.
type value struct {
	kind kind
	// members of an object, in order.
	keys []string
	vals []*value
	// elements of an array.
	elems []*value
	// str is a string's text or a number's literal (for a read value, as
	// pydantic's JSON serializer writes it).
	str string
	// b is a boolean's value; on a number, that it is a Python float.
	b bool
	// py, on a number, is Python's str() of it where that is not derived
	// from str and b (an int default of a float field: pydantic writes it
	// as a float, and str() of it is the int's).
	py string
}

type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func (k kind) String() string {
	return [...]string{"null", "boolean", "number", "string", "array", "object"}[k]
}

// get returns the member key of an object (the last one, if repeated).
func (v *value) get(key string) *value {
	if v == nil || v.kind != kindObject {
		return nil
	}
	for i := len(v.keys) - 1; i >= 0; i-- {
		if v.keys[i] == key {
			return v.vals[i]
		}
	}
	return nil
}

// set replaces member key of an object, or appends it.
func (v *value) set(key string, x *value) {
	for i, k := range v.keys {
		if k == key {
			v.vals[i] = x
			return
		}
	}
	v.keys = append(v.keys, key)
	v.vals = append(v.vals, x)
}

// del removes member key of an object.
func (v *value) del(key string) {
	for i := 0; i < len(v.keys); i++ {
		if v.keys[i] == key {
			v.keys = append(v.keys[:i], v.keys[i+1:]...)
			v.vals = append(v.vals[:i], v.vals[i+1:]...)
			i--
		}
	}
}

// maxDepth bounds the nesting of a parsed value (a schema or a reply).
const maxDepth = 64

// parseValue parses exactly one JSON value (surrounding whitespace allowed).
func parseValue(b []byte) (*value, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := readValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

func readValue(dec *json.Decoder, depth int) (*value, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested more than %d levels deep", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("no JSON value")
		}
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return &value{kind: kindNull}, nil
	case bool:
		return &value{kind: kindBool, b: t}, nil
	case json.Number:
		return &value{kind: kindNumber, str: string(t)}, nil
	case string:
		return &value{kind: kindString, str: t}, nil
	case json.Delim:
		switch t {
		case '{':
			v := &value{kind: kindObject}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				x, err := readValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				v.keys = append(v.keys, k)
				v.vals = append(v.vals, x)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return v, nil
		case '[':
			v := &value{kind: kindArray}
			for dec.More() {
				x, err := readValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				v.elems = append(v.elems, x)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return v, nil
		}
	}
	return nil, fmt.Errorf("unexpected %v", tok)
}

// encode writes v as compact JSON, members in order. Strings are escaped as
// pydantic's JSON serializer escapes them (see writeString).
func (v *value) encode(b *strings.Builder) {
	switch v.kind {
	case kindNull:
		b.WriteString("null")
	case kindBool:
		b.WriteString(strconv.FormatBool(v.b))
	case kindNumber:
		b.WriteString(v.str)
	case kindString:
		pytext.WriteJSONString(b, v.str, false)
	case kindArray:
		b.WriteByte('[')
		for i, e := range v.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			e.encode(b)
		}
		b.WriteByte(']')
	case kindObject:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			pytext.WriteJSONString(b, k, false)
			b.WriteByte(':')
			v.vals[i].encode(b)
		}
		b.WriteByte('}')
	}
}

func (v *value) String() string {
	var b strings.Builder
	v.encode(&b)
	return b.String()
}

// clone copies v deeply.
func (v *value) clone() *value {
	c := *v
	c.keys = append([]string(nil), v.keys...)
	c.vals = make([]*value, len(v.vals))
	for i, x := range v.vals {
		c.vals[i] = x.clone()
	}
	c.elems = make([]*value, len(v.elems))
	for i, x := range v.elems {
		c.elems[i] = x.clone()
	}
	return &c
}
