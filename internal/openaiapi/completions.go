package openaiapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/spec"
)

// completionRequest is the body of POST /openai/v1/chat/completions.
type completionRequest struct {
	Model         string            `json:"model"`
	Messages      []inputMessage    `json:"messages"`
	Stream        bool              `json:"stream"`
	StreamOptions *streamOptions    `json:"stream_options"`
	N             *int              `json:"n"`
	Metadata      map[string]string `json:"metadata"`
	// Refused when given: the team's agents have their own tools.
	Tools        json.RawMessage `json:"tools"`
	ToolChoice   json.RawMessage `json:"tool_choice"`
	Functions    json.RawMessage `json:"functions"`
	FunctionCall json.RawMessage `json:"function_call"`
	Audio        json.RawMessage `json:"audio"`
	// Accepted and ignored: the team's models have their own settings.
	Temperature         json.RawMessage `json:"temperature"`
	TopP                json.RawMessage `json:"top_p"`
	MaxTokens           json.RawMessage `json:"max_tokens"`
	MaxCompletionTokens json.RawMessage `json:"max_completion_tokens"`
	User                json.RawMessage `json:"user"`
	Store               json.RawMessage `json:"store"`
	Seed                json.RawMessage `json:"seed"`
	FrequencyPenalty    json.RawMessage `json:"frequency_penalty"`
	PresencePenalty     json.RawMessage `json:"presence_penalty"`
	Stop                json.RawMessage `json:"stop"`
	LogitBias           json.RawMessage `json:"logit_bias"`
	Logprobs            json.RawMessage `json:"logprobs"`
	TopLogprobs         json.RawMessage `json:"top_logprobs"`
	ParallelToolCalls   json.RawMessage `json:"parallel_tool_calls"`
	ResponseFormat      json.RawMessage `json:"response_format"`
	ReasoningEffort     json.RawMessage `json:"reasoning_effort"`
	ServiceTier         json.RawMessage `json:"service_tier"`
	Modalities          json.RawMessage `json:"modalities"`
	Verbosity           json.RawMessage `json:"verbosity"`
	PromptCacheKey      json.RawMessage `json:"prompt_cache_key"`
	SafetyIdentifier    json.RawMessage `json:"safety_identifier"`
}

type streamOptions struct {
	IncludeUsage       bool            `json:"include_usage"`
	IncludeObfuscation json.RawMessage `json:"include_obfuscation"`
}

// usageObject is a chat completion's usage: the run's tokens.
type usageObject struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

func newUsage(u chat.Usage) *usageObject {
	return &usageObject{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
}

type assistantMessage struct {
	Role        string   `json:"role"`
	Content     string   `json:"content"`
	Refusal     *string  `json:"refusal"`
	Annotations []string `json:"annotations"`
}

type completionChoice struct {
	Index        int              `json:"index"`
	Message      assistantMessage `json:"message"`
	Logprobs     *struct{}        `json:"logprobs"`
	FinishReason string           `json:"finish_reason"`
}

// completion is a chat.completion object.
type completion struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	Choices           []completionChoice `json:"choices"`
	Usage             *usageObject       `json:"usage"`
	SystemFingerprint *string            `json:"system_fingerprint"`
}

type chunkDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
	// Reasoning carries the team's replies while the run goes on, in the
	// field OpenAI-compatible servers stream a model's thinking in.
	Reasoning *string `json:"reasoning_content,omitempty"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	Logprobs     *struct{}  `json:"logprobs"`
	FinishReason *string    `json:"finish_reason"`
}

// completionChunk is a chat.completion.chunk object.
type completionChunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	Choices           []chunkChoice `json:"choices"`
	Usage             *usageObject  `json:"usage,omitempty"`
	SystemFingerprint *string       `json:"system_fingerprint"`
}

// completionID is the id of a chat completion: the chat's, so that the
// chat can be read through /v1 (docs/openai.md).
func completionID(chatID string) string { return "chatcmpl-" + chatID }

// ChatCompletions serves POST /openai/v1/chat/completions: a new chat from
// the saved team the model names, with the last user message as its task
// and the messages before it as its history; the answer is its run's
// final message. key is the request's Idempotency-Key ("" for none).
func (h *Handler) ChatCompletions(w http.ResponseWriter, r *http.Request, tenant, key string) {
	ctx := r.Context()
	var req completionRequest
	if err := h.readJSON(w, r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	var probs problems
	requireModel(req.Model, &probs)
	conv := readConversation("messages", req.Messages, &probs)
	refuse(&probs, "is not supported: the team's agents have their own tools and models",
		"tools", req.Tools, "tool_choice", req.ToolChoice, "functions", req.Functions, "function_call", req.FunctionCall, "audio", req.Audio)
	if req.N != nil && *req.N != 1 {
		probs.add("n", "must be 1: a run has one final message")
	}
	checkMetadata(req.Metadata, &probs)
	if err := probs.err(); err != nil {
		h.fail(w, r, err)
		return
	}
	team, err := h.checkTeam(ctx, tenant, req.Model)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ch, err := h.createChat(ctx, tenant, key, team, conv.task, conv.history, req.Metadata)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.lasting(w)
	w.Header().Set(chatHeader, ch.ID)
	if req.Stream {
		h.streamCompletion(w, r, tenant, ch, req)
		return
	}
	res, ok := h.answer(w, r, endpointCompletions, tenant, ch.ID, 1, 0)
	if !ok {
		return
	}
	h.writeJSON(w, r, completion{ID: completionID(ch.ID), Object: "chat.completion", Created: ch.CreatedAt.Unix(), Model: req.Model,
		Choices: []completionChoice{{Message: assistantMessage{Role: "assistant", Content: finalText(res), Annotations: []string{}}, FinishReason: "stop"}},
		Usage:   newUsage(res.usage)})
}

// streamCompletion answers a chat completion as chunks: the assistant's
// role at once, every reply of the run as reasoning_content while it is
// typed (live.go), then, when the run has ended and its final message is
// known, that message's streamed fragments (or its whole text) as
// content, the finish reason, the usage when asked for, and [DONE]. A run
// that does not complete ends the stream with an error chunk, which the
// SDKs raise.
func (h *Handler) streamCompletion(w http.ResponseWriter, r *http.Request, tenant string, ch *chat.Chat, req completionRequest) {
	ctx := r.Context()
	rc := http.NewResponseController(w)
	setStreamHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	chunk := completionChunk{ID: completionID(ch.ID), Object: "chat.completion.chunk", Created: ch.CreatedAt.Unix(), Model: req.Model}
	send := func(delta chunkDelta, finish *string, usage *usageObject) error {
		c := chunk
		c.Choices = []chunkChoice{{Delta: delta, FinishReason: finish}}
		if usage != nil {
			c.Choices, c.Usage = []chunkChoice{}, usage
		}
		return writeData(w, c)
	}
	empty := ""
	if send(chunkDelta{Role: "assistant", Content: &empty}, nil, nil) != nil || rc.Flush() != nil {
		return
	}
	// The team's replies as they are typed, as reasoning: each one's
	// speaker begins it.
	live, last := newLiveReplies(), -1
	live.more = func(i int, name, s string) error {
		if i != last {
			head := name + ": "
			if last >= 0 {
				head = "\n\n" + head
			}
			s, last = head+s, i
		}
		if err := send(chunkDelta{Reasoning: &s}, nil, nil); err != nil {
			return err
		}
		return rc.Flush()
	}
	res, err := h.follow(ctx, tenant, ch.ID, 1, 0, func() error { return heartbeat(w, rc) }, live)
	if err != nil {
		h.streamFailed(w, rc, r, err)
		return
	}
	h.count(endpointCompletions, res)
	if e := endError(res); e != nil {
		_ = writeData(w, e.body())
		_ = rc.Flush()
		return
	}
	for _, p := range finalPieces(res) {
		if send(chunkDelta{Content: &p}, nil, nil) != nil {
			return
		}
	}
	stop := "stop"
	if send(chunkDelta{}, &stop, nil) != nil {
		return
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		if send(chunkDelta{}, nil, newUsage(res.usage)) != nil {
			return
		}
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

// streamFailed ends a stream whose run could not be followed: an error
// the SDKs raise, unless the client went away.
func (h *Handler) streamFailed(w io.Writer, rc *http.ResponseController, r *http.Request, err error) {
	ok, err := streamEnded(r.Context(), err)
	if !ok {
		return
	}
	h.log.Warn("openai api: stream ended early", "path", r.URL.Path, "error", err)
	h.outcome.WithLabelValues(endpointCompletions, string(outcomeInterrupted)).Inc()
	_ = writeData(w, NewError(http.StatusServiceUnavailable, "stream_interrupted", "", "the stream was interrupted ("+err.Error()+"); the run goes on").body())
	_ = rc.Flush()
}

// finalText is the content of a run's final message ("" when it said
// nothing).
func finalText(res *runResult) string {
	if res.final == nil {
		return ""
	}
	return res.final.Content
}

// finalPieces are the fragments to stream the final message as: the
// model's own, or its whole text as one.
func finalPieces(res *runResult) []string {
	switch {
	case res.final == nil || res.final.Content == "":
		return nil
	case res.pieces != nil:
		return res.pieces
	default:
		return []string{res.final.Content}
	}
}

// requireModel checks that a request names a model.
func requireModel(model string, probs *problems) {
	if model == "" {
		probs.add("model", "is required: team:<name> of a saved team")
	}
}

// createChat creates the chat a request runs in: from the saved team,
// with the task, the history before it and the request's metadata.
func (h *Handler) createChat(ctx context.Context, tenant, key string, team teamModel, task string, history []spec.HistoryMessage, md map[string]string) (*chat.Chat, error) {
	body, err := json.Marshal(createBody{TeamRef: team.ref(), Task: task, Messages: history, Metadata: md})
	if err != nil {
		return nil, fmt.Errorf("encode create request: %w", err)
	}
	ch, _, err := h.rt.Create(ctx, &chat.CreateParams{Tenant: tenant, Body: body, IdempotencyKey: key})
	return ch, err
}

// answer follows a run to its end for a request that is not streamed;
// when the run did not complete it answers the error itself (ok false).
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, endpoint, tenant, chatID string, run int, after int64) (*runResult, bool) {
	res, err := h.follow(r.Context(), tenant, chatID, run, after, nil, nil)
	if err != nil && runtime.ServerEnded(r.Context()) {
		// The run was posted and goes on elsewhere: a repeat with the
		// request's Idempotency-Key gets its answer, one without runs
		// the team again.
		h.log.Warn("openai api: answer cut by shutdown", "path", r.URL.Path, "chat_id", chatID, "run", run)
		h.outcome.WithLabelValues(endpoint, string(outcomeInterrupted)).Inc()
		e := NewError(http.StatusServiceUnavailable, "server_shutting_down", "",
			"the server is shutting down; the run goes on: repeat the request with its Idempotency-Key for its answer")
		e.NoRetry = true
		WriteError(w, e)
		return nil, false
	}
	if err != nil {
		h.fail(w, r, err)
		return nil, false
	}
	h.count(endpoint, res)
	if e := endError(res); e != nil {
		WriteError(w, e)
		return nil, false
	}
	return res, true
}

// chatHeader names the chat a response answers from, for clients that
// want to read it through /v1.
const chatHeader = "Agentd-Chat-Id"

// Endpoint labels of the runs metric.
const (
	endpointCompletions = "chat.completions"
	endpointResponses   = "responses"
)

// count records how a followed run ended, and logs what did not complete.
func (h *Handler) count(endpoint string, res *runResult) {
	h.outcome.WithLabelValues(endpoint, string(res.outcome)).Inc()
	if res.outcome != outcomeCompleted {
		h.log.Info("openai api: run did not complete", "endpoint", endpoint, "chat_id", res.chatID, "run", res.run, "outcome", res.outcome, "detail", res.detail)
	}
}

// lasting lets a request outlive the server's timeouts for ordinary
// requests while it follows its run: the body has been read, and the
// response gets until the run wait is over, and a little for the answer.
func (h *Handler) lasting(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Now().Add(h.cfg.RunWait + 30*time.Second))
}

// setStreamHeaders sets the headers of an event stream.
func setStreamHeaders(hd http.Header) {
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
}

// writeData writes v as an SSE event with data only, as chat completion
// streams are written.
func writeData(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "data: %s\n\n", b)
	return err
}

// heartbeat writes an SSE comment, which clients skip.
func heartbeat(w io.Writer, rc *http.ResponseController) error {
	if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
		return err
	}
	return rc.Flush()
}
