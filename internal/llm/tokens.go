package llm

import (
	"fmt"
	"strings"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/pytext"
	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/tokencount"
)

var _ chat.TokenCounter = (*Client)(nil)

// CountTokens counts msgs as AgentChat's model client for the model does
// (ChatCompletionClient.count_tokens), which is what a token-limited model
// context keeps within its limit:
//
//   - replay: the words (whitespace-separated) of every message whose
//     content is text, as ReplayChatCompletionClient counts; tool calls,
//     tool results and images count nothing;
//   - every other provider: count_tokens_openai of AgentChat's OpenAI
//     client, with tiktoken's encoding for the model's name (cl100k_base
//     for a name tiktoken does not know): 3 per message, the tokens of
//     each field of the message as the client sends it (role, name plus
//     one, content, tool_call_id, and the tool calls as Python's
//     json.dumps writes them), images by their size, and 3 for the reply.
func (c *Client) CountTokens(m spec.Model, msgs []chat.ModelMessage) (int, error) {
	if m.Provider == "replay" {
		n := 0
		for _, msg := range msgs {
			if msg.Role == chat.RoleTool || len(msg.ToolCalls) > 0 || len(msg.Parts()) > 0 {
				continue
			}
			n += len(strings.Fields(msg.Content))
		}
		return n, nil
	}
	enc := tokencount.EncodingForModel(m.Model)
	n := 0
	count := func(s string) error {
		k, err := c.tokens.Count(enc, s)
		n += k
		return err
	}
	for i, msg := range msgs {
		// 3 per AgentChat message: the results of one model reply's calls
		// (consecutive tool messages) are one.
		if msg.Role != chat.RoleTool || i == 0 || msgs[i-1].Role != chat.RoleTool {
			n += 3
		}
		var err error
		switch {
		case msg.Role == chat.RoleTool:
			err = countAll(count, msg.Content, "tool", msg.ToolCallID)
		case msg.Role == chat.RoleAssistant && len(msg.ToolCalls) > 0:
			err = countAll(count, "assistant", pyToolCalls(msg.ToolCalls))
			if err == nil && msg.Content != "" {
				err = count(msg.Content) // the thought, sent as the content
			}
		case msg.Role == chat.RoleAssistant, msg.Role == chat.RoleSystem:
			err = countAll(count, msg.Role, msg.Content)
		case msg.Role == chat.RoleUser:
			n++ // the name
			err = countAll(count, "user", msg.Name)
			if err == nil && len(msg.Parts()) > 0 {
				for _, p := range msg.Parts() {
					if p.Image != nil {
						n += visionTokens(p.Image.Width, p.Image.Height)
						continue
					}
					var b strings.Builder
					b.WriteString(`{"type": "text", "text": `)
					pytext.WriteJSONString(&b, p.Text, true)
					b.WriteString("}")
					if err = count(b.String()); err != nil {
						break
					}
				}
			} else if err == nil {
				err = count(msg.Content)
			}
		default:
			err = fmt.Errorf("unknown role %q", msg.Role)
		}
		if err != nil {
			return 0, fmt.Errorf("count tokens: %w", err)
		}
	}
	return n + 3, nil
}

func countAll(count func(string) error, texts ...string) error {
	for _, t := range texts {
		if err := count(t); err != nil {
			return err
		}
	}
	return nil
}

// visionTokens is AgentChat's calculate_vision_tokens for an image of
// that size at detail "auto": scaled into 2048x2048, then its short side
// to 768 when both sides exceed it, 85 tokens plus 170 per 512-pixel tile.
func visionTokens(width, height int) int {
	const maxLong, maxShort, tile = 2048, 768, 512
	w, h := float64(width), float64(height)
	if w > maxLong || h > maxLong {
		if ar := w / h; ar > 1 {
			w, h = maxLong, float64(int(maxLong/ar))
		} else {
			h, w = maxLong, float64(int(maxLong*ar))
		}
	}
	ar := w / h
	if w > maxShort && h > maxShort {
		if ar > 1 {
			h, w = maxShort, float64(int(maxShort*ar))
		} else {
			w, h = maxShort, float64(int(maxShort/ar))
		}
	}
	tiles := ceilDiv(int(w), tile) * ceilDiv(int(h), tile)
	return 85 + 170*tiles
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// pyToolCalls writes tool calls as AgentChat's OpenAI client holds them
// (id, function {arguments, name}, type), dumped by Python's json.dumps.
func pyToolCalls(calls []chat.ToolCall) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, c := range calls {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(`{"id": `)
		pytext.WriteJSONString(&b, c.ID, true)
		b.WriteString(`, "function": {"arguments": `)
		pytext.WriteJSONString(&b, c.Function.Arguments, true)
		b.WriteString(`, "name": `)
		pytext.WriteJSONString(&b, c.Function.Name, true)
		b.WriteString(`}, "type": "function"}`)
	}
	b.WriteByte(']')
	return b.String()
}
