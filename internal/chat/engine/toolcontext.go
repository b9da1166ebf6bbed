package engine

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/spec"
)

// ToolContextEvents are the context.updated events of a tool turn's calls
// (docs/context-variables.md): one for each call whose python_function
// changed the variables (a Result's context_variables, what it changed in
// the dict it was given), in the calls' order, by the agent and the
// function. Every call of a reply was given the variables as they were
// before the reply's calls, as Swarm gives them. A change the limits of
// context variables refuse is not kept: that call's response becomes an
// error saying why, and refused counts them.
func (s *State) ToolContextEvents(agent string, calls []chat.ToolCall, results []chat.ToolResult, responses []chat.ToolResponse) (evs []chat.Event, refused int) {
	vars := s.vars
	for i, c := range calls {
		if i >= len(results) {
			break
		}
		r := results[i]
		if len(r.ContextSet) == 0 && len(r.ContextRemoved) == 0 {
			continue
		}
		raw := r.ContextSet
		if len(raw) == 0 {
			raw = json.RawMessage("{}")
		}
		var probs []string
		set, ok := spec.CheckContext("", raw, func(path, format string, args ...any) {
			probs = append(probs, strings.TrimSpace(path+" "+fmt.Sprintf(format, args...)))
		})
		u := chat.ContextUpdate{Set: set, Removed: r.ContextRemoved, By: chat.ContextBy{Agent: agent, Tool: c.Function.Name}}
		if u.Set == nil {
			u.Set = map[string]json.RawMessage{}
		}
		if ok {
			next := ApplyContext(vars, u)
			if n := len(EncodeContext(next)); n > spec.MaxContextBytes {
				ok, probs = false, append(probs, fmt.Sprintf("the variables would be %d bytes encoded, more than %d", n, spec.MaxContextBytes))
			} else {
				vars = next
			}
		}
		if !ok {
			responses[i] = ErrorResponse(c.ID, "the function's change of the context variables was not kept: "+strings.Join(probs, "; "))
			refused++
			continue
		}
		evs = append(evs, chat.ContextEvent(u))
	}
	return evs, refused
}
