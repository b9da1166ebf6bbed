package spec

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/pytext"
	"github.com/agentd/agentd/internal/spec/problem"
	"github.com/agentd/agentd/internal/varexpr"
)

// This file is what a spec says of a chat's context variables
// (docs/context-variables.md): the initial variables, the hand-offs that
// may be taken on a condition over them, and the system messages rendered
// from them.

// Bounds of a chat's context variables, whoever sets them (a spec, a run,
// a fork, a PATCH, a tool): the object encoded, how deep its values nest,
// and a name's length.
const (
	MaxContextBytes   = 64 << 10
	MaxContextDepth   = 32
	MaxContextKeySize = 256
)

// Handoff is one of an assistant's hand-offs: AgentChat's Handoff (a
// target, the tool's name and description), or, with a Condition, AG2's
// OnContextCondition: no tool, taken when the expression over the
// context variables holds as the agent's turn comes to a model call. A
// spec may give just the target's name.
type Handoff struct {
	Target      string `json:"target"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	Condition   string `json:"condition,omitempty"`
	// short: the spec gave the target's name alone, which is how the
	// hand-off is written back.
	short bool
}

// HandoffTo is the hand-off to target with AgentChat's defaults, written
// as the target's name.
func HandoffTo(target string) Handoff { return Handoff{Target: target, short: true} }

// UnmarshalJSON accepts a target's name or a hand-off object.
func (h *Handoff) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*h = Handoff{short: true}
		return json.Unmarshal(b, &h.Target)
	}
	type plain Handoff // without this method
	return json.Unmarshal(b, (*plain)(h))
}

// MarshalJSON writes the form the hand-off was given in.
func (h Handoff) MarshalJSON() ([]byte, error) {
	if h.short {
		return json.Marshal(h.Target)
	}
	type plain Handoff
	return json.Marshal(plain(h))
}

// Conditional reports whether the hand-off is taken on a condition (and
// offers the model no tool).
func (h *Handoff) Conditional() bool { return h.Condition != "" }

// ToolName is the name of the hand-off's tool: its own, else AgentChat's
// transfer_to_<target>, lower-cased.
func (h *Handoff) ToolName() string {
	if h.Name != "" {
		return h.Name
	}
	return strings.ToLower(HandoffPrefix + h.Target)
}

// ToolDescription is the description of the hand-off's tool: its own,
// else AgentChat's.
func (h *Handoff) ToolDescription() string {
	if h.Description != "" {
		return h.Description
	}
	return "Handoff to " + h.Target + "."
}

// ContextNames are the names of the spec's initial context variables:
// what its expressions may use.
func (s *Spec) ContextNames() []string {
	vars, _ := DecodeContext(s.ContextVariables)
	return slices.Sorted(maps.Keys(vars))
}

// DecodeContext reads a JSON object of context variables into its
// members (nil for an absent or null object).
func DecodeContext(raw json.RawMessage) (map[string]json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// CheckContext checks an object of context variables at path: a JSON
// object of at most MaxContextBytes encoded, whose names are 1 to
// MaxContextKeySize bytes and whose values nest at most MaxContextDepth
// deep. In a change (a run's, a fork's, a PATCH) a null value removes the
// variable; in a spec it declares the name for expressions without
// setting it. It returns the members when there is no problem.
func CheckContext(path string, raw json.RawMessage, add func(path, format string, args ...any)) (map[string]json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		add(path, "must be an object of variables: {\"name\": value, ...}")
		return nil, false
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		add(path, "must be an object of variables: %s", err)
		return nil, false
	}
	if compact.Len() > MaxContextBytes {
		add(path, "must be at most %d bytes encoded (this is %d)", MaxContextBytes, compact.Len())
		return nil, false
	}
	m, err := DecodeContext(compact.Bytes())
	if err != nil {
		add(path, "must be an object of variables: %s", err)
		return nil, false
	}
	ok := true
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kp := problem.Key(path, k)
		switch {
		case k == "" || len(k) > MaxContextKeySize:
			add(kp, "a variable's name must be 1 to %d bytes", MaxContextKeySize)
			ok = false
		case jsonDepth(m[k]) > MaxContextDepth:
			add(kp, "nests more than %d levels deep", MaxContextDepth)
			ok = false
		}
	}
	return m, ok
}

// jsonDepth is how deep a valid JSON value's arrays and objects nest (0
// for a scalar).
func jsonDepth(v []byte) int {
	depth, deepest := 0, 0
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '"':
			i = stringEnd(v, i)
		case '[', '{':
			depth++
			deepest = max(deepest, depth)
		case ']', '}':
			depth--
		}
	}
	return deepest
}

// checkContextVariables checks the spec's context_variables.
func (v *validator) checkContextVariables() {
	if len(v.spec.ContextVariables) == 0 || string(v.spec.ContextVariables) == "null" {
		return
	}
	CheckContext("/context_variables", v.spec.ContextVariables, v.add)
}

// checkHandoffs checks an agent's hand-offs: each names another agent (or
// user, which ends the run as AgentChat's HandoffTermination does), tool
// names are unique and a tool's, and a condition is a boolean expression
// over the spec's variables that only a swarm routes on.
func (v *validator) checkHandoffs(p string, a *Agent) {
	names := map[string]bool{}
	for j := range a.Handoffs {
		h := &a.Handoffs[j]
		hp := p + "/handoffs/" + strconv.Itoa(j)
		switch {
		case h.Target == "":
			v.add(hp+"/target", "is required")
		case h.Target == a.Name:
			v.add(hp, "an agent cannot hand off to itself")
		case h.Target != UserName && !v.agentNamed(h.Target):
			v.add(hp, "names no agent: %q (nor user)", h.Target)
		}
		if len(h.Description) > v.limits.MaxPromptBytes {
			v.add(hp+"/description", "must be at most %d bytes", v.limits.MaxPromptBytes)
		}
		if h.Conditional() {
			v.checkHandoffCondition(hp, h)
			continue
		}
		tool := h.ToolName()
		switch {
		case h.Name != "" && !toolNameRE.MatchString(h.Name):
			v.add(hp+"/name", "must match %s (a function name models accept)", toolNameRE)
		case names[tool]:
			v.add(hp+"/name", "another hand-off of this agent is named %q", tool)
		case h.Name != "" && v.spec.Tool(h.Name) != nil:
			v.add(hp+"/name", "%q is a tool of the chat: a hand-off's tool needs a name of its own", h.Name)
		}
		names[tool] = true
	}
}

// checkHandoffCondition checks a conditional hand-off: a boolean CEL
// expression over the spec's context variables, in a swarm, whose tool
// fields would mean nothing.
func (v *validator) checkHandoffCondition(hp string, h *Handoff) {
	if _, err := varexpr.Compile(h.Condition, v.spec.ContextNames()); err != nil {
		v.add(hp+"/condition", "%s", err)
	}
	if v.spec.Method() != SelectSwarm {
		v.add(hp+"/condition", "a hand-off on a condition routes a swarm: it needs speaker_selection.method swarm (a graph's edges take {\"expression\": ...})")
	}
	if h.Name != "" {
		v.add(hp+"/name", "a hand-off on a condition is no tool: it has no name")
	}
	if h.Description != "" {
		v.add(hp+"/description", "a hand-off on a condition is no tool: it has no description")
	}
}

// toolNameRE is what OpenAI-compatible APIs accept as a function's name:
// the rule of a structured output's name.
var toolNameRE = schemaNameRE

// checkTemplate checks an agent's system_message_template: a Python
// format string whose fields are names of variables ({customer}), with no
// system_message beside it.
func (v *validator) checkTemplate(p string, a *Agent) {
	t := a.SystemMessageTemplate
	if t == nil {
		return
	}
	path := p + "/system_message_template"
	switch {
	case a.Type != AgentAssistant:
		v.add(path, "only an assistant has a system message")
	case a.SystemMessage != nil:
		v.add(path, "give system_message or system_message_template, not both")
	case len(*t) > v.limits.MaxPromptBytes:
		v.add(path, "must be at most %d bytes", v.limits.MaxPromptBytes)
	}
	if _, err := pytext.ParseFormat(*t); err != nil {
		v.add(path, "is not a format string of variables: %s", err)
	}
}
