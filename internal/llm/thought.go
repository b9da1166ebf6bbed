package llm

import (
	"strings"
)

// R1-style reasoning tags: DeepSeek R1 and the models trained like it put
// their reasoning at the start of the content, between these.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// splitThought separates a reply's reasoning from its content, as
// AgentChat's clients fill CreateResult.thought: the reasoning the server
// sent apart (reasoning_content) when there is some, else a <think>…</think>
// block that opens the content (after white space). The content keeps
// everything else, trimmed of the white space the block leaves; a <think>
// elsewhere in a reply, or one that is never closed, is content.
func splitThought(reasoning, content string) (thought, rest string) {
	if reasoning != "" {
		return reasoning, content
	}
	trimmed := strings.TrimLeft(content, " \t\r\n")
	body, ok := strings.CutPrefix(trimmed, thinkOpen)
	if !ok {
		return "", content
	}
	inner, after, ok := strings.Cut(body, thinkClose)
	if !ok {
		return "", content
	}
	return strings.TrimSpace(inner), strings.TrimLeft(after, " \t\r\n")
}

// thinkSplitter holds a leading <think>…</think> back from a streamed
// reply, so that clients watching the deltas see only what ends up in the
// message's content. Deltas are fed in order; feed returns what may be
// shown now.
type thinkSplitter struct {
	state   int // splitUndecided, splitInThink, splitAfter, splitPass
	pending strings.Builder
}

const (
	splitUndecided = iota // only white space and a prefix of <think> so far
	splitInThink          // inside the block: held back
	splitAfter            // the block ended: leading white space is dropped
	splitPass             // no block (or it ended): everything is shown
)

func (t *thinkSplitter) feed(d string) string {
	switch t.state {
	case splitPass:
		return d
	case splitAfter:
		d = strings.TrimLeft(d, " \t\r\n")
		if d != "" {
			t.state = splitPass
		}
		return d
	}
	t.pending.WriteString(d)
	held := t.pending.String()
	if t.state == splitUndecided {
		lead := strings.TrimLeft(held, " \t\r\n")
		switch {
		case len(lead) < len(thinkOpen) && strings.HasPrefix(thinkOpen, lead):
			return "" // may still become <think>
		case !strings.HasPrefix(lead, thinkOpen):
			t.state = splitPass
			t.pending.Reset()
			return held
		}
		t.state = splitInThink
	}
	_, after, ok := strings.Cut(held, thinkClose)
	if !ok {
		return ""
	}
	t.pending.Reset()
	t.state = splitAfter
	return t.feed(after)
}

// pass shows everything from now on: the reasoning came apart
// (reasoning_content), so the content is all reply.
func (t *thinkSplitter) pass() {
	if t.state == splitUndecided && t.pending.Len() == 0 {
		t.state = splitPass
	}
}

// flush returns what is still held back when the stream ends: an unclosed
// <think> block is content after all (splitThought keeps it).
func (t *thinkSplitter) flush() string {
	if t.state == splitInThink || t.state == splitUndecided {
		s := t.pending.String()
		t.pending.Reset()
		t.state = splitPass
		return s
	}
	return ""
}
