package engine

import (
	"fmt"
	"slices"
	"time"

	"github.com/agentd/agentd/internal/chat"

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
	st *State
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
func (s *State) startInner(a *spec.Agent, now time.Time) error {
	isp := s.Spec.InnerSpec(a)
	in := newState(isp, DerefOr(isp.MaxRound, spec.DefaultMaxRound), s.exprs)
	in.innerOf, in.vars = a.Name, s.vars
	for i, ia := range isp.Agents {
		if n := s.innerCalls[ia.Name]; n > 0 {
			if in.modelCalls == nil {
				in.modelCalls = make([]int, len(isp.Agents))
			}
			in.modelCalls[i] = n
		}
	}
	in.SelectorCalls = s.innerSelects[a.Name]
	evs := append(s.innerTask(a), runningEvent())
	for i := range evs {
		evs[i].Seq, evs[i].CreatedAt = int64(i+1), now
		if err := in.Apply(evs[i]); err != nil {
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
func (s *State) innerTask(a *spec.Agent) []chat.Event {
	last := -1 // the agent's last message: its answer of its last turn
	for i := range s.Msgs {
		if s.Msgs[i].Name == a.Name && s.Msgs[i].Role != chat.RoleUser {
			last = i
		}
	}
	var evs []chat.Event
	if last >= 0 {
		var before []chat.Message
		var meta []chat.MessageData
		for i := range last {
			if s.Msgs[i].Name != a.Name {
				before, meta = append(before, s.Msgs[i]), append(meta, s.Meta[i])
			}
		}
		// An agent of no name sees everyone's messages as the others'.
		prev, _ := appendAgentContext(nil, s.Spec, &spec.Agent{}, before, meta, nil)
		if len(prev) > 0 {
			evs = append(evs, chat.WithData(chat.Event{Type: chat.EventMessage, Role: chat.RoleUser, Name: a.Name, Content: relevantPrevious},
				chat.MessageData{Kind: chat.KindTask, Type: chat.TypeHandoffMessage, Context: prev}))
		}
	}
	for i := last + 1; i < len(s.Msgs); i++ {
		m := s.Msgs[i]
		if m.Name == a.Name || !isChatMessage(m) {
			continue
		}
		d := chat.MessageData{Kind: chat.KindTask, Type: m.Type, Structured: string(m.Structured), Parts: m.Parts, Handoff: m.Handoff}
		if m.Type == chat.TypeHandoffMessage {
			for _, g := range handoffContext(s.Spec, s.Msgs[:i], s.Meta[:i], m, s.Meta[i].Turn, nil) {
				d.Context = append(d.Context, g...)
			}
		}
		evs = append(evs, chat.WithData(chat.Event{Type: chat.EventMessage, Role: chat.RoleUser, Name: m.Name, Content: m.Content}, d))
	}
	return evs
}

// foldInner folds an event of a team agent's inner run: into the inner
// run's state, and into the chat's counts of messages, usage and calls.
func (s *State) foldInner(team string, e chat.Event) error {
	in := s.inners[team]
	if in == nil {
		return fmt.Errorf("an event of the inner team of %q outside a turn of it", team)
	}
	in.st.LastSeq = e.Seq - 1 // the inner run's seqs are the chat's, with gaps
	if err := in.st.Apply(e); err != nil {
		return err
	}
	switch e.Type {
	case chat.EventMessage:
		m := in.st.Msgs[len(in.st.Msgs)-1]
		s.msgCount++
		if m.Usage != nil {
			s.usage = s.usage.Add(*m.Usage)
		}
		if in.st.Meta[len(in.st.Meta)-1].Kind == chat.KindModel {
			s.innerCalls = setCount(s.innerCalls, m.Name, s.innerCalls[m.Name]+1)
		}
	case chat.EventSpeakerSelected:
		sel := in.st.Pending
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
func (s *State) teamStep(env StepEnv, a *spec.Agent, turn int) Step {
	in := s.inners[a.Name]
	if in == nil {
		return AppendStep(FailedEvent(fmt.Errorf("the turn of team agent %s has no inner run", a.Name)))
	}
	ienv := StepEnv{Now: env.Now, NewID: env.NewID}
	is := in.st.Next(ienv)
	switch {
	case in.st.Broken != nil:
		return AppendStep(FailedEvent(fmt.Errorf("the inner team of %s: %w", a.Name, in.st.Broken)))
	case is.Kind == StepAppend && slices.ContainsFunc(is.Events, func(e chat.Event) bool { return e.Type == chat.EventChatFailed }):
		// The inner run fails: so does the team agent's turn, and the run.
		i := slices.IndexFunc(is.Events, func(e chat.Event) bool { return e.Type == chat.EventChatFailed })
		var d chat.TerminalData
		_ = chat.DecodeData(is.Events[i], &d)
		return AppendStep(FailedEvent(fmt.Errorf("the inner team of %s: %s", a.Name, d.Error)))
	case is.Kind == StepWait, is.Kind == StepAppend && slices.ContainsFunc(is.Events, func(e chat.Event) bool { return e.Type.Terminal() }):
		// The inner run is over (its stop is not recorded: AgentChat
		// keeps the inner stop message to itself).
	case is.Kind == StepAppend && slices.ContainsFunc(is.Events, func(e chat.Event) bool { return e.Type == chat.EventInputRequested }):
		return AppendStep(FailedEvent(fmt.Errorf("the inner team of %s asks a human, which nobody can answer inside a team", a.Name)))
	case is.Kind == StepBranches || is.Kind == StepStartRun:
		return AppendStep(FailedEvent(fmt.Errorf("the inner team of %s cannot take a %v step", a.Name, is.Kind)))
	default:
		is.Before, is.Events = TagTeam(is.Before, a.Name), TagTeam(is.Events, a.Name)
		if is.Kind != StepAppend {
			is.Inner, is.Team = in.st, a.Name
		}
		return is
	}
	if !slices.ContainsFunc(in.st.Meta, func(d chat.MessageData) bool { return d.Kind != chat.KindTask }) {
		return AppendStep(chat.WithData(chat.Event{Type: chat.EventMessage, Role: chat.RoleAssistant, Name: a.Name, Content: "No response."},
			chat.MessageData{Kind: chat.KindTeam, Turn: turn, End: true}))
	}
	return Step{Kind: StepModel, Agent: a, Turn: turn}
}

// TagTeam marks events as the inner team of the named team agent's.
func TagTeam(evs []chat.Event, team string) []chat.Event {
	out := slices.Clone(evs)
	for i, e := range out {
		switch e.Type {
		case chat.EventMessage:
			var d chat.MessageData
			if chat.DecodeData(e, &d) == nil {
				d.Team = team
				out[i] = chat.WithData(e, d)
			}
		case chat.EventSpeakerSelected:
			var sel chat.Selection
			if chat.DecodeData(e, &sel) == nil {
				sel.Team = team
				out[i] = chat.WithData(e, sel)
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
func (s *State) teamAnswerContext(a *spec.Agent) []chat.ModelMessage {
	out := []chat.ModelMessage{{Role: chat.RoleSystem, Content: DerefOr(a.Instruction, spec.DefaultInstruction)}}
	if in := s.inners[a.Name]; in != nil {
		for i, m := range in.st.Msgs {
			if in.st.Meta[i].Kind == chat.KindTask || !isChatMessage(m) {
				continue
			}
			out = append(out, chat.ModelMessage{Role: chat.RoleUser, Name: m.Name, Content: sharedText(m), More: chat.MoreParts(modelParts(m.Parts))})
		}
	}
	return append(out, chat.ModelMessage{Role: chat.RoleSystem, Content: DerefOr(a.ResponsePrompt, spec.DefaultResponsePrompt)})
}
