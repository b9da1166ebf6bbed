package llm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/agentd/agentd/internal/chat"
)

// replayProvider is AutoGen's ReplayChatCompletionClient made stateless: the
// position in the script is req.CallIndex, which the chat derives from its
// log, so a worker rebuilt on another replica after a crash answers the same
// call with the same response.
type replayProvider struct{}

// complete answers with the script's response at req.CallIndex, after its
// delay_ms. A chat waits out a response's delay_ms in complete, so complete keeps its
// frame small (the response is made by replayResponse, after the wait): a
// waiting chat's stack is as large as the frames it waits under.
func (replayProvider) complete(ctx context.Context, req *chat.ModelRequest) (*chat.ModelResponse, error) {
	script := req.Config.Responses
	if req.CallIndex < 0 || req.CallIndex >= len(script) {
		return nil, replayExhausted(req)
	}
	if err := sleep(ctx, time.Duration(script[req.CallIndex].DelayMS)*time.Millisecond); err != nil {
		return nil, err
	}
	return replayResponse(req)
}

//go:noinline
func replayExhausted(req *chat.ModelRequest) error {
	return fmt.Errorf("replay model of %s: asked for response %d, but the script has %d: %w",
		callerName(req.Caller), req.CallIndex+1, len(req.Config.Responses), chat.ErrReplayExhausted)
}

// replayResponse is the scripted response the request's CallIndex names.
//
//go:noinline
func replayResponse(req *chat.ModelRequest) (*chat.ModelResponse, error) {
	r := &req.Config.Responses[req.CallIndex]
	resp := &chat.ModelResponse{Content: r.Content, Thought: r.Thought}
	for i, tc := range r.ToolCalls {
		args, err := replayArguments(tc.Arguments)
		if err != nil {
			return nil, fmt.Errorf("replay model of %s: response %d, tool call %d (%s): %w",
				callerName(req.Caller), req.CallIndex+1, i+1, tc.Name, err)
		}
		resp.ToolCalls = append(resp.ToolCalls, chat.ToolCall{
			ID:       toolCallID(req.ChatID, req.Caller, req.CallIndex, i),
			Type:     "function",
			Function: chat.FunctionCall{Name: tc.Name, Arguments: args},
		})
	}
	if r.Usage != nil {
		resp.Usage = *r.Usage
	} else {
		resp.Usage = estimateUsage(req.Messages, resp)
	}
	return resp, nil
}

// replayArguments renders scripted arguments as the JSON string a model would
// send. Missing or null arguments become "{}". A JSON string is taken as the
// already-encoded argument string, as it appears on the OpenAI wire; that also
// lets a script send arguments that are not valid JSON, to exercise the tool
// error path.
func replayArguments(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("arguments: %w", err)
		}
		return s, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", fmt.Errorf("arguments: %w", err)
	}
	return buf.String(), nil
}

// toolCallID derives a tool call id from where the call sits in the chat.
// It is deterministic because a turn redone after a crash must produce the
// same ids: tool servers dedupe on Idempotency-Key <chat_id>/<tool_call_id>
// (docs/tools.md, docs/operations.md). Fields are length-prefixed so that no two different
// inputs hash the same bytes.
func toolCallID(chatID, caller string, callIndex, index int) string {
	h := sha256.New()
	for _, s := range []string{chatID, caller} {
		_ = binary.Write(h, binary.BigEndian, uint64(len(s)))
		h.Write([]byte(s))
	}
	_ = binary.Write(h, binary.BigEndian, int64(callIndex))
	_ = binary.Write(h, binary.BigEndian, int64(index))
	return "call_" + hex.EncodeToString(h.Sum(nil)[:12])
}

// estimateUsage stands in for a tokenizer when a script gives no usage, so
// that token_usage termination and the usage totals still move: one token per
// four characters (runes), rounded up. The prompt counts the content, tool
// call names and arguments of every request message; the completion counts
// the same of the response.
func estimateUsage(msgs []chat.ModelMessage, resp *chat.ModelResponse) chat.Usage {
	prompt := 0
	for _, m := range msgs {
		prompt += utf8.RuneCountInString(m.Content) + toolCallChars(m.ToolCalls)
	}
	completion := utf8.RuneCountInString(resp.Content) + toolCallChars(resp.ToolCalls)
	return chat.Usage{PromptTokens: int64((prompt + 3) / 4), CompletionTokens: int64((completion + 3) / 4)}
}

func toolCallChars(calls []chat.ToolCall) int {
	n := 0
	for _, tc := range calls {
		n += utf8.RuneCountInString(tc.Function.Name) + utf8.RuneCountInString(tc.Function.Arguments)
	}
	return n
}

// sleep waits for d or until ctx is done, whichever comes first, and returns
// ctx.Err() in the second case. A ctx that is already done fails even for
// d <= 0, so a cancelled turn never gets a response.
func sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	// One context that ends with either: a receive waits under smaller
	// runtime frames than a select.
	wctx, cancel := context.WithTimeout(ctx, d)
	<-wctx.Done()
	cancel()
	return ctx.Err()
}
