package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// schemaOf names the schema in api/openapi.yaml that each wire type
// encodes: a schema of components/schemas, or a JSON pointer under it to
// an inline object.
var schemaOf = map[string]struct {
	schema string
	value  any
}{
	"Chat":         {"Chat", Chat{}},
	"ChatList":     {"ChatList", ChatList{}},
	"MessageList":  {"MessageList", MessageList{}},
	"Message":      {"Message", Message{}},
	"ToolCall":     {"ToolCall", ToolCall{}},
	"FunctionCall": {"ToolCall/properties/function", FunctionCall{}},
	"ToolResponse": {"ToolResponse", ToolResponse{}},
	"CodeResult":   {"CodeResult", CodeResult{}},
	"Usage":        {"Usage", Usage{}},
	"PendingInput": {"PendingInput", PendingInput{}},
	"PendingCode":  {"PendingInput/properties/code_blocks/items", PendingCode{}},
	"Approval":     {"Input/properties/approvals/items", Approval{}},
	"TeamRef":      {"TeamRef", TeamRef{}},
	"ForkRef":      {"Chat/properties/forked_from/oneOf/1", ForkRef{}},
	"Warning":      {"Warning", Warning{}},
	"ProblemField": {"Problem/properties/errors/items", ProblemField{}},
	"RunRequest":   {"RunRequest", RunRequest{}},
	"ChatPatch":    {"ChatPatch", ChatPatch{}},
	"TaskMessage":  {"TaskMessage", TaskMessage{}},
	"ForkRequest":  {"ForkRequest", ForkRequest{}},
	"Input":        {"Input", Input{}},
	"Team":         {"Team", Team{}},
	"TeamList":     {"TeamList", TeamList{}},
	"DryRun":       {"DryRun", DryRun{}},
	"Delivery":     {"Delivery", Delivery{}},
	"DeliveryList": {"DeliveryList", DeliveryList{}},
	"Problem":      {"Problem", Problem{}},
}

// notObjects are the package's types that are no JSON object of the
// wire: Status is a string, Ending what a terminal event's data says.
var notObjects = []string{"Status", "Ending"}

// TestWireTypesMatchTheOpenAPIFile: every wire type's JSON fields are the
// properties of its schema in api/openapi.yaml, and the other way round,
// so that a field added to one and not the other fails here; and every
// type of the package is checked.
func TestWireTypesMatchTheOpenAPIFile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "api", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("parse api/openapi.yaml: %v", err)
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)

	for _, name := range packageTypes(t) {
		if _, ok := schemaOf[name]; !ok && !slices.Contains(notObjects, name) {
			t.Errorf("api.%s names no schema of api/openapi.yaml in schemaOf", name)
		}
	}
	for name, w := range schemaOf {
		schema, err := lookup(schemas, w.schema)
		if err != nil {
			t.Errorf("api.%s: %v", name, err)
			continue
		}
		var props []string
		if p, ok := schema["properties"].(map[string]any); ok {
			for k := range p {
				props = append(props, k)
			}
		}
		fields := jsonFields(reflect.TypeOf(w.value))
		for _, f := range fields {
			if !slices.Contains(props, f) {
				t.Errorf("api.%s has the field %q, which the schema %s does not", name, f, w.schema)
			}
		}
		for _, p := range props {
			if !slices.Contains(fields, p) {
				t.Errorf("the schema %s has the property %q, which api.%s does not", w.schema, p, name)
			}
		}
	}
}

// TestJSONFields: the fields the test compares are those encoding/json
// writes, an embedded struct's among them.
func TestJSONFields(t *testing.T) {
	t.Parallel()
	type inner struct {
		A int `json:"a"`
		B int `json:"-"`
	}
	type outer struct {
		inner
		C string `json:"c,omitempty"`
		D string
		e string
	}
	_ = outer{}.e
	if got, want := jsonFields(reflect.TypeFor[outer]()), []string{"a", "c", "D"}; !slices.Equal(got, want) {
		t.Errorf("jsonFields = %q, want %q", got, want)
	}
}

// lookup finds a schema by name, or by a pointer under a schema's name,
// following $refs on the way.
func lookup(schemas map[string]any, path string) (map[string]any, error) {
	tokens := strings.Split(path, "/")
	var node any = schemas[tokens[0]]
	for _, tok := range tokens[1:] {
		node = deref(schemas, node)
		switch n := node.(type) {
		case map[string]any:
			node = n[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i >= len(n) {
				return nil, &lookupError{path}
			}
			node = n[i]
		default:
			return nil, &lookupError{path}
		}
	}
	m, ok := deref(schemas, node).(map[string]any)
	if !ok {
		return nil, &lookupError{path}
	}
	return m, nil
}

func deref(schemas map[string]any, node any) any {
	if m, ok := node.(map[string]any); ok {
		if ref, ok := m["$ref"].(string); ok {
			return schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
		}
	}
	return node
}

type lookupError struct{ path string }

func (e *lookupError) Error() string { return "no object schema at " + e.path + " in api/openapi.yaml" }

// jsonFields are the names encoding/json gives a struct's fields.
func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case tag == "-":
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			out = append(out, jsonFields(f.Type)...)
		case !f.IsExported():
		case name != "":
			out = append(out, name)
		default:
			out = append(out, f.Name)
		}
	}
	return out
}

// packageTypes are the types this package declares (aliases included).
func packageTypes(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, s := range g.Specs {
					if ts := s.(*ast.TypeSpec); ts.Name.IsExported() {
						names = append(names, ts.Name.Name)
					}
				}
			}
		}
	}
	if len(names) == 0 {
		t.Fatal("no types found")
	}
	return names
}
