package pyfunc

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// swarmCase is one function of testdata/swarm_schemas.json, which
// e2e/swarm/functions.py records with OpenAI Swarm's function_to_json
// under CPython 3.13: the tool Swarm sends the model.
type swarmCase struct {
	Name          string          `json:"name"`
	SourceCode    string          `json:"source_code"`
	GlobalImports []Import        `json:"global_imports"`
	Tool          json.RawMessage `json:"tool"`
}

// TestSwarmSchemaMatchesSwarm derives the tool of every recorded function
// and compares it with Swarm's: name, description (the docstring as the
// compiler cleans it) and parameters, byte for byte as JSON.
func TestSwarmSchemaMatchesSwarm(t *testing.T) {
	b, err := os.ReadFile("testdata/swarm_schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []swarmCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) < 30 {
		t.Fatalf("only %d cases in the fixture", len(f.Cases))
	}
	for _, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			fn, err := ParseSwarm(c.SourceCode, c.GlobalImports)
			if err != nil {
				t.Fatalf("Swarm describes it, agentd refuses it: %v", err)
			}
			var got bytes.Buffer
			enc := json.NewEncoder(&got)
			enc.SetEscapeHTML(false)
			tool := map[string]any{"type": "function", "function": map[string]any{
				"name": fn.Name, "description": fn.Doc, "parameters": json.RawMessage(fn.Schema())}}
			if err := enc.Encode(tool); err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			if err := json.Compact(&want, c.Tool); err != nil {
				t.Fatal(err)
			}
			// Compare as values: the key order of function_to_json's dicts
			// is not part of what the API reads.
			if !sameJSON(t, got.Bytes(), want.Bytes()) {
				t.Errorf("source %q\n got  %s\n want %s", c.SourceCode, strings.TrimSpace(got.String()), want.String())
			}
		})
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// TestSwarmContextParam: a context_variables parameter is hidden from
// both schemas and flagged, whether annotated or not, and AgentChat's
// reading accepts it without an annotation.
func TestSwarmContextParam(t *testing.T) {
	src := "def f(percent: int, context_variables):\n    return ''\n"
	sf, err := ParseSwarm(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !sf.TakesContext() || strings.Contains(string(sf.Schema()), ContextParam) {
		t.Errorf("Swarm: takes %v, schema %s", sf.TakesContext(), sf.Schema())
	}
	af, err := Parse(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !af.TakesContext || strings.Contains(string(af.Schema()), ContextParam) {
		t.Errorf("AgentChat: takes %v, schema %s", af.TakesContext, af.Schema())
	}
	if _, err := Parse("def f(context_variables: dict, context_variables: dict):\n    pass\n", nil); err == nil {
		t.Error("a context_variables parameter defined twice was accepted")
	}
	if af, err := Parse("def f(a: int):\n    pass\n", nil); err != nil || af.TakesContext {
		t.Errorf("a function without the parameter: takes %v, %v", af.TakesContext, err)
	}
}

// TestCleanDoc pins CPython 3.13's docstring cleaning on what the fixture
// does not reach: no later lines, only blank later lines, a carriage
// return.
func TestCleanDoc(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"   one", "one"},
		{"a\n   \n  ", "a\n   \n  "},
		{"a\n   \n  b", "a\n \nb"},
		{"a\n  b\r\n  c", "a\nb\r\nc"},
		{"\tx\n\ty", "x\ny"},
	} {
		if got := cleanDoc(c.in); got != c.want {
			t.Errorf("cleanDoc(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// FuzzParseSwarm feeds ParseSwarm arbitrary sources: it must never panic,
// and what it accepts must give a schema that is valid JSON.
func FuzzParseSwarm(f *testing.F) {
	for _, src := range []string{
		"def f(a, b: int = 1, *args, c: 'str' = lambda: 0, **kw) -> list[int]:\n    \"\"\"Doc\n      more.\"\"\"\n",
		"async def g(context_variables, /, x: Optional[int] = None): 'd' 'e'; return x\n",
		"from __future__ import annotations\ndef h(s: str = r'\\x' f'{y}'):\n\tb'no'\n",
	} {
		f.Add(src)
	}
	imports := []Import{json.RawMessage(`{"module": "typing", "imports": ["Optional"]}`)}
	f.Fuzz(func(t *testing.T, src string) {
		fn, err := ParseSwarm(src, imports)
		if err != nil {
			return
		}
		if !json.Valid(fn.Schema()) {
			t.Fatalf("invalid schema %s for %q", fn.Schema(), src)
		}
	})
}
