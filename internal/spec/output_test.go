package spec

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

const planSchema = `{"properties": {"title": {"title": "Title", "type": "string"}, "priority": {"title": "Priority", "type": "integer"},
	"done": {"default": false, "title": "Done", "type": "boolean"}}, "required": ["title", "priority"], "title": "Plan", "type": "object"}`

// TestOutputSchemaProblems: every problem of an output_schema at once,
// with its pointer, the schema's own ones inside schema.
func TestOutputSchemaProblems(t *testing.T) {
	body := `{"task": "go", "tools": [{"name": "t", "implementation": {"type": "http", "url": "https://x.example/t"}}], "agents": [
		{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]}, "tools": ["t"],
		 "output_schema": {"name": "no spaces allowed", "schema": {"properties": {"n": {"type": "integer", "minimum": 1}, "m": {"$ref": "#/$defs/M"}}, "required": ["n", "m"], "type": "object"},
		  "format_string": "{x}"}},
		{"name": "b", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]},
		 "output_schema": {"name": "Plan", "schema": ` + planSchema + `, "format_string": "{title!r}", "property_order": ["title", "done"]}},
		{"name": "c", "type": "user_proxy", "output_schema": {"name": "Plan", "schema": ` + planSchema + `}}]}`
	got := problems(t, body)
	want := map[string]string{
		"/tools/0":                     "runs no tools",
		"/agents/0/tools/0":            "cannot use tool",
		"/agents/0/output_schema/name": "1 to 64 letters",
		"/agents/0/output_schema/schema/properties/n/minimum": "not supported",
		"/agents/0/output_schema/schema/properties/m/$ref":    "not supported",
		"/agents/0/output_schema/schema/properties/m/type":    "must be one of",
		"/agents/1/output_schema/property_order":              "each of the 3 properties",
		"/agents/2/output_schema":                             "only an assistant",
	}
	for _, p := range got {
		w, ok := want[p.Path]
		if !ok || !strings.Contains(p.Message, w) {
			t.Errorf("unexpected problem %s: %s", p.Path, p.Message)
		}
		delete(want, p.Path)
	}
	for path, msg := range want {
		t.Errorf("missing problem %s: %s…", path, msg)
	}
}

// TestOutputSchemaFormatString: a format string naming no field, or with
// a conversion, is refused (Python would raise when filling it in).
func TestOutputSchemaFormatString(t *testing.T) {
	for f, ok := range map[string]bool{"{title} ({priority})": true, "{nope}": false, "{title!r}": false, "{": false} {
		body := `{"task": "go", "agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]},
			"output_schema": {"name": "Plan", "schema": ` + planSchema + `, "format_string": ` + strings.TrimSpace(mustJSON(f)) + `}}]}`
		probs := problems(t, body)
		if (len(probs) == 0) != ok || (!ok && probs[0].Path != "/agents/0/output_schema/format_string") {
			t.Errorf("format string %q: problems %v, want ok %v", f, probs, ok)
		}
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestDecodeCompactRecordsPropertyOrder: the order of a schema's
// properties as the request writes them is kept in property_order, so
// that a store that reorders object members (jsonb) loses nothing.
func TestDecodeCompactRecordsPropertyOrder(t *testing.T) {
	body := []byte(`{"task": "go", "agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]},
		"output_schema": {"name": "Plan", "schema": ` + planSchema + `}}]}`)
	sp, compact, probs := DecodeCompact(body)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	want := []string{"title", "priority", "done"}
	if got := sp.Agents[0].OutputSchema.PropertyOrder; !slices.Equal(got, want) {
		t.Fatalf("property_order = %v, want %v", got, want)
	}
	// What is stored, read back after a round trip through jsonb (whose
	// member order is not the request's: here, Go's sorted map keys), has
	// the same order.
	var generic any
	if err := json.Unmarshal(compact, &generic); err != nil {
		t.Fatal(err)
	}
	reordered, err := json.Marshal(generic)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(reordered, []byte(`"title":{"title":"Title","type":"string"},"priority"`)) {
		t.Fatalf("the round trip kept the order; it shows nothing: %s", reordered)
	}
	again, _, probs := DecodeCompact(reordered)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	if got := again.Agents[0].OutputSchema.PropertyOrder; !slices.Equal(got, want) {
		t.Fatalf("stored property_order = %v, want %v (%s)", got, want, compact)
	}
	if !strings.Contains(string(compact), `"property_order":["title","priority","done"]`) {
		t.Fatalf("compact spec %s does not record the order", compact)
	}
	// A spec without an output_schema is stored as it was compacted.
	plain := []byte(`{"task": "go",  "agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]}}]}`)
	var wantPlain bytes.Buffer
	if err := json.Compact(&wantPlain, plain); err != nil {
		t.Fatal(err)
	}
	if _, c, _ := DecodeCompact(plain); !bytes.Equal(c, wantPlain.Bytes()) {
		t.Fatalf("compact = %s, want %s", c, wantPlain.Bytes())
	}
}
