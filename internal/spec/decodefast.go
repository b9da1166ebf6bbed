package spec

import (
	"bytes"
	"reflect"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeFast decodes a spec in one pass over the body, straight into Go
// values, when there is nothing in it to report. Every create decodes a
// spec, and DecodeSpec's thorough way (a generic decode to find every
// problem with its path, then json.Unmarshal, which scans each replay
// response three times) cost about a tenth of the server's CPU.
//
// It gives up (ok is false) at the first thing DecodeSpec could report, and
// at whatever it does not handle (null, duplicate keys, deep nesting);
// DecodeSpec then decodes the body its thorough way and says what is wrong.
// So for a body it accepts it must give exactly what json.Unmarshal gives:
// FuzzDecodeSpec checks that against the thorough way.
//
// It also returns the body compacted, as json.Compact would: what is stored
// and hashed. That is body itself when it holds no whitespace between
// tokens.
func decodeFast(body []byte) (*Spec, []byte, bool) {
	// What storableProblems refuses: a NUL can only come from an escape, as
	// JSON strings hold no raw control characters.
	if !utf8.Valid(body) || bytes.Contains(body, []byte(`\u0000`)) || loneSurrogate(body) {
		return nil, nil, false
	}
	d := fastDecoder{b: body}
	var s Spec
	d.ws()
	if d.peek() != '{' || !d.value(reflect.ValueOf(&s).Elem()) {
		return nil, nil, false
	}
	d.ws()
	if d.i != len(d.b) {
		return nil, nil, false
	}
	if d.compact == nil {
		return &s, body, true
	}
	return &s, append(d.compact, body[d.kept:]...), true
}

// maxFastDepth bounds the nesting decodeFast follows; deeper bodies take
// the thorough way, which has encoding/json's own bound.
const maxFastDepth = 200

// fastDecoder is decodeFast's position in the body.
type fastDecoder struct {
	b     []byte
	i     int
	depth int
	// compact is the body up to kept without whitespace between tokens;
	// nil until the first such whitespace.
	compact []byte
	kept    int
}

func (d *fastDecoder) peek() byte {
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// ws skips JSON whitespace, leaving it out of the compacted body.
func (d *fastDecoder) ws() {
	start := d.i
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
			continue
		}
		break
	}
	if d.i == start {
		return
	}
	if d.compact == nil {
		d.compact = make([]byte, 0, len(d.b))
	}
	d.compact = append(d.compact, d.b[d.kept:start]...)
	d.kept = d.i
}

// next skips whitespace and then c, reporting whether c was there.
func (d *fastDecoder) next(c byte) bool {
	d.ws()
	if d.peek() == c {
		d.i++
		return true
	}
	return false
}

// value decodes the value at d.i (no whitespace before it) into v.
func (d *fastDecoder) value(v reflect.Value) bool {
	d.depth++
	defer func() { d.depth-- }()
	if d.depth > maxFastDepth {
		return false
	}
	switch v.Type() {
	case rawMessageType:
		start := d.i
		if !d.skip() {
			return false
		}
		v.SetBytes(bytes.Clone(d.b[start:d.i]))
		return true
	case modelRefType: // as ModelRef.UnmarshalJSON
		ref := v.Addr().Interface().(*ModelRef)
		switch d.peek() {
		case '"':
			s, ok := d.str()
			ref.Name = s
			return ok
		case '{':
			ref.Inline = new(Model)
			return d.value(reflect.ValueOf(ref.Inline).Elem())
		}
		return false
	case toolApprovalType: // as ToolApproval.UnmarshalJSON
		ta := v.Addr().Interface().(*ToolApproval)
		switch d.peek() {
		case '"':
			s, ok := d.str()
			ta.Mode = s
			return ok
		case '[':
			return d.value(reflect.ValueOf(&ta.Tools).Elem())
		}
		return false
	case replayResponseType: // as ReplayResponse.UnmarshalJSON
		if d.peek() == '"' {
			s, ok := d.str()
			v.Addr().Interface().(*ReplayResponse).Content = s
			return ok
		}
	}
	switch v.Kind() {
	case reflect.Pointer:
		if d.peek() == 'n' {
			return false // null: the thorough way
		}
		p := reflect.New(v.Type().Elem())
		if !d.value(p.Elem()) {
			return false
		}
		v.Set(p)
		return true
	case reflect.Struct:
		return d.object(v)
	case reflect.Slice:
		return d.array(v)
	case reflect.Map:
		return d.mapping(v)
	case reflect.String:
		if d.peek() != '"' {
			return false
		}
		s, ok := d.str()
		v.SetString(s)
		return ok
	case reflect.Bool:
		switch {
		case d.literal("true"):
			v.SetBool(true)
			return true
		case d.literal("false"):
			return true
		}
		return false
	case reflect.Int, reflect.Int64:
		tok, integer := d.number()
		if tok == nil || !integer {
			return false
		}
		n, err := strconv.ParseInt(string(tok), 10, 64)
		if err != nil || v.OverflowInt(n) {
			return false
		}
		v.SetInt(n)
		return true
	case reflect.Float64:
		tok, _ := d.number()
		if tok == nil {
			return false
		}
		f, err := strconv.ParseFloat(string(tok), 64)
		if err != nil {
			return false
		}
		v.SetFloat(f)
		return true
	}
	return false
}

// object decodes a JSON object into struct v: every key must name a field,
// once.
func (d *fastDecoder) object(v reflect.Value) bool {
	if d.peek() != '{' {
		return false
	}
	d.i++
	fields := fieldIndexes(v.Type())
	if fields == nil {
		return false
	}
	var seen uint64
	if d.next('}') {
		return true
	}
	for {
		d.ws()
		key, ok := d.key()
		if !ok {
			return false
		}
		f, known := fields[string(key)]
		if !known || seen&(1<<f) != 0 {
			return false
		}
		seen |= 1 << f
		if !d.next(':') {
			return false
		}
		d.ws()
		if !d.value(v.Field(f)) {
			return false
		}
		if d.next(',') {
			continue
		}
		return d.next('}')
	}
}

// array decodes a JSON array into slice v; [] is an empty slice, not nil,
// as encoding/json has it.
func (d *fastDecoder) array(v reflect.Value) bool {
	if d.peek() != '[' {
		return false
	}
	d.i++
	v.Set(reflect.MakeSlice(v.Type(), 0, 0))
	if d.next(']') {
		return true
	}
	for {
		d.ws()
		n := v.Len()
		v.Grow(1)
		v.SetLen(n + 1)
		if !d.value(v.Index(n)) {
			return false
		}
		if d.next(',') {
			continue
		}
		return d.next(']')
	}
}

// mapping decodes a JSON object into map v, each key once.
func (d *fastDecoder) mapping(v reflect.Value) bool {
	if d.peek() != '{' || v.Type().Key().Kind() != reflect.String {
		return false
	}
	d.i++
	v.Set(reflect.MakeMap(v.Type()))
	if d.next('}') {
		return true
	}
	for {
		d.ws()
		if d.peek() != '"' {
			return false
		}
		s, ok := d.str()
		if !ok {
			return false
		}
		k := reflect.ValueOf(s).Convert(v.Type().Key())
		if v.MapIndex(k).IsValid() || !d.next(':') {
			return false
		}
		d.ws()
		e := reflect.New(v.Type().Elem()).Elem()
		if !d.value(e) {
			return false
		}
		v.SetMapIndex(k, e)
		if d.next(',') {
			continue
		}
		return d.next('}')
	}
}

// key returns the bytes of an object key without escapes; a key with an
// escape names no field of ours, so the thorough way reports it.
func (d *fastDecoder) key() ([]byte, bool) {
	if d.peek() != '"' {
		return nil, false
	}
	start := d.i + 1
	for i := start; i < len(d.b); i++ {
		switch c := d.b[i]; {
		case c == '"':
			d.i = i + 1
			return d.b[start:i], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// str decodes the string at d.i.
func (d *fastDecoder) str() (string, bool) {
	start := d.i + 1
	i := start
	for ; i < len(d.b); i++ {
		c := d.b[i]
		if c == '"' {
			d.i = i + 1
			return string(d.b[start:i]), true
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", false
		}
	}
	buf := append(make([]byte, 0, i-start+16), d.b[start:i]...)
	for i < len(d.b) {
		c := d.b[i]
		switch {
		case c == '"':
			d.i = i + 1
			return string(buf), true
		case c < 0x20:
			return "", false
		case c != '\\':
			buf = append(buf, c)
			i++
			continue
		}
		if i+1 >= len(d.b) {
			return "", false
		}
		switch e := d.b[i+1]; e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := d.hex4(i + 2)
			if !ok {
				return "", false
			}
			i += 4
			if utf16.IsSurrogate(r) {
				lo, ok := d.hex4(i + 4)
				if !ok || d.b[i+2] != '\\' || d.b[i+3] != 'u' {
					return "", false
				}
				if r = utf16.DecodeRune(r, lo); r == utf8.RuneError {
					return "", false
				}
				i += 6
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", false
		}
		i += 2
	}
	return "", false
}

// hex4 reads the four hex digits of a \u escape at i.
func (d *fastDecoder) hex4(i int) (rune, bool) {
	if i+4 > len(d.b) {
		return 0, false
	}
	var r rune
	for _, c := range d.b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// literal consumes lit (true, false, null) if it is at d.i.
func (d *fastDecoder) literal(lit string) bool {
	if !bytes.HasPrefix(d.b[d.i:], []byte(lit)) {
		return false
	}
	d.i += len(lit)
	return true
}

// number consumes a JSON number and returns its text (nil if there is
// none) and whether it has neither fraction nor exponent.
func (d *fastDecoder) number() ([]byte, bool) {
	start, i := d.i, d.i
	digits := func() bool {
		j := i
		for i < len(d.b) && d.b[i] >= '0' && d.b[i] <= '9' {
			i++
		}
		return i > j
	}
	if i < len(d.b) && d.b[i] == '-' {
		i++
	}
	switch {
	case i < len(d.b) && d.b[i] == '0':
		i++
	case !digits():
		return nil, false
	}
	integer := true
	if i < len(d.b) && d.b[i] == '.' {
		i++
		if !digits() {
			return nil, false
		}
		integer = false
	}
	if i < len(d.b) && (d.b[i] == 'e' || d.b[i] == 'E') {
		i++
		if i < len(d.b) && (d.b[i] == '+' || d.b[i] == '-') {
			i++
		}
		if !digits() {
			return nil, false
		}
		integer = false
	}
	d.i = i
	return d.b[start:i], integer
}

// skip consumes any JSON value (a RawMessage's), checking what
// storableProblems checks of it: its numbers fit a float64.
func (d *fastDecoder) skip() bool {
	d.depth++
	defer func() { d.depth-- }()
	if d.depth > maxFastDepth {
		return false
	}
	switch d.peek() {
	case '{', '[':
		closing := byte('}')
		obj := d.b[d.i] == '{'
		if !obj {
			closing = ']'
		}
		d.i++
		if d.next(closing) {
			return true
		}
		for {
			d.ws()
			if obj {
				if d.peek() != '"' {
					return false
				}
				if _, ok := d.str(); !ok || !d.next(':') {
					return false
				}
				d.ws()
			}
			if !d.skip() {
				return false
			}
			if d.next(',') {
				continue
			}
			return d.next(closing)
		}
	case '"':
		_, ok := d.str()
		return ok
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case 'n':
		return d.literal("null")
	}
	tok, _ := d.number()
	if tok == nil {
		return false
	}
	_, err := strconv.ParseFloat(string(tok), 64)
	return err == nil
}

// fieldIndexes maps the JSON names of a struct's fields to their indexes,
// or is nil for a struct decodeFast does not handle (more than 64 fields).
func fieldIndexes(t reflect.Type) map[string]int {
	if m, ok := fieldIndexesByType.Load(t); ok {
		return m.(map[string]int)
	}
	var m map[string]int
	if t.NumField() <= 64 {
		m = make(map[string]int, t.NumField())
		for name, f := range jsonFieldsOf(t) {
			m[name] = f.Index[0]
		}
	}
	fieldIndexesByType.Store(t, m)
	return m
}

// fieldIndexesByType caches fieldIndexes; its values are never written
// after Store.
var fieldIndexesByType sync.Map
