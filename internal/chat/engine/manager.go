package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/spec"
)

// This file is the group chat manager as a function of the log: given the
// state the log describes, next decides what the chat does next. It does no
// I/O; the worker performs the step and appends what it produced.

// stepKind says what a step needs done before its events can be appended.
type stepKind int

const (
	// StepWait: nothing to do now (the chat ended, or waits for input
	// nobody has given yet).
	StepWait stepKind = iota
	// StepAppend: append events; no other effect.
	StepAppend
	// StepSelect: ask the selector model for the speaker (auto selection).
	StepSelect
	// StepModel: call the speaker's model (with its tools, or without them
	// to reflect on tool use).
	StepModel
	// StepTools: run the open tool calls of the speaker's turn.
	StepTools
	// StepRouted: a user_proxy runs the tool calls routed to it.
	StepRouted
	// StepCode: a user_proxy runs the code blocks addressed to it.
	StepCode
	// StepStartRun: start the run queued after the one that ended.
	StepStartRun
	// StepBranches: run the branches of a parallel step at once.
	StepBranches
	// StepMagentic: the magentic_one orchestrator's model calls and message.
	StepMagentic
)

var stepNames = [...]string{"wait", "append", "select", "model", "tools", "routed", "code", "start-run", "branches", "magentic"}

func (k stepKind) String() string { return stepNames[k] }

// Step is one decision of the manager.
type Step struct {
	Kind stepKind
	// Before are events appended before the step's effect (the chat.running
	// of a resumed chat whose human skipped the reply).
	Before []chat.Event
	// Events are what a stepAppend appends.
	Events []chat.Event
	Agent  *spec.Agent
	Turn   int
	// Sel is the selection a stepSelect completes (method, candidates, turn).
	Sel chat.Selection
	// Reflect: a stepModel that ends a tool turn, without tools.
	Reflect bool
	// Open is the message whose tool calls a stepTools or stepRouted runs.
	Open   *chat.Message
	Blocks []CodeBlock
	// Inner is the state a step of a team agent's inner run is planned on
	// (nil: the chat's), and team that agent, whose name marks the events
	// the step makes.
	Inner *State
	Team  string
	// Magentic is the orchestrator's step a stepMagentic makes.
	Magentic string
}

func AppendStep(evs ...chat.Event) Step { return Step{Kind: StepAppend, Events: evs} }

// StepEnv is what a decision may depend on besides the log.
type StepEnv struct {
	Now time.Time
	// Input is a client's stored answer to the pending input request.
	Input json.RawMessage
	// NewID makes the request_id of an input request.
	NewID func() string
	// StopRequested: POST /stop asked the run to end after its current
	// turn; queued: runs wait to start after this one.
	StopRequested, Queued bool
}

// Next decides the chat's next step.
func (s *State) Next(env StepEnv) Step {
	switch {
	case s.Status.Terminal() && env.Queued && s.Broken == nil:
		return Step{Kind: StepStartRun}
	case s.Status.Terminal():
		return Step{}
	case s.Broken != nil:
		return AppendStep(FailedEvent(fmt.Errorf("the chat's log cannot be read: %w", s.Broken)))
	case s.Status == chat.StatusAwaitingInput:
		return s.resume(env)
	case s.Status != chat.StatusRunning:
		return AppendStep(runningEvent())
	}
	if ev, ok := s.AfterMessage(env); ok {
		// The log can end right after a stop condition: a spec that stops at
		// the task, or a crash between a turn and the next selection.
		return AppendStep(ev)
	}
	if ev, ok := s.externalStop(env); ok {
		return AppendStep(ev)
	}
	if s.Pending == nil {
		return s.selectStep(env)
	}
	if s.Parallel() {
		open := s.OpenBranches()
		if len(open) > 1 {
			return Step{Kind: StepBranches}
		}
		return s.turnStep(env, chat.Selection{Agent: open[0], Turn: s.Pending.Turn})
	}
	return s.turnStep(env, *s.Pending)
}

// BranchStep is the next step of one branch of a parallel step.
func (s *State) BranchStep(env StepEnv, agent string) Step {
	return s.turnStep(env, chat.Selection{Agent: agent, Turn: s.Pending.Turn})
}

// Plan returns the state after evs and the events to append for them: evs,
// plus the event the resulting state calls for when a message makes the
// chat stop or pause (a fired termination condition, the last allowed
// turn), so that a chat never stays running after its stop condition was
// recorded. s itself is not changed: the worker adopts the returned state
// once the store confirmed the append.
func (s *State) Plan(evs []chat.Event, env StepEnv, chatID string) (*State, []chat.Event, error) {
	next := s.clone()
	out := make([]chat.Event, 0, len(evs)+1)
	add := func(e chat.Event) error {
		e.ChatID, e.Seq, e.CreatedAt = chatID, next.LastSeq+1, env.Now
		if e.Type.Terminal() {
			e = WithRun(e, next.Run)
		}
		if err := next.Apply(e); err != nil {
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
	if next.Status == chat.StatusRunning {
		if e, ok := next.AfterMessage(env); ok {
			if err := add(e); err != nil {
				return nil, nil, err
			}
		}
	}
	return next, out, nil
}

// turnStep is the next step of the selected speaker's turn.
func (s *State) turnStep(env StepEnv, sel chat.Selection) Step {
	a := s.agent(sel.Agent)
	if a == nil {
		return AppendStep(FailedEvent(fmt.Errorf("selected speaker %q is not an agent of the chat", sel.Agent)))
	}
	switch a.Type {
	case spec.AgentAssistant:
		return s.assistantStep(env, a, sel.Turn)
	case spec.AgentTeam:
		return s.teamStep(env, a, sel.Turn)
	}
	if m, proxy := s.routedCalls(); m != nil && proxy == a.Name {
		return Step{Kind: StepRouted, Agent: a, Turn: sel.Turn, Open: m}
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
func (s *State) assistantStep(env StepEnv, a *spec.Agent, turn int) Step {
	iter, open := s.turnProgress(turn, a.Name)
	switch {
	case open != nil:
		if calls := s.callsToApprove(a, open); len(calls) > 0 {
			return AppendStep(s.inputRequest(env, &chat.PendingInput{Kind: chat.InputApproval, Agent: a.Name, ToolCalls: calls,
				Reason: "Approve, edit or reject each tool call before it runs."}))
		}
		return Step{Kind: StepTools, Agent: a, Turn: turn, Open: open}
	case iter < DerefOr(a.MaxToolIterations, 1) || DerefOr(a.ReflectOnToolUse, false) || s.Spec.OpenAISwarm():
		// Under openai_swarm a turn is one model call: its tool message
		// ends it.
		if h := s.handoffTaken(a); h != nil {
			// AG2 checks an agent's context conditions before any
			// other reply: one that holds hands off instead of the
			// model call.
			return AppendStep(conditionalHandoff(a, turn, h))
		}
		return Step{Kind: StepModel, Agent: a, Turn: turn, Reflect: iter >= DerefOr(a.MaxToolIterations, 1) && !s.Spec.OpenAISwarm()}
	default:
		return AppendStep(s.toolSummary(a, turn))
	}
}

// ModelReply is the message of one model call of an assistant's turn. A
// text reply ends the turn; so do calls for a user_proxy to run (box says
// who runs what) and a reflection.
//
// An agent with an output_schema replies with a StructuredMessage: a reply
// that does not validate against its type is an error, which fails the
// run as it fails AgentChat's team.run.
func ModelReply(a *spec.Agent, turn int, resp *chat.ModelResponse, box *Toolbox, reflect bool) (chat.Event, error) {
	usage := resp.Usage
	d := chat.MessageData{Usage: &usage, Thought: resp.Thought, Kind: chat.KindModel, Turn: turn, End: true}
	content := resp.Content
	if a.OutputSchema != nil && len(resp.ToolCalls) == 0 {
		// AgentChat gives the format string to the StructuredMessage of a
		// direct reply only, not to one made by reflecting on tool use.
		var err error
		if content, d.Structured, err = structuredReply(a, resp.Content, !reflect); err != nil {
			return chat.Event{}, err
		}
		d.Type = spec.StructuredMessageType(a.OutputSchema.Name)
		if resp.Content != content {
			d.Reply = resp.Content
		}
	}
	if reflect {
		return chat.WithData(chat.Event{Type: chat.EventMessage, Role: chat.RoleAssistant, Name: a.Name, Content: content}, d), nil
	}
	if len(resp.ToolCalls) > 0 {
		d.Thinking = resp.Thinking
	}
	routed := len(resp.ToolCalls) > 0 && slices.ContainsFunc(resp.ToolCalls, func(c chat.ToolCall) bool { return box.ByName[c.Function.Name].Executor != "" })
	d.End = len(resp.ToolCalls) == 0 || routed
	return chat.WithData(chat.Event{Type: chat.EventMessage, Role: chat.RoleAssistant, Name: a.Name, Content: content, ToolCalls: resp.ToolCalls}, d), nil
}

// toolSummary ends a turn whose iterations are used up without reflection:
// the last iteration's calls in tool_call_summary_format.
func (s *State) toolSummary(a *spec.Agent, turn int) chat.Event {
	calls, responses := s.lastIteration(turn, a.Name)
	format := DerefOr(a.ToolCallSummaryFormat, "{result}")
	lines := make([]string, 0, len(calls))
	for _, c := range calls {
		r := responses[c.ID]
		lines = append(lines, strings.NewReplacer("{tool_name}", c.Function.Name, "{arguments}", c.Function.Arguments,
			"{result}", r.Content, "{is_error}", pyBool(r.IsError)).Replace(format))
	}
	return chat.WithData(chat.Event{Type: chat.EventMessage, Role: chat.RoleAssistant, Name: a.Name, Content: strings.Join(lines, "\n")}, chat.MessageData{Kind: chat.KindSummary, Turn: turn, End: true})
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
func (s *State) turnProgress(turn int, agent string) (iterations int, open *chat.Message) {
	answered := map[string]bool{}
	for i := range s.Msgs {
		if s.Meta[i].Turn != turn || s.Msgs[i].Name != agent {
			continue
		}
		m := &s.Msgs[i]
		for _, r := range m.ToolResponses {
			answered[r.ToolCallID] = true
		}
		if len(m.ToolCalls) > 0 && m.Role == chat.RoleAssistant {
			iterations++
			open = m
		}
	}
	if open != nil && slices.ContainsFunc(open.ToolCalls, func(c chat.ToolCall) bool { return !answered[c.ID] }) {
		return iterations, open
	}
	return iterations, nil
}

// lastIteration returns the calls of the turn's last tool_calls message and
// the responses to them.
func (s *State) lastIteration(turn int, agent string) ([]chat.ToolCall, map[string]chat.ToolResponse) {
	var calls []chat.ToolCall
	responses := map[string]chat.ToolResponse{}
	for i := range s.Msgs {
		if s.Meta[i].Turn != turn || s.Msgs[i].Name != agent {
			continue
		}
		if m := &s.Msgs[i]; len(m.ToolCalls) > 0 {
			calls = m.ToolCalls
		}
		for _, r := range s.Msgs[i].ToolResponses {
			responses[r.ToolCallID] = r
		}
	}
	return calls, responses
}

// routedCalls returns the last message's tool calls when they wait for a
// user_proxy to execute them (AutoGen's func_call_filter), and that proxy.
func (s *State) routedCalls() (*chat.Message, string) {
	if len(s.Msgs) == 0 {
		return nil, ""
	}
	m := &s.Msgs[len(s.Msgs)-1]
	if m.Role != chat.RoleAssistant || len(m.ToolCalls) == 0 {
		return nil, ""
	}
	for _, c := range m.ToolCalls {
		for i := range s.Spec.Agents {
			p := &s.Spec.Agents[i]
			if p.Type == spec.AgentUserProxy && s.Spec.Executes(p, c.Function.Name) {
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
func (s *State) userProxyStep(env StepEnv, a *spec.Agent, turn int) Step {
	if _, decided := s.approvals[""]; decided {
		// The turn's code was approved or rejected: its human, if any,
		// was asked before.
		return s.autoReplyStep(env, a, turn)
	}
	limit := DerefOr(a.MaxConsecutiveAutoReply, defaultMaxConsecutiveAutoReply)
	switch a.InputMode() {
	case spec.HumanInputAlways:
		return AppendStep(s.inputRequest(env, &chat.PendingInput{Kind: "message", Agent: a.Name,
			Reason: "Provide feedback. Send empty content to skip and use the auto-reply, or \"exit\" to end the chat."}))
	case spec.HumanInputTerminate:
		if s.autoReplies[a.Name] >= limit {
			return AppendStep(s.inputRequest(env, &chat.PendingInput{Kind: "message", Agent: a.Name,
				Reason: fmt.Sprintf("max_consecutive_auto_reply (%d) reached. Send content to go on, or empty content or \"exit\" to end the chat.", limit)}))
		}
	default:
		if s.autoReplies[a.Name] >= limit {
			detail := fmt.Sprintf("Agent '%s' reached max_consecutive_auto_reply (%d).", a.Name, limit)
			return AppendStep(terminalEvent(chat.StatusCompleted, chat.StopMaxAutoReply, detail, ""))
		}
	}
	return s.autoReplyStep(env, a, turn)
}

// autoReplyStep is a user_proxy's reply without a human, which counts
// toward max_consecutive_auto_reply: the result of the code blocks
// addressed to it when it executes code and there are any, else its default
// auto-reply (AutoGen's default is "").
func (s *State) autoReplyStep(env StepEnv, a *spec.Agent, turn int) Step {
	if a.CodeExecution != nil {
		if blocks := runnableBlocks(s.Msgs, a.Name, a.CodeExecution.Languages); len(blocks) > 0 {
			if DerefOr(a.CodeApproval, false) {
				// AgentChat's CodeExecutorAgent approval_func, asked of a
				// client: one decision for the blocks together.
				d, decided := s.approvals[""]
				switch {
				case !decided:
					return AppendStep(s.inputRequest(env, &chat.PendingInput{Kind: chat.InputApproval, Agent: a.Name, CodeBlocks: pendingCode(blocks),
						Reason: "Approve or reject the code before it runs."}))
				case !d.Approve:
					return AppendStep(CodeReply(a, turn, &chat.CodeResult{ExitCode: 1,
						Output: "Code execution was not approved. Reason: " + d.Reason}))
				}
			}
			return Step{Kind: StepCode, Agent: a, Turn: turn, Blocks: blocks}
		}
	}
	return AppendStep(chat.WithData(chat.Event{Type: chat.EventMessage, Role: chat.RoleUser, Name: a.Name, Content: DerefOr(a.DefaultAutoReply, "")}, chat.MessageData{Kind: chat.KindAuto, Turn: turn, End: true}))
}

// CodeReply is a user_proxy's reply with the result of its code blocks.
func CodeReply(a *spec.Agent, turn int, res *chat.CodeResult) chat.Event {
	outcome := "execution succeeded"
	if res.ExitCode != 0 {
		outcome = "execution failed"
	}
	return chat.WithData(chat.Event{Type: chat.EventMessage, Role: chat.RoleUser, Name: a.Name,
		Content: fmt.Sprintf("exitcode: %d (%s)\nCode output: %s", res.ExitCode, outcome, res.Output)}, chat.MessageData{Kind: chat.KindAuto, Turn: turn, End: true, CodeResult: res})
}

// inputRequest makes the input.requested event that pauses the chat.
func (s *State) inputRequest(env StepEnv, p *chat.PendingInput) chat.Event {
	p.RequestID = env.NewID()
	if t := s.Spec.InputTimeoutS; t != nil {
		exp := env.Now.Add(Seconds(float64(*t)))
		p.ExpiresAt = &exp
	}
	return chat.Event{Type: chat.EventInputRequested, Data: chat.MustJSON(p)}
}

func runningEvent() chat.Event {
	return chat.Event{Type: chat.EventChatRunning, Data: json.RawMessage(`{"status":"running"}`)}
}

// callsToApprove are the calls of an assistant's open tool-call message
// that its tool_approval holds for a client and that no decision answers
// yet. Handoffs are never held.
func (s *State) callsToApprove(a *spec.Agent, open *chat.Message) []chat.ToolCall {
	if a.ToolApproval == nil {
		return nil
	}
	var calls []chat.ToolCall
	for _, c := range open.ToolCalls {
		if slices.ContainsFunc(a.Handoffs, func(h spec.Handoff) bool { return !h.Conditional() && h.ToolName() == c.Function.Name }) {
			continue
		}
		if _, decided := s.approvals[c.ID]; !decided && a.ToolApproval.Needs(c.Function.Name) {
			calls = append(calls, c)
		}
	}
	return calls
}

// pendingCode is the code blocks as an approval request shows them.
func pendingCode(blocks []CodeBlock) []chat.PendingCode {
	out := make([]chat.PendingCode, len(blocks))
	for i, b := range blocks {
		out[i] = chat.PendingCode{Language: b.Language, Code: b.Code}
	}
	return out
}

// defaultMaxConsecutiveAutoReply is AutoGen's MAX_CONSECUTIVE_AUTO_REPLY.
const defaultMaxConsecutiveAutoReply = 100
