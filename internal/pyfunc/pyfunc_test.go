package pyfunc

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

// agentChatCase is one signature of testdata/agentchat_schemas.json, which
// e2e/autogen/components/functions.py records with AgentChat 0.7.5: the
// schema FunctionTool.load_component shows the model, or the error with
// which AgentChat refuses the function.
type agentChatCase struct {
	Name          string            `json:"name"`
	SourceCode    string            `json:"source_code"`
	GlobalImports []json.RawMessage `json:"global_imports"`
	Schema        string            `json:"schema"`
	Error         string            `json:"error"`
}

// refusedOnPurpose are signatures AgentChat accepts and agentd refuses,
// each with the parameter the refusal names ("" for the function).
var refusedOnPurpose = map[string]string{
	"call_default":  "a",                  // the default is computed by a call: only literals are evaluated
	"decorated":     "",                   // a decorator may change what is called
	"star_args":     "args",               // AgentChat describes *args as one required field, which no call can fill
	"star_kwargs":   "kw",                 // likewise **kw
	"tuple_param":   "a",                  // tuples, sets and bytes are left out of the supported types
	"set_param":     "a",                  //
	"bytes_param":   "a",                  //
	"cancellation":  "cancellation_token", // a CancellationToken cannot cross into the sandbox
	"unicode_name":  "café",               // parameter names are ASCII (their title is Python's str.title)
	"dict_int_keys": "a",                  // JSON keys are strings; pydantic would convert them
	// AutoGen Studio's gallery tool: pydantic hands the function a
	// pathlib.Path, the sandbox's JSON arguments a str.
	"gallery_generate_image": "output_dir",
}

func loadCases(t *testing.T) []agentChatCase {
	t.Helper()
	b, err := os.ReadFile("testdata/agentchat_schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []agentChatCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) < 40 {
		t.Fatalf("only %d cases in the fixture", len(f.Cases))
	}
	return f.Cases
}

// TestSchemaMatchesAgentChat derives the schema of every recorded
// signature and compares it byte for byte with AgentChat's; a signature
// AgentChat refuses must be refused, and one agentd refuses on purpose
// must name the parameter.
func TestSchemaMatchesAgentChat(t *testing.T) {
	t.Parallel()
	for _, c := range loadCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			f, err := Parse(c.SourceCode, c.GlobalImports)
			param, onPurpose := refusedOnPurpose[c.Name]
			switch {
			case c.Error != "" || onPurpose:
				var pe *Error
				if !errors.As(err, &pe) {
					t.Fatalf("AgentChat: %q; agentd accepted it with schema %s", c.Error, f.Schema())
				}
				if onPurpose && pe.Param != param {
					t.Errorf("refusal names parameter %q, want %q: %v", pe.Param, param, err)
				}
				t.Logf("refused: %v (AgentChat: %s)", err, c.Error)
			case err != nil:
				t.Fatalf("AgentChat's schema is %s; agentd refused: %v", c.Schema, err)
			default:
				if got := string(f.Schema()); got != c.Schema {
					t.Errorf("schema differs\n got: %s\nwant: %s", got, c.Schema)
				}
			}
		})
	}
}

// TestArguments checks what the function receives: pydantic's conversions
// (float from int, int from an integral float, lax strings), extra names
// dropped, object order kept, and refusals that say what is wrong.
func TestArguments(t *testing.T) {
	t.Parallel()
	src := "def f(kind: str, n: int = 2, x: float = 1.0, items: Optional[List[int]] = None, flag: bool = False, d: dict = {}, u: Union[int, str] = 0, lit: Literal['a', 'b'] = 'a') -> str:\n    return kind\n"
	f, err := Parse(src, []Import{json.RawMessage(`{"module": "typing", "imports": ["Optional", "List", "Union", "Literal"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ in, want, err string }{
		{`{"kind": "a"}`, `{"kind":"a"}`, ""},
		{`{"kind": "a", "n": 2.0, "x": 3}`, `{"kind":"a","n":2,"x":3.0}`, ""},
		{`{"x": 1e20, "kind": "a"}`, `{"kind":"a","x":1e+20}`, ""},
		{`{"kind": "a", "items": [1.0, 2], "extra": true}`, `{"kind":"a","items":[1,2]}`, ""},
		{`{"kind": "a", "n": "7", "flag": "yes"}`, `{"kind":"a","n":7,"flag":true}`, ""},
		{`{"kind": "a", "d": {"b": 1, "a": {"z": 2, "y": 3}, "b": 4}}`, `{"kind":"a","d":{"b":4,"a":{"z":2,"y":3}}}`, ""},
		{`{"kind": "a", "u": 2.0}`, `{"kind":"a","u":2}`, ""},
		{`{"kind": "a", "u": "2"}`, `{"kind":"a","u":"2"}`, ""},
		{`{"kind": "a", "lit": "b", "items": null}`, `{"kind":"a","items":null,"lit":"b"}`, ""},
		{`{"n": 2.5}`, "", `kind: is required; n: must be an integer`},
		{`{"kind": 3, "lit": "c", "items": ["x"]}`, "", `kind: must be a string; items: matches none of the union's types; lit: must be one of "a", "b"`},
		{`[1]`, "", "arguments must be a JSON object"},
	} {
		got, err := f.Arguments([]byte(c.in))
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one containing %q", c.in, err, c.err)
			}
		case err != nil:
			t.Errorf("%s: %v", c.in, err)
		case string(got) != c.want:
			t.Errorf("%s: got %s, want %s", c.in, got, c.want)
		}
	}
}

// FuzzParse feeds Parse arbitrary sources: it must never panic, and what it
// accepts must give a schema that is valid JSON.
func FuzzParse(f *testing.F) {
	for _, src := range []string{
		"def f(a: int, b: Optional[List[str]] = None) -> str:\n    return ''\n",
		"async def g(x: Annotated[Literal['a', 1, None], 'd'] = 'a', *, y: dict[str, float] = {'k': 1e-7}):\n    pass\n",
		"def h(s: str = r'\\x' 'y' \"\"\"z\"\"\", t: 'int | None' = -0x1F):\n    pass\n",
	} {
		f.Add(src)
	}
	imports := []Import{json.RawMessage(`{"module": "typing", "imports": ["Optional", "List", "Literal", "Annotated"]}`)}
	f.Fuzz(func(t *testing.T, src string) {
		fn, err := Parse(src, imports)
		if err != nil {
			return
		}
		if !json.Valid(fn.Schema()) {
			t.Fatalf("invalid schema %s for %q", fn.Schema(), src)
		}
		if _, err := fn.Arguments([]byte(`{"a": 1, "x": "a", "s": "s"}`)); err != nil && !strings.Contains(err.Error(), "signature") {
			t.Fatalf("unexpected error %v", err)
		}
	})
}
