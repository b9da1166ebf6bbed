package llm

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/agentd/agentd/internal/chat"
)

// openAIProvider calls an OpenAI-compatible chat-completions endpoint.
type openAIProvider struct {
	cfg     OpenAIConfig // with defaults applied
	client  *openai.Client
	http    *http.Client
	log     *slog.Logger
	metrics *metrics
	now     func() time.Time
}

func newOpenAIProvider(cfg OpenAIConfig, log *slog.Logger, m *metrics) *openAIProvider {
	hc := cfg.HTTPClient
	if hc == nil {
		// A transport of our own, not http.DefaultTransport, so Close can drop
		// its idle connections without touching anyone else's.
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	if cfg.BaseURL != "" {
		oc.BaseURL = cfg.BaseURL
	}
	oc.OrgID = cfg.Organization
	oc.HTTPClient = headerDoer{client: hc}
	return &openAIProvider{
		cfg:     cfg,
		client:  openai.NewClientWithConfig(oc),
		http:    hc,
		log:     log,
		metrics: m,
		now:     time.Now,
	}
}

// Error is a failed model call, after any retries.
type Error struct {
	Provider string
	Model    string
	// StatusCode is the HTTP status of the last attempt (0: no response).
	StatusCode int
	// Message is the API's error message, or what went wrong otherwise.
	Message string
	// Attempts is how many HTTP attempts were made.
	Attempts int
	// RequestID is the server's x-request-id of the last attempt, if any.
	RequestID string
	// Err is the underlying error.
	Err error
}

// Error says what failed, with the status and the API's message.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s chat completion with model %q failed", e.Provider, e.Model)
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " after %d attempts", e.Attempts)
	}
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, ": status %d", e.StatusCode)
	}
	fmt.Fprintf(&b, ": %s", e.Message)
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (request id %s)", e.RequestID)
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

func (p *openAIProvider) complete(ctx context.Context, req *chat.ModelRequest) (*chat.ModelResponse, error) {
	creq, err := buildRequest(req)
	if err != nil {
		return nil, fmt.Errorf("openai request for %s: %w", callerName(req.Caller), err)
	}
	maxAttempts := p.cfg.MaxRetries + 1
	streamed := false // deltas of this attempt went out: a retry starts the reply again
	for n := 1; ; n++ {
		if streamed {
			// Streams showed part of a reply that failed: they start over.
			if req.OnReset != nil {
				req.OnReset()
			}
			streamed = false
		}
		var (
			resp openai.ChatCompletionResponse
			a    *attempt
		)
		if req.OnDelta != nil {
			resp, a, err = p.tryStream(ctx, creq, func(d string) { streamed = true; req.OnDelta(d) })
		} else {
			resp, a, err = p.try(ctx, creq)
		}
		if err == nil {
			out, cerr := convertResponse(req, resp)
			if cerr != nil {
				return nil, &Error{Provider: ProviderOpenAI, Model: creq.Model, StatusCode: a.status,
					Message: cerr.Error(), Attempts: n, RequestID: a.requestID, Err: cerr}
			}
			return out, nil
		}
		fail := &Error{Provider: ProviderOpenAI, Model: creq.Model, StatusCode: a.status,
			Message: errorMessage(err), Attempts: n, RequestID: a.requestID, Err: err}
		if a.timedOut {
			fail.Message = fmt.Sprintf("no response within the per-call timeout of %v", p.cfg.Timeout)
		}
		if ctx.Err() != nil {
			// The chat was cancelled or its deadline passed: that, not the
			// attempt's symptom, is why the call ends.
			fail.Err = ctx.Err()
			fail.Message = fmt.Sprintf("%v (last error: %s)", ctx.Err(), fail.Message)
			return nil, fail
		}
		reason, retry := retryReason(a, err)
		if !retry || n >= maxAttempts {
			return nil, fail
		}
		wait := retryWait(a, p.cfg.BackoffBase, p.cfg.BackoffMax, n, p.now())
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			// Waiting would only run into the chat's deadline.
			return nil, fail
		}
		p.metrics.retries.WithLabelValues(ProviderOpenAI, reason).Inc()
		p.log.WarnContext(ctx, "model call failed, retrying",
			"provider", ProviderOpenAI, "model", creq.Model, "chat_id", req.ChatID, "caller", req.Caller,
			"attempt", n, "max_attempts", maxAttempts, "reason", reason, "status", a.status,
			"wait", wait, "error", fail.Message)
		if err := sleep(ctx, wait); err != nil {
			fail.Err = err
			fail.Message = fmt.Sprintf("%v while waiting to retry (last error: %s)", err, fail.Message)
			return nil, fail
		}
	}
}

// try makes one HTTP attempt under the per-call timeout.
func (p *openAIProvider) try(ctx context.Context, creq openai.ChatCompletionRequest) (openai.ChatCompletionResponse, *attempt, error) {
	a := &attempt{}
	actx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	// go-openai reads the whole body before it returns, so cancelling on
	// return cuts nothing short.
	resp, err := p.client.CreateChatCompletion(context.WithValue(actx, attemptKey{}, a), creq)
	a.timedOut = errors.Is(actx.Err(), context.DeadlineExceeded)
	return resp, a, err
}

// tryStream makes one streaming attempt: the reply's content goes to onDelta
// as it arrives, and the chunks are put together into the response a
// non-streaming call would have returned (content, tool calls by index,
// finish reason, and the usage of the last chunk).
func (p *openAIProvider) tryStream(ctx context.Context, creq openai.ChatCompletionRequest, onDelta func(string)) (openai.ChatCompletionResponse, *attempt, error) {
	a := &attempt{}
	actx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	creq.Stream = true
	creq.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	var out openai.ChatCompletionResponse
	stream, err := p.client.CreateChatCompletionStream(context.WithValue(actx, attemptKey{}, a), creq)
	if err != nil {
		a.timedOut = errors.Is(actx.Err(), context.DeadlineExceeded)
		return out, a, err
	}
	defer stream.Close()
	var (
		content strings.Builder
		calls   []openai.ToolCall
		finish  openai.FinishReason
	)
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			a.timedOut = errors.Is(actx.Err(), context.DeadlineExceeded)
			return out, a, err
		}
		out.ID, out.Model, out.Created = chunk.ID, chunk.Model, chunk.Created
		if chunk.Usage != nil {
			out.Usage = *chunk.Usage
		}
		for _, ch := range chunk.Choices {
			if d := ch.Delta.Content; d != "" {
				content.WriteString(d)
				onDelta(d)
			}
			for _, tc := range ch.Delta.ToolCalls {
				i := len(calls)
				if tc.Index != nil {
					i = *tc.Index
				}
				for len(calls) <= i {
					calls = append(calls, openai.ToolCall{Type: openai.ToolTypeFunction})
				}
				if tc.ID != "" {
					calls[i].ID = tc.ID
				}
				calls[i].Function.Name += tc.Function.Name
				calls[i].Function.Arguments += tc.Function.Arguments
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	out.Choices = []openai.ChatCompletionChoice{{Message: openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant,
		Content: content.String(), ToolCalls: calls}, FinishReason: finish}}
	return out, a, nil
}

// errorMessage is the API's own message when there is one.
func errorMessage(err error) string {
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
	mc := req.Config
	if mc.Model == "" {
		return openai.ChatCompletionRequest{}, errors.New("model config names no model")
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
	switch m.Role {
	case chat.RoleSystem:
		om.Role = openai.ChatMessageRoleSystem
	case chat.RoleUser:
		om.Role = openai.ChatMessageRoleUser
		om.Name = sanitizeName(m.Name)
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
		if m.ToolCallID == "" {
			return om, errors.New("tool message without tool_call_id")
		}
		om.Role = openai.ChatMessageRoleTool
		om.ToolCallID = m.ToolCallID
	default:
		return om, fmt.Errorf("unknown role %q", m.Role)
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

// convertResponse maps the first choice back into chat's terms.
func convertResponse(req *chat.ModelRequest, resp openai.ChatCompletionResponse) (*chat.ModelResponse, error) {
	if len(resp.Choices) == 0 {
		return nil, errors.New("the response has no choices")
	}
	msg := resp.Choices[0].Message
	out := &chat.ModelResponse{
		Content: msg.Content,
		Usage:   chat.Usage{PromptTokens: int64(resp.Usage.PromptTokens), CompletionTokens: int64(resp.Usage.CompletionTokens)},
	}
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
