package tool

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzArguments feeds argument strings (and schemas) through the parsing
// and validation every call does. It must never panic; what it accepts must
// be one JSON object; and the messages must be error messages a tool
// response can carry.
func FuzzArguments(f *testing.F) {
	schemas := []string{
		`{"type":"object","properties":{"q":{"type":"string","maxLength":5},"n":{"type":"integer"}},"required":["q"]}`,
		`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"array","items":{"$ref":"#/$defs/x"}}},"$defs":{"x":{"enum":[1,"2",null]}}}`,
		`{"type":"object","patternProperties":{"^x-":{"type":"number","multipleOf":0.5}},"oneOf":[{"required":["a"]},{"required":["b"]}]}`,
	}
	for _, s := range schemas {
		for _, a := range []string{`{"q":"hello"}`, `{"q":1}`, `[]`, `{"a":[1,"2",3]}`, `{"x-1":1.5,"a":0}`, `{`, ``, `{"q":"a"} x`, "{\"q\":\"\xff\"}"} {
			f.Add(s, a)
		}
	}
	f.Fuzz(func(t *testing.T, schema, args string) {
		parsed, msg := parseArguments(args)
		if msg != "" {
			if !strings.HasPrefix(msg, "arguments ") {
				t.Fatalf("message %q", msg)
			}
			return
		}
		if _, ok := parsed.value.(map[string]any); !ok {
			t.Fatalf("accepted %q as %T", args, parsed.value)
		}
		var obj map[string]any
		if err := json.Unmarshal(parsed.raw, &obj); err != nil {
			t.Fatalf("accepted %q, raw %q is not an object: %v", args, parsed.raw, err)
		}
		if len(checkSchema(json.RawMessage(schema), "/parameters")) > 0 {
			return
		}
		sch, err := compileSchema([]byte(schema))
		if err != nil {
			t.Fatalf("checkSchema accepted a schema that does not compile: %v", err)
		}
		if msg := validationMessage(sch, parsed.value); msg != "" && !strings.HasPrefix(msg, "arguments ") {
			t.Fatalf("validation message %q", msg)
		}
	})
}
