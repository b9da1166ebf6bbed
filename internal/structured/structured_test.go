package structured

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// fixture is what pydantic did with replies of three types
// (e2e/autogen/structured.py).
type fixture map[string]struct {
	Schema       json.RawMessage `json:"schema"`
	Strict       json.RawMessage `json:"strict"`
	FormatString string          `json:"format_string"`
	Replies      []struct {
		Reply string `json:"reply"`
		Error bool   `json:"error"`
		JSON  string `json:"json"`
		Text  string `json:"text"`
	} `json:"replies"`
}

func loadFixture(t *testing.T) fixture {
	t.Helper()
	b, err := os.ReadFile("testdata/pydantic.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx fixture
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatal(err)
	}
	if len(fx) == 0 {
		t.Fatal("empty fixture")
	}
	return fx
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// departures are the replies agentd refuses where pydantic accepts them:
// an infinite number, which pydantic would write as null.
var departures = map[string]bool{`{"f": 1e400, "i": 1}`: true}

// TestPydanticReplies: every reply is accepted or refused as pydantic's
// model_validate_json does, and an accepted one is written byte for byte
// as model_dump_json writes it and as str.format fills the format string.
func TestPydanticReplies(t *testing.T) {
	t.Parallel()
	for name, ty := range loadFixture(t) {
		t.Run(name, func(t *testing.T) {
			sc, probs := Parse(ty.Schema, nil)
			if len(probs) > 0 {
				t.Fatalf("Parse: %v", probs)
			}
			if got := sc.Strict(); !sameJSON(t, got, ty.Strict) {
				t.Errorf("strict schema\n got  %s\n want %s", got, ty.Strict)
			}
			if err := sc.CheckFormat(ty.FormatString); err != nil {
				t.Fatalf("CheckFormat: %v", err)
			}
			for _, r := range ty.Replies {
				obj, err := sc.Read(r.Reply)
				if departures[r.Reply] {
					// A deliberate departure (docs/autogen.md, Differences from
					// AutoGen): refused, where pydantic takes it.
					if err == nil {
						t.Errorf("%q: accepted as %s; agentd refuses it", r.Reply, obj.JSON())
					}
					continue
				}
				switch {
				case r.Error && err == nil:
					t.Errorf("%q: accepted as %s; pydantic refuses it", r.Reply, obj.JSON())
				case !r.Error && err != nil:
					t.Errorf("%q: %v; pydantic accepts it as %s", r.Reply, err, r.JSON)
				case !r.Error:
					if got := obj.JSON(); got != r.JSON {
						t.Errorf("%q: JSON\n got  %s\n want %s", r.Reply, got, r.JSON)
					}
					if got := obj.Format(ty.FormatString); got != r.Text {
						t.Errorf("%q: text\n got  %s\n want %s", r.Reply, got, r.Text)
					}
				}
			}
		})
	}
}

// TestPropertyOrder: the order given wins over the schema's (a stored
// schema has lost its own), and a wrong order is a problem.
func TestPropertyOrder(t *testing.T) {
	t.Parallel()
	schema := []byte(`{"properties": {"b": {"type": "integer"}, "a": {"type": "string"}}, "required": ["a", "b"], "type": "object"}`)
	sc, probs := Parse(schema, []string{"a", "b"})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	obj, err := sc.Read(`{"b": 1, "a": "x"}`)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := obj.JSON(), `{"a":"x","b":1}`; got != want {
		t.Errorf("JSON = %s, want %s", got, want)
	}
	if got := string(sc.Strict()); !strings.Contains(got, `"required":["a","b"]`) {
		t.Errorf("strict schema %s: required not in the given order", got)
	}
	for _, order := range [][]string{{"a"}, {"a", "a"}, {"a", "c"}} {
		if _, probs := Parse(schema, order); len(probs) == 0 || probs[0].Path != OrderPath {
			t.Errorf("order %v: problems %v, want one at %s", order, probs, OrderPath)
		}
	}
}

// TestRefusedSchemas: what pydantic validates in ways not reproduced here
// is refused, each with the pointer to it.
func TestRefusedSchemas(t *testing.T) {
	t.Parallel()
	cases := []struct{ schema, path string }{
		{`{"$defs": {"S": {"type": "object"}}, "properties": {"s": {"$ref": "#/$defs/S"}}, "required": ["s"], "type": "object"}`, "/$defs"},
		{`{"properties": {"s": {"$ref": "#/$defs/S"}}, "required": ["s"], "type": "object"}`, "/properties/s/$ref"},
		{`{"properties": {"d": {"additionalProperties": {"type": "integer"}, "type": "object"}}, "required": ["d"], "type": "object"}`, "/properties/d/additionalProperties"},
		{`{"properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"], "type": "object"}`, "/properties/n/minimum"},
		{`{"properties": {"t": {"type": "string", "format": "date-time"}}, "required": ["t"], "type": "object"}`, "/properties/t/format"},
		{`{"properties": {"u": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}, "required": ["u"], "type": "object"}`, "/properties/u/anyOf"},
		{`{"properties": {"l": {"type": "array"}}, "required": ["l"], "type": "object"}`, "/properties/l/items"},
		{`{"properties": {"o": {"type": "string"}}, "type": "object"}`, "/properties/o"},
		{`{"properties": {}, "type": "array"}`, "/type"},
		{`[]`, ""},
	}
	for _, c := range cases {
		_, probs := Parse([]byte(c.schema), nil)
		found := false
		for _, p := range probs {
			found = found || p.Path == c.path
		}
		if !found {
			t.Errorf("%s: problems %v, want one at %q", c.schema, probs, c.path)
		}
	}
}

// TestFormatStrings: only {field} replacements of the type's fields.
func TestFormatStrings(t *testing.T) {
	t.Parallel()
	sc, probs := Parse([]byte(`{"properties": {"a": {"type": "string"}}, "required": ["a"], "type": "object"}`), nil)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	for f, ok := range map[string]bool{
		"{a}": true, "{{a}} {a}": true, "no fields": true, "}}{{": true,
		"{b}": false, "{}": false, "{0}": false, "{a!r}": false, "{a:>5}": false, "{a.x}": false, "{a[0]}": false, "{a": false, "a}": false,
	} {
		if err := sc.CheckFormat(f); (err == nil) != ok {
			t.Errorf("CheckFormat(%q) = %v, want ok %v", f, err, ok)
		}
	}
}

// FuzzRead: reading any reply never panics, and what it accepts is JSON
// that reads back to the same object.
func FuzzRead(f *testing.F) {
	b, err := os.ReadFile("testdata/pydantic.json")
	if err != nil {
		f.Fatal(err)
	}
	var fx fixture
	if err := json.Unmarshal(b, &fx); err != nil {
		f.Fatal(err)
	}
	for _, r := range fx["Plan"].Replies {
		f.Add(r.Reply)
	}
	sc, probs := Parse(fx["Plan"].Schema, nil)
	if len(probs) > 0 {
		f.Fatal(probs)
	}
	f.Fuzz(func(t *testing.T, reply string) {
		obj, err := sc.Read(reply)
		if err != nil {
			return
		}
		out := obj.JSON()
		if !json.Valid([]byte(out)) {
			t.Fatalf("%q gave invalid JSON %s", reply, out)
		}
		again, err := sc.Read(out)
		if err != nil || again.JSON() != out {
			t.Fatalf("%q: %s does not read back (%v)", reply, out, err)
		}
		_ = obj.Format(fx["Plan"].FormatString)
	})
}
