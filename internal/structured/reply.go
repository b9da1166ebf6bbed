package structured

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/pytext"
)

// Object is a reply read into its type's fields: what pydantic's
// model_validate_json makes of it.
type Object struct {
	names []string
	vals  []*value
}

// Read validates a model's reply against the schema as AgentChat does
// (output_content_type.model_validate_json): the reply must be one JSON
// object; each field takes its value, or its default when the reply has
// none; members that are no field are dropped. Integers may come as
// numbers with no fraction, numbers as integers (they become floats).
func (s *Schema) Read(text string) (*Object, error) {
	v, err := parseValue([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if v.kind != kindObject {
		return nil, fmt.Errorf("the reply is a JSON %s, not an object", v.kind)
	}
	o := &Object{}
	var errs []error
	for _, f := range s.fields {
		x := v.get(f.name)
		if x == nil {
			if f.required || f.def == nil {
				errs = append(errs, fmt.Errorf("%s: field required", f.name))
				continue
			}
			o.names = append(o.names, f.name)
			o.vals = append(o.vals, literal(f.t, f.def))
			continue
		}
		n, err := convert(f.t, x)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.name, err))
			continue
		}
		o.names = append(o.names, f.name)
		o.vals = append(o.vals, n)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return o, nil
}

// literal is a default as pydantic holds and writes it: pydantic does not
// validate defaults, so a number is an int or a float as it is written
// (which is what str() shows), but its JSON serializer writes a number of
// a float field as a float.
func literal(t typ, v *value) *value {
	c := v.clone()
	var walk func(*typ, *value)
	walk = func(t *typ, x *value) {
		switch x.kind {
		case kindNumber:
			f, err := strconv.ParseFloat(x.str, 64)
			if err != nil {
				return
			}
			switch {
			case !isIntLiteral(x.str):
				x.str, x.b = ryuFloat(f), true
			case t != nil && t.kind == "number":
				x.py, x.str = x.str, ryuFloat(f)
			}
		case kindArray:
			var et *typ
			if t != nil {
				et = t.items
			}
			for _, e := range x.elems {
				walk(et, e)
			}
		case kindObject:
			for _, e := range x.vals {
				walk(nil, e)
			}
		}
	}
	walk(&t, c)
	return c
}

// convert validates x as t and returns it as pydantic holds it (numbers in
// the form its JSON serializer writes them; b marks a float).
func convert(t typ, x *value) (*value, error) {
	if x.kind == kindNull {
		if t.nullable {
			return x, nil
		}
		return nil, errors.New("input should not be null")
	}
	switch t.kind {
	case "string":
		if x.kind != kindString {
			return nil, fmt.Errorf("input should be a valid string, not a JSON %s", x.kind)
		}
		return x, nil
	case "boolean":
		return toBool(x)
	case "integer":
		return toInt(x)
	case "number":
		return toFloat(x)
	case "enum":
		for _, e := range t.enum {
			if e.kind == kindString && x.kind == kindString && e.str == x.str {
				return x, nil
			}
			if e.kind == kindNumber && x.kind == kindNumber {
				if n, err := toInt(x); err == nil && n.str == e.str {
					return n, nil
				}
			}
		}
		var allowed []string
		for _, e := range t.enum {
			allowed = append(allowed, e.String())
		}
		return nil, fmt.Errorf("input should be one of %s", strings.Join(allowed, ", "))
	case "array":
		if x.kind != kindArray {
			return nil, fmt.Errorf("input should be a valid list, not a JSON %s", x.kind)
		}
		out := &value{kind: kindArray}
		for i, e := range x.elems {
			n, err := convert(*t.items, e)
			if err != nil {
				return nil, fmt.Errorf("item %d: %w", i, err)
			}
			out.elems = append(out.elems, n)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported type %q", t.kind)
}

// The strings pydantic's lax mode reads as numbers.
var (
	intString   = regexp.MustCompile(`^[+-]?[0-9]+(_[0-9]+)*$`)
	floatString = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$`)
)

// toInt reads an integer as pydantic's lax mode does: an integer, a number
// without a fractional part (2.0), a boolean (1, 0), or a string holding
// one of those numbers (surrounding whitespace and digit-separating
// underscores allowed).
func toInt(x *value) (*value, error) {
	lit := x.str
	switch x.kind {
	case kindBool:
		if x.b {
			return &value{kind: kindNumber, str: "1"}, nil
		}
		return &value{kind: kindNumber, str: "0"}, nil
	case kindString:
		lit = strings.TrimSpace(x.str)
		switch {
		case intString.MatchString(lit):
			lit = strings.ReplaceAll(lit, "_", "")
		case floatString.MatchString(lit):
		default:
			return nil, errors.New("input should be a valid integer, unable to parse string as an integer")
		}
	case kindNumber:
	default:
		return nil, fmt.Errorf("input should be a valid integer, not a JSON %s", x.kind)
	}
	if isIntLiteral(lit) {
		n, ok := new(big.Int).SetString(strings.TrimPrefix(lit, "+"), 10)
		if !ok {
			return nil, errors.New("input should be a valid integer")
		}
		return &value{kind: kindNumber, str: n.String()}, nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) || f != math.Trunc(f) {
		return nil, errors.New("input should be a valid integer, got a number with a fractional part")
	}
	return &value{kind: kindNumber, str: new(big.Float).SetFloat64(f).Text('f', 0)}, nil
}

// toFloat reads a number as pydantic's lax mode does: a number, a boolean
// (1.0, 0.0) or a string holding a number. Infinities and NaN, which
// pydantic accepts and writes as null, are refused.
func toFloat(x *value) (*value, error) {
	lit := x.str
	switch x.kind {
	case kindBool:
		lit = "0"
		if x.b {
			lit = "1"
		}
	case kindString:
		lit = strings.TrimSpace(x.str)
		if !floatString.MatchString(lit) {
			return nil, errors.New("input should be a valid number, unable to parse string as a number")
		}
	case kindNumber:
		// pydantic's JSON parser reads an integer of more than 18 digits
		// as a big integer, which its float validator refuses.
		if isIntLiteral(lit) && len(strings.TrimLeft(lit, "-")) > 18 {
			return nil, errors.New("input should be a valid number")
		}
	default:
		return nil, fmt.Errorf("input should be a valid number, not a JSON %s", x.kind)
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, errors.New("input should be a finite number")
	}
	return &value{kind: kindNumber, str: ryuFloat(f), b: true}, nil
}

// toBool reads a boolean as pydantic's lax mode does: a boolean, the
// numbers 0 and 1, or one of the strings it knows (in any case).
func toBool(x *value) (*value, error) {
	switch x.kind {
	case kindBool:
		return x, nil
	case kindNumber:
		f, err := strconv.ParseFloat(x.str, 64)
		if err == nil && (f == 0 || f == 1) {
			return &value{kind: kindBool, b: f == 1}, nil
		}
	case kindString:
		switch strings.ToLower(x.str) {
		case "1", "on", "t", "true", "y", "yes":
			return &value{kind: kindBool, b: true}, nil
		case "0", "off", "f", "false", "n", "no":
			return &value{kind: kindBool}, nil
		}
	}
	return nil, errors.New("input should be a valid boolean")
}

// JSON is the object as pydantic's model_dump_json writes it: compact,
// the fields in order.
func (o *Object) JSON() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range o.names {
		if i > 0 {
			b.WriteByte(',')
		}
		pytext.WriteJSONString(&b, n, false)
		b.WriteByte(':')
		o.vals[i].encode(&b)
	}
	b.WriteByte('}')
	return b.String()
}

// Format fills in a format string as StructuredMessage.to_text does:
// format_string.format(**content.model_dump()), each value as Python's
// str() writes it. The format string was checked with CheckFormat.
func (o *Object) Format(format string) string {
	parts, _ := pytext.ParseFormat(format)
	var b strings.Builder
	for _, p := range parts {
		if !p.Field {
			b.WriteString(p.Text)
			continue
		}
		for i, n := range o.names {
			if n == p.Text {
				pyStr(&b, o.vals[i])
			}
		}
	}
	return b.String()
}

// CheckFormat checks a format string against the schema: every field it
// names must be a property.
func (s *Schema) CheckFormat(format string) error {
	parts, err := pytext.ParseFormat(format)
	if err != nil {
		return err
	}
	props := s.Properties()
	for _, p := range parts {
		if !p.Field {
			continue
		}
		found := false
		for _, n := range props {
			found = found || n == p.Text
		}
		if !found {
			return fmt.Errorf("{%s} names no field of the type (fields: %s)", p.Text, strings.Join(props, ", "))
		}
	}
	return nil
}

// pyStr writes str(v) of the Python value pydantic's model_dump gives.
func pyStr(b *strings.Builder, v *value) {
	if v.kind == kindString {
		b.WriteString(v.str)
		return
	}
	pyRepr(b, v)
}

// pyRepr writes repr(v): what str() of a list shows of its elements.
func pyRepr(b *strings.Builder, v *value) {
	switch v.kind {
	case kindNull:
		b.WriteString("None")
	case kindBool:
		if v.b {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case kindNumber:
		if v.py != "" {
			b.WriteString(v.py)
			return
		}
		if v.b { // a float
			f, _ := strconv.ParseFloat(v.str, 64)
			b.WriteString(pytext.Float(f))
			return
		}
		b.WriteString(v.str)
	case kindString:
		pytext.WriteStrRepr(b, v.str)
	case kindArray:
		b.WriteByte('[')
		for i, e := range v.elems {
			if i > 0 {
				b.WriteString(", ")
			}
			pyRepr(b, e)
		}
		b.WriteByte(']')
	case kindObject:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			pytext.WriteStrRepr(b, k)
			b.WriteString(": ")
			pyRepr(b, v.vals[i])
		}
		b.WriteByte('}')
	}
}

// ryuFloat writes f as pydantic's JSON serializer does (the ryu
// algorithm's shortest digits): 1.0, 1e16, 1e-7, 0.0001. Python's own repr
// (1e+16, 1e-05) is pytext.Float.
func ryuFloat(f float64) string {
	neg := math.Signbit(f)
	if neg {
		f = -f
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, exps, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(exps)
	if digits == "0" {
		exp = 0
	}
	n := len(digits)
	point := exp + 1 // digits before the decimal point
	var out string
	switch {
	case point >= n && point <= 16:
		out = digits + strings.Repeat("0", point-n) + ".0"
	case point > 0 && point <= 16:
		out = digits[:point] + "." + digits[point:]
	case point > -5 && point <= 0:
		out = "0." + strings.Repeat("0", -point) + digits
	case n == 1:
		out = digits + "e" + strconv.Itoa(point-1)
	default:
		out = digits[:1] + "." + digits[1:] + "e" + strconv.Itoa(point-1)
	}
	if neg {
		out = "-" + out
	}
	return out
}
