package engine

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/spec"
)

// termState is what the termination conditions look at besides the delta:
// counts and totals of this run (the task and what followed it; resumed
// history does not count), derived from the log.
type termState struct {
	// messages counts the chat messages (AgentChat's BaseChatMessage: not an
	// assistant's tool-call and tool-result events), as MaxMessageTermination
	// does.
	messages int
	// events counts every message of the run, the agents' inner events
	// (and the thoughts AgentChat sends as events of their own) too: what
	// MaxMessageTermination counts with include_agent_event.
	events int
	// usage sums the agents' model usage; the selector's is not part of it,
	// as in AgentChat, where only agents' messages carry models_usage.
	usage chat.Usage
	start time.Time // when the chat first ran; zero before
	now   time.Time
}

// termMsg is one message of a delta: what one agent response (its inner
// events and its final message), the task or a human message appended.
type termMsg struct {
	chat.Message
	// task marks the task message: it counts, but text_mention never
	// matches it (a departure from AutoGen, see docs/autogen.md).
	task bool
	// functions are the calls a tool message answers.
	functions []string
	// stop: the message ended a turn after POST /stop asked the run to
	// end (what an external condition waits for).
	stop bool
}

// termNode is one node of a termination tree. A node that fired stays fired,
// which is what `all` needs ("each part must have fired, in any order"). The
// tree is rebuilt from the log by feeding it every message again, so it holds
// no state the log does not.
type termNode struct {
	cond     *spec.Condition
	re       *regexp.Regexp
	children []*termNode
	fired    bool
	reason   chat.StopReason
	detail   string
	// order is a global counter value at firing, so that `any`/`all` can
	// tell which part fired first.
	order int
}

// terminator evaluates a spec's termination tree.
type terminator struct {
	root  *termNode
	clock int
}

func newTerminator(c *spec.Condition) terminator {
	if c == nil {
		return terminator{}
	}
	return terminator{root: buildTermNode(c)}
}

func buildTermNode(c *spec.Condition) *termNode {
	n := &termNode{cond: c}
	if c.TextMatch != nil {
		n.re = regexp.MustCompile(c.TextMatch.Pattern) // validated at create time
	}
	for i := range c.Any {
		n.children = append(n.children, buildTermNode(&c.Any[i]))
	}
	for i := range c.All {
		n.children = append(n.children, buildTermNode(&c.All[i]))
	}
	return n
}

// observe evaluates the tree on a delta, as AgentChat's group chat manager
// calls its condition with each agent response (the inner events and the
// final message), and reports whether the whole tree has fired. The delta is
// empty when only time passed.
func (t *terminator) observe(delta []termMsg, st termState) bool {
	if t.root == nil {
		return false
	}
	t.eval(t.root, delta, st)
	return t.root.fired
}

// result is the stop reason and detail of a fired tree.
func (t *terminator) result() (chat.StopReason, string) {
	return t.root.reason, t.root.detail
}

// deadline is when the earliest unfired timeout condition fires, if any.
func (t *terminator) deadline(start time.Time) (time.Time, bool) {
	if t.root == nil || start.IsZero() {
		return time.Time{}, false
	}
	var best time.Time
	var walk func(n *termNode)
	walk = func(n *termNode) {
		if n.fired {
			return
		}
		if n.cond.TimeoutS != nil {
			d := start.Add(Seconds(*n.cond.TimeoutS))
			if best.IsZero() || d.Before(best) {
				best = d
			}
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(t.root)
	return best, !best.IsZero()
}

func (t *terminator) fire(n *termNode, reason chat.StopReason, detail string) {
	t.clock++
	n.fired, n.reason, n.detail, n.order = true, reason, detail, t.clock
}

func (t *terminator) eval(n *termNode, delta []termMsg, st termState) {
	if n.fired {
		return
	}
	c := n.cond
	switch {
	case c.MaxMessages != nil:
		count := st.messages
		if c.IncludeAgentEvent != nil && *c.IncludeAgentEvent {
			count = st.events
		}
		if count >= *c.MaxMessages {
			t.fire(n, chat.StopMaxMessages, fmt.Sprintf("Maximum number of messages %d reached, current message count: %d", *c.MaxMessages, count))
		}
	case c.TextMessage != nil:
		// The task counts too, as AgentChat checks its conditions on the
		// task messages before any turn.
		for _, m := range delta {
			if m.Type == chat.TypeTextMessage && (c.TextMessage.Source == "" || m.Name == c.TextMessage.Source) {
				t.fire(n, chat.StopTextMessage, fmt.Sprintf("Text message received from '%s'", m.Name))
				return
			}
		}
	case c.TextMention != nil:
		for _, m := range delta {
			if !m.task && fromSources(&m.Message, c.TextMention.Sources) && strings.Contains(termText(m.Message), c.TextMention.Text) {
				t.fire(n, chat.StopTextMention, fmt.Sprintf("Text '%s' mentioned", c.TextMention.Text))
				return
			}
		}
	case c.TextMatch != nil:
		for _, m := range delta {
			if !m.task && n.re.MatchString(textMatchScope(m.Content)) {
				t.fire(n, chat.StopTextMatch, fmt.Sprintf("Text matched pattern '%s'", c.TextMatch.Pattern))
				return
			}
		}
	case c.TokenUsage != nil:
		u := c.TokenUsage
		total := st.usage.PromptTokens + st.usage.CompletionTokens
		if u.MaxTotalTokens != nil && total >= *u.MaxTotalTokens ||
			u.MaxPromptTokens != nil && st.usage.PromptTokens >= *u.MaxPromptTokens ||
			u.MaxCompletionTokens != nil && st.usage.CompletionTokens >= *u.MaxCompletionTokens {
			t.fire(n, chat.StopTokenUsage, fmt.Sprintf("Token usage limit reached, total token count: %d, prompt token count: %d, completion token count: %d.",
				total, st.usage.PromptTokens, st.usage.CompletionTokens))
		}
	case c.TimeoutS != nil:
		if !st.start.IsZero() && !st.now.Before(st.start.Add(Seconds(*c.TimeoutS))) {
			t.fire(n, chat.StopTimeout, fmt.Sprintf("Timeout of %g seconds reached", *c.TimeoutS))
		}
	case c.Handoff != nil:
		for _, m := range delta {
			if m.Type == chat.TypeHandoffMessage && m.Handoff == c.Handoff.Target {
				t.fire(n, chat.StopHandoff, fmt.Sprintf("Handoff to %s from %s detected.", m.Handoff, m.Name))
				return
			}
		}
	case c.FunctionCall != nil:
		for _, m := range delta {
			if slices.Contains(m.functions, c.FunctionCall.Name) {
				t.fire(n, chat.StopFunctionCall, fmt.Sprintf("Function '%s' was executed.", c.FunctionCall.Name))
				return
			}
		}
	case c.External != nil:
		for _, m := range delta {
			if m.stop {
				t.fire(n, chat.StopExternal, externalDetail)
				return
			}
		}
	case c.SourceMatch != nil:
		for _, m := range delta {
			if !m.task && slices.Contains(c.SourceMatch.Sources, m.Name) {
				t.fire(n, chat.StopSourceMatch, fmt.Sprintf("'%s' answered", m.Name))
				return
			}
		}
	case c.Any != nil:
		// OrTerminationCondition: every part sees the delta; those that fire
		// on it are joined with ", " in list order; stop_reason is the first.
		var fired []*termNode
		for _, ch := range n.children {
			if ch.fired {
				continue
			}
			t.eval(ch, delta, st)
			if ch.fired {
				fired = append(fired, ch)
			}
		}
		if len(fired) > 0 {
			details := make([]string, len(fired))
			for i, ch := range fired {
				details[i] = ch.detail
			}
			t.fire(n, fired[0].reason, strings.Join(details, ", "))
		}
	case c.All != nil:
		// AndTerminationCondition: the parts that have not fired see the
		// delta; once all have, their texts are joined with ", " in the
		// order they fired.
		for _, ch := range n.children {
			t.eval(ch, delta, st)
		}
		if !slices.ContainsFunc(n.children, func(ch *termNode) bool { return !ch.fired }) {
			ordered := slices.Clone(n.children)
			slices.SortStableFunc(ordered, func(a, b *termNode) int { return a.order - b.order })
			details := make([]string, len(ordered))
			for i, ch := range ordered {
				details[i] = ch.detail
			}
			t.fire(n, ordered[0].reason, strings.Join(details, ", "))
		}
	}
}

// externalDetail is AgentChat's ExternalTermination stop text.
const externalDetail = "External termination requested"

// hasExternal reports whether a termination tree holds an external
// condition.
func hasExternal(c *spec.Condition) bool {
	if c == nil {
		return false
	}
	if c.External != nil {
		return true
	}
	return slices.ContainsFunc(c.Any, func(x spec.Condition) bool { return hasExternal(&x) }) ||
		slices.ContainsFunc(c.All, func(x spec.Condition) bool { return hasExternal(&x) })
}

// termText is the text TextMentionTermination searches in a message
// (AgentChat's to_text): the content, and for tool events also the calls'
// names and arguments or the results' contents, which AgentChat searches in
// the events' printed form.
func termText(m chat.Message) string {
	if len(m.ToolCalls) == 0 && len(m.ToolResponses) == 0 {
		return m.Content
	}
	parts := []string{m.Content}
	for _, c := range m.ToolCalls {
		parts = append(parts, c.Function.Name, c.Function.Arguments)
	}
	for _, r := range m.ToolResponses {
		parts = append(parts, r.Content)
	}
	return strings.Join(parts, "\n")
}

func fromSources(m *chat.Message, sources []string) bool {
	return len(sources) == 0 || slices.Contains(sources, m.Name)
}

// clone returns an independent copy of the tree and its firing state. It
// is a value, kept in the state itself: a chat without termination
// conditions (no tree) clones without allocating.
func (t *terminator) clone() terminator {
	c := terminator{clock: t.clock}
	if t.root != nil {
		c.root = t.root.clone()
	}
	return c
}

func (n *termNode) clone() *termNode {
	c := *n
	c.children = make([]*termNode, len(n.children))
	for i, ch := range n.children {
		c.children[i] = ch.clone()
	}
	return &c
}

// Seconds converts a spec's seconds to a duration, saturating instead of
// overflowing (validation bounds them; this keeps a stored spec from before
// the bound safe).
func Seconds(s float64) time.Duration {
	const max = float64(1<<63-1) / float64(time.Second)
	switch {
	case s >= max:
		return time.Duration(1<<63 - 1)
	case s <= 0:
		return 0
	}
	return time.Duration(s * float64(time.Second))
}
