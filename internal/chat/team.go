package chat

import (
	"fmt"
	"slices"
	"time"

	"github.com/agentd/agentd/internal/spec"
)

// This file is the team agent: AgentChat's SocietyOfMindAgent. On each of
// its turns its inner team runs afresh (AgentChat resets the team after
// every turn) on the messages given to the agent since its last turn,
// preceded from its second turn on by a HandoffMessage whose context is
// every message given to it before; then the agent's model answers from
// the inner team's messages. The inner events are the chat's log, marked
// with the team agent's name, and folded into a state of their own: they
// are not the chat's thread (no other agent sees them, and the chat's
// termination does not count them), but a worker rebuilt from the log
// continues an inner run where it was, as it does any chat.

// relevantPrevious is the content of the HandoffMessage that carries a
// team agent's earlier messages into its inner team.
const relevantPrevious = "relevant previous messages"

// innerTeam is a team agent's inner run in progress.
type innerTeam struct {
	// st is the inner run as a chat of its own: its spec the inner team's,
	// its log the task made for it (innerTask) and the inner events.
	st *state
}

func (in *innerTeam) clone() *innerTeam { return &innerTeam{st: in.st.clone()} }

// cloneInners copies the inner runs of a state being cloned.
func cloneInners(m map[string]*innerTeam) map[string]*innerTeam {
	if m == nil {
		return nil
	}
	c := make(map[string]*innerTeam, len(m))
	for k, v := range m {
		c[k] = v.clone()
	}
	return c
}

// startInner starts the inner run of team agent a, selected now: a state
// of the inner team that has folded the run's task and started running.
// Inner agents' model and selector calls count across the chat's runs, so
// that replay positions go on where the last inner run left them.
func (s *state) startInner(a *spec.Agent, now time.Time) error {
	isp := s.spec.InnerSpec(a)
	in := newState(isp, derefOr(isp.MaxRound, spec.DefaultMaxRound))
	in.innerOf = a.Name
	for i, ia := range isp.Agents {
		if n := s.innerCalls[ia.Name]; n > 0 {
			if in.modelCalls == nil {
				in.modelCalls = make([]int, len(isp.Agents))
			}
			in.modelCalls[i] = n
		}
	}
	in.selectorCalls = s.innerSelects[a.Name]
	evs := append(s.innerTask(a), runningEvent())
	for i := range evs {
		evs[i].Seq, evs[i].CreatedAt = int64(i+1), now
		if err := in.apply(evs[i]); err != nil {
			return fmt.Errorf("start the inner team of %s: %w", a.Name, err)
		}
	}
	if s.inners == nil {
		s.inners = map[string]*innerTeam{}
	}
	s.inners[a.Name] = &innerTeam{st: in}
	return nil
}

// innerTask is the task of a team agent's inner run, as SocietyOfMindAgent
// makes it: the chat messages given to the agent since its last turn, and
// before them, when the agent had earlier turns, a HandoffMessage from the
// agent carrying what it was given before as context (the model messages
// an assistant would have made of them).
func (s *state) innerTask(a *spec.Agent) []Event {
	last := -1 // the agent's last message: its answer of its last turn
	for i := range s.msgs {
		if s.msgs[i].Name == a.Name && s.msgs[i].Role != RoleUser {
			last = i
		}
	}
	var evs []Event
	if last >= 0 {
		var before []Message
		var meta []messageData
		for i := range last {
			if s.msgs[i].Name != a.Name {
				before, meta = append(before, s.msgs[i]), append(meta, s.meta[i])
			}
		}
		// An agent of no name sees everyone's messages as the others'.
		prev, _ := appendAgentContext(nil, s.spec, &spec.Agent{}, before, meta, nil)
		if len(prev) > 0 {
			evs = append(evs, withData(Event{Type: EventMessage, Role: RoleUser, Name: a.Name, Content: relevantPrevious},
				messageData{Kind: kindTask, Type: TypeHandoffMessage, context: prev}))
		}
	}
	for i := last + 1; i < len(s.msgs); i++ {
		m := s.msgs[i]
		if m.Name == a.Name || !isChatMessage(m) {
			continue
		}
		d := messageData{Kind: kindTask, Type: m.Type, Structured: string(m.Structured), Parts: m.Parts, Handoff: m.Handoff}
		if m.Type == TypeHandoffMessage {
			for _, g := range handoffContext(s.spec, s.msgs[:i], s.meta[:i], m, s.meta[i].Turn, nil) {
				d.context = append(d.context, g...)
			}
		}
		evs = append(evs, withData(Event{Type: EventMessage, Role: RoleUser, Name: m.Name, Content: m.Content}, d))
	}
	return evs
}

// foldInner folds an event of a team agent's inner run: into the inner
// run's state, and into the chat's counts of messages, usage and calls.
func (s *state) foldInner(team string, e Event) error {
	in := s.inners[team]
	if in == nil {
		return fmt.Errorf("an event of the inner team of %q outside a turn of it", team)
	}
	in.st.lastSeq = e.Seq - 1 // the inner run's seqs are the chat's, with gaps
	if err := in.st.apply(e); err != nil {
		return err
	}
	switch e.Type {
	case EventMessage:
		m := in.st.msgs[len(in.st.msgs)-1]
		s.msgCount++
		if m.Usage != nil {
			s.usage = s.usage.Add(*m.Usage)
		}
		if in.st.meta[len(in.st.meta)-1].Kind == kindModel {
			s.innerCalls = setCount(s.innerCalls, m.Name, s.innerCalls[m.Name]+1)
		}
	case EventSpeakerSelected:
		sel := in.st.pending
		if sel != nil && sel.Usage != nil {
			s.usage = s.usage.Add(*sel.Usage)
		}
		if sel != nil && sel.Attempts > 0 {
			s.innerSelects = setCount(s.innerSelects, team, s.innerSelects[team]+sel.Attempts)
		}
	}
	return nil
}

// teamStep is the next step of a team agent's turn: the inner run's next
// step, its events marked as the team's, until the inner run would stop;
// then the agent's answer.
func (s *state) teamStep(env stepEnv, a *spec.Agent, turn int) step {
	in := s.inners[a.Name]
	if in == nil {
		return appendStep(failedEvent(fmt.Errorf("the turn of team agent %s has no inner run", a.Name)))
	}
	ienv := stepEnv{now: env.now, newID: env.newID}
	is := in.st.next(ienv)
	switch {
	case in.st.broken != nil:
		return appendStep(failedEvent(fmt.Errorf("the inner team of %s: %w", a.Name, in.st.broken)))
	case is.kind == stepAppend && slices.ContainsFunc(is.events, func(e Event) bool { return e.Type == EventChatFailed }):
		// The inner run fails: so does the team agent's turn, and the run.
		i := slices.IndexFunc(is.events, func(e Event) bool { return e.Type == EventChatFailed })
		var d terminalData
		_ = decodeData(is.events[i], &d)
		return appendStep(failedEvent(fmt.Errorf("the inner team of %s: %s", a.Name, d.Error)))
	case is.kind == stepWait, is.kind == stepAppend && slices.ContainsFunc(is.events, func(e Event) bool { return e.Type.Terminal() }):
		// The inner run is over (its stop is not recorded: AgentChat
		// keeps the inner stop message to itself).
	case is.kind == stepAppend && slices.ContainsFunc(is.events, func(e Event) bool { return e.Type == EventInputRequested }):
		return appendStep(failedEvent(fmt.Errorf("the inner team of %s asks a human, which nobody can answer inside a team", a.Name)))
	case is.kind == stepBranches || is.kind == stepStartRun:
		return appendStep(failedEvent(fmt.Errorf("the inner team of %s cannot take a %v step", a.Name, is.kind)))
	default:
		is.before, is.events = tagTeam(is.before, a.Name), tagTeam(is.events, a.Name)
		if is.kind != stepAppend {
			is.st, is.team = in.st, a.Name
		}
		return is
	}
	if !slices.ContainsFunc(in.st.meta, func(d messageData) bool { return d.Kind != kindTask }) {
		return appendStep(withData(Event{Type: EventMessage, Role: RoleAssistant, Name: a.Name, Content: "No response."},
			messageData{Kind: kindTeam, Turn: turn, End: true}))
	}
	return step{kind: stepModel, agent: a, turn: turn}
}

// tagTeam marks events as the inner team of the named team agent's.
func tagTeam(evs []Event, team string) []Event {
	out := slices.Clone(evs)
	for i, e := range out {
		switch e.Type {
		case EventMessage:
			var d messageData
			if decodeData(e, &d) == nil {
				d.Team = team
				out[i] = withData(e, d)
			}
		case EventSpeakerSelected:
			var sel selection
			if decodeData(e, &sel) == nil {
				sel.Team = team
				out[i] = withData(e, sel)
			}
		}
	}
	return out
}

// teamAnswerContext is what a team agent's model is asked, as
// SocietyOfMindAgent asks it: the instruction, the inner team's chat
// messages (each as a user message from its source; a StructuredMessage as
// its JSON), and the response prompt. AgentChat sends the instruction and
// the prompt as system messages to a model that takes several of them,
// which every OpenAI model it knows does.
func (s *state) teamAnswerContext(a *spec.Agent) []ModelMessage {
	out := []ModelMessage{{Role: RoleSystem, Content: derefOr(a.Instruction, spec.DefaultInstruction)}}
	if in := s.inners[a.Name]; in != nil {
		for i, m := range in.st.msgs {
			if in.st.meta[i].Kind == kindTask || !isChatMessage(m) {
				continue
			}
			out = append(out, ModelMessage{Role: RoleUser, Name: m.Name, Content: sharedText(m), Parts: modelParts(m.Parts)})
		}
	}
	return append(out, ModelMessage{Role: RoleSystem, Content: derefOr(a.ResponsePrompt, spec.DefaultResponsePrompt)})
}
