// Package jsonobj writes small JSON objects field by field, byte for byte
// what encoding/json writes for the same values, without reflection. The
// log's hottest event data (a turn's selection and its message's
// bookkeeping) is written with it at a tenth of json.Marshal's cost; a
// string json.Marshal would escape is not written but reported (OK), so
// that the caller falls back to json.Marshal and the bytes stay the same.
package jsonobj

import "strconv"

// Writer writes one JSON object. Its zero value is ready: Open, the
// fields, then Close.
type Writer struct {
	b      []byte
	bad    bool
	fields int
	outer  int // fields of the enclosing object while in Begin/End
}

// Open starts the object.
func (w *Writer) Open() { w.b = append(make([]byte, 0, 128), '{') }

// Close ends the object and returns it; ok is false when a string needed
// escaping, and then the bytes are not the object.
func (w *Writer) Close() (b []byte, ok bool) { return append(w.b, '}'), !w.bad }

// Key writes a member's name (which the caller knows needs no escaping).
func (w *Writer) Key(k string) {
	if w.fields > 0 {
		w.b = append(w.b, ',')
	}
	w.fields++
	w.b = append(w.b, '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
}

// Str writes a string member.
func (w *Writer) Str(k, v string) {
	w.Key(k)
	w.quote(v)
}

// quote writes v quoted if json.Marshal would write it as it is: printable
// ASCII without the quote, the backslash and what it escapes for HTML.
func (w *Writer) quote(v string) {
	for i := range len(v) {
		switch c := v[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			w.bad = true
			return
		}
	}
	w.b = append(w.b, '"')
	w.b = append(w.b, v...)
	w.b = append(w.b, '"')
}

// Int writes an integer member.
func (w *Writer) Int(k string, v int64) {
	w.Key(k)
	w.b = strconv.AppendInt(w.b, v, 10)
}

// Bool writes a boolean member.
func (w *Writer) Bool(k string, v bool) {
	w.Key(k)
	w.b = strconv.AppendBool(w.b, v)
}

// Strs writes a list of strings; nil is null, as json.Marshal has it.
func (w *Writer) Strs(k string, vs []string) {
	w.Key(k)
	if vs == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = append(w.b, '[')
	for i, v := range vs {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.quote(v)
	}
	w.b = append(w.b, ']')
}

// Begin starts an object member, one level deep; End ends it.
func (w *Writer) Begin(k string) {
	w.Key(k)
	w.b = append(w.b, '{')
	w.outer, w.fields = w.fields, 0
}

// End ends the member Begin started.
func (w *Writer) End() {
	w.b = append(w.b, '}')
	w.fields = w.outer
}
