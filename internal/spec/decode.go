package spec

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/agentd/agentd/internal/spec/problem"
)

// DecodeSpec decodes a spec strictly: every unknown field and every value of
// the wrong JSON type is reported with its JSON pointer, all at once, rather
// than stopping at the first one as encoding/json does. It is the first half
// of validation; Validate does the rest.
func DecodeSpec(body []byte) (*Spec, []Problem) {
	if s, _, ok := decodeFast(body); ok {
		return s, nil
	}
	return decodeThorough(body)
}

// decodeCompact is DecodeSpec that also returns the body compacted (as
// json.Compact does), which is what a chat stores and hashes.
//
// An assistant's output_schema without a property_order gets one, from the
// order of its schema's properties in body, and the compacted body says
// so: what a chat stores must not depend on a JSON object's member order,
// which a jsonb column does not keep.
func DecodeCompact(body []byte) (*Spec, []byte, []Problem) {
	s, compact, ok := decodeFast(body)
	if !ok {
		var probs []Problem
		if s, probs = decodeThorough(body); len(probs) > 0 {
			return nil, nil, probs
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, body); err != nil {
			return nil, nil, []Problem{{Message: err.Error()}}
		}
		compact = buf.Bytes()
	}
	compact, err := recordPropertyOrder(s, compact)
	if err != nil {
		return nil, nil, []Problem{{Message: err.Error()}}
	}
	return s, compact, nil
}

// decodeThorough is DecodeSpec for a body decodeFast gave up on: it finds
// every problem, with its path.
func decodeThorough(body []byte) (*Spec, []Problem) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, []Problem{{Path: "", Message: "body is not valid JSON: " + err.Error()}}
	}
	if dec.More() {
		return nil, []Problem{{Path: "", Message: "body must hold exactly one JSON value"}}
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, []Problem{{Path: "", Message: "must be an object"}}
	}
	var probs []Problem
	if probs = storableProblems(body, v); len(probs) > 0 {
		return nil, probs
	}
	if checkShape(&probs, "", v, specType); len(probs) > 0 {
		return nil, probs
	}
	var s Spec
	if err := json.Unmarshal(body, &s); err != nil {
		// The shape check accepts only what Unmarshal can decode, so this is
		// a bug rather than bad input; still report it as a problem.
		return nil, []Problem{{Path: "", Message: err.Error()}}
	}
	return &s, nil
}

var (
	rawMessageType     = reflect.TypeFor[json.RawMessage]()
	modelRefType       = reflect.TypeFor[ModelRef]()
	messageContentType = reflect.TypeFor[MessageContent]()
	replayResponseType = reflect.TypeFor[ReplayResponse]()
	modelConfigType    = reflect.TypeFor[Model]()
	specType           = reflect.TypeFor[Spec]()
	toolApprovalType   = reflect.TypeFor[ToolApproval]()
	taskType           = reflect.TypeFor[Task]()
	stringsType        = reflect.TypeFor[[]string]()
)

// checkShape walks a generic JSON value beside the Go type it will be
// decoded into and records unknown fields and type mismatches. Specs without
// problems seldom come this way (decodeFast takes them), so it says where
// every problem is rather than stopping at the first.
func checkShape(probs *[]Problem, path string, v any, t reflect.Type) {
	if v == nil {
		return // null decodes to the zero value of any Go type
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	add := func(msg string) { *probs = append(*probs, Problem{Path: path, Message: msg}) }
	switch t {
	case rawMessageType:
		return
	case modelRefType:
		if _, ok := v.(string); ok {
			return
		}
		if _, ok := v.(map[string]any); !ok {
			add("must be a model name or a model object")
			return
		}
		checkShape(probs, path, v, modelConfigType)
		return
	case messageContentType:
		switch v := v.(type) {
		case string:
		case []any:
			for i, e := range v {
				b, _ := json.Marshal(e)
				var p Part
				if err := p.UnmarshalJSON(b); err != nil {
					*probs = append(*probs, Problem{Path: path + "/" + strconv.Itoa(i), Message: err.Error()})
				}
			}
		default:
			add("must be a string, or (of a MultiModalMessage) a list of texts and images")
		}
		return
	case taskType:
		switch v.(type) {
		case string, map[string]any, []any:
		default:
			add(errTaskShape.Error())
		}
		return
	case toolApprovalType:
		if _, ok := v.(string); ok {
			return
		}
		if _, ok := v.([]any); !ok {
			add(`must be "never", "always" or a list of tool names`)
			return
		}
		checkShape(probs, path, v, stringsType)
		return
	case replayResponseType:
		if _, ok := v.(string); ok {
			return
		}
		if _, ok := v.(map[string]any); !ok {
			add("must be a string or an object")
			return
		}
		// Fall through to the struct check below.
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			add("must be an object")
			return
		}
		fields := jsonFields(t)
		for _, k := range sortedKeys(obj) {
			ft, known := fields[k]
			if !known {
				*probs = append(*probs, Problem{Path: path + "/" + problem.Escape(k), Message: "unknown field"})
				continue
			}
			checkShape(probs, path+"/"+problem.Escape(k), obj[k], ft)
		}
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			add("must be an array")
			return
		}
		for i, e := range arr {
			checkShape(probs, path+"/"+strconv.Itoa(i), e, t.Elem())
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			add("must be an object")
			return
		}
		for _, k := range sortedKeys(obj) {
			checkShape(probs, path+"/"+problem.Escape(k), obj[k], t.Elem())
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			add("must be a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			add("must be a boolean")
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, ok := v.(json.Number)
		if !ok {
			add("must be an integer")
			return
		}
		if _, err := n.Int64(); err != nil {
			add("must be an integer")
		}
	case reflect.Float64:
		if _, ok := v.(json.Number); !ok {
			add("must be a number")
		}
	}
}

// sortedKeys are obj's keys in order, so that problems come in a stable
// order.
func sortedKeys(obj map[string]any) []string {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// jsonFields maps the JSON names of a struct's fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	// The fields of a type never change: worked out once per type, as
	// encoding/json caches its own, rather than for every object of every
	// spec.
	if m, ok := fieldsByType.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	fields := jsonFieldsOf(t)
	m := make(map[string]reflect.Type, len(fields))
	for name, f := range fields {
		m[name] = f.Type
	}
	fieldsByType.Store(t, m)
	return m
}

// jsonFieldsOf maps the JSON names of a struct's fields to the fields.
func jsonFieldsOf(t reflect.Type) map[string]reflect.StructField {
	m := make(map[string]reflect.StructField, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f
	}
	return m
}

// fieldsByType caches jsonFields; its values are never written after Store.
var fieldsByType sync.Map

// storableProblems reports the values of a body that a store cannot hold,
// so that both stores refuse the same specs (with a 422) instead of one
// storing what the other fails on: invalid UTF-8, a lone UTF-16 surrogate
// escape, a NUL character, and numbers beyond float64's range.
func storableProblems(body []byte, v any) []Problem {
	if !utf8.Valid(body) {
		return []Problem{{Path: "", Message: "body is not valid UTF-8"}}
	}
	if loneSurrogate(body) {
		return []Problem{{Path: "", Message: "body holds a lone UTF-16 surrogate escape (\\ud800-\\udfff not in a pair), which no store can hold"}}
	}
	if storableValue(v) {
		return nil // the common case: no paths worked out for a spec that is fine
	}
	var probs []Problem
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case string:
			if strings.IndexByte(x, 0) >= 0 {
				probs = append(probs, Problem{Path: path, Message: "must not contain the NUL character (\\u0000), which the store cannot hold"})
			}
		case json.Number:
			if _, err := strconv.ParseFloat(string(x), 64); err != nil {
				probs = append(probs, Problem{Path: path, Message: "number out of range"})
			}
		case []any:
			for i, e := range x {
				walk(path+"/"+strconv.Itoa(i), e)
			}
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if strings.IndexByte(k, 0) >= 0 {
					probs = append(probs, Problem{Path: path + "/" + problem.Escape(k), Message: "key must not contain the NUL character (\\u0000), which the store cannot hold"})
				}
				walk(path+"/"+problem.Escape(k), x[k])
			}
		}
	}
	walk("", v)
	return probs
}

// storableValue reports whether a decoded JSON value holds nothing that
// storableProblems would report.
func storableValue(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.IndexByte(x, 0) < 0
	case json.Number:
		_, err := strconv.ParseFloat(string(x), 64)
		return err == nil
	case []any:
		for _, e := range x {
			if !storableValue(e) {
				return false
			}
		}
	case map[string]any:
		for k, e := range x {
			if strings.IndexByte(k, 0) >= 0 || !storableValue(e) {
				return false
			}
		}
	}
	return true
}

// loneSurrogate reports whether JSON text holds a \u escape of a UTF-16
// surrogate that is not part of a high-low pair.
func loneSurrogate(b []byte) bool {
	hex := func(i int) (rune, bool) {
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 32)
		return rune(n), err == nil
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			continue
		}
		r, ok := hex(i)
		if !ok {
			i++ // a two-byte escape such as \\ or \"
			continue
		}
		switch {
		case r >= 0xD800 && r < 0xDC00:
			lo, ok := hex(i + 6)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 11
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		default:
			i += 5
		}
	}
	return false
}
