package spec

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
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
// of validation; Validate does the rest, and Check does both.
func DecodeSpec(body []byte) (*Spec, []Problem) {
	if s, _, ok := decodeFast(body); ok {
		return s, nil
	}
	d := decodeThorough(body)
	if d.probs.Len() > 0 {
		return nil, d.probs.Items()
	}
	return d.spec, nil
}

// DecodeCompact is DecodeSpec that also returns the body compacted (as
// json.Compact does), which is what a chat stores and hashes.
//
// An assistant's output_schema without a property_order gets one, from the
// order of its schema's properties in body, and the compacted body says
// so: what a chat stores must not depend on a JSON object's member order,
// which a jsonb column does not keep.
func DecodeCompact(body []byte) (*Spec, []byte, []Problem) {
	d := decodeCompact(body)
	if d.probs.Len() > 0 {
		return nil, nil, d.probs.Items()
	}
	return d.spec, d.compact, nil
}

// Check reads the spec of a new chat: it decodes body (DecodeCompact) and
// validates it (Validate), and reports the problems of both at once. A
// misspelled field or a value of the wrong type does not hide the rest:
// the spec is validated without them, and what validation would say again
// about a value already reported is left out.
func Check(body []byte, limits Limits, env Env) (*Spec, []byte, []Problem) {
	return decodeCompact(body).check(limits, env, false)
}

// Draft is a spec body decoded (DecodeDraft) but not yet validated: the
// server reads a saved team's body, and the runtime, which knows the
// limits and the models, tools and sandbox it can offer, validates it
// (CheckTeam). Decoding's problems are kept for that check, so that it
// reports them with its own, all at once.
type Draft struct {
	d *decoded
}

// DecodeDraft decodes body as DecodeCompact does, keeping its problems.
func DecodeDraft(body []byte) *Draft { return &Draft{d: decodeCompact(body)} }

// CheckTeam is Check for the spec of a saved team (ValidateTeam): the
// spec and its compacted body, or every problem.
func (d *Draft) CheckTeam(limits Limits, env Env) (*Spec, []byte, []Problem) {
	return d.d.check(limits, env, true)
}

// check validates what was decoded; a value decoding left out for its
// problem is not reported again.
func (d *decoded) check(limits Limits, env Env, team bool) (*Spec, []byte, []Problem) {
	if d.spec == nil {
		return nil, nil, d.probs.Items()
	}
	var probs problem.List
	probs.AddAll("", d.probs.Items())
	for _, p := range validate(d.spec, limits, env, team) {
		if !d.reported(p.Path) {
			probs.Add(p.Path, "%s", p.Message)
		}
	}
	if probs.Len() > 0 {
		return nil, nil, probs.Items()
	}
	return d.spec, d.compact, nil
}

// decoded is what decoding a body found: the spec (nil when nothing could
// be made of the body), the body compacted (only without problems), the
// problems, and the pointers of the values left out of the spec because of
// them.
type decoded struct {
	spec    *Spec
	compact []byte
	probs   problem.List
	dropped []string
}

// reported tells whether path is at or under a value that was left out
// for a problem already reported.
func (d *decoded) reported(path string) bool {
	for _, p := range d.dropped {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

func decodeCompact(body []byte) *decoded {
	s, compact, ok := decodeFast(body)
	if !ok {
		d := decodeThorough(body)
		if d.probs.Len() > 0 {
			return d
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, body); err != nil {
			d.probs.Add("", "%s", err)
			return &decoded{probs: d.probs}
		}
		s, compact = d.spec, buf.Bytes()
	}
	compact, err := recordPropertyOrder(s, compact)
	if err != nil {
		d := &decoded{}
		d.probs.Add("", "%s", err)
		return d
	}
	return &decoded{spec: s, compact: compact}
}

// decodeThorough is DecodeSpec for a body decodeFast gave up on: it finds
// every problem, with its path. Unless the body is no JSON object at all
// (or holds what no store can), it also decodes the spec without the
// values it found wrong, so that Check can validate the rest.
func decodeThorough(body []byte) *decoded {
	d := &decoded{}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		d.probs.Add("", "body is not valid JSON: %s", problem.DescribeJSONError(body, err))
		return d
	}
	if dec.More() {
		d.probs.Add("", "body must hold exactly one JSON value")
		return d
	}
	if _, ok := v.(map[string]any); !ok {
		d.probs.Add("", "must be an object")
		return d
	}
	if probs := storableProblems(body, v); len(probs) > 0 {
		d.probs.AddAll("", probs)
		return d
	}
	checkShape(d, "", v, specType)
	b := body
	if d.probs.Len() > 0 {
		b, _ = json.Marshal(v) // v without what checkShape dropped
	}
	var s Spec
	if err := json.Unmarshal(b, &s); err != nil {
		// The shape check accepts only what Unmarshal can decode, so this is
		// a bug rather than bad input; still report it as a problem.
		d.probs.Add("", "%s", err)
		return d
	}
	d.spec = &s
	return d
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
	handoffType        = reflect.TypeFor[Handoff]()
)

// checkShape walks a generic JSON value beside the Go type it will be
// decoded into and records unknown fields and type mismatches. Specs without
// problems seldom come this way (decodeFast takes them), so it says where
// every problem is rather than stopping at the first.
//
// What it reports is taken out of v (an unknown field is deleted, a value
// of the wrong type becomes null, which decodes to the zero value), and its
// path recorded in d.dropped: v then decodes, and the rest of the spec can
// be validated. It returns false when v itself is to be taken out.
func checkShape(d *decoded, path string, v any, t reflect.Type) (ok bool) {
	if v == nil {
		return true // null decodes to the zero value of any Go type
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	bad := func(msg string) bool {
		d.probs.Add(path, "%s", msg)
		return false
	}
	// keep is what a check of a child says: one taken out is null now.
	keep := func(childPath string, child any, ct reflect.Type, set func()) {
		if !checkShape(d, childPath, child, ct) {
			d.dropped = append(d.dropped, childPath)
			set()
		}
	}
	switch t {
	case rawMessageType:
		return true
	case modelRefType:
		if _, ok := v.(string); ok {
			return true
		}
		if _, ok := v.(map[string]any); !ok {
			return bad("must be a model name or a model object")
		}
		return checkShape(d, path, v, modelConfigType)
	case messageContentType:
		switch v := v.(type) {
		case string:
		case []any:
			ok := true
			for i, e := range v {
				b, _ := json.Marshal(e)
				var p Part
				if err := p.UnmarshalJSON(b); err != nil {
					d.probs.Add(problem.Index(path, i), "%s", err)
					ok = false
				}
			}
			return ok
		default:
			return bad("must be a string, or (of a MultiModalMessage) a list of texts and images")
		}
		return true
	case taskType:
		switch v.(type) {
		case string, map[string]any, []any:
			return true
		default:
			return bad(errTaskShape.Error())
		}
	case toolApprovalType:
		if _, ok := v.(string); ok {
			return true
		}
		if _, ok := v.([]any); !ok {
			return bad(`must be "never", "always" or a list of tool names`)
		}
		return checkShape(d, path, v, stringsType)
	case replayResponseType:
		if _, ok := v.(string); ok {
			return true
		}
		if _, ok := v.(map[string]any); !ok {
			return bad("must be a string or an object")
		}
		// Fall through to the struct check below.
	case handoffType:
		if _, ok := v.(string); ok {
			return true
		}
		if _, ok := v.(map[string]any); !ok {
			return bad(`must be an agent's name or a hand-off {"target", "name"?, "description"?, "condition"?}`)
		}
		// Fall through to the struct check below.
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return bad("must be an object")
		}
		fields := jsonFields(t)
		for _, k := range sortedKeys(obj) {
			kp := problem.Key(path, k)
			ft, known := fields[k]
			if !known {
				if near := nearestField(k, fields); near != "" {
					d.probs.Add(kp, "unknown field: did you mean %q?", near)
				} else {
					d.probs.Add(kp, "unknown field")
				}
				d.dropped = append(d.dropped, kp)
				delete(obj, k)
				continue
			}
			keep(kp, obj[k], ft, func() { obj[k] = nil })
		}
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			return bad("must be an array")
		}
		for i, e := range arr {
			keep(problem.Index(path, i), e, t.Elem(), func() { arr[i] = nil })
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return bad("must be an object")
		}
		for _, k := range sortedKeys(obj) {
			keep(problem.Key(path, k), obj[k], t.Elem(), func() { obj[k] = nil })
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			return bad("must be a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return bad("must be a boolean")
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, ok := v.(json.Number)
		if !ok {
			return bad("must be an integer")
		}
		if _, err := n.Int64(); err != nil {
			return bad("must be an integer")
		}
	case reflect.Float64:
		if _, ok := v.(json.Number); !ok {
			return bad("must be a number")
		}
	}
	return true
}

// nearestField is the known field a misspelled key most likely means: the
// one fewest edits away (letters inserted, deleted or changed, case
// ignored), if it is close enough to be a slip rather than another word;
// else "".
func nearestField(key string, fields map[string]reflect.Type) string {
	k := strings.ToLower(key)
	best, bestDist := "", 0
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		d := editDistance(k, name)
		if best == "" || d < bestDist {
			best, bestDist = name, d
		}
	}
	// Two edits at most, and at most one for every three letters of the
	// key: "nme" is "name", "max_rounds" is "max_round", "ab" is nothing.
	if best == "" || bestDist > 2 || 3*bestDist > len([]rune(k)) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// sortedKeys are obj's keys in order, so that problems come in a stable
// order.
func sortedKeys[V any](obj map[string]V) []string {
	return slices.Sorted(maps.Keys(obj))
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
	var probs problem.List
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case string:
			if strings.IndexByte(x, 0) >= 0 {
				probs.Add(path, "must not contain the NUL character (\\u0000), which the store cannot hold")
			}
		case json.Number:
			if _, err := strconv.ParseFloat(string(x), 64); err != nil {
				probs.Add(path, "number out of range")
			}
		case []any:
			for i, e := range x {
				walk(problem.Index(path, i), e)
			}
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if strings.IndexByte(k, 0) >= 0 {
					probs.Add(problem.Key(path, k), "key must not contain the NUL character (\\u0000), which the store cannot hold")
				}
				walk(problem.Key(path, k), x[k])
			}
		}
	}
	walk("", v)
	return probs.Items()
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
