package tool

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/spec/problem"
)

// schemaURL names the one schema a compiler holds. It is never fetched.
const schemaURL = "urn:agentd:tool-parameters"

// schemaCacheSize bounds the compiled schemas kept; a chat's tools are few,
// but the server runs many chats, and MCP servers bring their own schemas.
const schemaCacheSize = 1024

// maxSchemaErrors caps the problems listed for one schema or one call, so a
// broken schema cannot produce a reply longer than the model's context.
const maxSchemaErrors = 10

// noLoader refuses every external reference. The library's default loader
// reads file:// URLs, which would let a spec's "$ref" probe the server's
// filesystem; a tool schema must be self-contained (local "#/$defs/..."
// references still work, and the standard metaschemas are built in).
type noLoader struct{}

// Load refuses url.
func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema references are not allowed (%s)", url)
}

// compileSchema compiles a JSON Schema document (draft 2020-12 unless it
// says otherwise with $schema).
func compileSchema(raw []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(schemaURL)
}

// checkSchema reports the problems of a tool's parameters schema: it must
// be an object schema of type "object" (what OpenAI accepts for a function)
// and compile. Paths are base plus the pointer into the schema.
func checkSchema(raw json.RawMessage, base string) []spec.Problem {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return []spec.Problem{{Path: base, Message: "must be a JSON Schema object"}}
	}
	var probs problem.List
	var typ string
	if err := json.Unmarshal(obj["type"], &typ); err != nil || typ != "object" {
		probs.Add(base+"/type", `must be "object": a function takes an object of named arguments`)
	}
	_, err := compileSchema(raw)
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	switch {
	case err == nil:
	case errors.As(err, &sve) && errors.As(sve.Err, &ve):
		for _, leaf := range leaves(ve) {
			probs.Add(base+pointer(leaf.InstanceLocation), "%s", leafMessage(leaf))
		}
	default:
		probs.Add(base, "is not a valid JSON Schema: %v", err)
	}
	return probs.Items()
}

// parseArguments decodes a call's arguments, which must be one JSON object.
// It returns the compact JSON and the decoded value (numbers as
// json.Number, which the validator takes without losing precision), or an
// error message. Whitespace alone counts as "{}": some OpenAI-compatible
// servers send it for a function without parameters.
func parseArguments(s string) (parsed arguments, msg string) {
	s = strings.TrimSpace(s)
	if s == "" {
		s = "{}"
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return arguments{}, "arguments are not valid JSON: " + err.Error()
	}
	if _, err := dec.Token(); err != io.EOF {
		return arguments{}, "arguments are not valid JSON: unexpected data after the object"
	}
	if _, ok := v.(map[string]any); !ok {
		return arguments{}, fmt.Sprintf("arguments must be a JSON object, not %s", jsonKind(v))
	}
	var b bytes.Buffer
	_ = json.Compact(&b, []byte(s)) // s is valid JSON: Decode succeeded
	return arguments{raw: b.Bytes(), value: v}, ""
}

// arguments are a call's parsed arguments.
type arguments struct {
	raw   json.RawMessage // compact JSON object
	value any             // decoded, map[string]any
}

// validateArguments checks args against the called function's schema and
// returns a message listing what is wrong, or "". An http or sandbox
// tool's schema was checked at create time; an MCP server's schema is not
// ours, so when it does not compile the server is left to judge the
// arguments itself.
func (r *Runner) validateArguments(req *chat.ToolRequest, impl *implementation, args arguments) string {
	schema := req.Function.Parameters
	if len(bytes.TrimSpace(schema)) == 0 && impl.Type != TypeMCP {
		schema = req.Tool.Parameters
	}
	if s := bytes.TrimSpace(schema); len(s) == 0 || string(s) == "null" {
		return ""
	}
	sch, err := r.schemas.get(schema)
	if err != nil {
		if impl.Type == TypeMCP {
			r.log.Debug("mcp tool schema does not compile; the server validates the arguments",
				"chat_id", req.ChatID, "function", req.Function.Name, "error", err)
			return ""
		}
		return "the tool's parameters schema is invalid: " + err.Error()
	}
	return validationMessage(sch, args.value)
}

// validationMessage validates v and lists the failures, or returns "".
func validationMessage(sch *jsonschema.Schema, v any) string {
	err := sch.Validate(v)
	if err == nil {
		return ""
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return "arguments could not be validated: " + err.Error()
	}
	var msgs []string
	for _, leaf := range leaves(ve) {
		msgs = append(msgs, "at "+pointerOrRoot(leaf.InstanceLocation)+": "+leafMessage(leaf))
	}
	return "arguments do not match the schema: " + strings.Join(msgs, "; ")
}

// leaves returns the innermost validation errors (the ones that say what is
// wrong rather than "allOf failed"), at most maxSchemaErrors of them.
func leaves(ve *jsonschema.ValidationError) []*jsonschema.ValidationError {
	var out []*jsonschema.ValidationError
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(out) >= maxSchemaErrors {
			return
		}
		if len(e.Causes) == 0 {
			out = append(out, e)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return out
}

// leafMessage is what one validation error says, without its location.
func leafMessage(e *jsonschema.ValidationError) string {
	// Error() of a leaf is "at '<pointer>': <message>"; the pointer is
	// formatted by the caller, which knows the base path.
	msg := e.Error()
	if _, after, ok := strings.Cut(msg, "': "); ok && strings.HasPrefix(msg, "at '") {
		return after
	}
	return msg
}

// pointer formats a location as a JSON pointer ("" for the root).
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(problem.Escape(t))
	}
	return b.String()
}

// pointerOrRoot is pointer, with "/" standing for the root so that a
// message never says "at : ...".
func pointerOrRoot(tokens []string) string {
	if len(tokens) == 0 {
		return "/"
	}
	return pointer(tokens)
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number, float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	default:
		return "an object"
	}
}

// schemaCache keeps compiled schemas by the SHA-256 of their bytes, failures
// included, so a schema is compiled once however many calls use it.
type schemaCache struct {
	mu      sync.Mutex
	max     int
	entries map[[sha256.Size]byte]schemaEntry
}

type schemaEntry struct {
	schema *jsonschema.Schema
	err    error
}

func newSchemaCache(max int) *schemaCache {
	return &schemaCache{max: max, entries: make(map[[sha256.Size]byte]schemaEntry)}
}

// get returns the compiled schema of raw. When the cache is full an
// arbitrary entry makes room: cheap, and a schema that is evicted while
// still in use is only compiled again.
func (c *schemaCache) get(raw []byte) (*jsonschema.Schema, error) {
	key := sha256.Sum256(raw)
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok {
		return e.schema, e.err
	}
	// Compiled outside the lock: two callers may both compile a new schema,
	// which is harmless, while a slow compile never blocks other calls.
	e.schema, e.err = compileSchema(raw)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.max {
		for k := range c.entries {
			delete(c.entries, k)
			break
		}
	}
	c.entries[key] = e
	return e.schema, e.err
}
