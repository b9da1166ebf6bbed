package engine

import (
	"cmp"
	"slices"
	"strings"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/pytext"
	"github.com/agentd/agentd/internal/spec"
)

// handoffParameters is the schema of a handoff tool: AgentChat generates
// it from a function without arguments, as a strict FunctionTool.
const handoffParameters = `{"type":"object","properties":{},"required":[],"additionalProperties":false}`

// HandoffDef is the tool an assistant calls to take a hand-off, exactly as
// AgentChat's Handoff(target, name, description).handoff_tool describes it.
func HandoffDef(h spec.Handoff) chat.ToolDef {
	return chat.ToolDef{Name: h.ToolName(), Description: h.ToolDescription(),
		Parameters: []byte(handoffParameters), Strict: true}
}

// agentContext is what an assistant's model sees of the conversation (after
// its system message), as AgentChat's AssistantAgent keeps its model context
// in a group chat. msgs and meta are the log's messages and their
// bookkeeping; spec names the agents.
//
//   - The task, human messages and other agents' chat messages (replies,
//     tool-call summaries, handoffs, a user_proxy's replies) are user
//     messages with the sender's name. Other agents' inner events (their tool
//     calls and results) are not shown: AgentChat passes only the final
//     message of a turn to the other participants.
//   - A handoff to anyone carries its context as AgentChat's HandoffMessage
//     does: the tool calls of the handing-off reply other than handoffs, with
//     their results, or else the text that came with the handoff, as the
//     sender's assistant message, before the handoff message itself.
//   - The agent's own turns are as it added them to its context: each model
//     reply (text, or tool calls with the text that came with them and the
//     signed thinking blocks of the reply) as an assistant message, each
//     tool call answered by a tool message right after it (a call with no
//     recorded answer, cut by a crash, gets an error), and not its own
//     tool-call summaries or handoff messages.
//   - A StructuredMessage is its object's JSON (to_model_message) to the
//     others, and the model's own text to the agent that wrote it.
//   - Calls routed to a user_proxy's functions follow AutoGen 0.2, where
//     AgentChat has nothing alike: the call and the proxy's results are
//     messages of the group chat, so the other agents see them (as text
//     with the sender's name), e.g. a move on a shared board.
//
// Each element is one AgentChat LLM message (a tool-results message may hold
// several tool messages), which is what a bounded context counts (see
// boundContext).
func agentContext(sp *spec.Spec, a *spec.Agent, msgs []chat.Message, meta []chat.MessageData, tokens chat.TokenCounter) ([]chat.ModelMessage, error) {
	return appendAgentContext(nil, sp, a, msgs, meta, tokens)
}

// appendAgentContext appends agentContext's messages to out. It is made for
// every model call, so it is built in place: one slice for the whole
// context, not one per message and then a copy.
func appendAgentContext(out []chat.ModelMessage, sp *spec.Spec, a *spec.Agent, msgs []chat.Message, meta []chat.MessageData, tokens chat.TokenCounter) ([]chat.ModelMessage, error) {
	var (
		responses map[string]chat.ToolResponse
		ownCalls  map[string]bool
	)
	for _, m := range msgs {
		for _, r := range m.ToolResponses {
			if responses == nil {
				responses = map[string]chat.ToolResponse{}
			}
			responses[r.ToolCallID] = r
		}
		if m.Name == a.Name {
			for _, c := range m.ToolCalls {
				if ownCalls == nil {
					ownCalls = map[string]bool{}
				}
				ownCalls[c.ID] = true
			}
		}
	}
	// starts are where each AgentChat message begins in out: only a
	// bounded context, which keeps some of them, needs them.
	bounded := a.Context.Kind() != spec.ContextUnbounded
	var starts []int
	base := len(out)
	add := func(ms ...chat.ModelMessage) {
		if bounded {
			starts = append(starts, len(out))
		}
		out = append(out, ms...)
	}
	order := viewOrder(a, msgs, meta) // nil: every message, in log order
	if a.MessageFilter != nil {
		order = filteredOrder(sp, a, msgs, meta, order)
	}
	for k := 0; k < len(msgs) && (order == nil || k < len(order)); k++ {
		i := k
		if order != nil {
			i = order[k]
		}
		m := msgs[i]
		own := m.Name == a.Name && m.Role != chat.RoleUser
		switch {
		case !own && m.Type == chat.TypeToolCallRequestEvent && meta[i].End:
			// A reply whose calls a user_proxy runs ends its turn there.
			add(chat.ModelMessage{Role: chat.RoleUser, Name: m.Name, Content: describeCalls(m)})
		case !own && m.Type == chat.TypeToolCallExecutionEvent && sp.IsUserProxy(m.Name):
			var parts []string
			for _, r := range m.ToolResponses {
				if !ownCalls[r.ToolCallID] { // the caller has them after its calls
					parts = append(parts, r.Content)
				}
			}
			if len(parts) > 0 {
				add(chat.ModelMessage{Role: chat.RoleUser, Name: m.Name, Content: strings.Join(parts, "\n")})
			}
		case own && m.Type == chat.TypeToolCallRequestEvent:
			add(chat.ModelMessage{Role: chat.RoleAssistant, Content: m.Content, ToolCalls: m.ToolCalls, More: chat.MoreThinking(meta[i].Thinking)})
			add(toolResults(m.ToolCalls, responses)...)
		case own && m.Type == chat.TypeTextMessage:
			add(chat.ModelMessage{Role: chat.RoleAssistant, Content: m.Content})
		case own && spec.IsStructuredMessage(m.Type):
			// The agent keeps the model's own text of a structured reply.
			add(chat.ModelMessage{Role: chat.RoleAssistant, Content: cmp.Or(meta[i].Reply, m.Content)})
		case own || !isChatMessage(m):
			// Own summaries and handoffs, and everyone's inner events.
		case m.Type == chat.TypeHandoffMessage && meta[i].Context != nil:
			// A handoff made for a team's inner run carries its context.
			for _, c := range meta[i].Context {
				add(c)
			}
			add(chat.ModelMessage{Role: chat.RoleUser, Name: m.Name, Content: m.Content})
		case m.Type == chat.TypeHandoffMessage:
			for _, g := range handoffContext(sp, msgs[:i], meta[:i], m, meta[i].Turn, responses) {
				add(g...)
			}
			add(chat.ModelMessage{Role: chat.RoleUser, Name: m.Name, Content: m.Content})
		default:
			add(chat.ModelMessage{Role: chat.RoleUser, Name: m.Name, Content: sharedText(m), More: chat.MoreParts(modelParts(m.Parts))})
		}
	}
	if !bounded {
		return out, nil
	}
	return boundContext(a.Context, out, base, starts, func(ms []chat.ModelMessage) (int, error) {
		return countTokens(tokens, sp.ResolveModel(a.Model), ms)
	})
}

// viewOrder is the order in which an agent takes the log's messages, or
// nil for the log's own order. They differ after a parallel step: a
// sibling's reply that ended while the agent's own turn ran reaches the
// agent after its own reply of that turn (AgentChat hands an agent the
// messages that came during its turn once the turn is over), or, if that
// turn was cut, before its next turn; while the turn runs, the agent does
// not see it at all.
func viewOrder(a *spec.Agent, msgs []chat.Message, meta []chat.MessageData) []int {
	first := slices.IndexFunc(meta, func(d chat.MessageData) bool { return slices.Contains(d.HiddenFrom, a.Name) })
	if first < 0 {
		return nil
	}
	order := make([]int, 0, len(msgs))
	for i := range first {
		order = append(order, i)
	}
	var held []int
	turn := 0 // the parallel step the held messages ended in
	for i := first; i < len(msgs); i++ {
		own := msgs[i].Name == a.Name && msgs[i].Role != chat.RoleUser
		switch {
		case slices.Contains(meta[i].HiddenFrom, a.Name):
			held, turn = append(held, i), meta[i].Turn
		case own && len(held) > 0 && meta[i].Turn == turn && meta[i].End:
			order = append(order, i)
			order, held = append(order, held...), held[:0]
		case own && len(held) > 0 && meta[i].Turn != turn:
			order, held = append(order, held...), held[:0]
			order = append(order, i)
		default:
			order = append(order, i)
		}
	}
	return order
}

// filteredOrder is the order in which an agent with a message_filter
// (AgentChat's MessageFilterAgent) takes the messages of order (nil: the
// log's) into its model context. The others' messages given to the agent
// for a turn (those since its last turn, the task among them) pass the
// filter together: for each source the filter lists, in the filter's
// order, that source's messages, the first or last count of them or all.
// The agent's own messages stay where they are.
func filteredOrder(sp *spec.Spec, a *spec.Agent, msgs []chat.Message, meta []chat.MessageData, order []int) []int {
	if order == nil {
		order = make([]int, len(msgs))
		for i := range order {
			order[i] = i
		}
	}
	out := make([]int, 0, len(order))
	var batch []int
	flush := func() {
		for _, f := range a.MessageFilter.PerSource {
			var from []int
			for _, i := range batch {
				if msgs[i].Name == f.Source {
					from = append(from, i)
				}
			}
			if n := DerefOr(f.Count, 0); n > 0 && n < len(from) {
				switch f.Position {
				case "first":
					from = from[:n]
				case "last":
					from = from[len(from)-n:]
				}
			}
			out = append(out, from...)
		}
		batch = batch[:0]
	}
	for _, i := range order {
		m := msgs[i]
		switch {
		case m.Name == a.Name && m.Role != chat.RoleUser:
			flush()
			out = append(out, i)
		case isChatMessage(m) || m.Type == chat.TypeToolCallRequestEvent && meta[i].End ||
			m.Type == chat.TypeToolCallExecutionEvent && sp.IsUserProxy(m.Name):
			// What AgentChat gives a participant of the others' turns.
			batch = append(batch, i)
		}
	}
	flush()
	return out
}

// toolResults answers each call in order with its recorded response.
func toolResults(calls []chat.ToolCall, responses map[string]chat.ToolResponse) []chat.ModelMessage {
	out := make([]chat.ModelMessage, 0, len(calls))
	for _, c := range calls {
		content := "Error: no result was recorded for this call"
		if r, ok := responses[c.ID]; ok {
			content = r.Content
		}
		out = append(out, chat.ModelMessage{Role: chat.RoleTool, ToolCallID: c.ID, Content: content})
	}
	return out
}

// handoffContext is the context of handoff message h (AgentChat's
// HandoffMessage.context): from the tool-call message of the same turn that
// made the handoff, the calls that were not handoffs with their results, or,
// with none, the text that came with the calls.
func handoffContext(sp *spec.Spec, before []chat.Message, meta []chat.MessageData, h chat.Message, turn int, responses map[string]chat.ToolResponse) [][]chat.ModelMessage {
	var req *chat.Message
	for i := len(before) - 1; i >= 0 && meta[i].Turn == turn && before[i].Name == h.Name; i-- {
		if before[i].Type == chat.TypeToolCallRequestEvent {
			req = &before[i]
			break
		}
	}
	if req == nil {
		return nil
	}
	handoffs := map[string]bool{}
	if from := sp.Agent(h.Name); from != nil {
		for _, t := range from.Handoffs {
			if !t.Conditional() {
				handoffs[t.ToolName()] = true
			}
		}
	}
	calls := slices.DeleteFunc(slices.Clone(req.ToolCalls), func(c chat.ToolCall) bool { return handoffs[c.Function.Name] })
	switch {
	case len(calls) > 0:
		return [][]chat.ModelMessage{{{Role: chat.RoleAssistant, Content: req.Content, ToolCalls: calls}}, toolResults(calls, responses)}
	case req.Content != "":
		return [][]chat.ModelMessage{{{Role: chat.RoleAssistant, Content: req.Content}}}
	}
	return nil
}

// describeCalls renders another agent's routed tool calls as text.
func describeCalls(m chat.Message) string {
	lines := []string{}
	if m.Content != "" {
		lines = append(lines, m.Content)
	}
	for _, c := range m.ToolCalls {
		lines = append(lines, "["+m.Name+" calls "+c.Function.Name+"("+c.Function.Arguments+")]")
	}
	return strings.Join(lines, "\n")
}

// sharedText is what the other agents (and the selector) see of a chat
// message: its content, but of a StructuredMessage its object as
// model_dump_json writes it (AgentChat's to_model_message), whatever its
// format string shows.
func sharedText(m chat.Message) string {
	if spec.IsStructuredMessage(m.Type) && len(m.Structured) > 0 {
		return string(m.Structured)
	}
	return m.Content
}

// modelText is a message's model text (AgentChat's to_model_text): its
// content, or of a MultiModalMessage its texts with " [image]" for each
// image. A graph's string conditions are tested on it, and a MagenticOne
// orchestrator's task is made of it.
func modelText(m chat.Message) string {
	if len(m.Parts) == 0 {
		return m.Content
	}
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Image != nil {
			b.WriteString(" [image]")
		} else {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// modelParts are a MultiModalMessage's parts as a model request holds them
// (nil for any other message): each image with its size in pixels, which
// its tokens are counted by. An image was checked when it was accepted, so
// its header reads; one that does not keeps a size of zero.
func modelParts(parts []spec.Part) []chat.ContentPart {
	if len(parts) == 0 {
		return nil
	}
	out := make([]chat.ContentPart, len(parts))
	for i, p := range parts {
		if p.Image == nil {
			out[i] = chat.ContentPart{Text: p.Text}
			continue
		}
		mt, cfg, _ := spec.ImageConfig(p.Image.Data)
		out[i] = chat.ContentPart{Image: &chat.Image{Data: p.Image.Data, MediaType: cmp.Or(mt, p.Image.MediaType), Width: cfg.Width, Height: cfg.Height}}
	}
	return out
}

// selectorText is what the selector's history shows of a message. Of a
// MultiModalMessage AgentChat shows its content list as Python's str()
// writes it, an image as its object's repr with a memory address
// ("<autogen_core._image.Image object at 0x7f…>"), which no one can
// reproduce: agentd writes the list with each image as <image>.
func selectorText(m chat.Message) string {
	if len(m.Parts) == 0 {
		return sharedText(m)
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, p := range m.Parts {
		if i > 0 {
			b.WriteString(", ")
		}
		if p.Image != nil {
			b.WriteString("<image>")
		} else {
			pytext.WriteStrRepr(&b, p.Text)
		}
	}
	b.WriteByte(']')
	return b.String()
}
