package openaiapi

import (
	"strings"

	"github.com/agentd/agentd/internal/chat"
)

// A run's answer is its final message, and which message is final is known
// only when the run ends: a later agent may always speak. So that a
// stream shows the team at work meanwhile, every reply of the run is also
// streamed as it is typed, in the API's place for what a model thinks
// before it answers (reasoning_content of a chat completion chunk, reasoning
// items of a response), and the answer comes as content once the run has
// ended. A client that reads content alone gets exactly the non-streamed
// answer; one that shows reasoning sees each agent type, the final speaker
// included, as it happens (docs/openai.md).

// maxLiveReplies bounds the replies one stream shows live: a run that says
// more shows the rest as its final message only.
const maxLiveReplies = 256

// liveReplies follows the fragments of a run's replies in progress and
// hands them to a stream: begin at a reply's first fragment (i numbers the
// replies from 0), more with each fragment, end with a reply's text so far
// when the stream closes it (at the run's end, or when its model call
// restarted, which voids it: a restarted reply begins again as another).
type liveReplies struct {
	begin func(i int, name string) error
	more  func(i int, name, s string) error
	end   func(i int, text string) error

	open map[replyKey]*liveReply
	n    int
}

type liveReply struct {
	i    int
	text strings.Builder
}

func newLiveReplies() *liveReplies {
	return &liveReplies{open: map[replyKey]*liveReply{},
		begin: func(int, string) error { return nil },
		end:   func(int, string) error { return nil }}
}

// delta takes a fragment of a reply in progress.
func (l *liveReplies) delta(d chat.Delta) error {
	k := replyKey{d.Name, d.AfterSeq}
	r, ok := l.open[k]
	if d.Reset {
		if !ok {
			return nil
		}
		delete(l.open, k)
		return l.end(r.i, r.text.String())
	}
	if d.Content == "" {
		return nil
	}
	if !ok {
		if l.n >= maxLiveReplies {
			return nil
		}
		r = &liveReply{i: l.n}
		l.n++
		l.open[k] = r
		if err := l.begin(r.i, d.Name); err != nil {
			return err
		}
	}
	r.text.WriteString(d.Content)
	return l.more(r.i, d.Name, d.Content)
}

// close ends the replies still open, in the order they began.
func (l *liveReplies) close() error {
	for len(l.open) > 0 {
		var first replyKey
		var r *liveReply
		for k, o := range l.open {
			if r == nil || o.i < r.i {
				first, r = k, o
			}
		}
		delete(l.open, first)
		if err := l.end(r.i, r.text.String()); err != nil {
			return err
		}
	}
	return nil
}
