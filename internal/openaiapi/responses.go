package openaiapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
)

// The Responses API: a conversation is one chat, each response one of its
// runs. A response's id names both ("resp_<chat id>_<run>"), so a
// previous_response_id finds the chat without any state of this package's
// own, and the conversation's id is the chat's.

// responseRequest is the body of POST /openai/v1/responses.
type responseRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions"`
	PreviousResponseID string            `json:"previous_response_id"`
	Conversation       json.RawMessage   `json:"conversation"`
	Stream             bool              `json:"stream"`
	Metadata           map[string]string `json:"metadata"`
	// Refused when given (or true).
	Background *bool           `json:"background"`
	Tools      json.RawMessage `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	Prompt     json.RawMessage `json:"prompt"`
	// Accepted and ignored: the team's models have their own settings,
	// and every response is stored (it is a run of a chat).
	Temperature       json.RawMessage `json:"temperature"`
	TopP              json.RawMessage `json:"top_p"`
	MaxOutputTokens   json.RawMessage `json:"max_output_tokens"`
	MaxToolCalls      json.RawMessage `json:"max_tool_calls"`
	User              json.RawMessage `json:"user"`
	Store             json.RawMessage `json:"store"`
	Include           json.RawMessage `json:"include"`
	Text              json.RawMessage `json:"text"`
	Reasoning         json.RawMessage `json:"reasoning"`
	Truncation        json.RawMessage `json:"truncation"`
	ParallelToolCalls json.RawMessage `json:"parallel_tool_calls"`
	ServiceTier       json.RawMessage `json:"service_tier"`
	PromptCacheKey    json.RawMessage `json:"prompt_cache_key"`
	SafetyIdentifier  json.RawMessage `json:"safety_identifier"`
	StreamOptions     json.RawMessage `json:"stream_options"`
	TopLogprobs       json.RawMessage `json:"top_logprobs"`
}

// responseID is the id of a chat's run as a response.
func responseID(chatID string, run int) string {
	return "resp_" + chatID + "_" + strconv.Itoa(run)
}

// parseResponseID reads a response id; ok is false for anything this
// server did not hand out.
func parseResponseID(id string) (chatID string, run int, ok bool) {
	rest, ok := strings.CutPrefix(id, "resp_")
	c, n, found := strings.Cut(rest, "_")
	if !ok || !found || len(c) != 36 {
		return "", 0, false
	}
	u, err := uuid.Parse(c)
	run, nerr := strconv.Atoi(n)
	if err != nil || nerr != nil || run < 1 || strconv.Itoa(run) != n {
		return "", 0, false
	}
	return u.String(), run, true
}

// conversationID reads the conversation parameter: an id, or {"id"}.
func conversationID(raw json.RawMessage, probs *problems) string {
	if !given(raw) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		var o struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &o) != nil || o.ID == "" {
			probs.add("conversation", "must be a conversation id or {\"id\"}")
			return ""
		}
		s = o.ID
	}
	if u, err := uuid.Parse(s); err == nil && len(s) == 36 {
		return u.String()
	}
	probs.add("conversation", "is not a conversation of this server: the id is a chat's (conversation.id of a response)")
	return ""
}

// readInput reads input: a text, or a list of message items.
func readInput(raw json.RawMessage, probs *problems) []inputMessage {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0:
		probs.add("input", "is required")
		return nil
	case raw[0] == '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		c, _ := json.Marshal(s)
		return []inputMessage{{Role: "user", Content: c}}
	}
	var items []inputMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		probs.add("input", "must be a text or a list of message items: %s", describe(err))
		return nil
	}
	return items
}

// Responses serves POST /openai/v1/responses: without previous_response_id
// or conversation, a new chat from the saved team the model names (the
// last user message is the task, the input before it and instructions the
// history); with one, the next run of that chat. key is the request's
// Idempotency-Key ("" for none), which only a request starting a
// conversation takes.
func (h *Handler) Responses(w http.ResponseWriter, r *http.Request, tenant, key string) {
	ctx := r.Context()
	var req responseRequest
	if err := h.readJSON(w, r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	var probs problems
	requireModel(req.Model, &probs)
	refuse(&probs, "is not supported: the team's agents have their own tools and prompts",
		"tools", req.Tools, "tool_choice", req.ToolChoice, "prompt", req.Prompt)
	if req.Background != nil && *req.Background {
		probs.add("background", "is not supported: a response is a run, followed by GET /v1/chats/{id}/events if need be")
	}
	checkMetadata(req.Metadata, &probs)
	chatID := conversationID(req.Conversation, &probs)
	if req.PreviousResponseID != "" {
		prev, _, ok := parseResponseID(req.PreviousResponseID)
		switch {
		case !ok:
			probs.add("previous_response_id", "is not a response of this server")
		case chatID != "" && chatID != prev:
			probs.add("conversation", "names another conversation than previous_response_id's")
		default:
			chatID = prev
		}
	}
	conv := readConversation("input", readInput(req.Input, &probs), &probs)
	if chatID != "" {
		if len(conv.history) > 0 {
			probs.add("input", "continues a conversation: give the next user message only")
		}
		if req.Instructions != nil {
			probs.add("instructions", "come from the team and the conversation's start: a next response takes none")
		}
		if req.Metadata != nil {
			probs.add("metadata", "belongs to the conversation: set it when it starts (or PATCH /v1/chats/{id})")
		}
		if key != "" {
			probs.add("Idempotency-Key", "applies to a request that starts a conversation; a next response is a new run, which takes none")
		}
	}
	if err := probs.err(); err != nil {
		h.fail(w, r, err)
		return
	}
	team, err := h.checkTeam(ctx, tenant, req.Model)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var (
		ch    *chat.Chat
		run   = 1
		after int64
	)
	if chatID == "" {
		history := conv.history
		if req.Instructions != nil && *req.Instructions != "" {
			history = append([]spec.HistoryMessage{{Role: spec.RoleSystem, Content: spec.MessageContent{Text: *req.Instructions}}}, history...)
		}
		if ch, err = h.createChat(ctx, tenant, key, team, conv.task, history, req.Metadata); err != nil {
			h.fail(w, r, err)
			return
		}
	} else {
		if _, err = h.conversationChat(ctx, tenant, chatID, team); err != nil {
			h.fail(w, r, err)
			return
		}
		if ch, run, err = h.rt.SubmitRun(ctx, tenant, chatID, "", spec.TextRun(conv.task)); err != nil {
			h.fail(w, r, err)
			return
		}
		after = ch.LastSeq
	}
	h.lasting(w)
	w.Header().Set(chatHeader, ch.ID)
	rs := responseStart{model: req.Model, ch: ch, run: run, createdAt: h.now()}
	if req.Stream {
		h.streamResponse(w, r, tenant, rs, after)
		return
	}
	if res, ok := h.answer(w, r, endpointResponses, tenant, ch.ID, run, after); ok {
		h.writeJSON(w, r, rs.object(res))
	}
}

// conversationChat returns the chat a next response continues: one of the
// tenant's, made from the team the model names.
func (h *Handler) conversationChat(ctx context.Context, tenant, chatID string, team teamModel) (*chat.Chat, error) {
	ch, err := h.rt.Get(ctx, tenant, chatID)
	if errors.Is(err, chat.ErrNotFound) {
		return nil, NewError(http.StatusNotFound, "conversation_not_found", "previous_response_id",
			"no conversation "+chatID+": it does not exist, or it is another tenant's")
	}
	if err != nil {
		return nil, err
	}
	if ch.Team == nil || ch.Team.Name != team.name {
		return nil, NewError(http.StatusBadRequest, "model_mismatch", "model",
			"the conversation is not one of the team "+modelPrefix+team.name+": continue it with the model it started with")
	}
	return ch, nil
}

// Response serves GET /openai/v1/responses/{id}: the run as a response,
// as far as it has got.
func (h *Handler) Response(w http.ResponseWriter, r *http.Request, tenant, id string) {
	chatID, run, ok := parseResponseID(id)
	notFound := NewError(http.StatusNotFound, "response_not_found", "response_id", "no response "+id)
	if !ok {
		h.fail(w, r, notFound)
		return
	}
	ctx := r.Context()
	ch, err := h.rt.Get(ctx, tenant, chatID)
	if errors.Is(err, chat.ErrNotFound) || err == nil && run > ch.Run {
		h.fail(w, r, notFound)
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	f := newRunFollower(chatID, run)
	for after := int64(0); ; {
		evs, err := h.rt.Events(ctx, tenant, chatID, after, eventPageSize)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		done := false
		for _, e := range evs {
			after = e.Seq
			if done = f.event(e); done {
				break
			}
		}
		if done || len(evs) < eventPageSize {
			break
		}
	}
	model := ""
	if ch.Team != nil {
		model = modelPrefix + ch.Team.Name
	}
	h.writeJSON(w, r, responseStart{model: model, ch: ch, run: run, createdAt: f.res.startedAt}.object(f.res))
}

// responseStart is what a response object says of its request.
type responseStart struct {
	model     string
	ch        *chat.Chat
	run       int
	createdAt time.Time
}

// responseObject is a response object of the Responses API.
type responseObject struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Model              string            `json:"model"`
	Output             []outputItem      `json:"output"`
	OutputText         string            `json:"output_text"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Conversation       conversationRef   `json:"conversation"`
	Usage              *responseUsage    `json:"usage"`
	Error              *responseError    `json:"error"`
	IncompleteDetails  *incompleteDetail `json:"incomplete_details"`
	Metadata           json.RawMessage   `json:"metadata"`
	Instructions       *string           `json:"instructions"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	Tools              []string          `json:"tools"`
	ToolChoice         string            `json:"tool_choice"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	Store              bool              `json:"store"`
	Background         bool              `json:"background"`
	Text               responseText      `json:"text"`
}

type conversationRef struct {
	ID string `json:"id"`
}

type responseText struct {
	Format struct {
		Type string `json:"type"`
	} `json:"format"`
}

type responseUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	OutputTokens       int64 `json:"output_tokens"`
	TotalTokens        int64 `json:"total_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incompleteDetail struct {
	Reason string `json:"reason"`
}

// outputItem is a message item of a response's output.
type outputItem struct {
	Type    string       `json:"type"`
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputPart `json:"content"`
}

type outputPart struct {
	Type        string   `json:"type"`
	Text        string   `json:"text"`
	Annotations []string `json:"annotations"`
	Logprobs    []string `json:"logprobs"`
}

// object is the response for a run as res has seen it.
func (s responseStart) object(res *runResult) responseObject {
	o := responseObject{ID: responseID(s.ch.ID, s.run), Object: "response", CreatedAt: s.createdAt.Unix(), Model: s.model,
		Output: []outputItem{}, Conversation: conversationRef{ID: s.ch.ID}, Metadata: json.RawMessage("{}"),
		Tools: []string{}, ToolChoice: "auto", Store: true}
	o.Text.Format.Type = "text"
	if len(s.ch.Metadata) > 0 && s.ch.Metadata[0] == '{' {
		o.Metadata = s.ch.Metadata
	}
	if s.run > 1 {
		prev := responseID(s.ch.ID, s.run-1)
		o.PreviousResponseID = &prev
	}
	switch {
	case !res.ended:
		o.Status = "in_progress"
	case res.outcome == outcomeCompleted:
		o.Status = "completed"
	case res.outcome == outcomeInputRequired:
		o.Status = "incomplete"
		o.IncompleteDetails = &incompleteDetail{Reason: "input_required"}
	case res.outcome == outcomeCancelled:
		o.Status = "cancelled"
	default:
		o.Status = "failed"
		o.Error = &responseError{Code: "server_error", Message: res.detail}
	}
	if res.ended {
		u := &responseUsage{InputTokens: res.usage.PromptTokens, OutputTokens: res.usage.CompletionTokens,
			TotalTokens: res.usage.PromptTokens + res.usage.CompletionTokens}
		o.Usage = u
	}
	if res.ended && res.final != nil {
		o.Output = []outputItem{messageItem(s.ch.ID, res.final, "completed")}
		o.OutputText = res.final.Content
	}
	return o
}

// messageItem is a run's final message as an output item.
func messageItem(chatID string, m *chat.Message, status string) outputItem {
	it := outputItem{Type: "message", ID: "msg_" + chatID + "_" + strconv.FormatInt(m.Seq, 10), Status: status, Role: "assistant", Content: []outputPart{}}
	if status == "completed" {
		it.Content = []outputPart{{Type: "output_text", Text: m.Content, Annotations: []string{}, Logprobs: []string{}}}
	}
	return it
}

// streamResponse answers a response as Responses events: created and
// in_progress at once; once the run has ended, its final message as an
// output item whose text comes as output_text deltas (the model's own
// fragments, or the whole text as one), then completed. A run that does
// not complete ends the stream with response.failed (or
// response.incomplete when the team asked a human).
func (h *Handler) streamResponse(w http.ResponseWriter, r *http.Request, tenant string, rs responseStart, after int64) {
	ctx := r.Context()
	rc := http.NewResponseController(w)
	setStreamHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	seq := 0
	emit := func(typ string, fields map[string]any) error {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		b, err := json.Marshal(fields)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		return err
	}
	start := rs.object(&runResult{})
	if emit("response.created", map[string]any{"response": start}) != nil ||
		emit("response.in_progress", map[string]any{"response": start}) != nil || rc.Flush() != nil {
		return
	}
	res, err := h.follow(ctx, tenant, rs.ch.ID, rs.run, after, func() error { return heartbeat(w, rc) })
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("openai api: stream ended early", "path", r.URL.Path, "error", err)
			_ = emit("error", map[string]any{"code": "stream_interrupted", "message": "the stream was interrupted (" + err.Error() + "); the run goes on", "param": nil})
			_ = rc.Flush()
		}
		return
	}
	h.count(endpointResponses, res)
	if res.outcome == outcomeTimeout {
		_ = emit("error", map[string]any{"code": "run_timeout", "message": res.detail, "param": nil})
		_ = rc.Flush()
		return
	}
	final := rs.object(res)
	if res.outcome != outcomeCompleted {
		typ := "response.failed"
		if final.Status == "incomplete" {
			typ = "response.incomplete"
		}
		if final.Error == nil {
			final.Error = &responseError{Code: string(res.outcome), Message: res.detail}
		}
		_ = emit(typ, map[string]any{"response": final})
		_ = rc.Flush()
		return
	}
	if res.final != nil {
		if h.streamItem(emit, rs.ch.ID, res) != nil {
			return
		}
	}
	_ = emit("response.completed", map[string]any{"response": final})
	_ = rc.Flush()
}

// streamItem emits the final message as an output item with its text in
// output_text deltas.
func (h *Handler) streamItem(emit func(string, map[string]any) error, chatID string, res *runResult) error {
	m := res.final
	item := messageItem(chatID, m, "in_progress")
	part := outputPart{Type: "output_text", Text: "", Annotations: []string{}, Logprobs: []string{}}
	at := func(f map[string]any) map[string]any {
		f["item_id"], f["output_index"], f["content_index"] = item.ID, 0, 0
		return f
	}
	if err := emit("response.output_item.added", map[string]any{"output_index": 0, "item": item}); err != nil {
		return err
	}
	if err := emit("response.content_part.added", at(map[string]any{"part": part})); err != nil {
		return err
	}
	for _, p := range finalPieces(res) {
		if err := emit("response.output_text.delta", at(map[string]any{"delta": p, "logprobs": []string{}})); err != nil {
			return err
		}
	}
	if err := emit("response.output_text.done", at(map[string]any{"text": m.Content, "logprobs": []string{}})); err != nil {
		return err
	}
	part.Text = m.Content
	if err := emit("response.content_part.done", at(map[string]any{"part": part})); err != nil {
		return err
	}
	return emit("response.output_item.done", map[string]any{"output_index": 0, "item": messageItem(chatID, m, "completed")})
}
