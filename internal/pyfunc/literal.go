package pyfunc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentd/agentd/internal/pytext"
)

// valueKind is the Python type of a literal value.
type valueKind int

const (
	vNone valueKind = iota
	vBool
	vInt
	vFloat
	vStr
	vList // a list or a tuple: both are JSON arrays
	vDict
)

// value is a Python literal: what a parameter's default or a Literal's
// member may be.
type value struct {
	kind  valueKind
	b     bool
	i     *big.Int
	f     float64
	s     string
	items []value  // vList
	keys  []string // vDict, in insertion order
	vals  []value  // vDict
}

// equal reports whether a and b are the same literal, as typing.Literal
// deduplicates its members: equal and of the same type.
func (a value) equal(b value) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case vNone:
		return true
	case vBool:
		return a.b == b.b
	case vInt:
		return a.i.Cmp(b.i) == 0
	case vFloat:
		return a.f == b.f
	case vStr:
		return a.s == b.s
	}
	return false
}

// typeName is the JSON Schema type of a literal's Python type, as pydantic
// writes it for a Literal's members.
func (a value) typeName() string {
	return [...]string{vNone: "null", vBool: "boolean", vInt: "integer", vFloat: "number", vStr: "string", vList: "array", vDict: "object"}[a.kind]
}

// writeJSON writes v as pydantic's JSON Schema holds a default: Python's
// float repr, and the keys of every dict sorted except those of a dict
// whose parent key is "default" or "properties" (pydantic's
// GenerateJsonSchema.sort, which passes a list's parent key on to its
// items).
func (v value) writeJSON(b *bytes.Buffer, parentKey string) {
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
		writeString(b, v.s)
	case vList:
		b.WriteByte('[')
		for i, it := range v.items {
			if i > 0 {
				b.WriteByte(',')
			}
			it.writeJSON(b, parentKey)
		}
		b.WriteByte(']')
	case vDict:
		order := make([]int, len(v.keys))
		for i := range order {
			order[i] = i
		}
		if parentKey != "default" && parentKey != "properties" {
			slices.SortStableFunc(order, func(x, y int) int { return strings.Compare(v.keys[x], v.keys[y]) })
		}
		b.WriteByte('{')
		for n, i := range order {
			if n > 0 {
				b.WriteByte(',')
			}
			writeString(b, v.keys[i])
			b.WriteByte(':')
			v.vals[i].writeJSON(b, v.keys[i])
		}
		b.WriteByte('}')
	}
}

// writeString writes s as a JSON string, with non-ASCII characters as they
// are and without HTML escaping.
func writeString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	b.Truncate(b.Len() - 1)
}

// floatRepr formats f as Python's repr does (and so json.dumps): the
// shortest digits that round-trip, in positional notation with at least
// one decimal when the decimal exponent is in [-4, 16), else in scientific
// notation with a signed exponent of at least two digits.
func floatRepr(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		// Not reachable from a literal; what json.dumps writes.
		switch {
		case math.IsNaN(f):
			return "NaN"
		case f > 0:
			return "Infinity"
		}
		return "-Infinity"
	}
	return pytext.Float(f)
}

// errUnsupported marks a literal form agentd does not evaluate (f-strings,
// bytes, complex numbers, \N{…} escapes).
var errUnsupported = errors.New("unsupported literal")

// parseNumber evaluates a Python numeric literal.
func parseNumber(text string) (value, error) {
	t := strings.ReplaceAll(text, "_", "")
	if strings.HasSuffix(t, "j") || strings.HasSuffix(t, "J") {
		return value{}, fmt.Errorf("%w: complex number %s", errUnsupported, text)
	}
	lower := strings.ToLower(t)
	base := 10
	switch {
	case strings.HasPrefix(lower, "0x"):
		base, t = 16, t[2:]
	case strings.HasPrefix(lower, "0o"):
		base, t = 8, t[2:]
	case strings.HasPrefix(lower, "0b"):
		base, t = 2, t[2:]
	case strings.ContainsAny(lower, ".e"):
		f, err := strconv.ParseFloat(t, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return value{}, fmt.Errorf("invalid number %s", text)
		}
		return value{kind: vFloat, f: f}, nil
	}
	i, ok := new(big.Int).SetString(t, base)
	if !ok || base == 10 && len(t) > 1 && t[0] == '0' && strings.Trim(t, "0") != "" {
		return value{}, fmt.Errorf("invalid number %s", text)
	}
	return value{kind: vInt, i: i}, nil
}

// parseString evaluates one Python string literal token (prefix and quotes
// included).
func parseString(text string) (string, error) {
	i := strings.IndexAny(text, `'"`)
	prefix := strings.ToLower(text[:i])
	body := text[i:]
	if strings.Contains(prefix, "b") {
		return "", fmt.Errorf("%w: bytes literal", errUnsupported)
	}
	if strings.Contains(prefix, "f") {
		return "", fmt.Errorf("%w: f-string", errUnsupported)
	}
	q := 1
	if len(body) >= 6 && (strings.HasPrefix(body, `"""`) || strings.HasPrefix(body, `'''`)) {
		q = 3
	}
	body = body[q : len(body)-q]
	if strings.Contains(prefix, "r") {
		return body, nil
	}
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' || i+1 >= len(body) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := body[i]; e {
		case '\n':
		case '\r':
			if i+1 < len(body) && body[i+1] == '\n' {
				i++
			}
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+n >= len(body) {
				return "", fmt.Errorf("truncated \\%c escape", e)
			}
			v, err := strconv.ParseUint(body[i+1:i+1+n], 16, 32)
			if err != nil || v > utf8.MaxRune || v >= 0xD800 && v <= 0xDFFF {
				return "", fmt.Errorf("invalid \\%c escape", e)
			}
			b.WriteRune(rune(v))
			i += n
		case 'N':
			return "", fmt.Errorf("%w: \\N{...} escape", errUnsupported)
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(body) && j < i+3 && body[j] >= '0' && body[j] <= '7' {
				j++
			}
			v, _ := strconv.ParseUint(body[i:j], 8, 32)
			b.WriteRune(rune(v))
			i = j - 1
		default:
			// Python keeps an unknown escape as it is.
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return b.String(), nil
}
