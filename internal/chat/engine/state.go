package engine

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/spec"
)

// State is a chat as its log describes it: the fold of its events, and
// nothing else. It does no I/O. The worker keeps one state per chat and
// replaces it only with a state that the store confirmed (see worker.commit),
// so what the worker believes is always what the log holds.
type State struct {
	Spec *spec.Spec
	// SpecMaxRound is max_round as the spec and the server's limit give it;
	// maxRound is the current run's (a run may set its own).
	SpecMaxRound, MaxRound int
	// Run is the number of the chat's latest run (docs/runs.md), 1 in a
	// log without run.started events; runTurns is the chat's turns when it
	// started: max_round counts the run's turns.
	Run, RunTurns int
	// turnFloor is the number of a turn that a run's end cut: later turns
	// are numbered after it.
	turnFloor int
	// explicitExternal: the termination tree holds an external condition
	// (a team file's ExternalTermination). Without one, a stop request
	// ends a run as if the tree were or-ed with one.
	explicitExternal bool
	// extFired: a stop request was seen on the run's last turn (the
	// implicit external condition fired).
	extFired bool
	// approvals are the decisions given for the open turn's tool calls
	// (by call id) or code ("" key), since its approval request.
	approvals map[string]chat.Approval

	LastSeq       int64
	Status        chat.Status
	stopReason    chat.StopReason
	stopDetail    string
	errText       string
	completedAt   *time.Time
	Msgs          []chat.Message
	Meta          []chat.MessageData // msgs[i]'s bookkeeping
	msgCount      int
	runMsgs       int // chat messages of the task and later: what max_messages counts
	runEvents     int // every message of the task and later, inner events and thoughts too
	Turns         int
	usage         chat.Usage // every model call's, the selector's included: the chat's usage
	LastSpeaker   string
	Pending       *chat.Selection // a selected speaker whose turn has not ended
	modelCalls    []int           // per agent, by its index in spec.Agents
	SelectorCalls int
	autoReplies   map[string]int     // per user_proxy, since its last human reply
	PendingInput  *chat.PendingInput // the open input request, while awaiting input
	term          terminator
	termFired     bool
	// termBase holds the counts at the last reset of the termination tree
	// (a human chose to go on after it fired), as AgentChat resets its
	// conditions: they count from there.
	termBase termState
	// agentUsage sums the agents' model calls only (usage also has the
	// selector's): what token_usage counts.
	agentUsage chat.Usage
	// delta holds the messages of the turn in progress: termination is
	// evaluated on a whole agent response, as AgentChat does.
	delta []termMsg
	// Broken is the first event that could not be folded: the state after
	// it cannot be trusted, and the chat can only fail (see next).
	Broken error
	// graph is the graph method's execution state (nil for the others).
	graph *graphState
	// branchesDone are the agents of a parallel step (pending with several
	// agents) whose turns have ended.
	branchesDone []string
	// inners are the inner runs of the team agents whose turns go on;
	// innerCalls count the inner agents' model calls and innerSelects the
	// inner selectors' calls (by team agent), across inner runs.
	inners       map[string]*innerTeam
	innerCalls   map[string]int
	innerSelects map[string]int
	// innerOf is, in the state of an inner run, its team agent: the
	// events marked with that name are this state's own.
	innerOf string
	// magentic is the magentic_one orchestrator's state (nil for the
	// other methods).
	magentic *magenticState
	// vars are the chat's context variables (variables.go), replaced as
	// a whole by each context.updated; exprs the spec's expressions over
	// them, compiled once.
	vars  map[string]json.RawMessage
	exprs exprSet
}

// NewState returns the state of an empty log. Its counts (modelCalls,
// autoReplies) are made by their first count: a map costs every waiting
// chat some hundred bytes, and most chats never count auto-replies.
func NewState(sp *spec.Spec, maxRound int) *State {
	exprs, err := compileExprs(sp)
	s := newState(sp, maxRound, exprs)
	if err != nil {
		s.Broken = fmt.Errorf("compile the spec's expressions: %w", err)
	}
	return s
}

// newState is NewState with the spec's expressions compiled already.
func newState(sp *spec.Spec, maxRound int, exprs exprSet) *State {
	s := &State{
		exprs:            exprs,
		Spec:             sp,
		SpecMaxRound:     maxRound,
		MaxRound:         maxRound,
		Run:              1,
		Status:           chat.StatusQueued,
		term:             newTerminator(sp.Termination),
		explicitExternal: hasExternal(sp.Termination),
	}
	if sel := sp.SpeakerSelection; sel != nil && sel.Method == spec.SelectGraph && sel.Graph != nil {
		s.graph = newGraphState(sel.Graph)
	}
	s.magentic = newMagenticState(sp)
	return s
}

// clone returns a copy that can be changed without changing s. The message
// slices share their backing arrays: messages are never changed once
// folded, and only one of s and its clone goes on (the other is dropped).
func (s *State) clone() *State {
	c := *s
	c.modelCalls = slices.Clone(s.modelCalls)
	c.autoReplies = maps.Clone(s.autoReplies)
	c.approvals = maps.Clone(s.approvals)
	c.term = s.term.clone()
	c.delta = slices.Clip(s.delta) // appends to the clone's delta copy, never write into s's
	c.branchesDone = slices.Clip(s.branchesDone)
	if s.graph != nil {
		c.graph = s.graph.clone()
	}
	c.inners = cloneInners(s.inners)
	c.innerCalls, c.innerSelects = maps.Clone(s.innerCalls), maps.Clone(s.innerSelects)
	c.magentic = s.magentic.clone()
	return &c
}

// setCount sets m[k] = v, making m if it is nil.
func setCount(m map[string]int, k string, v int) map[string]int {
	if m == nil {
		m = map[string]int{}
	}
	m[k] = v
	return m
}

// Apply folds one event into the state. It is the single place that
// interprets the log, used both when rebuilding and for confirmed appends.
// An event that does not fold (a gap in the seqs, data that does not decode)
// is an error naming its seq; the state then only follows the seqs and a
// terminal status, and the chat fails (next).
func (s *State) Apply(e chat.Event) error {
	if e.Seq != s.LastSeq+1 {
		err := fmt.Errorf("event seq %d follows seq %d: the log has a gap", e.Seq, s.LastSeq)
		s.LastSeq = e.Seq
		s.breakOn(err)
		return err
	}
	s.LastSeq = e.Seq
	if s.Broken != nil {
		if e.Type.Terminal() {
			var d chat.TerminalData
			_ = json.Unmarshal(e.Data, &d) // the status is what counts; the type says it is terminal
			s.Status = terminalStatus(e.Type)
		}
		return nil
	}
	if err := s.fold(e); err != nil {
		err = fmt.Errorf("event seq %d (%s): %w", e.Seq, e.Type, err)
		s.breakOn(err)
		return err
	}
	return nil
}

func (s *State) breakOn(err error) {
	if s.Broken == nil {
		s.Broken = err
	}
}

func terminalStatus(t chat.EventType) chat.Status {
	switch t {
	case chat.EventChatCompleted:
		return chat.StatusCompleted
	case chat.EventChatFailed:
		return chat.StatusFailed
	default:
		return chat.StatusCancelled
	}
}

func (s *State) fold(e chat.Event) error {
	if s.graph != nil && e.Type != chat.EventMessage {
		s.graph.settle(s.holds)
	}
	switch e.Type {
	case chat.EventChatRunning:
		s.Status, s.PendingInput = chat.StatusRunning, nil
		if s.termBase.start.IsZero() {
			// The run's timeout conditions count from when it first ran.
			s.termBase.start = e.CreatedAt
		}
		var d chat.RunningData
		if err := chat.DecodeData(e, &d); err != nil {
			return err
		}
		for _, a := range d.Approvals {
			if s.approvals == nil {
				s.approvals = map[string]chat.Approval{}
			}
			s.approvals[a.ToolCallID] = a
		}
	case chat.EventRunStarted:
		var d chat.RunData
		if err := chat.DecodeData(e, &d); err != nil {
			return err
		}
		s.startRun(d)
	case chat.EventSpeakerSelected:
		var sel chat.Selection
		if err := chat.DecodeData(e, &sel); err != nil {
			return err
		}
		if sel.Team != "" && sel.Team != s.innerOf {
			return s.foldInner(sel.Team, e)
		}
		s.LastSpeaker, s.Pending, s.branchesDone = sel.Agent, &sel, nil
		agents := sel.Agents
		if len(agents) == 0 {
			agents = []string{sel.Agent}
		}
		for _, name := range agents {
			if a := s.agent(name); a != nil && a.Type == spec.AgentTeam {
				if err := s.startInner(a, e.CreatedAt); err != nil {
					return err
				}
			}
		}
		if s.graph != nil && len(sel.Agents) > 0 {
			s.graph.selected(sel.Agents)
		}
		s.SelectorCalls += sel.Attempts
		if sel.Usage != nil {
			s.usage = s.usage.Add(*sel.Usage)
		}
	case chat.EventInputRequested:
		var p chat.PendingInput
		if err := chat.DecodeData(e, &p); err != nil {
			return err
		}
		s.Status, s.PendingInput = chat.StatusAwaitingInput, &p
	case chat.EventMessage:
		return s.foldMessage(e)
	case chat.EventContextUpdated:
		return s.foldContext(e)
	case chat.EventChatCompleted, chat.EventChatFailed, chat.EventChatCancelled:
		var d chat.TerminalData
		if err := chat.DecodeData(e, &d); err != nil {
			return err
		}
		s.Status, s.stopReason, s.stopDetail, s.errText = terminalStatus(e.Type), d.StopReason, d.StopDetail, d.Error
		s.PendingInput, s.approvals, s.inners = nil, nil, nil
		if s.Pending != nil {
			// The next run's turns are numbered after a turn the run's end
			// cut, so that none of its messages is taken for theirs.
			s.turnFloor, s.Pending, s.branchesDone = s.Pending.Turn, nil, nil
		}
		if s.graph != nil && d.StopReason == chat.StopGraphComplete {
			// A graph that ran to its end starts again at its start nodes;
			// one stopped otherwise goes on with the nodes that were ready.
			s.graph.reset()
		}
		t := e.CreatedAt
		s.completedAt = &t
	}
	return nil
}

func (s *State) foldMessage(e chat.Event) error {
	var d chat.MessageData
	if err := chat.DecodeData(e, &d); err != nil {
		return err
	}
	if d.Team != "" && d.Team != s.innerOf {
		return s.foldInner(d.Team, e)
	}
	m := chat.Message{Seq: e.Seq, Role: e.Role, Name: e.Name, Content: e.Content, ToolCalls: e.ToolCalls,
		ToolResponses: e.ToolResponses, CreatedAt: e.CreatedAt, CodeResult: d.CodeResult, Handoff: d.Handoff, Usage: d.Usage, Thought: d.Thought,
		Parts: d.Parts}
	if d.Structured != "" {
		m.Structured = json.RawMessage(d.Structured)
	}
	m.Type = chat.MessageType(e, d)
	s.Msgs = append(s.Msgs, m)
	s.Meta = append(s.Meta, d)
	s.msgCount++
	if m.Usage != nil {
		s.usage = s.usage.Add(*m.Usage)
		s.agentUsage = s.agentUsage.Add(*m.Usage)
	}
	if s.magentic != nil {
		if done, err := s.foldMagentic(m, d); done || err != nil {
			return err
		}
	}
	switch d.Kind {
	case chat.KindModel:
		if i := s.Spec.AgentIndex(m.Name); i >= 0 {
			if s.modelCalls == nil {
				s.modelCalls = make([]int, len(s.Spec.Agents))
			}
			s.modelCalls[i]++
		}
	case chat.KindAuto:
		s.autoReplies = setCount(s.autoReplies, m.Name, s.autoReplies[m.Name]+1)
	case chat.KindHuman:
		s.autoReplies = setCount(s.autoReplies, m.Name, 0)
	case chat.KindHistory:
		if s.agent(m.Name) != nil {
			s.LastSpeaker = m.Name
		}
		return nil
	}
	if isChatMessage(m) {
		s.runMsgs++
	}
	s.runEvents += agentChatItems(m)
	if s.graph != nil {
		if d.Kind == chat.KindTask {
			// Applied once it is known to be the run's last (see settle).
			s.graph.task = &graphTask{source: m.Name, text: modelText(m)}
		} else {
			s.graph.settle(s.holds)
		}
		if d.Turn > 0 && d.End {
			s.graph.taken(m.Name, modelText(m), s.holds)
		}
	}
	lastBranch := true
	if d.Turn > 0 && d.End {
		if s.Parallel() && d.Turn == s.Pending.Turn {
			// A branch of a parallel step ended. AgentChat's siblings still
			// running get its message only once their own turns are over
			// (see viewOrder), and the step ends with its last branch.
			s.branchesDone = append(s.branchesDone, m.Name)
			open := s.OpenBranches()
			s.Meta[len(s.Meta)-1].HiddenFrom = open
			lastBranch = len(open) == 0
		}
		if lastBranch {
			s.Turns, s.Pending, s.approvals, s.branchesDone = d.Turn, nil, nil, nil
		}
		delete(s.inners, m.Name) // a team agent answered: its inner run is over
	}
	if d.ResetTermination {
		s.term = newTerminator(s.Spec.Termination)
		s.termFired, s.extFired, s.delta = false, false, nil
		s.termBase = termState{messages: s.runMsgs, events: s.runEvents, usage: s.agentUsage, start: e.CreatedAt}
		return nil
	}
	// Termination is evaluated when a turn ends, on the agent's whole
	// response (its inner events and its final message), as AgentChat's
	// group chat manager does; the task and a human's message are a
	// response of their own.
	s.delta = append(s.delta, termMsg{Message: m, task: d.Kind == chat.KindTask, functions: d.Functions, stop: d.Stop})
	if d.Turn > 0 && !d.End {
		return nil // the turn goes on
	}
	if !lastBranch {
		s.unseenBranch(m.Name)
		return nil
	}
	s.termFired = s.term.observe(s.delta, s.termState(e.CreatedAt))
	if !s.explicitExternal && slices.ContainsFunc(s.delta, func(m termMsg) bool { return m.stop }) {
		s.extFired = true
	}
	s.delta = nil
	return nil
}

// agentChatItems is how many of AgentChat's messages and events a message
// is: one, and one more for a thought (AgentChat's ThoughtEvent before it:
// the reasoning kept as the message's thought, or the text that came with
// tool calls).
func agentChatItems(m chat.Message) int {
	if m.Thought != "" || m.Type == chat.TypeToolCallRequestEvent && m.Content != "" {
		return 2
	}
	return 1
}

// startRun folds a run.started: the run's counts restart, as AgentChat
// resets its termination conditions and turn count when a run stops; the
// thread, the agents' contexts and the selection's position go on.
func (s *State) startRun(d chat.RunData) {
	s.Run, s.RunTurns = d.Run, max(s.Turns, s.turnFloor)
	s.MaxRound = s.SpecMaxRound
	if d.MaxRound > 0 {
		s.MaxRound = d.MaxRound
	}
	s.term = newTerminator(s.Spec.Termination)
	s.termFired, s.extFired, s.delta = false, false, nil
	s.termBase = termState{messages: s.runMsgs, events: s.runEvents, usage: s.agentUsage}
	s.magentic.runStarted()
	if s.Status.Terminal() {
		s.Status, s.stopReason, s.stopDetail, s.errText, s.completedAt = chat.StatusQueued, "", "", "", nil
	}
	s.PendingInput, s.approvals = nil, nil
}

// nextTurn is the number of the next agent turn.
func (s *State) nextTurn() int { return max(s.Turns, s.turnFloor) + 1 }

// termState is what the termination conditions count, since their last reset.
func (s *State) termState(now time.Time) termState {
	return termState{
		messages: s.runMsgs - s.termBase.messages,
		events:   s.runEvents - s.termBase.events,
		usage:    chat.Usage{PromptTokens: s.agentUsage.PromptTokens - s.termBase.usage.PromptTokens, CompletionTokens: s.agentUsage.CompletionTokens - s.termBase.usage.CompletionTokens},
		start:    s.termBase.start,
		now:      now,
	}
}

// Deadline is when the earliest timeout condition fires, if any.
func (s *State) Deadline() (time.Time, bool) {
	return s.term.deadline(s.termBase.start)
}

// Update is the chat record as it stands in this state: what an append
// writes besides the events.
func (s *State) Update(now time.Time) chat.ChatUpdate {
	upd := chat.ChatUpdate{
		Status: s.Status, StopReason: s.stopReason, StopDetail: s.stopDetail, Error: s.errText,
		Turns: s.Turns, MessageCount: s.msgCount, PromptTokens: s.usage.PromptTokens, CompletionTokens: s.usage.CompletionTokens,
		CompletedAt: s.completedAt, UpdatedAt: now, Run: s.Run,
		// A chat that ended or waits for a human needs no worker.
		ReleaseLease: s.Status.Terminal() || s.Status == chat.StatusAwaitingInput,
	}
	if s.Status == chat.StatusAwaitingInput && s.PendingInput != nil {
		upd.PendingInput = chat.MustJSON(s.PendingInput)
		upd.InputExpiresAt = s.PendingInput.ExpiresAt
	}
	return upd
}

// agent returns the spec's agent of that name, or nil.
func (s *State) agent(name string) *spec.Agent { return s.Spec.Agent(name) }

// ModelCallsOf is how many model calls the agent of that name has made.
func (s *State) ModelCallsOf(name string) int {
	if i := s.Spec.AgentIndex(name); i >= 0 && i < len(s.modelCalls) {
		return s.modelCalls[i]
	}
	return 0
}

// Parallel reports whether the turn in progress is a parallel step: several
// agents (a graph's ready nodes) run at once.
func (s *State) Parallel() bool {
	return s.Pending != nil && len(s.Pending.Agents) > 1
}

// OpenBranches are the agents of the parallel step whose turns go on.
func (s *State) OpenBranches() []string {
	if !s.Parallel() {
		return nil
	}
	var open []string
	for _, a := range s.Pending.Agents {
		if !slices.Contains(s.branchesDone, a) {
			open = append(open, a)
		}
	}
	return open
}

// unseenBranch takes the response of a branch that ended before the last
// one out of the termination delta: AgentChat's manager checks its
// conditions only on the response that ends the step, so the conditions
// never count the others (their messages, events or tokens).
func (s *State) unseenBranch(agent string) {
	var keep []termMsg
	for _, t := range s.delta {
		if t.Name != agent {
			keep = append(keep, t)
			continue
		}
		if isChatMessage(t.Message) {
			s.termBase.messages++
		}
		s.termBase.events += agentChatItems(t.Message)
		if t.Usage != nil {
			s.termBase.usage = s.termBase.usage.Add(*t.Usage)
		}
	}
	s.delta = keep
}

func DerefOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
