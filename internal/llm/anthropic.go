package llm

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
)

// defaultAnthropicMaxTokens is max_tokens when the spec sets none: the
// Messages API requires it, and AgentChat's Anthropic client sends 4096.
const defaultAnthropicMaxTokens = spec.DefaultAnthropicMaxTokens

// anthropicWire calls Anthropic's Messages API through Anthropic's Go SDK.
// The SDK's own retries are off (ours honour the endpoint's limits and
// policy) and it reads no environment: the key and URL are the endpoint's.
type anthropicWire struct {
	ep     *Endpoint
	client anthropic.Client
}

func newAnthropicWire(ep *Endpoint, baseURL string, hc doer) *anthropicWire {
	return &anthropicWire{ep: ep, client: anthropic.NewClient(
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(baseURL),
		option.WithAPIKey(ep.APIKey),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
	)}
}

func (w *anthropicWire) prepare(req *chat.ModelRequest) (tryFunc, error) {
	params, err := anthropicRequest(req)
	if err != nil {
		return nil, fmt.Errorf("anthropic request for %s: %w", callerName(req.Caller), err)
	}
	return func(ctx context.Context, a *attempt, onDelta func(string)) (*chat.ModelResponse, error) {
		if onDelta == nil {
			return w.tryWhole(ctx, req, &params)
		}
		return w.tryStream(ctx, a, req, &params, onDelta)
	}, nil
}

// tryWhole makes one attempt without streaming.
//
//go:noinline
func (w *anthropicWire) tryWhole(ctx context.Context, req *chat.ModelRequest, params *anthropic.MessageNewParams) (*chat.ModelResponse, error) {
	msg, err := w.client.Messages.New(ctx, *params)
	if err != nil {
		return nil, err
	}
	return anthropicResponse(req, msg), nil
}

// tryStream makes one streaming attempt: the reply's text goes to onDelta
// as it arrives, and the events are put together into the message. It
// reads the events as the SDK's stream does: pings and events without
// data are skipped, and an error event is the attempt's error.
//
// A chat waiting on a streamed reply waits under tryStream and the attempt
// function prepare returns, and its goroutine's stack is as large as the
// frames it waits under. The SDK's values are large: an event or a
// message, with its JSON metadata, is about 5 KB, and the SDK's stream
// type keeps two events in the frame it reads the body under. So tryStream
// reads the events with the SDK's decoder itself, and the values are made
// and read in frames of their own (newAnthropicReply, anthropicReply.add),
// gone while the reply streams: such a chat's stack is 8 KB, where it was
// 32 (the frames it waited under took 25 KB).
func (w *anthropicWire) tryStream(ctx context.Context, a *attempt, req *chat.ModelRequest, params *anthropic.MessageNewParams, onDelta func(string)) (*chat.ModelResponse, error) {
	resp, err := w.openStream(ctx, params)
	if err != nil {
		return nil, err
	}
	events := ssestream.NewDecoder(resp)
	if events == nil {
		return nil, errors.New("the response has no body")
	}
	defer events.Close()
	reply := newAnthropicReply()
	for events.Next() {
		if err := reply.add(resp, events.Event(), onDelta); err != nil {
			return nil, err
		}
	}
	if err := events.Err(); err != nil {
		return nil, err
	}
	a.drainBody()
	if reply.msg.ID == "" {
		return nil, errors.New("the event stream ended without a message")
	}
	return anthropicResponse(req, &reply.msg), nil
}

// openStream sends a streamed call, as the SDK's Messages.NewStreaming
// does, and returns the response whose body is the event stream.
//
//go:noinline
func (w *anthropicWire) openStream(ctx context.Context, params *anthropic.MessageNewParams) (*http.Response, error) {
	var resp *http.Response
	if err := w.client.Post(ctx, "v1/messages", *params, &resp, option.WithJSONSet("stream", true)); err != nil {
		return nil, err
	}
	return resp, nil
}

// anthropicReply puts a streamed reply's events together: ev is where
// each event is decoded, msg the message they make.
type anthropicReply struct {
	ev  anthropic.MessageStreamEventUnion
	msg anthropic.Message
}

// newAnthropicReply makes an anthropicReply on the heap: not inlined, so
// that it is not made in the frame of tryStream.
//
//go:noinline
func newAnthropicReply() *anthropicReply { return new(anthropicReply) }

// add adds an event of the stream of resp to the message; a reply's text
// goes to onDelta.
//
//go:noinline
func (r *anthropicReply) add(resp *http.Response, e ssestream.Event, onDelta func(string)) error {
	data := bytes.TrimSuffix(e.Data, []byte("\n"))
	switch {
	case e.Type == "ping" || e.Type == "":
		return nil
	case e.Type == "error":
		return streamError(resp, data)
	case len(data) == 0:
		return nil
	}
	r.ev = anthropic.MessageStreamEventUnion{}
	if err := json.Unmarshal(e.Data, &r.ev); err != nil {
		return err
	}
	if err := r.msg.Accumulate(r.ev); err != nil {
		return err
	}
	// Only the reply's text is streamed: thinking is the thought, which
	// clients see on the message.
	if r.ev.Type == "content_block_delta" && r.ev.Delta.Type == "text_delta" && r.ev.Delta.Text != "" {
		onDelta(r.ev.Delta.Text)
	}
	return nil
}

// streamError is the error an error event of the stream of resp carries,
// data: the API's error, as the SDK makes it.
func streamError(resp *http.Response, data []byte) error {
	e := &anthropic.Error{StatusCode: resp.StatusCode, Request: resp.Request, Response: resp,
		RequestID: resp.Header.Get("request-id"), WorkspaceID: resp.Header.Get("anthropic-workspace-id")}
	if e.UnmarshalJSON(data) != nil {
		return fmt.Errorf("received error while streaming: %s", data)
	}
	return e
}

// anthropicRequest maps a chat model request onto the Messages API: the
// system messages become the top-level system prompt; a tool message
// becomes a user message of tool_result blocks; consecutive messages of one
// role are merged into one message (the API wants turns to alternate), and
// empty texts are left out (the API rejects empty text blocks). Options the
// API does not have (temperature, top_p, seed, response_format, penalties,
// reasoning_effort) are refused at create time (Client.CheckModel), so none
// reach here; stop goes as stop_sequences.
func anthropicRequest(req *chat.ModelRequest) (anthropic.MessageNewParams, error) {
	mc := req.Config
	p := anthropic.MessageNewParams{Model: anthropic.Model(mc.Model), MaxTokens: defaultAnthropicMaxTokens}
	if mc.Model == "" {
		return p, errors.New("model config names no model")
	}
	if mc.MaxTokens != nil {
		p.MaxTokens = int64(*mc.MaxTokens)
	}
	p.StopSequences = mc.Stop
	thinking := mc.ThinkingEnabled()
	switch {
	case thinking:
		p.Thinking = anthropic.ThinkingConfigParamOfEnabled(int64(*mc.Thinking.BudgetTokens))
	case mc.Thinking != nil && mc.Thinking.Type == spec.ThinkingDisabled:
		p.Thinking = anthropic.ThinkingConfigParamUnion{OfDisabled: &anthropic.ThinkingConfigDisabledParam{}}
	}
	loop := toolLoopStart(req.Messages)
	var (
		system   []string
		msgs     []anthropic.MessageParam
		role     string // the role of the last message in msgs
		used     = map[string]bool{}
		usedList []string
	)
	add := func(r string, blocks ...anthropic.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if r == role && len(msgs) > 0 {
			last := &msgs[len(msgs)-1]
			if r == chat.RoleUser {
				last.OfUser.Content = append(last.OfUser.Content, blocks...)
			} else {
				last.OfAssistant.Content = mergeAssistant(last.OfAssistant.Content, blocks)
			}
			return
		}
		role = r
		if r == chat.RoleUser {
			msgs = append(msgs, anthropic.NewUserMessage(blocks...))
		} else {
			msgs = append(msgs, anthropic.NewAssistantMessage(blocks...))
		}
	}
	var errs []error
	for i, m := range req.Messages {
		if m.Role == chat.RoleUser && len(m.Parts()) > 0 {
			// A MultiModalMessage: a text block per text, an image block
			// per image (base64 PNG, as AgentChat's client sends it).
			var blocks []anthropic.ContentBlockParamUnion
			for _, p := range m.Parts() {
				if p.Image == nil {
					if strings.TrimSpace(p.Text) != "" { // the API refuses blank text blocks
						blocks = append(blocks, anthropic.NewTextBlock(p.Text))
					}
					continue
				}
				data, err := imagePNG(p.Image)
				if err != nil {
					errs = append(errs, fmt.Errorf("message %d: %w", i, err))
					continue
				}
				blocks = append(blocks, anthropic.NewImageBlockBase64("image/png", base64.StdEncoding.EncodeToString(data)))
			}
			add(chat.RoleUser, blocks...)
			continue
		}
		switch m.Role {
		case chat.RoleSystem:
			if strings.TrimSpace(m.Content) != "" {
				system = append(system, m.Content)
			}
		case chat.RoleUser:
			if strings.TrimSpace(m.Content) != "" {
				add(chat.RoleUser, anthropic.NewTextBlock(m.Content))
			}
		case chat.RoleAssistant:
			var blocks []anthropic.ContentBlockParamUnion
			if thinking && i >= loop {
				blocks = thinkingBlocks(m.Thinking())
			}
			if strings.TrimSpace(m.Content) != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for _, tc := range m.ToolCalls {
				name := sanitizeName(tc.Function.Name)
				if !used[name] {
					used[name] = true
					usedList = append(usedList, name)
				}
				blocks = append(blocks, anthropic.NewToolUseBlock(toolUseID(tc.ID), toolInput(tc.Function.Arguments), name))
			}
			add(chat.RoleAssistant, blocks...)
		case chat.RoleTool:
			if m.ToolCallID == "" {
				errs = append(errs, fmt.Errorf("message %d: tool message without tool_call_id", i))
				continue
			}
			b := anthropic.ToolResultBlockParam{ToolUseID: toolUseID(m.ToolCallID)}
			if m.Content != "" {
				b.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: m.Content}}}
			}
			add(chat.RoleUser, anthropic.ContentBlockParamUnion{OfToolResult: &b})
		default:
			errs = append(errs, fmt.Errorf("message %d: unknown role %q", i, m.Role))
		}
	}
	if len(msgs) == 0 {
		errs = append(errs, errors.New("no messages"))
	}
	// A last assistant message is a prefill, whose text may not end in white
	// space (as AgentChat's client trims it).
	if n := len(msgs); n > 0 && msgs[n-1].OfAssistant != nil {
		blocks := msgs[n-1].OfAssistant.Content
		if t := blocks[len(blocks)-1].OfText; t != nil {
			t.Text = strings.TrimRight(t.Text, " \t\r\n")
		}
	}
	if len(system) > 0 {
		p.System = []anthropic.TextBlockParam{{Text: strings.Join(system, "\n")}}
	}
	p.Messages = msgs
	for _, t := range req.Tools {
		tp, err := anthropicTool(t)
		if err != nil {
			errs = append(errs, fmt.Errorf("tool %s: %w", t.Name, err))
			continue
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &tp})
	}
	switch {
	case len(p.Tools) > 0:
		auto := &anthropic.ToolChoiceAutoParam{}
		if mc.ParallelToolCalls != nil && !*mc.ParallelToolCalls {
			auto.DisableParallelToolUse = anthropic.Bool(true)
		}
		p.ToolChoice = anthropic.ToolChoiceUnionParam{OfAuto: auto}
	case len(usedList) > 0:
		// The API wants the tools of every tool_use in the history defined,
		// also on a call that offers none (a reflection): they are named
		// with no schema, and tool_choice none keeps the model from them.
		for _, name := range usedList {
			tp := anthropic.ToolParam{Name: name, InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{}}}
			p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &tp})
		}
		p.ToolChoice = anthropic.ToolChoiceUnionParam{OfNone: &anthropic.ToolChoiceNoneParam{}}
	}
	return p, errors.Join(errs...)
}

// toolLoopStart is the index of the first message of the tool loop a
// request ends in: the trailing run of assistant messages with tool calls
// and their tool messages (len(msgs) when it ends in none). With thinking
// enabled, the Messages API wants the assistant messages of that loop sent
// back starting with their thinking blocks, exactly as received; those of
// earlier turns it strips, so they are left out (which also keeps them off
// a context whose earlier part a bounded context has cut).
func toolLoopStart(msgs []chat.ModelMessage) int {
	i := len(msgs)
	for i > 0 {
		m := msgs[i-1]
		if m.Role != chat.RoleTool && (m.Role != chat.RoleAssistant || len(m.ToolCalls) == 0) {
			break
		}
		i--
	}
	return i
}

// thinkingBlocks are kept thinking blocks as the request's blocks.
func thinkingBlocks(kept []chat.ThinkingBlock) []anthropic.ContentBlockParamUnion {
	var out []anthropic.ContentBlockParamUnion
	for _, b := range kept {
		switch b.Type {
		case "thinking":
			out = append(out, anthropic.NewThinkingBlock(b.Signature, b.Thinking))
		case "redacted_thinking":
			out = append(out, anthropic.NewRedactedThinkingBlock(b.Data))
		}
	}
	return out
}

// mergeAssistant appends the blocks of an assistant message to the one
// before it (the API wants roles to alternate). Thinking blocks go first:
// an assistant message must start with its thinking, and the two messages
// are one to the API.
func mergeAssistant(content, blocks []anthropic.ContentBlockParamUnion) []anthropic.ContentBlockParamUnion {
	n := 0
	for n < len(blocks) && (blocks[n].OfThinking != nil || blocks[n].OfRedactedThinking != nil) {
		n++
	}
	if n == 0 {
		return append(content, blocks...)
	}
	out := make([]anthropic.ContentBlockParamUnion, 0, len(content)+len(blocks))
	lead := 0
	for lead < len(content) && (content[lead].OfThinking != nil || content[lead].OfRedactedThinking != nil) {
		lead++
	}
	out = append(out, content[:lead]...)
	out = append(out, blocks[:n]...)
	out = append(out, content[lead:]...)
	return append(out, blocks[n:]...)
}

// anthropicTool is a tool definition: the JSON Schema of its parameters
// becomes input_schema (an object schema).
func anthropicTool(t chat.ToolDef) (anthropic.ToolParam, error) {
	tp := anthropic.ToolParam{Name: sanitizeName(t.Name)}
	if t.Description != "" {
		tp.Description = anthropic.String(t.Description)
	}
	schema := map[string]any{}
	if len(t.Parameters) > 0 && string(t.Parameters) != "null" {
		if err := json.Unmarshal(t.Parameters, &schema); err != nil {
			return tp, fmt.Errorf("parameters: %w", err)
		}
	}
	if typ, ok := schema["type"]; ok && typ != "object" {
		return tp, fmt.Errorf("parameters: type %v: the schema of a tool's input must be an object", typ)
	}
	delete(schema, "type")
	tp.InputSchema.Properties = schema["properties"]
	if tp.InputSchema.Properties == nil {
		tp.InputSchema.Properties = map[string]any{}
	}
	delete(schema, "properties")
	if req, ok := schema["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				tp.InputSchema.Required = append(tp.InputSchema.Required, s)
			}
		}
	}
	delete(schema, "required")
	if len(schema) > 0 {
		tp.InputSchema.ExtraFields = schema
	}
	return tp, nil
}

// toolInput is a tool call's arguments as the object a tool_use block
// holds; arguments that are not a JSON object are wrapped, as AgentChat's
// client wraps them, as {"text": arguments}.
func toolInput(args string) json.RawMessage {
	trimmed := strings.TrimSpace(args)
	if trimmed == "" {
		return json.RawMessage(`{}`)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(trimmed), &obj) == nil && obj != nil {
		return json.RawMessage(trimmed)
	}
	b, _ := json.Marshal(map[string]string{"text": args})
	return b
}

// toolUseID makes a tool call id acceptable as a tool_use id
// (^[a-zA-Z0-9_-]+$): ids of calls made through other endpoints (resumed
// history) may hold other characters. The same id always maps the same way,
// so a tool_result still answers its tool_use.
func toolUseID(id string) string {
	var b strings.Builder
	for _, r := range id {
		if r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "toolu_empty"
	}
	return b.String()
}

// anthropicResponse maps a Message back into chat's terms: text blocks are
// the content, thinking blocks the thought, tool_use blocks the tool calls;
// the thinking and redacted_thinking blocks are also kept as received, to
// be sent back within the tool loop.
func anthropicResponse(req *chat.ModelRequest, msg *anthropic.Message) *chat.ModelResponse {
	var text, thinking strings.Builder
	out := &chat.ModelResponse{Usage: chat.Usage{PromptTokens: msg.Usage.InputTokens, CompletionTokens: msg.Usage.OutputTokens}}
	for i, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "thinking":
			thinking.WriteString(b.Thinking)
			out.Thinking = append(out.Thinking, chat.ThinkingBlock{Type: b.Type, Thinking: b.Thinking, Signature: b.Signature})
		case "redacted_thinking":
			out.Thinking = append(out.Thinking, chat.ThinkingBlock{Type: b.Type, Data: b.Data})
		case "tool_use":
			id := b.ID
			if id == "" {
				id = toolCallID(req.ChatID, req.Caller, req.CallIndex, i)
			}
			args := strings.TrimSpace(string(b.Input))
			if args == "" || args == "null" {
				args = "{}"
			}
			out.ToolCalls = append(out.ToolCalls, chat.ToolCall{ID: id, Type: "function",
				Function: chat.FunctionCall{Name: b.Name, Arguments: args}})
		}
	}
	out.Thought, out.Content = splitThought(thinking.String(), text.String())
	return out
}

// anthropicErrorMessage is the API's own message of an error response.
func anthropicErrorMessage(err error) (string, bool) {
	e, ok := errors.AsType[*anthropic.Error](err)
	if !ok {
		return "", false
	}
	msg := e.Message
	if msg == "" {
		msg = fmt.Sprintf("status %d", e.StatusCode)
	}
	if t := e.Type(); t != "" {
		msg += fmt.Sprintf(" (type %s)", t)
	}
	return msg, true
}

// anthropicErrorStatus is the HTTP status of an SDK error, if any.
func anthropicErrorStatus(err error) int {
	if e, ok := errors.AsType[*anthropic.Error](err); ok {
		return e.StatusCode
	}
	return 0
}
