package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/spec"
)

// call is one JSON-RPC request being served.
type call struct {
	h      *Handler
	w      http.ResponseWriter
	r      *http.Request
	tenant string
	team   string
	id     json.RawMessage
	method string
}

func (c *call) fail(e *rpcError) { c.h.answer(c.w, c.r, c.method, c.id, nil, e) }

func (c *call) ok(result any) { c.h.answer(c.w, c.r, c.method, c.id, result, nil) }

// failErr answers the error of the chat service, logging ours. A call
// cut by the server's shutdown says so.
func (c *call) failErr(err error, taskID string) {
	if runtime.ServerEnded(c.r.Context()) {
		c.h.log.Warn("a2a call cut by shutdown", "method", c.method, "team", c.team, "tenant", c.tenant, "task_id", taskID)
		err = runtime.ErrStopped
	}
	e, internal := rpcErrorOf(err, taskID)
	if internal && c.r.Context().Err() == nil {
		c.h.log.Error("a2a call failed", "method", c.method, "team", c.team, "tenant", c.tenant, "task_id", taskID, "error", err)
	}
	c.fail(e)
}

// target is the run a call is about, once its chat is known to be the
// tenant's and of this team.
type target struct {
	chat *chat.Chat
	run  int
}

// task finds the run a task id names.
func (c *call) task(ctx context.Context, taskID string) (*target, error) {
	chatID, run, ok := ParseTaskID(taskID)
	if !ok {
		return nil, taskNotFound(taskID)
	}
	ch, err := c.h.chats.Get(ctx, c.tenant, chatID)
	if err != nil {
		return nil, err
	}
	if ch.Team == nil || ch.Team.Name != c.team || run > ch.Run+ch.QueuedRuns {
		return nil, taskNotFound(taskID)
	}
	return &target{chat: ch, run: run}, nil
}

// loaded finds the task an id names and folds its state, or answers the
// error and returns false.
func (c *call) loaded(taskID string) (*target, *runView, bool) {
	ctx := c.r.Context()
	t, err := c.task(ctx, taskID)
	if err != nil {
		c.failErr(err, taskID)
		return nil, nil, false
	}
	v, err := c.load(ctx, t.chat.ID, t.run)
	if err != nil {
		c.failErr(err, taskID)
		return nil, nil, false
	}
	return t, v, true
}

// load folds the chat's log into the state of the run.
func (c *call) load(ctx context.Context, chatID string, run int) (*runView, error) {
	v := newRunView(chatID, run)
	return v, c.follow(ctx, v, 0, nil)
}

// follow folds the chat's events after v.lastSeq into v, up to seq upTo
// (0: all there are), handing what each makes to emit (nil: nothing is
// sent).
func (c *call) follow(ctx context.Context, v *runView, upTo int64, emit func([]StreamResponse) error) error {
	for {
		limit := eventPage
		if upTo > 0 {
			if v.lastSeq >= upTo {
				return nil
			}
			limit = int(min(int64(eventPage), upTo-v.lastSeq))
		}
		evs, err := c.h.chats.Events(ctx, c.tenant, v.chatID, v.lastSeq, limit)
		if err != nil {
			return err
		}
		for _, e := range evs {
			out := v.apply(e)
			if emit != nil && len(out) > 0 {
				if err := emit(out); err != nil {
					return err
				}
			}
		}
		if len(evs) < limit {
			return nil
		}
	}
}

// sendMessage serves SendMessage and SendStreamingMessage: the message
// starts a chat of the team (no context), posts the context's next run,
// or answers the input the task waits for.
func (c *call) sendMessage(raw json.RawMessage, stream bool) {
	var p SendMessageRequest
	if e := decodeParams(raw, &p); e != nil {
		c.fail(e)
		return
	}
	m := p.Message
	if m == nil {
		c.fail(invalidParams("params.message is required"))
		return
	}
	switch {
	case m.Role != RoleUser && m.Role != "":
		c.fail(invalidParams("params.message.role must be %s", RoleUser))
		return
	case len(m.Parts) == 0 || len(m.Parts) > maxParts:
		c.fail(invalidParams("params.message.parts must hold 1 to %d parts", maxParts))
		return
	case len(m.MessageID) > maxMessageIDBytes:
		c.fail(invalidParams("params.message.messageId must be at most %d bytes", maxMessageIDBytes))
		return
	}
	var cfg SendMessageConfiguration
	if p.Configuration != nil {
		cfg = *p.Configuration
	}
	if e := checkHistoryLength(cfg.HistoryLength); e != nil {
		c.fail(e)
		return
	}
	text, data, e := messageContent(m.Parts)
	if e != nil {
		c.fail(e)
		return
	}
	ctx := c.r.Context()
	var (
		chatID string
		run    int
		// since is where the chat's log stood when the message was
		// taken: a task settled by an event up to it (the input request
		// just answered) is not yet the answer to this message, and a
		// stream shows the task as it stood then and everything after.
		since int64
		err   error
	)
	push := cfg.TaskPushNotificationConfig
	switch {
	case m.TaskID != "" || m.ContextID != "":
		id := m.ContextID
		if id == "" {
			id, _, _ = ParseTaskID(m.TaskID)
		}
		// The push config of an existing chat is the one it was created
		// with: checked before the message changes anything.
		if err = c.checkPushOf(ctx, id, push); err != nil && !errorsIsNotFound(err) {
			break
		}
		if m.TaskID != "" {
			chatID, run, since, err = c.answerTask(ctx, m, text, data)
		} else {
			chatID, run, since, err = c.continueContext(ctx, m, text, data)
		}
	default:
		if data != nil {
			c.fail(invalidParams("a new task takes its task as text parts"))
			return
		}
		chatID, run, since, err = c.create(ctx, m.MessageID, text, push)
	}
	if err != nil {
		c.failErr(err, m.TaskID)
		return
	}
	if stream {
		c.streamTask(chatID, run, since, cfg.HistoryLength, nil)
		return
	}
	v, err := c.wait(ctx, chatID, run, since, !cfg.ReturnImmediately)
	if err != nil {
		c.failErr(err, TaskID(chatID, run))
		return
	}
	c.ok(SendMessageResponse{Task: v.task(c.historyLength(cfg.HistoryLength))})
}

// create starts a chat of the team with the text as its task: run 1. The
// messageId is the create's idempotency key, so a client's retry of the
// same message is the same task.
func (c *call) create(ctx context.Context, messageID, text string, push *TaskPushNotificationConfig) (string, int, int64, error) {
	req := map[string]any{"team_ref": c.team, "task": text}
	if e := pushBody(req, push); e != nil {
		return "", 0, 0, e
	}
	body, err := json.Marshal(req)
	if err != nil {
		return "", 0, 0, err
	}
	key := ""
	if messageID != "" {
		key = "a2a:" + c.team + ":" + messageID
	}
	ch, created, err := c.h.chats.Create(ctx, &chat.CreateParams{Tenant: c.tenant, Body: body, IdempotencyKey: key})
	if err != nil {
		return "", 0, 0, err
	}
	if created {
		c.h.log.Info("a2a task created", "chat_id", ch.ID, "team", c.team, "tenant", c.tenant)
	}
	return ch.ID, 1, ch.LastSeq, nil
}

// continueContext handles a message to a known context without a task:
// the answer to the chat's pending input, else the chat's next run.
func (c *call) continueContext(ctx context.Context, m *Message, text string, data json.RawMessage) (string, int, int64, error) {
	ch, err := c.h.chats.Get(ctx, c.tenant, m.ContextID)
	if err != nil {
		if errorsIsNotFound(err) {
			return "", 0, 0, invalidParams("context %q not found", m.ContextID)
		}
		return "", 0, 0, err
	}
	if ch.Team == nil || ch.Team.Name != c.team {
		return "", 0, 0, invalidParams("context %q not found", m.ContextID)
	}
	if ch.Status == chat.StatusAwaitingInput {
		since, err := c.answer(ctx, ch, text, data)
		return ch.ID, ch.Run, since, err
	}
	if data != nil {
		return "", 0, 0, invalidParams("a new task takes its task as text parts")
	}
	after, n, err := c.h.chats.SubmitRun(ctx, c.tenant, ch.ID, "", spec.TextRun(text))
	if err != nil {
		return "", 0, 0, err
	}
	c.h.log.Info("a2a task posted", "chat_id", ch.ID, "run", n, "team", c.team, "tenant", c.tenant)
	return ch.ID, n, after.LastSeq, nil
}

// answerTask handles a message naming a task: the answer to the input
// the task waits for.
func (c *call) answerTask(ctx context.Context, m *Message, text string, data json.RawMessage) (string, int, int64, error) {
	t, err := c.task(ctx, m.TaskID)
	if err != nil {
		return "", 0, 0, err
	}
	if m.ContextID != "" && m.ContextID != t.chat.ID {
		return "", 0, 0, invalidParams("task %q is not of context %q", m.TaskID, m.ContextID)
	}
	if t.run != t.chat.Run || t.chat.Status != chat.StatusAwaitingInput {
		return "", 0, 0, unsupported("task %q is not waiting for input", m.TaskID)
	}
	since, err := c.answer(ctx, t.chat, text, data)
	return t.chat.ID, t.run, since, err
}

// answer turns a message into the answer of the chat's pending input: a
// data part is the answer as POST /v1/chats/{id}/input takes it (without
// request_id); text is the human's message, the speaker's name, or, for
// approvals, "approve" (everything held runs) or a reason to reject it.
// It returns the chat's last seq, which the answer comes after.
func (c *call) answer(ctx context.Context, ch *chat.Chat, text string, data json.RawMessage) (int64, error) {
	var p chat.PendingInput
	if err := json.Unmarshal(ch.PendingInput, &p); err != nil {
		return 0, fmt.Errorf("decode pending input of chat %s: %w", ch.ID, err)
	}
	in := chat.Input{RequestID: p.RequestID}
	switch {
	case data != nil:
		var a struct {
			Content   *string         `json:"content"`
			Speaker   *string         `json:"speaker"`
			Approvals []chat.Approval `json:"approvals"`
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			return 0, invalidParams("a data part answers with {\"content\"?, \"speaker\"?, \"approvals\"?}: %v", err)
		}
		in.Content, in.Speaker, in.Approvals = a.Content, a.Speaker, a.Approvals
	case p.Kind == chat.InputSpeaker:
		s := strings.TrimSpace(text)
		in.Speaker = &s
	case p.Kind == chat.InputApproval:
		in.Approvals = p.ApprovalsFromText(text)
	default:
		in.Content = &text
	}
	if _, err := c.h.chats.Input(ctx, c.tenant, ch.ID, "", &in); err != nil {
		return 0, err
	}
	c.h.log.Info("a2a input answered", "chat_id", ch.ID, "run", ch.Run, "kind", p.Kind, "team", c.team, "tenant", c.tenant)
	return ch.LastSeq, nil
}

// messageContent is a message's text parts joined, and its data part (one
// at most, for answers); files are not taken.
func messageContent(parts []Part) (string, json.RawMessage, *rpcError) {
	var texts []string
	var data json.RawMessage
	for i, p := range parts {
		switch {
		case p.Text != nil:
			texts = append(texts, *p.Text)
		case len(p.Data) > 0 && string(p.Data) != "null":
			if data != nil {
				return "", nil, invalidParams("params.message.parts: at most one data part")
			}
			data = p.Data
		case p.Raw != nil || p.URL != nil:
			return "", nil, &rpcError{Code: codeContentTypeNotSupported,
				Message: fmt.Sprintf("params.message.parts[%d]: files are not taken; send text (or a data part answering pending input)", i), outcome: contentTypeOutcome}
		default:
			return "", nil, invalidParams("params.message.parts[%d] holds no text, data or file", i)
		}
	}
	if data != nil && len(texts) > 0 {
		return "", nil, invalidParams("params.message.parts: text and a data part cannot be mixed")
	}
	return strings.Join(texts, "\n"), data, nil
}

func checkHistoryLength(n *int) *rpcError {
	if n != nil && *n < 0 {
		return invalidParams("historyLength must not be negative")
	}
	return nil
}

// historyLength is the client's history length within the cap.
func (c *call) historyLength(n *int) *int {
	m := c.h.cfg.MaxHistory
	if n != nil && *n < m {
		m = *n
	}
	return &m
}

// wait returns the run's state once it settled past since (ended, or
// asks for input again), or at once when block is false, or when
// MaxBlock has passed.
func (c *call) wait(ctx context.Context, chatID string, run int, since int64, block bool) (*runView, error) {
	wake, stop := c.h.chats.Subscribe(chatID)
	defer stop()
	v, err := c.load(ctx, chatID, run)
	if err != nil || !block {
		return v, err
	}
	deadline := time.NewTimer(c.h.cfg.MaxBlock)
	defer deadline.Stop()
	// A wake-up can be missed by nothing (Subscribe came first), but the
	// log is read again now and then all the same: a store that lost its
	// notifications for a while must not keep a caller waiting forever.
	tick := time.NewTicker(c.h.cfg.Heartbeat)
	defer tick.Stop()
	for !v.settledAfter(since) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return v, nil
		case <-wake:
		case <-tick.C:
		}
		if err := c.follow(ctx, v, 0, nil); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// getTask serves GetTask.
func (c *call) getTask(raw json.RawMessage) {
	var p GetTaskRequest
	if e := decodeParams(raw, &p); e != nil {
		c.fail(e)
		return
	}
	if e := checkHistoryLength(p.HistoryLength); e != nil {
		c.fail(e)
		return
	}
	if _, v, ok := c.loaded(p.ID); ok {
		c.ok(v.task(c.historyLength(p.HistoryLength)))
	}
}

// cancelTask serves CancelTask: the chat's run is cancelled, and the task
// is answered once its log says so (or as it stands after a while).
func (c *call) cancelTask(raw json.RawMessage) {
	var p TaskIDRequest
	if e := decodeParams(raw, &p); e != nil {
		c.fail(e)
		return
	}
	ctx := c.r.Context()
	t, v, ok := c.loaded(p.ID)
	if !ok {
		return
	}
	if terminalState(v.state()) || t.run != t.chat.Run {
		c.fail(&rpcError{Code: codeTaskNotCancelable, Message: fmt.Sprintf("task %q has ended: %s", p.ID, v.state()), outcome: taskNotCancelableOutcome})
		return
	}
	if _, _, err := c.h.chats.Cancel(ctx, c.tenant, t.chat.ID); err != nil {
		c.failErr(err, p.ID)
		return
	}
	c.h.log.Info("a2a task cancel requested", "chat_id", t.chat.ID, "run", t.run, "team", c.team, "tenant", c.tenant)
	wctx, cancel := context.WithTimeout(ctx, cancelWait)
	defer cancel()
	v, err := c.wait(wctx, t.chat.ID, t.run, v.lastSeq, true)
	if err != nil {
		if wctx.Err() == nil {
			c.failErr(err, p.ID)
			return
		}
		if v, err = c.load(ctx, t.chat.ID, t.run); err != nil {
			c.failErr(err, p.ID)
			return
		}
	}
	c.ok(v.task(c.historyLength(nil)))
}

// cancelWait bounds how long CancelTask waits for the run to record its
// end; a run on a replica that is gone ends when another takes it over.
const cancelWait = 10 * time.Second

// subscribe serves SubscribeToTask: the task as it stands, then its
// updates until it settles.
func (c *call) subscribe(raw json.RawMessage) {
	var p TaskIDRequest
	if e := decodeParams(raw, &p); e != nil {
		c.fail(e)
		return
	}
	t, v, ok := c.loaded(p.ID)
	if !ok {
		return
	}
	if terminalState(v.state()) {
		c.fail(unsupported("task %q has ended (%s): read it with GetTask", p.ID, v.state()))
		return
	}
	c.streamTask(t.chat.ID, t.run, 0, nil, v)
}
