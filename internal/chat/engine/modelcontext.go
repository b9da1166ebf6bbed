package engine

import (
	"errors"
	"fmt"
	"slices"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/spec"
)

// defaultSystemMessage is AgentChat's AssistantAgent default.
const defaultSystemMessage = "You are a helpful AI assistant. Solve tasks using your tools. Reply with TERMINATE when the task has been completed."

// ModelContext is an assistant's model request messages: its system
// message (AgentChat's default when unset; none when empty), then its view
// of the conversation (see agentContext).
func (s *State) ModelContext(a *spec.Agent, tokens chat.TokenCounter) ([]chat.ModelMessage, error) {
	if a.Type == spec.AgentTeam {
		return s.teamAnswerContext(a), nil
	}
	if s.Spec.OpenAISwarm() {
		return s.swarmContext(a), nil
	}
	sys := s.systemMessage(a)
	// About one model message per message of the log, and the system's.
	out := make([]chat.ModelMessage, 0, len(s.Msgs)+1)
	if sys != "" {
		out = append(out, chat.ModelMessage{Role: chat.RoleSystem, Content: sys})
	}
	msgs, meta := s.magenticView()
	out, err := appendAgentContext(out, s.Spec, a, msgs, meta, tokens)
	if err == nil && !s.Spec.ResolveModel(a.Model).SeesImages() {
		// After the bounded context counted them, as AgentChat's agents
		// remove images from what their context gave.
		withoutImages(out)
	}
	return out, err
}

// withoutImages makes each message with images its text (AgentChat's
// remove_images): the content of a MultiModalMessage is already its
// to_text, "<image>" for each image and one part per line.
func withoutImages(out []chat.ModelMessage) {
	for i := range out {
		out[i].DropParts()
	}
}

// boundContext keeps what a bounded model context keeps of out[base:],
// whose AgentChat messages begin at starts (a tool-results message spans
// several model messages), with AgentChat's algorithms
// (autogen_core.model_context):
//
//   - buffered: the last buffer_size messages, without tool results at
//     their start;
//   - head_and_tail: the first head_size messages (without a tool-call
//     message at their end) and the last tail_size (without tool results
//     at their start), with a user message from "System" saying how many
//     were skipped between them; everything when nothing would be skipped;
//   - token_limited: while the messages count more than token_limit
//     tokens, the middle one (index n/2) is taken out; then tool results
//     at the start are dropped. As in AgentChat, a message taken out of the
//     middle may leave a tool call without its results or results without
//     their call.
func boundContext(c *spec.ModelContext, out []chat.ModelMessage, base int, starts []int, count func([]chat.ModelMessage) (int, error)) ([]chat.ModelMessage, error) {
	groups := make([][]chat.ModelMessage, len(starts))
	for k, st := range starts {
		end := len(out)
		if k+1 < len(starts) {
			end = starts[k+1]
		}
		groups[k] = out[st:end:end]
	}
	results := func(g []chat.ModelMessage) bool { return len(g) > 0 && g[0].Role == chat.RoleTool }
	calls := func(g []chat.ModelMessage) bool {
		return len(g) > 0 && g[0].Role == chat.RoleAssistant && len(g[0].ToolCalls) > 0
	}
	var kept [][]chat.ModelMessage
	switch c.Kind() {
	case spec.ContextBuffered:
		kept = groups[max(0, len(groups)-*c.BufferSize):]
		if len(kept) > 0 && results(kept[0]) {
			kept = kept[1:]
		}
	case spec.ContextHeadAndTail:
		h, t := *c.HeadSize, *c.TailSize
		skipped := len(groups) - h - t
		if skipped <= 0 {
			return out, nil
		}
		head := groups[:h]
		if calls(head[len(head)-1]) {
			head = head[:len(head)-1]
		}
		tail := groups[len(groups)-t:]
		if results(tail[0]) {
			tail = tail[1:]
		}
		kept = append(append(slices.Clip(head), []chat.ModelMessage{{Role: chat.RoleUser, Name: "System",
			Content: fmt.Sprintf("Skipped %d messages.", skipped)}}), tail...)
	case spec.ContextTokenLimited:
		// The count is a constant plus one amount per message, so each
		// message is counted once, not the whole list again after each
		// removal.
		none, err := count(nil)
		if err != nil {
			return nil, err
		}
		each := make([]int, len(groups))
		total := none
		for k, g := range groups {
			n, err := count(g)
			if err != nil {
				return nil, err
			}
			each[k] = n - none
			total += each[k]
		}
		kept = slices.Clone(groups)
		for total > *c.TokenLimit && len(kept) > 0 {
			mid := len(kept) / 2
			total -= each[mid]
			kept = slices.Delete(kept, mid, mid+1)
			each = slices.Delete(each, mid, mid+1)
		}
		if len(kept) > 0 && results(kept[0]) {
			kept = kept[1:]
		}
	default:
		return out, nil
	}
	// The kept messages are copied out before out's tail is written over.
	var flat []chat.ModelMessage
	for _, g := range kept {
		flat = append(flat, g...)
	}
	return append(out[:base], flat...), nil
}

// errNoTokenCounter: a token-limited context, but the runtime's model
// client counts no tokens.
var errNoTokenCounter = errors.New("a token_limited context needs token counts, and this server's model client gives none")

// countTokens counts msgs for model m.
func countTokens(tokens chat.TokenCounter, m spec.Model, msgs []chat.ModelMessage) (int, error) {
	if tokens == nil {
		return 0, errNoTokenCounter
	}
	return tokens.CountTokens(m, msgs)
}
