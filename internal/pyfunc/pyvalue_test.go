package pyfunc

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestValueAsPython: JSON documents read by ParseJSON give Python's own
// str(), repr() and json.dumps(ensure_ascii=False, separators=(",", ":"))
// of json.loads of them (testdata/pyrepr.json, recorded with Python by
// e2e/autogen/components/pyrepr.py).
func TestValueAsPython(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("testdata", "pyrepr.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct{ JSON, Str, Repr, Dumps string }
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 20 {
		t.Fatalf("%d cases", len(cases))
	}
	for _, c := range cases {
		v, err := ParseJSON([]byte(c.JSON))
		if err != nil {
			t.Errorf("%s: %v", c.JSON, err)
			continue
		}
		if got := v.Str(); got != c.Str {
			t.Errorf("str(%s) = %q, Python %q", c.JSON, got, c.Str)
		}
		if got := v.Repr(); got != c.Repr {
			t.Errorf("repr(%s) = %q, Python %q", c.JSON, got, c.Repr)
		}
		if got := v.DumpJSON(); got != c.Dumps {
			t.Errorf("dumps(%s) = %q, Python %q", c.JSON, got, c.Dumps)
		}
	}
}

// TestFromJSONSchema: the schema the model is shown and the model_dump of
// a call, for what HttpTool's model does with it (the full record, of
// AgentChat itself, is replayed in internal/tool's TestHTTPAPIAsAgentChat),
// and the refusals with their pointers.
func TestFromJSONSchema(t *testing.T) {
	t.Parallel()
	f, err := FromJSONSchema([]byte(`{"type":"object","properties":{"b":{"type":"boolean","default":true,"description":"flag"},"n":{"type":"integer"},"e":{"enum":["x",1]},"l":{"type":"array","items":{"type":"number","description":"dropped"}}},"required":["n"]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","properties":{"b":{"default":true,"description":"flag","title":"B","type":"boolean"},"n":{"title":"N","type":"integer"},"e":{"default":null,"enum":["x",1],"title":"E"},"l":{"default":null,"items":{"type":"number"},"title":"L","type":"array"}},"required":["n"],"additionalProperties":false}`
	if got := string(f.Schema()); got != want {
		t.Errorf("schema\n%s\nwant\n%s", got, want)
	}
	fields, err := f.ModelDump([]byte(`{"n": "7", "l": [1, 2.5], "zz": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fl := range fields {
		got = append(got, fl.Name+"="+fl.Value.Repr())
	}
	if s := join(got); s != "b=True n=7 e=None l=[1.0, 2.5]" {
		t.Errorf("model_dump: %s", s)
	}
	if _, err := f.ModelDump([]byte(`{"n": "x"}`)); err == nil {
		t.Error("an int parameter took \"x\"")
	}
	for schema, ptr := range map[string]string{
		`{"type":"array"}`: "/type",
		`{"type":"object","properties":{"a":{"type":"string","maxLength":3}}}`:               "/properties/a/maxLength",
		`{"type":"object","properties":{"a":{"type":["string","null"]}}}`:                    "/properties/a/type",
		`{"type":"object","properties":{"a-b":{"type":"string"}}}`:                           "/properties/a-b",
		`{"type":"object","properties":{"a":{"type":"object","properties":{}}}}`:             "/properties/a/properties",
		`{"type":"object","properties":{"a":{"type":"array","items":{"type":"tuple"}}}}`:     "/properties/a/items/type",
		`{"type":"object","properties":{"a":{"type":"string"}},"required":["b"]}`:            "/required/0",
		`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":true}`: "/additionalProperties",
		`{"type":"object","$defs":{}}`:                                                       "/$defs",
	} {
		_, err := FromJSONSchema([]byte(schema))
		se, ok := err.(*SchemaError)
		if !ok || se.Pointer != ptr {
			t.Errorf("%s: %v, want a problem at %s", schema, err, ptr)
		}
	}
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}

// FuzzFromJSONSchema: any input is translated or refused, never a panic,
// and what is translated has a schema that is JSON.
func FuzzFromJSONSchema(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"a":{"type":"array","items":{"enum":[1,"x",null]}}},"required":["a"]}`))
	f.Add([]byte(`{"properties":{"d":{"type":"object","default":{"k":[1.5]}}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		fn, err := FromJSONSchema(b)
		if err != nil {
			return
		}
		if !json.Valid(fn.Schema()) {
			t.Fatalf("schema is not JSON: %s", fn.Schema())
		}
		_, _ = fn.ModelDump([]byte(`{}`))
	})
}
