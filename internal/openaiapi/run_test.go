package openaiapi

import (
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
)

func runStarted(seq int64, run int) chat.Event {
	return chat.WithData(chat.Event{Seq: seq, Type: chat.EventRunStarted, CreatedAt: time.Unix(100, 0)}, chat.RunData{Run: run})
}

func message(seq int64, name, content string, d chat.MessageData) chat.Event {
	return chat.WithData(chat.Event{Seq: seq, Type: chat.EventMessage, Role: chat.RoleAssistant, Name: name, Content: content}, d)
}

func usage(p, c int64) *chat.Usage { return &chat.Usage{PromptTokens: p, CompletionTokens: c} }

// TestRunFollower: the answer is the run's last message that is neither
// its task nor an inner team's; the usage is the run's own (earlier runs'
// are not counted); the pieces are the final reply's fragments when they
// add up to it, after a reset only those sent since.
func TestRunFollower(t *testing.T) {
	t.Parallel()
	end := chat.WithData(chat.Event{Seq: 9, Type: chat.EventChatCompleted}, chat.TerminalData{Status: chat.StatusCompleted, Run: 2})
	for _, c := range []struct {
		name    string
		deltas  []chat.Delta
		events  []chat.Event
		final   string
		pieces  []string
		outcome outcome
		usage   chat.Usage
	}{
		{
			name:   "pieces of the final reply",
			deltas: []chat.Delta{{Name: "a", Content: "early", AfterSeq: 5}, {Name: "b", Content: "Hel", AfterSeq: 6}, {Name: "b", Content: "lo", AfterSeq: 6}},
			events: []chat.Event{
				message(2, "a", "run 1", chat.MessageData{Kind: chat.KindModel, Usage: usage(100, 100)}),
				runStarted(4, 2),
				message(5, "user", "task", chat.MessageData{Kind: chat.KindTask}),
				message(6, "a", "early", chat.MessageData{Kind: chat.KindModel, Usage: usage(3, 4)}),
				chat.WithData(chat.Event{Seq: 7, Type: chat.EventSpeakerSelected}, chat.Selection{Agent: "b", Usage: usage(1, 1)}),
				message(8, "b", "Hello", chat.MessageData{Kind: chat.KindModel, Usage: usage(5, 6)}),
				end,
			},
			final: "Hello", pieces: []string{"Hel", "lo"}, outcome: outcomeCompleted, usage: chat.Usage{PromptTokens: 9, CompletionTokens: 11},
		},
		{
			name:   "a reset voids what came before it",
			deltas: []chat.Delta{{Name: "b", Content: "Hxx", AfterSeq: 5}, {Name: "b", Reset: true, AfterSeq: 5}, {Name: "b", Content: "Hi", AfterSeq: 5}},
			events: []chat.Event{runStarted(4, 2), message(6, "b", "Hi", chat.MessageData{Kind: chat.KindModel}), end},
			final:  "Hi", pieces: []string{"Hi"}, outcome: outcomeCompleted,
		},
		{
			name:   "fragments that do not add up are not used",
			deltas: []chat.Delta{{Name: "b", Content: "Hel", AfterSeq: 5}},
			events: []chat.Event{runStarted(4, 2), message(6, "b", "Hello", chat.MessageData{Kind: chat.KindModel}), end},
			final:  "Hello", outcome: outcomeCompleted,
		},
		{
			name:   "an inner team's message is not the answer",
			events: []chat.Event{runStarted(4, 2), message(5, "b", "outer", chat.MessageData{Kind: chat.KindModel}), message(6, "inner", "inner", chat.MessageData{Kind: chat.KindModel, Team: "b"}), end},
			final:  "outer", outcome: outcomeCompleted,
		},
		{
			name: "a human is asked",
			events: []chat.Event{runStarted(4, 2), message(5, "b", "question", chat.MessageData{Kind: chat.KindModel}),
				{Seq: 6, Type: chat.EventInputRequested}},
			final: "question", outcome: outcomeInputRequired,
		},
		{
			name: "a failed run",
			events: []chat.Event{runStarted(4, 2),
				chat.WithData(chat.Event{Seq: 5, Type: chat.EventChatFailed}, chat.TerminalData{Status: chat.StatusFailed, StopReason: "error", Error: "model unreachable"})},
			outcome: outcomeFailed,
		},
	} {
		f := newRunFollower("c", 2)
		for _, d := range c.deltas {
			f.delta(d)
		}
		ended := false
		for _, e := range c.events {
			if ended = f.event(e); ended {
				break
			}
		}
		res := f.res
		if !ended || res.outcome != c.outcome || finalText(res) != c.final || strings.Join(res.pieces, "|") != strings.Join(c.pieces, "|") || res.usage != c.usage {
			t.Errorf("%s: ended %v outcome %s final %q pieces %q usage %+v; want %s %q %q %+v", c.name, ended, res.outcome, finalText(res), res.pieces, res.usage, c.outcome, c.final, c.pieces, c.usage)
		}
		if c.outcome == outcomeFailed && !strings.Contains(res.detail, "model unreachable") {
			t.Errorf("%s: detail %q does not say why", c.name, res.detail)
		}
	}
}

func TestParseModelAndResponseID(t *testing.T) {
	t.Parallel()
	for model, want := range map[string]string{"team:writer": "writer", "team:writer@3": "writer@3", "team:": "", "writer": "", "team:a@0": "", "team:a@x": "", "team:a b": ""} {
		m, err := parseModel(model)
		got := ""
		if err == nil {
			got = m.ref()
		} else if err.Status != 404 || err.Code != "model_not_found" {
			t.Errorf("parseModel(%q): %+v", model, err)
		}
		if got != want {
			t.Errorf("parseModel(%q) = %q, want %q", model, got, want)
		}
	}
	const id = "01a24369-49d2-7d71-99f2-a24a2b82f677"
	if c, run, ok := parseResponseID(responseID(id, 12)); !ok || c != id || run != 12 {
		t.Errorf("round trip: %q %d %v", c, run, ok)
	}
	for _, bad := range []string{"resp_" + id, "resp_" + id + "_0", "resp_" + id + "_01", "resp_x_1", id + "_1"} {
		if _, _, ok := parseResponseID(bad); ok {
			t.Errorf("parseResponseID(%q) ok", bad)
		}
	}
}

func TestReadConversation(t *testing.T) {
	t.Parallel()
	var probs problems
	conv := readConversation("messages", []inputMessage{
		{Role: "developer", Content: []byte(`"rules"`)},
		{Role: "assistant", Content: []byte(`[{"type": "output_text", "text": "a"}, {"type": "text", "text": "b"}]`)},
		{Role: "user", Content: []byte(`"task"`)},
	}, &probs)
	if probs.err() != nil || conv.task != "task" || len(conv.history) != 2 || conv.history[0].Role != "system" || conv.history[1].Content.Text != "a\nb" {
		t.Errorf("conversation %+v, problems %v", conv, probs)
	}
	probs = nil
	readConversation("input", []inputMessage{{Role: "user", Content: []byte(`[{"type": "input_image"}]`)}, {Role: "assistant", Content: []byte(`"x"`)}}, &probs)
	err := probs.err()
	if err == nil || !strings.Contains(err.Error(), "input[0].content[0].type") || !strings.Contains(err.Error(), "input[1].role") {
		t.Errorf("problems: %v", err)
	}
}
