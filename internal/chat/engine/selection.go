package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/spec"
)

// successors applies `transitions` (AutoGen's allowed_or_disallowed_speaker_
// transitions) to the agents that may follow last. Before the first agent
// turn (last is no agent) every agent may speak. With type "allowed", an
// agent missing from the map has no successor; with "disallowed" it has all.
func successors(s *spec.Spec, last string) []string {
	names := AgentNames(s)
	sel := s.SpeakerSelection
	if sel == nil || len(sel.Transitions) == 0 || !slices.Contains(names, last) {
		return names
	}
	listed := sel.Transitions[last]
	if sel.TransitionsType == "disallowed" {
		return slices.DeleteFunc(names, func(n string) bool { return slices.Contains(listed, n) })
	}
	return slices.DeleteFunc(names, func(n string) bool { return !slices.Contains(listed, n) })
}

// candidates are the agents eligible to speak after last: the successors,
// without last itself when repeats are not allowed (unless it is the only
// one left, as AutoGen allows a lone agent to go on).
func candidates(s *spec.Spec, last string) []string {
	succ := successors(s, last) // a slice of its own, which this may change
	if s.AllowRepeat() || len(succ) <= 1 || !slices.ContainsFunc(succ, func(n string) bool { return n != last }) {
		return succ
	}
	return slices.DeleteFunc(succ, func(n string) bool { return n == last })
}

// nextInOrder is the first candidate after last in agents order, wrapping:
// round robin, and the auto selector's fallback. It never returns a name
// that is not a candidate.
func nextInOrder(sp *spec.Spec, last string, candidates []string) string {
	agents := sp.Agents
	start := slices.IndexFunc(agents, func(a spec.Agent) bool { return a.Name == last }) + 1 // 0 when last is no agent
	for i := range agents {
		if n := agents[(start+i)%len(agents)].Name; slices.Contains(candidates, n) {
			return n
		}
	}
	return ""
}

// pickRandom chooses uniformly among candidates. Seeded per turn, not per
// chat: the choice of turn N depends on nothing but the seed and N, so it is
// reproducible after a restart without storing generator state.
func pickRandom(sp *spec.Spec, candidates []string, turn int) string {
	if seed := sp.SpeakerSelection.Seed; seed != nil {
		return candidates[rand.New(rand.NewPCG(uint64(*seed), uint64(turn))).IntN(len(candidates))]
	}
	return candidates[rand.IntN(len(candidates))]
}

// swarmTarget is the Swarm speaker: the target of the latest handoff, else
// the current speaker, else the first agent.
func swarmTarget(sp *spec.Spec, msgs []chat.Message, last string) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Handoff != "" {
			return msgs[i].Handoff
		}
	}
	if slices.Contains(AgentNames(sp), last) {
		return last
	}
	return sp.Agents[0].Name
}

func AgentNames(sp *spec.Spec) []string {
	names := make([]string, len(sp.Agents))
	for i, a := range sp.Agents {
		names[i] = a.Name
	}
	return names
}

// defaultSelectorPrompt is AgentChat SelectorGroupChat's template, byte for
// byte (it ends with a newline).
const defaultSelectorPrompt = `You are in a role play game. The following roles are available:
{roles}.
Read the following conversation. Then select the next role from {participants} to play. Only return the role.

{history}

Read the above conversation. Then select the next role from {participants} to play. Only return the role.
`

// SelectorPrompt renders the auto selector's prompt as AgentChat's
// SelectorGroupChat does: {roles} lists every agent ("name: description",
// whitespace runs collapsed), {participants} the candidates, and {history}
// the chat messages — the task, replies, tool-call summaries and handoffs,
// not an assistant's inner tool-call and tool-result events — each as
// "name: content" with trailing space trimmed and a blank line after it,
// joined by newlines. The selector's context (speaker_selection.context)
// bounds the history as an agent's bounds what its model sees.
func SelectorPrompt(sp *spec.Spec, candidates []string, msgs []chat.Message, tokens chat.TokenCounter) (string, error) {
	ss := sp.SpeakerSelection
	tmpl := defaultSelectorPrompt
	if p := ss.SelectorPrompt; p != nil {
		tmpl = *p
	}
	roles := make([]string, 0, len(sp.Agents))
	for _, a := range sp.Agents {
		desc := a.Description
		if a.MessageFilter != nil {
			desc += " (with message filtering)" // MessageFilterAgent's own description
		}
		roles = append(roles, strings.TrimSpace(strings.Join(strings.Fields(a.Name+": "+desc), " ")))
	}
	ctx := make([]chat.ModelMessage, 0, len(msgs))
	for _, m := range msgs {
		if isChatMessage(m) {
			ctx = append(ctx, chat.ModelMessage{Role: chat.RoleUser, Name: m.Name, Content: selectorText(m), More: chat.MoreParts(modelParts(m.Parts))})
		}
	}
	if ss.Context.Kind() != spec.ContextUnbounded {
		starts := make([]int, len(ctx))
		for i := range starts {
			starts[i] = i
		}
		var err error
		ctx, err = boundContext(ss.Context, ctx, 0, starts, func(ms []chat.ModelMessage) (int, error) {
			return countTokens(tokens, sp.ResolveModel(ss.Model), ms)
		})
		if err != nil {
			return "", fmt.Errorf("the selector's model context: %w", err)
		}
	}
	history := make([]string, 0, len(ctx))
	for _, m := range ctx {
		history = append(history, strings.TrimRightFunc(m.Name+": "+m.Content, unicode.IsSpace)+"\n\n")
	}
	return strings.NewReplacer("{roles}", strings.Join(roles, "\n"), "{participants}", PyList(candidates),
		"{history}", strings.Join(history, "\n")).Replace(tmpl), nil
}

// isChatMessage reports whether m is one of AgentChat's chat messages (what
// a group chat passes between agents and what MaxMessageTermination counts)
// rather than an agent's inner event (a tool call request or its results).
func isChatMessage(m chat.Message) bool {
	return m.Type != chat.TypeToolCallRequestEvent && m.Type != chat.TypeToolCallExecutionEvent
}

// PyList renders names as Python's str(list) does, which is what AutoGen's
// prompts show the model.
func PyList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + n + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// mentionedAgents returns the agents a selector reply names, in agents
// order: a name counts where it stands as a whole word (bounded by non-word
// characters or the ends), and an underscore in a name also matches a space
// ("code_writer" in "code writer") or an escaped underscore ("code\_writer"),
// as in AutoGen.
func mentionedAgents(names []string, reply string) []string {
	var out []string
	for _, n := range names {
		if mentions(reply, n) || strings.Contains(n, "_") &&
			(mentions(reply, strings.ReplaceAll(n, "_", " ")) || mentions(reply, strings.ReplaceAll(n, "_", `\_`))) {
			out = append(out, n)
		}
	}
	return out
}

func mentions(text, word string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], word)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(word)
		before, _ := utf8.DecodeLastRuneInString(text[:start])
		after, _ := utf8.DecodeRuneInString(text[end:])
		if (start == 0 || !isWord(before)) && (end == len(text) || !isWord(after)) {
			return true
		}
		i = start + 1
	}
}

func isWord(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// JudgeSelectorReply decides one auto-selection attempt: the chosen agent,
// or the feedback for the next attempt, in AgentChat's words. Mentions are
// looked for among all agents (AgentChat does so to catch the previous
// speaker); last is the previous speaker, which may not be chosen unless
// repeats are allowed. A name that the transitions exclude (an agentd
// addition AgentChat has no equivalent for) gets feedback of the same form.
func JudgeSelectorReply(names, candidates []string, reply, last string, allowRepeat bool) (agent, feedback string) {
	mentioned := mentionedAgents(names, reply)
	switch {
	case len(mentioned) == 0:
		return "", fmt.Sprintf("No valid name was mentioned. Please select from: %s.", PyList(candidates))
	case len(mentioned) > 1:
		return "", fmt.Sprintf("Expected exactly one name to be mentioned. Please select only one from: %s.", PyList(candidates))
	case !allowRepeat && mentioned[0] == last:
		return "", fmt.Sprintf("Repeated speaker is not allowed, please select a different name from: %s.", PyList(candidates))
	case !slices.Contains(candidates, mentioned[0]):
		return "", fmt.Sprintf("'%s' is not allowed to speak next. Please select a different name from: %s.", mentioned[0], PyList(candidates))
	default:
		return mentioned[0], ""
	}
}

// selectStep chooses the speaker of the next turn: the speaker.selected
// event to append, or the auto selector's model call that completes it. A
// manual selection pauses the chat for a client's choice instead, and a
// chat in which no agent may speak stops.
func (s *State) selectStep(env StepEnv) Step {
	if s.magentic != nil {
		return s.magenticNext()
	}
	turn := s.nextTurn()
	method := s.Spec.Method()
	if s.graph != nil {
		// Every ready node runs, at once (GraphFlow's select_speaker
		// drains its ready queue). A node enqueued twice runs once.
		var agents []string
		for _, n := range s.graph.readyNodes(s.holds) {
			if !slices.Contains(agents, n) {
				agents = append(agents, n)
			}
		}
		if len(agents) == 0 {
			return AppendStep(terminalEvent(chat.StatusCompleted, chat.StopGraphComplete, graphStopDetail, ""))
		}
		return AppendStep(SelectedEvent(chat.Selection{Agent: agents[0], Agents: agents, Method: method, Candidates: agents, Turn: turn}))
	}
	if _, proxy := s.routedCalls(); proxy != "" {
		// Tool calls wait for the user_proxy that executes them (AutoGen's
		// func_call_filter): it speaks next, whatever the method says.
		return AppendStep(SelectedEvent(chat.Selection{Agent: proxy, Method: method, Candidates: []string{proxy}, Turn: turn, Routed: true}))
	}
	cands := candidates(s.Spec, s.LastSpeaker)
	if len(cands) == 0 {
		detail := fmt.Sprintf("No eligible speaker after '%s': the transitions allow none.", s.LastSpeaker)
		return AppendStep(terminalEvent(chat.StatusCompleted, chat.StopNoEligibleSpeaker, detail, ""))
	}
	sel := chat.Selection{Method: method, Candidates: cands, Turn: turn}
	switch method {
	case spec.SelectRandom:
		sel.Agent = pickRandom(s.Spec, cands, turn)
	case spec.SelectManual:
		return AppendStep(s.inputRequest(env, &chat.PendingInput{Kind: "speaker", Candidates: cands,
			Reason: fmt.Sprintf("Select the speaker of turn %d.", turn)}))
	case spec.SelectSwarm:
		sel.Agent = swarmTarget(s.Spec, s.Msgs, s.LastSpeaker)
		if s.Spec.Agent(sel.Agent) == nil {
			// A hand-off to user that no condition ended the run on.
			detail := fmt.Sprintf("No eligible speaker: '%s' handed the swarm to '%s', who is not one of its agents; "+
				"end the run on that hand-off with a handoff termination condition for '%s' (AgentChat's HandoffTermination).",
				s.LastSpeaker, sel.Agent, sel.Agent)
			return AppendStep(terminalEvent(chat.StatusCompleted, chat.StopNoEligibleSpeaker, detail, ""))
		}
		if !ContainsName(cands, sel.Agent) {
			detail := fmt.Sprintf("No eligible speaker: the swarm hands over to '%s', which the transitions do not allow after '%s'.", sel.Agent, s.LastSpeaker)
			return AppendStep(terminalEvent(chat.StatusCompleted, chat.StopNoEligibleSpeaker, detail, ""))
		}
	case spec.SelectAuto:
		if len(cands) > 1 {
			return Step{Kind: StepSelect, Sel: sel}
		}
		// One eligible candidate needs no model call.
		sel.Agent = cands[0]
	default:
		sel.Agent = nextInOrder(s.Spec, s.LastSpeaker, cands)
		sel.Candidates = []string{sel.Agent}
	}
	return AppendStep(SelectedEvent(sel))
}

func SelectedEvent(sel chat.Selection) chat.Event {
	return chat.WithData(chat.Event{Type: chat.EventSpeakerSelected}, sel)
}

// AutoSelection is the auto selector's choice after its attempts, AutoGen
// style: the agent of the first valid reply; else the fallback, the next
// candidate in agents order after the last speaker — never an excluded
// agent.
func (s *State) AutoSelection(sel chat.Selection, replies []string, usage chat.Usage) chat.Selection {
	names := AgentNames(s.Spec)
	sel.Attempts, sel.Replies, sel.Usage = len(replies), replies, &usage
	for _, r := range replies {
		if agent, _ := JudgeSelectorReply(names, sel.Candidates, r, s.LastSpeaker, s.Spec.AllowRepeat()); agent != "" {
			sel.Agent = agent
			return sel
		}
	}
	sel.Agent, sel.Fallback = nextInOrder(s.Spec, s.LastSpeaker, sel.Candidates), true
	return sel
}

func ContainsName(names []string, n string) bool {
	return slices.Contains(names, n)
}
