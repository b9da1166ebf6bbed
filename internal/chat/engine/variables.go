package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/pytext"
	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/varexpr"
)

// This file is the chat's context variables (docs/context-variables.md)
// as the log holds them: the fold of context.updated events, the
// expressions over them that route hand-offs and graph edges, and the
// system messages rendered from them.

// exprSet holds the spec's expressions compiled once, by their text: a
// state and its clones, and the states of its inner runs, share one set,
// which is never written after it is made.
type exprSet map[string]*varexpr.Program

// compileExprs compiles every expression of a spec: its agents' (inner
// teams' too) conditional hand-offs and its graph's expression edges.
// The spec was validated, so none fails unless the stored spec was
// changed by hand; that error breaks the state (the chat fails).
func compileExprs(sp *spec.Spec) (exprSet, error) {
	var srcs []string
	var walk func(agents []spec.Agent)
	walk = func(agents []spec.Agent) {
		for i := range agents {
			for _, h := range agents[i].Handoffs {
				if h.Conditional() {
					srcs = append(srcs, h.Condition)
				}
			}
			if t := agents[i].Team; t != nil {
				walk(t.Agents)
			}
		}
	}
	walk(sp.Agents)
	if sel := sp.SpeakerSelection; sel != nil && sel.Graph != nil {
		for _, n := range sel.Graph.Nodes {
			for _, e := range n.Edges {
				if src, ok := e.Expression(); ok {
					srcs = append(srcs, src)
				}
			}
		}
	}
	if len(srcs) == 0 {
		return nil, nil
	}
	names := sp.ContextNames()
	set := make(exprSet, len(srcs))
	for _, src := range srcs {
		if set[src] != nil {
			continue
		}
		p, err := varexpr.Compile(src, names)
		if err != nil {
			return nil, fmt.Errorf("expression %q: %w", src, err)
		}
		set[src] = p
	}
	return set, nil
}

// holds evaluates an expression of the spec over the variables as they
// stand. One that cannot be evaluated (a variable not set, a value of
// another type) does not hold.
func (s *State) holds(src string) bool {
	p := s.exprs[src]
	if p == nil {
		return false
	}
	ok, err := p.Holds(s.vars)
	return ok && err == nil
}

// ContextVariables are the chat's variables as the log leaves them (nil
// when none was ever set). The map is the state's: read it, never write it.
func (s *State) ContextVariables() map[string]json.RawMessage { return s.vars }

// foldContext folds a context.updated event. The map is replaced, never
// written in place: clones of the state share it.
func (s *State) foldContext(e chat.Event) error {
	vars, err := FoldContext(s.vars, e)
	if err != nil {
		return err
	}
	s.vars = vars
	for _, in := range s.inners {
		in.st.vars = s.vars
	}
	return nil
}

// FoldContext is vars after a context.updated event: what a chat's
// variables are is the fold of those events alone, so a reader that
// needs only the variables reads only them.
func FoldContext(vars map[string]json.RawMessage, e chat.Event) (map[string]json.RawMessage, error) {
	var u chat.ContextUpdate
	if err := chat.DecodeData(e, &u); err != nil {
		return nil, err
	}
	for k, v := range u.Set {
		c, err := canonicalJSON(v)
		if err != nil {
			return nil, fmt.Errorf("variable %s: %w", k, err)
		}
		u.Set[k] = c
	}
	return ApplyContext(vars, u), nil
}

// canonicalJSON is a JSON value written one way: compact, the keys of its
// objects sorted, its numbers as written. The log's stores give an
// event's data back in different forms (Postgres's jsonb spaces it and
// orders keys its own way), and the variables must be the same on every
// replica and after every rebuild.
func canonicalJSON(raw json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// ApplyContext is vars after an update: a new map (nil when empty).
func ApplyContext(vars map[string]json.RawMessage, u chat.ContextUpdate) map[string]json.RawMessage {
	next := maps.Clone(vars)
	if next == nil {
		next = make(map[string]json.RawMessage, len(u.Set))
	}
	maps.Copy(next, u.Set)
	for _, k := range u.Removed {
		delete(next, k)
	}
	if len(next) == 0 {
		return nil
	}
	return next
}

// ContextTooLarge says why an update cannot be applied to vars (the
// result over spec.MaxContextBytes encoded), or "".
func ContextTooLarge(vars map[string]json.RawMessage, u chat.ContextUpdate) string {
	if n := len(EncodeContext(ApplyContext(vars, u))); n > spec.MaxContextBytes {
		return fmt.Sprintf("the chat's context variables with these changes would be %d bytes encoded, over %d", n, spec.MaxContextBytes)
	}
	return ""
}

// EncodeContext is the variables as one JSON object (keys in order), {}
// for none: what the chat object shows.
func EncodeContext(vars map[string]json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range slices.Sorted(maps.Keys(vars)) {
		if i > 0 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(k)
		b.Write(key)
		b.WriteByte(':')
		b.Write(vars[k]) // canonical already (foldContext)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// InitialContextEvent is the context.updated event of a new chat's
// variables (false when the spec sets none). A null in the spec declares
// a name for expressions without setting it.
func InitialContextEvent(sp *spec.Spec) (chat.Event, bool) {
	vars, _ := spec.DecodeContext(sp.ContextVariables)
	u := chat.ContextUpdateOf(vars, chat.ContextBy{Client: chat.ContextByCreate})
	if len(u.Set) == 0 {
		return chat.Event{}, false
	}
	u.Removed = nil
	return chat.ContextEvent(u), true
}

// systemMessage is an assistant's system message for a model call: its
// template rendered from the variables, else its system_message, else
// AgentChat's default.
func (s *State) systemMessage(a *spec.Agent) string {
	switch {
	case a.SystemMessageTemplate != nil:
		return RenderTemplate(*a.SystemMessageTemplate, s.vars)
	case a.SystemMessage != nil:
		return *a.SystemMessage
	}
	return defaultSystemMessage
}

// RenderTemplate fills in a system_message_template as Swarm's
// instructions.format(**defaultdict(str, context_variables)) does: each
// {name} is str() of the variable's value (an object's keys sorted: the
// log keeps them so, see canonicalJSON), and empty when it is not set.
// The template was checked at create (pytext.ParseFormat).
func RenderTemplate(template string, vars map[string]json.RawMessage) string {
	parts, err := pytext.ParseFormat(template)
	if err != nil {
		return template
	}
	var b strings.Builder
	for _, p := range parts {
		if !p.Field {
			b.WriteString(p.Text)
			continue
		}
		if v, ok := vars[p.Text]; ok {
			if err := pytext.WriteJSONStr(&b, v); err != nil {
				b.WriteString(string(v))
			}
		}
	}
	return b.String()
}

// handoffTaken is the first of an assistant's conditional hand-offs whose
// expression holds now (AG2's OnContextCondition, checked in order before
// the agent replies), or nil.
func (s *State) handoffTaken(a *spec.Agent) *spec.Handoff {
	for i := range a.Handoffs {
		if h := &a.Handoffs[i]; h.Conditional() && s.holds(h.Condition) {
			return h
		}
	}
	return nil
}

// conditionalHandoffText is AG2's reply of an agent whose context
// condition hands off.
func conditionalHandoffText(target string) string { return "[Handing off to " + target + "]" }

// conditionalHandoff is the message that ends an assistant's turn with a
// hand-off taken on its condition: a HandoffMessage, without a model
// call.
func conditionalHandoff(a *spec.Agent, turn int, h *spec.Handoff) chat.Event {
	return chat.WithData(chat.Event{Type: chat.EventMessage, Role: chat.RoleAssistant, Name: a.Name, Content: conditionalHandoffText(h.Target)},
		chat.MessageData{Kind: chat.KindHandoff, Handoff: h.Target, Condition: h.Condition, Turn: turn, End: true})
}
