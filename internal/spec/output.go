package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"

	"github.com/agentd/agentd/internal/structured"
)

// recordPropertyOrder sets the property_order of every output_schema that
// has none to the order of its schema's properties as written, and returns
// compact with those orders in it (compact itself when nothing changed).
func recordPropertyOrder(s *Spec, compact []byte) ([]byte, error) {
	changed := map[int][]string{}
	for i := range s.Agents {
		o := s.Agents[i].OutputSchema
		if o == nil || o.PropertyOrder != nil {
			continue
		}
		sc, probs := structured.Parse(o.Schema, nil)
		if len(probs) > 0 {
			continue // Validate reports it
		}
		o.PropertyOrder = sc.Properties()
		changed[i] = o.PropertyOrder
	}
	if len(changed) == 0 {
		return compact, nil
	}
	dec := json.NewDecoder(bytes.NewReader(compact))
	dec.UseNumber()
	var top map[string]any
	if err := dec.Decode(&top); err != nil {
		return nil, fmt.Errorf("record property order: %w", err)
	}
	agents, _ := top["agents"].([]any)
	for i, order := range changed {
		if i >= len(agents) {
			continue
		}
		a, _ := agents[i].(map[string]any)
		o, _ := a["output_schema"].(map[string]any)
		if o == nil {
			continue
		}
		o["property_order"] = order
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(top); err != nil {
		return nil, fmt.Errorf("record property order: %w", err)
	}
	return bytes.TrimRight(out.Bytes(), "\n"), nil
}

// schemaNameRE is what OpenAI accepts as a json_schema response format's
// name (a pydantic model's class name always is).
var schemaNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// maxSchemaBytes bounds an output schema.
const maxSchemaBytes = 64 << 10

// checkOutputSchema checks an assistant's output_schema: a type agentd
// validates replies of exactly as AgentChat's pydantic model would, and a
// format string it fills in as Python does.
func (v *validator) checkOutputSchema(p string, a *Agent) {
	o := a.OutputSchema
	if o == nil {
		return
	}
	ap := p
	p += "/output_schema"
	if a.Type != AgentAssistant {
		v.add(p, "only an assistant gives structured output")
		return
	}
	if !schemaNameRE.MatchString(o.Name) {
		v.add(p+"/name", "must be 1 to 64 letters, digits, '_' or '-' (the model's type name, sent as the json_schema's name)")
	}
	for j, t := range a.Tools {
		// AgentChat's OpenAI client asks for structured output through
		// the openai library's parse, which refuses tools that are not
		// strict, and an agentd tool is not.
		v.add(ap+"/tools/"+strconv.Itoa(j), "an agent with output_schema cannot use tool %q: AgentChat's OpenAI client takes only strict tools with structured output (%q is not strict); handoffs are strict and allowed", t, t)
	}
	if v.env.Models != nil && a.Model != nil {
		// The model must take a json_schema response_format (an
		// anthropic endpoint's Messages API has none).
		m := v.spec.ResolveModel(a.Model)
		if m.Provider != "" && m.Provider != "replay" {
			m.ResponseFormat = json.RawMessage(`{"type":"json_schema"}`)
			for _, pr := range v.env.Models.CheckModel(&m) {
				if pr.Path == "/response_format" {
					v.add(p, "needs a model that takes a json_schema response_format: %s", pr.Message)
				}
			}
		}
	}
	if len(o.Schema) == 0 || string(o.Schema) == "null" {
		v.add(p+"/schema", "is required: the JSON Schema of the reply's type")
		return
	}
	if len(o.Schema) > maxSchemaBytes {
		v.add(p+"/schema", "must be at most %d bytes", maxSchemaBytes)
		return
	}
	sc, probs := structured.Parse(o.Schema, o.PropertyOrder)
	for _, pr := range probs {
		if pr.Path == structured.OrderPath {
			v.add(p+"/property_order", "%s", pr.Message)
			continue
		}
		v.add(p+"/schema"+pr.Path, "%s", pr.Message)
	}
	if o.FormatString != nil {
		switch {
		case len(*o.FormatString) > v.limits.MaxPromptBytes:
			v.add(p+"/format_string", "must be at most %d bytes", v.limits.MaxPromptBytes)
		case sc != nil:
			if err := sc.CheckFormat(*o.FormatString); err != nil {
				v.add(p+"/format_string", "%s", err.Error())
			}
		}
	}
}
