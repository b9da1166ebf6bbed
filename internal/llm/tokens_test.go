package llm

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
)

// TestCountTokensIsAgentChats compares CountTokens with AgentChat's
// count_tokens_openai on model contexts of every kind of message
// (testdata/message_tokens.json, written by e2e/autogen/tokencounts.py).
func TestCountTokensIsAgentChats(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/message_tokens.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Model    string `json:"model"`
		Messages []struct {
			Type    string          `json:"type"`
			Source  string          `json:"source"`
			Content json.RawMessage `json:"content"`
			Thought *string         `json:"thought"`
		} `json:"messages"`
		Tokens int `json:"tokens"`
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no cases")
	}
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range cases {
		var msgs []chat.ModelMessage
		for _, m := range tc.Messages {
			var text string
			isText := json.Unmarshal(m.Content, &text) == nil
			switch {
			case m.Type == "UserMessage":
				msgs = append(msgs, chat.ModelMessage{Role: chat.RoleUser, Name: m.Source, Content: text})
			case m.Type == "AssistantMessage" && isText:
				msgs = append(msgs, chat.ModelMessage{Role: chat.RoleAssistant, Content: text})
			case m.Type == "AssistantMessage":
				var calls []struct{ ID, Arguments, Name string }
				if err := json.Unmarshal(m.Content, &calls); err != nil {
					t.Fatal(err)
				}
				mm := chat.ModelMessage{Role: chat.RoleAssistant}
				if m.Thought != nil {
					mm.Content = *m.Thought
				}
				for _, call := range calls {
					mm.ToolCalls = append(mm.ToolCalls, chat.ToolCall{ID: call.ID, Type: "function",
						Function: chat.FunctionCall{Name: call.Name, Arguments: call.Arguments}})
				}
				msgs = append(msgs, mm)
			case m.Type == "FunctionExecutionResultMessage":
				var res []struct {
					CallID  string `json:"call_id"`
					Content string `json:"content"`
				}
				if err := json.Unmarshal(m.Content, &res); err != nil {
					t.Fatal(err)
				}
				for _, r := range res {
					msgs = append(msgs, chat.ModelMessage{Role: chat.RoleTool, ToolCallID: r.CallID, Content: r.Content})
				}
			default:
				t.Fatalf("case %d: message type %s", i, m.Type)
			}
		}
		got, err := c.CountTokens(spec.Model{Provider: "openai", Model: tc.Model}, msgs)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.Tokens {
			t.Errorf("case %d (%s): %d tokens, AgentChat's %d", i, tc.Model, got, tc.Tokens)
		}
	}
}

// TestCountTokensReplay: the replay client counts the words of text
// messages only.
func TestCountTokensReplay(t *testing.T) {
	t.Parallel()
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.CountTokens(spec.Model{Provider: "replay"}, []chat.ModelMessage{
		{Role: chat.RoleUser, Name: "user", Content: "two  words\n"},
		{Role: chat.RoleAssistant, Content: "three more words"},
		{Role: chat.RoleAssistant, Content: "thought", ToolCalls: []chat.ToolCall{{ID: "c"}}},
		{Role: chat.RoleTool, ToolCallID: "c", Content: "not counted"},
	})
	if err != nil || got != 5 {
		t.Fatalf("replay count = %d, %v; want 5", got, err)
	}
}

func TestVisionTokens(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ w, h, want int }{
		{64, 64, 85 + 170}, {512, 512, 85 + 170}, {513, 512, 85 + 340}, {1024, 1024, 85 + 4*170},
		{4096, 2048, 85 + 6*170}, {800, 3000, 85 + 8*170},
	} {
		if got := visionTokens(tc.w, tc.h); got != tc.want {
			t.Errorf("%dx%d: %d, want %d", tc.w, tc.h, got, tc.want)
		}
	}
}
