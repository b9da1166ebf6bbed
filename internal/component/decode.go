package component

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/spec/problem"
)

// report collects the problems and warnings of one translation, so that
// every problem of a file is reported at once.
type report struct {
	probs problem.List
	warns []Warning
	// components counts the components read; past maxComponents the file
	// is refused as a whole, so that a hostile file (say, thousands of
	// nested | conditions) costs little to refuse.
	components int
}

// maxComponents bounds the components of one file: far more than a team
// within the spec's limits (agents, tools, conditions) can hold.
const maxComponents = 1000

func (r *report) problem(path, format string, args ...any) {
	r.probs.Add(path, format, args...)
}

func (r *report) warn(path, format string, args ...any) {
	r.warns = append(r.warns, Warning{Path: path, Message: fmt.Sprintf(format, args...)})
}

// object is a JSON object being read field by field. Fields nobody read are
// reported by done: AgentChat's pydantic models ignore unknown fields, and
// so does agentd, but it says so.
//
// The file is decoded once into a tree of generic JSON values (objects are
// map[string]any, numbers json.Number), and objects are read from that
// tree: reading each level from raw bytes would scan every subtree once per
// level above it.
type object struct {
	r    *report
	path string
	m    map[string]any
	used map[string]bool
}

// decodeTree decodes one JSON value into the generic tree objects read.
func decodeTree(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// newObject reads v as an object; a problem and nil when it is not one.
func newObject(r *report, path string, v any) *object {
	m, ok := v.(map[string]any)
	if !ok {
		r.problem(path, "must be an object")
		return nil
	}
	return &object{r: r, path: path, m: m, used: map[string]bool{}}
}

// has reports whether key is present and not null.
func (o *object) has(key string) bool {
	v, ok := o.m[key]
	return ok && v != nil
}

func (o *object) at(key string) string { return problem.Key(o.path, key) }

// get decodes key into v when present and not null, and reports whether it
// did; a value of the wrong type is a problem.
func (o *object) get(key string, v any, want string) bool {
	o.used[key] = true
	if !o.has(key) {
		return false
	}
	// Only small values (scalars, short lists, usage) are read this way.
	b, err := json.Marshal(o.m[key])
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		o.r.problem(o.at(key), "must be %s", want)
		return false
	}
	return true
}

func (o *object) str(key string) *string {
	var s string
	if o.get(key, &s, "a string") {
		return &s
	}
	return nil
}

// required reads a string that must be present.
func (o *object) required(key string) string {
	if s := o.str(key); s != nil {
		return *s
	}
	if !o.has(key) {
		o.r.problem(o.at(key), "is required")
	}
	return ""
}

func (o *object) integer(key string) *int {
	var f float64
	if !o.get(key, &f, "an integer") {
		return nil
	}
	if f != float64(int(f)) {
		o.r.problem(o.at(key), "must be an integer")
		return nil
	}
	n := int(f)
	return &n
}

func (o *object) number(key string) *float64 {
	var f float64
	if o.get(key, &f, "a number") {
		return &f
	}
	return nil
}

func (o *object) boolean(key string) *bool {
	var b bool
	if o.get(key, &b, "a boolean") {
		return &b
	}
	return nil
}

func (o *object) strings(key string) []string {
	var s []string
	o.get(key, &s, "an array of strings")
	return s
}

func (o *object) list(key string) []any {
	o.used[key] = true
	if !o.has(key) {
		return nil
	}
	l, ok := o.m[key].([]any)
	if !ok {
		o.r.problem(o.at(key), "must be an array")
	}
	return l
}

// raw returns key's value, nil when absent or null.
func (o *object) raw(key string) any {
	o.used[key] = true
	return o.m[key]
}

// rawJSON returns key's value as JSON, nil when absent or null.
func (o *object) rawJSON(key string) json.RawMessage {
	v := o.raw(key)
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil // a decoded tree always encodes
	}
	return b
}

// ignore marks keys as read without using them.
func (o *object) ignore(keys ...string) {
	for _, k := range keys {
		o.used[k] = true
	}
}

// ignoreWarn marks keys as read and warns when one is set.
func (o *object) ignoreWarn(why string, keys ...string) {
	for _, k := range keys {
		o.used[k] = true
		if o.has(k) {
			o.r.warn(o.at(k), "ignored: %s", why)
		}
	}
}

// refuse reports each set key as a problem.
func (o *object) refuse(why string, keys ...string) {
	for _, k := range keys {
		o.used[k] = true
		if o.has(k) && !isEmpty(o.m[k]) {
			o.r.problem(o.at(k), "%s", why)
		}
	}
}

// isEmpty reports an empty array or object.
func isEmpty(v any) bool {
	switch v := v.(type) {
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

// done warns about every field nobody read.
func (o *object) done() {
	keys := make([]string, 0, len(o.m))
	for k := range o.m {
		if !o.used[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		o.r.warn(o.at(k), "unknown field, ignored (AgentChat ignores it too)")
	}
}

// comp is a component being translated: its provider (canonical) and an
// object over its config.
type comp struct {
	path     string
	provider string
	raw      string // the provider as written, for messages
	typ      string
	cfg      *object
}

// readComponent reads a component at path. It reports a component that is
// not an object or has no provider, and returns nil then.
func readComponent(r *report, path string, raw any) *comp {
	r.components++
	switch {
	case r.components == maxComponents+1:
		r.problem(path, "the file holds more than %d components; agentd translates no more", maxComponents)
		return nil
	case r.components > maxComponents:
		return nil
	}
	o := newObject(r, path, raw)
	if o == nil {
		return nil
	}
	prov := o.str("provider")
	if prov == nil || *prov == "" {
		if !o.has("provider") {
			r.problem(path+"/provider", "is required: a component has a provider, component_type and config")
		}
		return nil
	}
	typ := o.str("component_type")
	o.ignore("version", "component_version", "description", "label")
	cfgRaw := o.raw("config")
	o.done()
	c := &comp{path: path, provider: canonical(*prov), raw: *prov}
	if typ != nil {
		c.typ = *typ
	}
	if cfgRaw == nil {
		r.problem(path+"/config", "is required")
		return nil
	}
	c.cfg = newObject(r, path+"/config", cfgRaw)
	if c.cfg == nil {
		return nil
	}
	return c
}

// unsupported reports a component agentd does not translate: refused ones
// with their reason, the rest as unknown to agentd, listing what is.
func (c *comp) unsupported(r *report, kind string, supported ...string) {
	if why, ok := refused[c.provider]; ok {
		r.problem(c.path, "provider %q is refused: %s", c.raw, why)
		return
	}
	names := make([]string, len(supported))
	for i, s := range supported {
		names[i] = shortName(s)
	}
	r.problem(c.path+"/provider", "unknown %s provider %q: agentd translates %s (AgentChat 0.7.5); it never imports a provider's module",
		kind, c.raw, strings.Join(names, ", "))
}

func idx(path string, i int) string { return path + "/" + strconv.Itoa(i) }
