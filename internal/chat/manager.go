package chat

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/spec"
)

// This file is the group chat manager as a function of the log: given the
// state the log describes, next decides what the chat does next. It does no
// I/O; the worker performs the step and appends what it produced.

// stepKind says what a step needs done before its events can be appended.
type stepKind int

const (
	// stepWait: nothing to do now (the chat ended, or waits for input
	// nobody has given yet).
	stepWait stepKind = iota
	// stepAppend: append events; no other effect.
	stepAppend
	// stepSelect: ask the selector model for the speaker (auto selection).
	stepSelect
	// stepModel: call the speaker's model (with its tools, or without them
	// to reflect on tool use).
	stepModel
	// stepTools: run the open tool calls of the speaker's turn.
	stepTools
	// stepRouted: a user_proxy runs the tool calls routed to it.
	stepRouted
	// stepCode: a user_proxy runs the code blocks addressed to it.
	stepCode
	// stepStartRun: start the run queued after the one that ended.
	stepStartRun
	// stepBranches: run the branches of a parallel step at once.
	stepBranches
	// stepMagentic: the magentic_one orchestrator's model calls and message.
	stepMagentic
)

var stepNames = [...]string{"wait", "append", "select", "model", "tools", "routed", "code", "start-run", "branches", "magentic"}

func (k stepKind) String() string { return stepNames[k] }

// step is one decision of the manager.
type step struct {
	kind stepKind
	// before are events appended before the step's effect (the chat.running
	// of a resumed chat whose human skipped the reply).
	before []Event
	// events are what a stepAppend appends.
	events []Event
	agent  *spec.Agent
	turn   int
	// sel is the selection a stepSelect completes (method, candidates, turn).
	sel selection
	// reflect: a stepModel that ends a tool turn, without tools.
	reflect bool
	// open is the message whose tool calls a stepTools or stepRouted runs.
	open   *Message
	blocks []codeBlock
	// st is the state a step of a team agent's inner run is planned on
	// (nil: the chat's), and team that agent, whose name marks the events
	// the step makes.
	st   *state
	team string
	// magentic is the orchestrator's step a stepMagentic makes.
	magentic string
}

func appendStep(evs ...Event) step { return step{kind: stepAppend, events: evs} }

// stepEnv is what a decision may depend on besides the log.
type stepEnv struct {
	now time.Time
	// input is a client's stored answer to the pending input request.
	input json.RawMessage
	// newID makes the request_id of an input request.
	newID func() string
	// stopRequested: POST /stop asked the run to end after its current
	// turn; queued: runs wait to start after this one.
	stopRequested, queued bool
}

// next decides the chat's next step.
func (s *state) next(env stepEnv) step {
	switch {
	case s.status.Terminal() && env.queued && s.broken == nil:
		return step{kind: stepStartRun}
	case s.status.Terminal():
		return step{}
	case s.broken != nil:
		return appendStep(failedEvent(fmt.Errorf("the chat's log cannot be read: %w", s.broken)))
	case s.status == StatusAwaitingInput:
		return s.resume(env)
	case s.status != StatusRunning:
		return appendStep(runningEvent())
	}
	if ev, ok := s.afterMessage(env); ok {
		// The log can end right after a stop condition: a spec that stops at
		// the task, or a crash between a turn and the next selection.
		return appendStep(ev)
	}
	if ev, ok := s.externalStop(env); ok {
		return appendStep(ev)
	}
	if s.pending == nil {
		return s.selectStep(env)
	}
	if s.parallel() {
		open := s.openBranches()
		if len(open) > 1 {
			return step{kind: stepBranches}
		}
		return s.turnStep(env, selection{Agent: open[0], Turn: s.pending.Turn})
	}
	return s.turnStep(env, *s.pending)
}

// branchStep is the next step of one branch of a parallel step.
func (s *state) branchStep(env stepEnv, agent string) step {
	return s.turnStep(env, selection{Agent: agent, Turn: s.pending.Turn})
}

// plan returns the state after evs and the events to append for them: evs,
// plus the event the resulting state calls for when a message makes the
// chat stop or pause (a fired termination condition, the last allowed
// turn), so that a chat never stays running after its stop condition was
// recorded. s itself is not changed: the worker adopts the returned state
// once the store confirmed the append.
func (s *state) plan(evs []Event, env stepEnv, chatID string) (*state, []Event, error) {
	next := s.clone()
	out := make([]Event, 0, len(evs)+1)
	add := func(e Event) error {
		e.ChatID, e.Seq, e.CreatedAt = chatID, next.lastSeq+1, env.now
		if e.Type.Terminal() {
			e = withRun(e, next.run)
		}
		if err := next.apply(e); err != nil {
			return err
		}
		out = append(out, e)
		return nil
	}
	for _, e := range evs {
		if err := add(e); err != nil {
			return nil, nil, err
		}
	}
	if next.status == StatusRunning {
		if e, ok := next.afterMessage(env); ok {
			if err := add(e); err != nil {
				return nil, nil, err
			}
		}
	}
	return next, out, nil
}

// turnStep is the next step of the selected speaker's turn.
func (s *state) turnStep(env stepEnv, sel selection) step {
	a := s.agent(sel.Agent)
	if a == nil {
		return appendStep(failedEvent(fmt.Errorf("selected speaker %q is not an agent of the chat", sel.Agent)))
	}
	switch a.Type {
	case spec.AgentAssistant:
		return s.assistantStep(env, a, sel.Turn)
	case spec.AgentTeam:
		return s.teamStep(env, a, sel.Turn)
	}
	if m, proxy := s.routedCalls(); m != nil && proxy == a.Name {
		return step{kind: stepRouted, agent: a, turn: sel.Turn, open: m}
	}
	return s.userProxyStep(env, a, sel.Turn)
}

// assistantStep is AgentChat's AssistantAgent turn, one step at a time: a
// model call with the agent's tools; while the model asks for tools it
// owns, run them all and call the model again, up to max_tool_iterations;
// then reflect (one more call, no tools) or append a summary of the last
// calls. A turn cut by a crash is continued from its messages: calls
// without responses are run (again, with the same ids) before the model is
// asked anything. What ends the turn (a text reply, calls a user_proxy
// runs, a handoff) is decided where the step's events are made
// (modelReply, toolTurnEvents).
func (s *state) assistantStep(env stepEnv, a *spec.Agent, turn int) step {
	iter, open := s.turnProgress(turn, a.Name)
	switch {
	case open != nil:
		if calls := s.callsToApprove(a, open); len(calls) > 0 {
			return appendStep(s.inputRequest(env, &PendingInput{Kind: InputApproval, Agent: a.Name, ToolCalls: calls,
				Reason: "Approve, edit or reject each tool call before it runs."}))
		}
		return step{kind: stepTools, agent: a, turn: turn, open: open}
	case iter < derefOr(a.MaxToolIterations, 1):
		return step{kind: stepModel, agent: a, turn: turn}
	case derefOr(a.ReflectOnToolUse, false):
		return step{kind: stepModel, agent: a, turn: turn, reflect: true}
	default:
		return appendStep(s.toolSummary(a, turn))
	}
}

// modelReply is the message of one model call of an assistant's turn. A
// text reply ends the turn; so do calls for a user_proxy to run (box says
// who runs what) and a reflection.
//
// An agent with an output_schema replies with a StructuredMessage: a reply
// that does not validate against its type is an error, which fails the
// run as it fails AgentChat's team.run.
func modelReply(a *spec.Agent, turn int, resp *ModelResponse, box *toolbox, reflect bool) (Event, error) {
	usage := resp.Usage
	d := messageData{Usage: &usage, Thought: resp.Thought, Kind: kindModel, Turn: turn, End: true}
	content := resp.Content
	if a.OutputSchema != nil && len(resp.ToolCalls) == 0 {
		// AgentChat gives the format string to the StructuredMessage of a
		// direct reply only, not to one made by reflecting on tool use.
		var err error
		if content, d.Structured, err = structuredReply(a, resp.Content, !reflect); err != nil {
			return Event{}, err
		}
		d.Type = spec.StructuredMessageType(a.OutputSchema.Name)
		if resp.Content != content {
			d.Reply = resp.Content
		}
	}
	if reflect {
		return withData(Event{Type: EventMessage, Role: RoleAssistant, Name: a.Name, Content: content}, d), nil
	}
	if len(resp.ToolCalls) > 0 {
		d.Thinking = resp.Thinking
	}
	routed := len(resp.ToolCalls) > 0 && slices.ContainsFunc(resp.ToolCalls, func(c ToolCall) bool { return box.byName[c.Function.Name].executor != "" })
	d.End = len(resp.ToolCalls) == 0 || routed
	return withData(Event{Type: EventMessage, Role: RoleAssistant, Name: a.Name, Content: content, ToolCalls: resp.ToolCalls}, d), nil
}

// toolSummary ends a turn whose iterations are used up without reflection:
// the last iteration's calls in tool_call_summary_format.
func (s *state) toolSummary(a *spec.Agent, turn int) Event {
	calls, responses := s.lastIteration(turn, a.Name)
	format := derefOr(a.ToolCallSummaryFormat, "{result}")
	lines := make([]string, 0, len(calls))
	for _, c := range calls {
		r := responses[c.ID]
		lines = append(lines, strings.NewReplacer("{tool_name}", c.Function.Name, "{arguments}", c.Function.Arguments,
			"{result}", r.Content, "{is_error}", pyBool(r.IsError)).Replace(format))
	}
	return withData(Event{Type: EventMessage, Role: RoleAssistant, Name: a.Name, Content: strings.Join(lines, "\n")}, messageData{Kind: kindSummary, Turn: turn, End: true})
}

// pyBool is a bool as Python's str.format writes it, which AgentChat uses
// for tool_call_summary_format.
func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// turnProgress reads the agent's current turn from the log: how many model
// calls asked for tools, and the tool_calls message whose calls have no
// responses yet (nil when the model is to be asked next). The branches of
// a parallel step share their turn number and are told apart by agent.
func (s *state) turnProgress(turn int, agent string) (iterations int, open *Message) {
	answered := map[string]bool{}
	for i := range s.msgs {
		if s.meta[i].Turn != turn || s.msgs[i].Name != agent {
			continue
		}
		m := &s.msgs[i]
		for _, r := range m.ToolResponses {
			answered[r.ToolCallID] = true
		}
		if len(m.ToolCalls) > 0 && m.Role == RoleAssistant {
			iterations++
			open = m
		}
	}
	if open != nil && slices.ContainsFunc(open.ToolCalls, func(c ToolCall) bool { return !answered[c.ID] }) {
		return iterations, open
	}
	return iterations, nil
}

// lastIteration returns the calls of the turn's last tool_calls message and
// the responses to them.
func (s *state) lastIteration(turn int, agent string) ([]ToolCall, map[string]ToolResponse) {
	var calls []ToolCall
	responses := map[string]ToolResponse{}
	for i := range s.msgs {
		if s.meta[i].Turn != turn || s.msgs[i].Name != agent {
			continue
		}
		if m := &s.msgs[i]; len(m.ToolCalls) > 0 {
			calls = m.ToolCalls
		}
		for _, r := range s.msgs[i].ToolResponses {
			responses[r.ToolCallID] = r
		}
	}
	return calls, responses
}

// routedCalls returns the last message's tool calls when they wait for a
// user_proxy to execute them (AutoGen's func_call_filter), and that proxy.
func (s *state) routedCalls() (*Message, string) {
	if len(s.msgs) == 0 {
		return nil, ""
	}
	m := &s.msgs[len(s.msgs)-1]
	if m.Role != RoleAssistant || len(m.ToolCalls) == 0 {
		return nil, ""
	}
	for _, c := range m.ToolCalls {
		for i := range s.spec.Agents {
			p := &s.spec.Agents[i]
			if p.Type == spec.AgentUserProxy && s.spec.Executes(p, c.Function.Name) {
				return m, p.Name
			}
		}
	}
	return nil, ""
}

// userProxyStep is AutoGen 0.2's check_termination_and_human_reply followed
// by the auto-reply: ALWAYS asks the human every time; TERMINATE asks only
// once max_consecutive_auto_reply auto-replies were given (a fired
// termination condition asks too, see afterMessage); NEVER never asks and
// ends the chat when the auto-replies run out.
func (s *state) userProxyStep(env stepEnv, a *spec.Agent, turn int) step {
	if _, decided := s.approvals[""]; decided {
		// The turn's code was approved or rejected: its human, if any,
		// was asked before.
		return s.autoReplyStep(env, a, turn)
	}
	limit := derefOr(a.MaxConsecutiveAutoReply, defaultMaxConsecutiveAutoReply)
	switch a.InputMode() {
	case spec.HumanInputAlways:
		return appendStep(s.inputRequest(env, &PendingInput{Kind: "message", Agent: a.Name,
			Reason: "Provide feedback. Send empty content to skip and use the auto-reply, or \"exit\" to end the chat."}))
	case spec.HumanInputTerminate:
		if s.autoReplies[a.Name] >= limit {
			return appendStep(s.inputRequest(env, &PendingInput{Kind: "message", Agent: a.Name,
				Reason: fmt.Sprintf("max_consecutive_auto_reply (%d) reached. Send content to go on, or empty content or \"exit\" to end the chat.", limit)}))
		}
	default:
		if s.autoReplies[a.Name] >= limit {
			detail := fmt.Sprintf("Agent '%s' reached max_consecutive_auto_reply (%d).", a.Name, limit)
			return appendStep(terminalEvent(StatusCompleted, StopMaxAutoReply, detail, ""))
		}
	}
	return s.autoReplyStep(env, a, turn)
}

// autoReplyStep is a user_proxy's reply without a human, which counts
// toward max_consecutive_auto_reply: the result of the code blocks
// addressed to it when it executes code and there are any, else its default
// auto-reply (AutoGen's default is "").
func (s *state) autoReplyStep(env stepEnv, a *spec.Agent, turn int) step {
	if a.CodeExecution != nil {
		if blocks := runnableBlocks(s.msgs, a.Name, a.CodeExecution.Languages); len(blocks) > 0 {
			if derefOr(a.CodeApproval, false) {
				// AgentChat's CodeExecutorAgent approval_func, asked of a
				// client: one decision for the blocks together.
				d, decided := s.approvals[""]
				switch {
				case !decided:
					return appendStep(s.inputRequest(env, &PendingInput{Kind: InputApproval, Agent: a.Name, CodeBlocks: pendingCode(blocks),
						Reason: "Approve or reject the code before it runs."}))
				case !d.Approve:
					return appendStep(codeReply(a, turn, &CodeResult{ExitCode: 1,
						Output: "Code execution was not approved. Reason: " + d.Reason}))
				}
			}
			return step{kind: stepCode, agent: a, turn: turn, blocks: blocks}
		}
	}
	return appendStep(withData(Event{Type: EventMessage, Role: RoleUser, Name: a.Name, Content: derefOr(a.DefaultAutoReply, "")}, messageData{Kind: kindAuto, Turn: turn, End: true}))
}

// codeReply is a user_proxy's reply with the result of its code blocks.
func codeReply(a *spec.Agent, turn int, res *CodeResult) Event {
	outcome := "execution succeeded"
	if res.ExitCode != 0 {
		outcome = "execution failed"
	}
	return withData(Event{Type: EventMessage, Role: RoleUser, Name: a.Name,
		Content: fmt.Sprintf("exitcode: %d (%s)\nCode output: %s", res.ExitCode, outcome, res.Output)}, messageData{Kind: kindAuto, Turn: turn, End: true, CodeResult: res})
}

// inputRequest makes the input.requested event that pauses the chat.
func (s *state) inputRequest(env stepEnv, p *PendingInput) Event {
	p.RequestID = env.newID()
	if t := s.spec.InputTimeoutS; t != nil {
		exp := env.now.Add(seconds(float64(*t)))
		p.ExpiresAt = &exp
	}
	return Event{Type: EventInputRequested, Data: mustJSON(p)}
}

func runningEvent() Event {
	return Event{Type: EventChatRunning, Data: json.RawMessage(`{"status":"running"}`)}
}

// callsToApprove are the calls of an assistant's open tool-call message
// that its tool_approval holds for a client and that no decision answers
// yet. Handoffs are never held.
func (s *state) callsToApprove(a *spec.Agent, open *Message) []ToolCall {
	if a.ToolApproval == nil {
		return nil
	}
	var calls []ToolCall
	for _, c := range open.ToolCalls {
		if slices.ContainsFunc(a.Handoffs, func(t string) bool { return handoffTool(t) == c.Function.Name }) {
			continue
		}
		if _, decided := s.approvals[c.ID]; !decided && a.ToolApproval.Needs(c.Function.Name) {
			calls = append(calls, c)
		}
	}
	return calls
}

// pendingCode is the code blocks as an approval request shows them.
func pendingCode(blocks []codeBlock) []PendingCode {
	out := make([]PendingCode, len(blocks))
	for i, b := range blocks {
		out[i] = PendingCode{Language: b.Language, Code: b.Code}
	}
	return out
}
