package llm

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
)

// openAIWire calls an OpenAI-compatible chat-completions endpoint, or an
// Azure OpenAI deployment, through go-openai.
type openAIWire struct {
	ep     *Endpoint
	client *openai.Client
	// hc sends the streamed calls of an openai endpoint (openChatStream),
	// to chatURL: the URL go-openai would post them to.
	hc      doer
	chatURL string
}

// newOpenAIWire returns the wire of an openai or azure endpoint. go-openai's
// Azure mode is what Azure's REST API expects: POST
// {resource}/openai/deployments/{deployment}/chat/completions?api-version=V
// with the key in the api-key header. baseURL is the endpoint's, its
// default applied (see newEndpoint).
func newOpenAIWire(ep *Endpoint, baseURL string, hc doer) *openAIWire {
	var oc openai.ClientConfig
	if ep.Kind == KindAzure {
		oc = openai.DefaultAzureConfig(ep.APIKey, baseURL)
		oc.APIVersion = ep.APIVersion
		deployment := ep.Deployment
		oc.AzureModelMapperFunc = func(model string) string { return cmp.Or(deployment, model) }
	} else {
		oc = openai.DefaultConfig(ep.APIKey)
		oc.BaseURL = baseURL
		oc.OrgID = ep.Organization
	}
	oc.HTTPClient = hc
	return &openAIWire{ep: ep, client: openai.NewClientWithConfig(oc), hc: hc,
		chatURL: strings.TrimRight(oc.BaseURL, "/") + "/chat/completions"}
}

// prepare checks the request; the returned attempt function builds it and
// sends it.
//
// Every attempt builds its request again from req, which the chat keeps
// anyway: so a call holds no copy of its history while it waits in the
// endpoint's queue, and a streamed call of an openai endpoint, the one
// chats make most, encodes its body straight from req's messages
// (encodeStreamBody) without go-openai's messages, 152 bytes each, in
// between.
func (o *openAIWire) prepare(req *chat.ModelRequest) (tryFunc, error) {
	if err := checkRequest(req); err != nil {
		return nil, fmt.Errorf("%s request for %s: %w", o.ep.Kind, callerName(req.Caller), err)
	}
	var rewrite func([]byte) ([]byte, error)
	if req.Protocol == spec.ProtocolOpenAISwarm {
		var err error
		if rewrite, err = swarmRewrite(req); err != nil {
			return nil, fmt.Errorf("%s request for %s: %w", o.ep.Kind, callerName(req.Caller), err)
		}
	}
	return func(ctx context.Context, a *attempt, onDelta func(string)) (*chat.ModelResponse, error) {
		a.rewrite = rewrite
		if onDelta == nil {
			return o.tryWhole(ctx, req)
		}
		resp, err := o.tryStream(ctx, a, req, onDelta)
		if err != nil {
			return nil, err
		}
		return convertResponse(req, resp)
	}, nil
}

// rebuildRequest builds go-openai's request of an attempt, on the heap.
//
//go:noinline
func rebuildRequest(req *chat.ModelRequest) (*openai.ChatCompletionRequest, error) {
	c, err := buildRequest(req)
	if err != nil {
		return nil, err // checked by prepare: not expected
	}
	return &c, nil
}

// tryWhole makes one attempt without streaming.
//
//go:noinline
func (o *openAIWire) tryWhole(ctx context.Context, req *chat.ModelRequest) (*chat.ModelResponse, error) {
	c, err := rebuildRequest(req)
	if err != nil {
		return nil, err
	}
	// go-openai reads the whole body before it returns, so cancelling on
	// return cuts nothing short.
	resp, err := o.client.CreateChatCompletion(ctx, *c)
	if err != nil {
		return nil, err
	}
	return convertResponse(req, &resp)
}

// tryStream makes one streaming attempt: the reply's content goes to onDelta
// as it arrives, and the chunks are put together into the response a
// non-streaming call would have returned (content, tool calls by index,
// finish reason, and the usage of the last chunk).
//
// A chat waiting on a streamed reply waits under tryStream and the attempt
// function prepare returns, and its goroutine's stack is as large as the
// frames it waits under. go-openai's request and response values are a
// couple of KB each, more where one is passed by value: in those frames
// they made every waiting chat's stack twice as large. So they are made,
// passed and read in frames of their own (rebuildRequest, tryWhole,
// azureStream, streamReply's methods), gone while the reply streams.
func (o *openAIWire) tryStream(ctx context.Context, a *attempt, req *chat.ModelRequest, onDelta func(string)) (*openai.ChatCompletionResponse, error) {
	src, err := o.openStream(ctx, req)
	if err != nil {
		return nil, err
	}
	defer src.close()
	reply, chunk := newStreamReply(), new(streamChunk)
	for {
		raw, err := src.next()
		if errors.Is(err, io.EOF) {
			a.drainBody() // the connection goes back to the pool
			break
		}
		if err != nil {
			return nil, err
		}
		if err := reply.add(chunk, raw, onDelta); err != nil {
			return nil, err
		}
	}
	return reply.response(onDelta), nil
}

// openStream sends a streamed call: through go-openai to Azure
// (azureStream); else by openChatStream.
func (o *openAIWire) openStream(ctx context.Context, req *chat.ModelRequest) (chunkSource, error) {
	if o.ep.Kind == KindAzure {
		return o.azureStream(ctx, req)
	}
	s, err := o.openChatStream(ctx, req)
	if err != nil {
		return nil, err // not a nil *sseChunks in a chunkSource
	}
	return s, nil
}

// streamed makes creq a streamed call's, with the usage in its last chunk.
func streamed(creq *openai.ChatCompletionRequest) {
	creq.Stream = true
	creq.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
}

// azureStream sends a streamed call through go-openai, whose stream it
// reads.
//
//go:noinline
func (o *openAIWire) azureStream(ctx context.Context, req *chat.ModelRequest) (chunkSource, error) {
	creq, err := rebuildRequest(req)
	if err != nil {
		return nil, err
	}
	streamed(creq)
	stream, err := o.client.CreateChatCompletionStream(ctx, *creq)
	if err != nil {
		return nil, err
	}
	return goOpenAIChunks{stream}, nil
}

// streamReply puts a streamed reply's chunks together.
type streamReply struct {
	out                openai.ChatCompletionResponse
	content, reasoning strings.Builder
	calls              []openai.ToolCall
	finish             openai.FinishReason
	think              thinkSplitter
}

// replyRoom is the room a streamed reply's content starts with, in bytes.
const replyRoom = 256

// newStreamReply makes a streamReply on the heap: not inlined, so that it
// is not made in the frame of tryStream.
//
//go:noinline
func newStreamReply() *streamReply { return new(streamReply) }

// add decodes a chunk, raw, into chunk (the one before, reused) and adds it
// to the reply; the reply's content goes to onDelta.
//
//go:noinline
func (r *streamReply) add(chunk *streamChunk, raw []byte, onDelta func(string)) error {
	if err := chunk.decode(raw); err != nil {
		return err
	}
	r.out.ID, r.out.Model, r.out.Created = chunk.ID, chunk.Model, chunk.Created
	if chunk.Usage != nil {
		r.out.Usage = *chunk.Usage
	}
	for _, ch := range chunk.Choices {
		r.reasoning.WriteString(ch.Delta.ReasoningContent)
		if d := ch.Delta.Content; d != "" {
			if r.reasoning.Len() > 0 {
				r.think.pass()
			}
			if r.content.Cap() == 0 {
				r.content.Grow(replyRoom) // the reply grows a token at a time
			}
			r.content.WriteString(d)
			// A leading <think>…</think> is reasoning, not reply: it is
			// held back from the stream.
			if shown := r.think.feed(d); shown != "" {
				onDelta(shown)
			}
		}
		for _, tc := range ch.Delta.ToolCalls {
			i := len(r.calls)
			if tc.Index != nil {
				i = *tc.Index
			}
			for len(r.calls) <= i {
				r.calls = append(r.calls, openai.ToolCall{Type: openai.ToolTypeFunction})
			}
			if tc.ID != "" {
				r.calls[i].ID = tc.ID
			}
			r.calls[i].Function.Name += tc.Function.Name
			r.calls[i].Function.Arguments += tc.Function.Arguments
		}
		if ch.FinishReason != "" {
			r.finish = ch.FinishReason
		}
	}
	return nil
}

// response is the reply put together, after the last chunk; what the
// think splitter still holds goes to onDelta.
//
//go:noinline
func (r *streamReply) response(onDelta func(string)) *openai.ChatCompletionResponse {
	if rest := r.think.flush(); rest != "" {
		onDelta(rest)
	}
	r.out.Choices = []openai.ChatCompletionChoice{{Message: openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant,
		Content: r.content.String(), ReasoningContent: r.reasoning.String(), ToolCalls: r.calls}, FinishReason: r.finish}}
	return &r.out
}

// errorMessage is the API's own message when there is one.
func errorMessage(err error) string {
	if msg, ok := anthropicErrorMessage(err); ok {
		return msg
	}
	if e, ok := errors.AsType[*openai.APIError](err); ok {
		msg := e.Message
		if e.Type != "" {
			msg += " (type " + e.Type
			if e.Code != nil && e.Code != "" {
				msg += fmt.Sprintf(", code %v", e.Code)
			}
			msg += ")"
		}
		return msg
	}
	if e, ok := errors.AsType[*openai.RequestError](err); ok {
		body := strings.TrimSpace(string(e.Body))
		if len(body) > 512 {
			body = body[:512] + "…"
		}
		if body == "" {
			body = e.HTTPStatus
		}
		return body
	}
	return err.Error()
}

// buildRequest maps a chat model request onto go-openai's.
func buildRequest(req *chat.ModelRequest) (openai.ChatCompletionRequest, error) {
	creq, errs := buildOptions(req)
	if creq.Model == "" {
		return creq, errors.Join(errs...)
	}
	// Sized once: go-openai's message is 152 bytes, and a history
	// grown by append allocated about twice its size on every call.
	creq.Messages = make([]openai.ChatCompletionMessage, 0, len(req.Messages))
	for i, m := range req.Messages {
		om, err := convertMessage(m)
		if err != nil {
			errs = append(errs, fmt.Errorf("message %d: %w", i, err))
			continue
		}
		creq.Messages = append(creq.Messages, om)
	}
	return creq, errors.Join(errs...)
}

// checkRequest reports what buildRequest would fail on, but for images
// that do not decode (the spec checks an image's header when it takes
// it): it converts no message.
func checkRequest(req *chat.ModelRequest) error {
	creq, errs := buildOptions(req)
	if creq.Model == "" {
		return errors.Join(errs...)
	}
	for i := range req.Messages {
		if err := checkMessage(&req.Messages[i]); err != nil {
			errs = append(errs, fmt.Errorf("message %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// buildOptions maps a chat model request onto go-openai's, but for its
// messages; the errors are those of the options, and "no messages". A
// request without a model is the one error.
func buildOptions(req *chat.ModelRequest) (openai.ChatCompletionRequest, []error) {
	mc := req.Config
	if mc.Model == "" {
		return openai.ChatCompletionRequest{}, []error{errors.New("model config names no model")}
	}
	creq := openai.ChatCompletionRequest{Model: mc.Model, Seed: mc.Seed}
	// go-openai drops zero temperature and top_p (omitempty on a float32), and
	// the API then uses its default of 1. The smallest non-zero float32 is
	// sent as 1e-45, which the API takes as zero: the workaround go-openai's
	// maintainers suggest (sashabaranov/go-openai#9).
	if mc.Temperature != nil {
		creq.Temperature = nonZero(*mc.Temperature)
	}
	if mc.TopP != nil {
		creq.TopP = nonZero(*mc.TopP)
	}
	var errs []error
	if mc.MaxTokens != nil {
		// The spec's max_tokens goes out as max_completion_tokens: OpenAI
		// deprecated max_tokens, and reasoning models reject it.
		creq.MaxCompletionTokens = *mc.MaxTokens
	}
	creq.Stop, creq.ReasoningEffort = mc.Stop, mc.ReasoningEffort
	// A zero penalty is the API's default, which go-openai's omitempty
	// leaves out: the same request.
	if mc.FrequencyPenalty != nil {
		creq.FrequencyPenalty = float32(*mc.FrequencyPenalty)
	}
	if mc.PresencePenalty != nil {
		creq.PresencePenalty = float32(*mc.PresencePenalty)
	}
	if len(mc.ResponseFormat) > 0 && string(mc.ResponseFormat) != "null" {
		rf, err := responseFormat(mc.ResponseFormat)
		if err != nil {
			errs = append(errs, err)
		}
		creq.ResponseFormat = rf
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if len(params) == 0 || string(params) == "null" {
			// The API wants a schema; no parameters is an empty object.
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		creq.Tools = append(creq.Tools, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: t.Name, Description: t.Description, Parameters: params, Strict: t.Strict,
		}})
	}
	if len(creq.Tools) > 0 {
		// What AgentChat's OpenAI client sends with tools (the API's default).
		creq.ToolChoice = "auto"
	}
	// The API rejects parallel_tool_calls on a request without tools.
	if mc.ParallelToolCalls != nil && len(creq.Tools) > 0 {
		creq.ParallelToolCalls = *mc.ParallelToolCalls
	}
	if len(req.Messages) == 0 {
		errs = append(errs, errors.New("no messages"))
	}
	return creq, errs
}

// nonZero converts v for go-openai, keeping an explicit zero (see buildRequest).
func nonZero(v float64) float32 {
	if v == 0 {
		return math.SmallestNonzeroFloat32
	}
	return float32(v)
}

// responseFormat decodes the spec's response_format, which has the API's
// shape: {"type": "text"|"json_object"|"json_schema", "json_schema": {...}}.
func responseFormat(raw json.RawMessage) (*openai.ChatCompletionResponseFormat, error) {
	var rf openai.ChatCompletionResponseFormat
	if err := json.Unmarshal(raw, &rf); err != nil {
		return nil, fmt.Errorf("response_format: %w", err)
	}
	switch rf.Type {
	case openai.ChatCompletionResponseFormatTypeText, openai.ChatCompletionResponseFormatTypeJSONObject:
	case openai.ChatCompletionResponseFormatTypeJSONSchema:
		if rf.JSONSchema == nil || rf.JSONSchema.Name == "" {
			return nil, errors.New("response_format: type json_schema needs json_schema.name")
		}
	default:
		return nil, fmt.Errorf("response_format: unknown type %q (want text, json_object or json_schema)", rf.Type)
	}
	return &rf, nil
}

// convertMessage maps one message. Names are sanitized because the API
// rejects any outside ^[a-zA-Z0-9_-]{1,64}$, and history (resumed messages,
// models' own tool call names) is not bound by agentd's name rules.
func convertMessage(m chat.ModelMessage) (openai.ChatCompletionMessage, error) {
	om := openai.ChatCompletionMessage{Content: m.Content}
	if err := checkMessage(&m); err != nil {
		return om, err
	}
	switch m.Role {
	case chat.RoleSystem:
		om.Role = openai.ChatMessageRoleSystem
	case chat.RoleUser:
		om.Role = openai.ChatMessageRoleUser
		om.Name = sanitizeName(m.Name)
		if len(m.Parts()) > 0 {
			// A MultiModalMessage: its parts in order, as AgentChat's
			// client sends them (a text part per string, an image_url part
			// with a PNG data URL and detail "auto" per image).
			om.Content = ""
			for _, p := range m.Parts() {
				if p.Image == nil {
					if p.Text == "" {
						continue // go-openai would drop its required text
					}
					om.MultiContent = append(om.MultiContent, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: p.Text})
					continue
				}
				url, err := imageDataURL(p.Image)
				if err != nil {
					return om, err
				}
				om.MultiContent = append(om.MultiContent, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL,
					ImageURL: &openai.ChatMessageImageURL{URL: url, Detail: openai.ImageURLDetailAuto}})
			}
			if len(om.MultiContent) > 0 {
				return om, nil
			}
		}
	case chat.RoleAssistant:
		om.Role = openai.ChatMessageRoleAssistant
		om.Name = sanitizeName(m.Name)
		for _, tc := range m.ToolCalls {
			om.ToolCalls = append(om.ToolCalls, openai.ToolCall{
				ID:   tc.ID,
				Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{
					Name: sanitizeName(tc.Function.Name),
					// The API requires the string; go-openai omits it when empty.
					Arguments: cmp.Or(tc.Function.Arguments, "{}"),
				},
			})
		}
	case chat.RoleTool:
		om.Role = openai.ChatMessageRoleTool
		om.ToolCallID = m.ToolCallID
	}
	// go-openai omits an empty content, but the API requires content on all
	// but an assistant message that calls tools ("Missing required
	// parameter"). A single space is the smallest content that survives
	// omitempty and means nothing to a model.
	if om.Content == "" && len(om.ToolCalls) == 0 {
		om.Content = " "
	}
	return om, nil
}

// checkMessage reports what in m the API cannot take, but for images
// (converted by convertMessage).
func checkMessage(m *chat.ModelMessage) error {
	switch m.Role {
	case chat.RoleSystem, chat.RoleUser, chat.RoleAssistant:
		return nil
	case chat.RoleTool:
		if m.ToolCallID == "" {
			return errors.New("tool message without tool_call_id")
		}
		return nil
	}
	return fmt.Errorf("unknown role %q", m.Role)
}

// convertResponse maps the first choice back into chat's terms.
func convertResponse(req *chat.ModelRequest, resp *openai.ChatCompletionResponse) (*chat.ModelResponse, error) {
	if len(resp.Choices) == 0 {
		return nil, errors.New("the response has no choices")
	}
	msg := resp.Choices[0].Message
	out := &chat.ModelResponse{
		Content: msg.Content,
		Usage:   chat.Usage{PromptTokens: int64(resp.Usage.PromptTokens), CompletionTokens: int64(resp.Usage.CompletionTokens)},
	}
	// Reasoning is the message's thought, never its content: the
	// reasoning_content field of DeepSeek, vLLM, LiteLLM and others, else
	// an R1-style <think>…</think> at the start of the content.
	out.Thought, out.Content = splitThought(msg.ReasoningContent, out.Content)
	if out.Content == "" && msg.Refusal != "" {
		// A refusal is the model's answer; dropping it would leave an empty
		// reply with no explanation.
		out.Content = msg.Refusal
	}
	for i, tc := range msg.ToolCalls {
		id := tc.ID
		if id == "" {
			// Some compatible servers omit ids; the tool messages that answer
			// these calls need one, and it must be stable across a redo.
			id = toolCallID(req.ChatID, req.Caller, req.CallIndex, i)
		}
		out.ToolCalls = append(out.ToolCalls, chat.ToolCall{
			ID:       id,
			Type:     "function",
			Function: chat.FunctionCall{Name: tc.Function.Name, Arguments: cmp.Or(tc.Function.Arguments, "{}")},
		})
	}
	return out, nil
}
