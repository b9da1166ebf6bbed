package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// The contract: api/openapi.yaml's component schemas, compiled once. The
// end-to-end tests check the real server's responses and events against them
// (and the examples against the spec schema), so the document cannot drift
// from what the server does.
var contract struct {
	once     sync.Once
	compiler *jsonschema.Compiler
	err      error
	mu       sync.Mutex
	schemas  map[string]*jsonschema.Schema
}

const contractURL = "file:///openapi.json"

func schema(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	contract.once.Do(func() {
		b, err := os.ReadFile(filepath.Join("..", "api", "openapi.yaml"))
		if err != nil {
			contract.err = err
			return
		}
		var doc any
		if err := yaml.Unmarshal(b, &doc); err != nil {
			contract.err = err
			return
		}
		// Through JSON, so that numbers and maps have the types the
		// validator expects.
		js, err := json.Marshal(doc)
		if err != nil {
			contract.err = err
			return
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
		if err != nil {
			contract.err = err
			return
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		contract.err = c.AddResource(contractURL, v)
		contract.compiler = c
		contract.schemas = map[string]*jsonschema.Schema{}
	})
	if contract.err != nil {
		t.Fatalf("load api/openapi.yaml: %v", contract.err)
	}
	contract.mu.Lock()
	defer contract.mu.Unlock()
	if s, ok := contract.schemas[name]; ok {
		return s
	}
	ptr := "#/components/schemas/" + name
	if strings.HasPrefix(name, "#/") {
		ptr = name // a schema of the document that is not a component
	}
	s, err := contract.compiler.Compile(contractURL + ptr)
	if err != nil {
		t.Fatalf("compile schema %s: %v", name, err)
	}
	contract.schemas[name] = s
	return s
}

// conforms checks a JSON body against a component schema of the contract,
// or against the schema at name when it is a JSON pointer ("#/…").
func conforms(t *testing.T, name string, body []byte) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Errorf("%s: not JSON: %v: %s", name, err, body)
		return
	}
	if err := schema(t, name).Validate(v); err != nil {
		t.Errorf("the response does not match the contract's %s: %v\n%s", name, err, body)
	}
}

// conformsEvent checks one SSE event against the contract's Event schema.
func conformsEvent(t *testing.T, e sseEvent) {
	t.Helper()
	obj := map[string]any{"event": e.Type, "data": json.RawMessage(e.Data)}
	if e.ID > 0 {
		obj["id"] = e.ID
	}
	b, _ := json.Marshal(obj)
	conforms(t, "Event", b)
}

func TestExamplesMatchTheSpecSchema(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "examples", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// An AgentChat team file (the team form's "team") has a provider.
		var top map[string]json.RawMessage
		if json.Unmarshal(b, &top) == nil && top["provider"] != nil {
			conforms(t, "TeamComponent", b)
			continue
		}
		conforms(t, "ChatSpec", b)
	}
}
