package engine

import (
	"encoding/json"
	"fmt"

	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/structured"
)

// outputSchema reads an agent's output type (checked at create time).
func outputSchema(o *spec.OutputSchema) (*structured.Schema, error) {
	sc, probs := structured.Parse(o.Schema, o.PropertyOrder)
	if len(probs) > 0 {
		return nil, fmt.Errorf("output_schema %s%s: %s", o.Name, probs[0].Path, probs[0].Message)
	}
	return sc, nil
}

// ResponseFormat is the response_format an agent with an output type asks
// its model for, as AgentChat's OpenAI client sends it (the openai
// library's type_to_response_format_param): a strict json_schema named
// after the type.
func ResponseFormat(o *spec.OutputSchema) (json.RawMessage, error) {
	sc, err := outputSchema(o)
	if err != nil {
		return nil, err
	}
	type jsonSchema struct {
		Schema json.RawMessage `json:"schema"`
		Name   string          `json:"name"`
		Strict bool            `json:"strict"`
	}
	return json.Marshal(struct {
		Type       string     `json:"type"`
		JSONSchema jsonSchema `json:"json_schema"`
	}{"json_schema", jsonSchema{Schema: sc.Strict(), Name: o.Name, Strict: true}})
}

// structuredReply reads a model's reply as its agent's output type, as
// AgentChat's AssistantAgent does (model_validate_json), and returns the
// StructuredMessage's content and object: the content is what AgentChat's
// to_model_text gives, the format string filled in (when format is true
// and the type has one) or else the object as model_dump_json writes it.
func structuredReply(a *spec.Agent, text string, format bool) (content, object string, err error) {
	sc, err := outputSchema(a.OutputSchema)
	if err != nil {
		return "", "", err
	}
	obj, err := sc.Read(text)
	if err != nil {
		return "", "", fmt.Errorf("agent %s: the model's reply is not a valid %s: %w", a.Name, a.OutputSchema.Name, err)
	}
	object = obj.JSON()
	if f := a.OutputSchema.FormatString; format && f != nil {
		return obj.Format(*f), object, nil
	}
	return object, object, nil
}
