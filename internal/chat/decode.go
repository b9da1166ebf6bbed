package chat

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// DecodeSpec decodes a spec strictly: every unknown field and every value of
// the wrong JSON type is reported with its JSON pointer, all at once, rather
// than stopping at the first one as encoding/json does. It is the first half
// of validation; Validate does the rest.
func DecodeSpec(body []byte) (*Spec, []Problem) {
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
	checkShape(&probs, "", v, reflect.TypeFor[Spec]())
	if len(probs) > 0 {
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
	replayResponseType = reflect.TypeFor[ReplayResponse]()
)

// checkShape walks a generic JSON value beside the Go type it will be decoded
// into and records unknown fields and type mismatches.
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
		checkShape(probs, path, v, reflect.TypeFor[ModelConfig]())
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
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			if !ok {
				*probs = append(*probs, Problem{Path: path + "/" + escapePointer(k), Message: "unknown field"})
				continue
			}
			checkShape(probs, path+"/"+escapePointer(k), obj[k], ft)
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
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			checkShape(probs, path+"/"+escapePointer(k), obj[k], t.Elem())
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

// jsonFields maps the JSON names of a struct's fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	m := make(map[string]reflect.Type, t.NumField())
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
		m[name] = f.Type
	}
	return m
}

// escapePointer escapes a key for use in a JSON pointer (RFC 6901).
func escapePointer(k string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
}
