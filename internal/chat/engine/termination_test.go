package engine

import (
	"cmp"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/spec"
)

func cond(t *testing.T, s string) *spec.Condition {
	t.Helper()
	var c spec.Condition
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

func TestTermination(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		name, content string
		usage         chat.Usage
		at            time.Duration
		typ, thought  string // typ: TextMessage unless set
	}
	tests := []struct {
		name    string
		cond    string
		steps   []step // the first is the task
		firesAt int    // index of the step after which the tree fires; -1 never
		reason  chat.StopReason
		detail  string
	}{
		{"max_messages counts the task", `{"max_messages": 3}`,
			[]step{{name: "user"}, {name: "a"}, {name: "b"}}, 2, chat.StopMaxMessages, "Maximum number of messages 3 reached, current message count: 3"},
		{"text_mention ignores the task", `{"text_mention": {"text": "DONE"}}`,
			[]step{{name: "user", content: "say DONE"}, {name: "a", content: "no"}, {name: "b", content: "DONE!"}}, 2, chat.StopTextMention, "Text 'DONE' mentioned"},
		{"text_mention sources", `{"text_mention": {"text": "DONE", "sources": ["b"]}}`,
			[]step{{name: "user"}, {name: "a", content: "DONE"}, {name: "b", content: "DONE"}}, 2, chat.StopTextMention, "Text 'DONE' mentioned"},
		{"text_match", `{"text_match": {"pattern": "FINAL ANSWER: \\d+"}}`,
			[]step{{name: "user", content: "FINAL ANSWER: 1"}, {name: "a", content: "FINAL ANSWER: x"}, {name: "a", content: "FINAL ANSWER: 42"}}, 2, chat.StopTextMatch, "Text matched pattern 'FINAL ANSWER: \\d+'"},
		{"token_usage", `{"token_usage": {"max_total_tokens": 30}}`,
			[]step{{name: "user"}, {name: "a", usage: chat.Usage{PromptTokens: 10, CompletionTokens: 10}}, {name: "a", usage: chat.Usage{PromptTokens: 5, CompletionTokens: 5}}}, 2, chat.StopTokenUsage, "Token usage limit reached, total token count: 30, prompt token count: 15, completion token count: 15."},
		{"source_match", `{"source_match": {"sources": ["b"]}}`,
			[]step{{name: "user"}, {name: "a"}, {name: "b"}}, 2, chat.StopSourceMatch, "'b' answered"},
		{"timeout", `{"timeout_s": 5}`,
			[]step{{name: "user"}, {name: "a", at: 4 * time.Second}, {name: "a", at: 6 * time.Second}}, 2, chat.StopTimeout, "Timeout of 5 seconds reached"},
		{"any takes the first that fired", `{"any": [{"max_messages": 10}, {"text_mention": {"text": "X"}}]}`,
			[]step{{name: "user"}, {name: "a", content: "X"}}, 1, chat.StopTextMention, "Text 'X' mentioned"},
		{"all waits for every part, in any order", `{"all": [{"text_mention": {"text": "X"}}, {"source_match": {"sources": ["b"]}}]}`,
			[]step{{name: "user"}, {name: "b"}, {name: "a"}, {name: "a", content: "X"}}, 3, chat.StopSourceMatch, "'b' answered, Text 'X' mentioned"},
		{"max_messages leaves out agent events", `{"max_messages": 3}`,
			[]step{{name: "user"}, {name: "a", typ: chat.TypeToolCallRequestEvent}, {name: "a", typ: chat.TypeToolCallExecutionEvent}, {name: "a", thought: "hm"}, {name: "b"}}, 4, chat.StopMaxMessages,
			"Maximum number of messages 3 reached, current message count: 3"},
		{"max_messages with agent events counts them and thoughts", `{"max_messages": 5, "include_agent_event": true}`,
			[]step{{name: "user"}, {name: "a", typ: chat.TypeToolCallRequestEvent, content: "first"}, {name: "a", typ: chat.TypeToolCallExecutionEvent}, {name: "b"}}, 3, chat.StopMaxMessages,
			"Maximum number of messages 5 reached, current message count: 5"},
		{"text_message fires on the task", `{"text_message": {}}`,
			[]step{{name: "user", content: "hi"}, {name: "a"}}, 0, chat.StopTextMessage, "Text message received from 'user'"},
		{"text_message from a source", `{"text_message": {"source": "b"}}`,
			[]step{{name: "user"}, {name: "b", typ: chat.TypeToolCallRequestEvent}, {name: "b", typ: chat.TypeToolCallSummaryMessage}, {name: "a"}, {name: "b"}}, 4, chat.StopTextMessage,
			"Text message received from 'b'"},
		{"never", `{"text_mention": {"text": "X"}}`,
			[]step{{name: "user", content: "X"}, {name: "a"}}, -1, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			term := newTerminator(cond(t, tt.cond))
			var usage chat.Usage
			fired, msgs, events := -1, 0, 0
			for i, s := range tt.steps {
				usage = usage.Add(s.usage)
				m := termMsg{Message: chat.Message{Type: cmp.Or(s.typ, chat.TypeTextMessage), Name: s.name, Content: s.content, Thought: s.thought}, task: i == 0}
				if isChatMessage(m.Message) {
					msgs++
				}
				events += agentChatItems(m.Message)
				st := termState{messages: msgs, events: events, usage: usage, start: start, now: start.Add(s.at)}
				if term.observe([]termMsg{m}, st) {
					fired = i
					break
				}
			}
			if fired != tt.firesAt {
				t.Fatalf("fired after step %d, want %d", fired, tt.firesAt)
			}
			if fired < 0 {
				return
			}
			reason, detail := term.result()
			if reason != tt.reason || detail != tt.detail {
				t.Fatalf("result = %q %q, want %q %q", reason, detail, tt.reason, tt.detail)
			}
		})
	}
}

func TestTerminatorDeadline(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	term := newTerminator(cond(t, `{"any": [{"timeout_s": 9}, {"all": [{"timeout_s": 2.5}, {"max_messages": 100}]}]}`))
	d, ok := term.deadline(start)
	if !ok || !d.Equal(start.Add(2500*time.Millisecond)) {
		t.Fatalf("deadline = %v %v", d, ok)
	}
	none := newTerminator(nil)
	if _, ok := none.deadline(start); ok {
		t.Fatal("no conditions, but a deadline")
	}
}

// TestSecondsDoesNotOverflow: the largest timeout a spec may set is a
// duration, not an overflow.
func TestSecondsDoesNotOverflow(t *testing.T) {
	if d := Seconds(1e10); d <= 0 {
		t.Fatalf("seconds(1e10) = %v: overflowed", d)
	}
}
