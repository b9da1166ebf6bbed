package agui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/spec"
)

// threadKey is the chat metadata key holding an AG-UI thread's id: the
// client names its threads, and a thread's first run finds no chat by
// that name and creates one.
const threadKey = "ag_ui_thread"

// chatHeader names the chat a thread is, for clients that want to read
// it through /v1.
const chatHeader = "Agentd-Chat-Id"

// Outcomes of the runs metric besides a RUN_FINISHED's own (interrupt,
// cancelled).
const (
	outcomeSuccess     = "success"
	outcomeError       = "error"
	outcomeTimeout     = "timeout"
	outcomeInterrupted = "interrupted"
)

// eventPageSize is how many events one read of a snapshot takes.
const eventPageSize = 256

// maxSnapshotEvents bounds the events read for a resumed thread's
// MESSAGES_SNAPSHOT; a longer chat's snapshot holds its latest messages.
const maxSnapshotEvents = 20 * eventPageSize

// Run serves POST /ag-ui/{team}: the run a RunAgentInput asks for, on the
// chat its thread is, streamed as AG-UI events. Errors found before the
// stream begins are answered as problems; after, as RUN_ERROR. key is
// the request's Idempotency-Key ("" for none), which a later run takes
// as POST /v1/chats/{id}/runs does.
func (h *Handler) Run(w http.ResponseWriter, r *http.Request, tenant, team, key string) {
	ctx := r.Context()
	in, err := h.readInput(w, r)
	if err != nil {
		h.cfg.Fail(w, r, err)
		return
	}
	if _, err := h.rt.GetTeam(ctx, tenant, team, 0); err != nil {
		h.cfg.Fail(w, r, err)
		return
	}
	st, err := h.start(ctx, tenant, team, key, in)
	if err != nil {
		h.cfg.Fail(w, r, err)
		return
	}
	h.log.Info("ag-ui run posted", "chat_id", st.chatID, "run", st.run, "thread_id", in.ThreadID, "team", team, "tenant", tenant, "resumed", st.snapshot != nil)
	h.stream(w, r, tenant, in, st)
}

// started is where a run's stream begins.
type started struct {
	chatID string
	run    int
	// after is the chat's last seq before the run's events.
	after int64
	// answered: the run is the chat's current one, going on with the
	// answer to its pending input (its run.started is behind after).
	answered bool
	// snapshot are the thread's messages so far, for a resumed thread.
	snapshot []map[string]any
}

// start posts the run: a new chat for an unknown thread, else the
// answer to the chat's pending input or the chat's next run.
func (h *Handler) start(ctx context.Context, tenant, team, key string, in *runAgentInput) (*started, error) {
	ch, err := h.thread(ctx, tenant, team, in.ThreadID)
	if err != nil {
		return nil, err
	}
	task := in.lastUserText()
	if ch == nil {
		if task == "" {
			return nil, invalid(spec.Problem{Path: "/messages", Message: "the last message is the new thread's task, so it must be the user's and hold text"})
		}
		body, err := json.Marshal(map[string]any{"team_ref": team, "task": task, "metadata": map[string]string{threadKey: in.ThreadID}})
		if err != nil {
			return nil, fmt.Errorf("encode create request: %w", err)
		}
		// The thread names the key: two first runs of one thread at once
		// make one chat.
		ch, _, err := h.rt.Create(ctx, &chat.CreateParams{Tenant: tenant, Body: body, IdempotencyKey: "ag-ui:" + in.ThreadID})
		if err != nil {
			return nil, err
		}
		return &started{chatID: ch.ID, run: 1}, nil
	}
	snap, err := h.snapshot(ctx, tenant, ch)
	if err != nil {
		return nil, err
	}
	st := &started{chatID: ch.ID, snapshot: snap}
	if ch.Status == chat.StatusAwaitingInput {
		var p chat.PendingInput
		if err := json.Unmarshal(ch.PendingInput, &p); err != nil {
			return nil, fmt.Errorf("decode pending input of chat %s: %w", ch.ID, err)
		}
		a, err := in.answer(&p)
		if err != nil {
			return nil, err
		}
		if _, err := h.rt.Input(ctx, tenant, ch.ID, key, a); err != nil {
			return nil, err
		}
		st.run, st.after, st.answered = ch.Run, ch.LastSeq, true
		return st, nil
	}
	if task == "" {
		return nil, invalid(spec.Problem{Path: "/messages", Message: "the last message is the run's task, so it must be the user's and hold text"})
	}
	after, n, err := h.rt.SubmitRun(ctx, tenant, ch.ID, key, spec.TextRun(task))
	if err != nil {
		return nil, err
	}
	st.run, st.after = n, after.LastSeq
	return st, nil
}

// thread returns the chat a thread is: the chat the thread's id names
// (a thread begun elsewhere, through /v1 or A2A), else the chat made for
// it by an earlier run; nil for a new thread. A chat of another team is
// not the thread.
func (h *Handler) thread(ctx context.Context, tenant, team, threadID string) (*chat.Chat, error) {
	ch, err := h.rt.Get(ctx, tenant, threadID)
	switch {
	case err == nil:
		if ch.Team != nil && ch.Team.Name == team {
			return ch, nil
		}
		return nil, invalid(spec.Problem{Path: "/threadId", Message: "names a chat that is not of the team " + team})
	case !errors.Is(err, chat.ErrNotFound):
		return nil, err
	}
	chats, _, err := h.rt.List(ctx, &chat.ListChatsParams{Tenant: tenant, Team: team, Limit: 1,
		Metadata: []chat.MetadataMatch{{Key: threadKey, Value: threadID}}})
	if err != nil || len(chats) == 0 {
		return nil, err
	}
	// A listed chat is a summary: the full chat has the pending input.
	return h.rt.Get(ctx, tenant, chats[0].ID)
}

// snapshot reads a chat's messages so far as AG-UI messages.
func (h *Handler) snapshot(ctx context.Context, tenant string, ch *chat.Chat) ([]map[string]any, error) {
	var evs []chat.Event
	var after int64
	if ch.LastSeq > maxSnapshotEvents {
		after = ch.LastSeq - maxSnapshotEvents
	}
	for after < ch.LastSeq {
		page, err := h.rt.Events(ctx, tenant, ch.ID, after, eventPageSize)
		if err != nil {
			return nil, fmt.Errorf("read events of chat %s: %w", ch.ID, err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			if e.Seq <= ch.LastSeq {
				evs = append(evs, e)
			}
			after = e.Seq
		}
	}
	return snapshotMessages(evs), nil
}

// stream writes the run's events until it ends.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, tenant string, in *runAgentInput, st *started) {
	ctx := r.Context()
	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	hd.Set(chatHeader, st.chatID)
	w.WriteHeader(http.StatusOK)
	send := func(evs ...Event) error {
		for _, e := range evs {
			if err := writeEvent(w, e); err != nil {
				return err
			}
		}
		return rc.Flush()
	}
	if send(Event{"type": typeRunStarted, "threadId": in.ThreadID, "runId": in.RunID}) != nil {
		return
	}
	if st.snapshot != nil {
		if send(Event{"type": typeMessagesSnapshot, "messages": st.snapshot}) != nil {
			return
		}
	}
	m := newMapper(in.ThreadID, in.RunID, st.run)
	m.started = st.answered
	outcome, err := h.follow(ctx, tenant, st, m, send, func() error {
		if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
			return err
		}
		return rc.Flush()
	})
	if err != nil {
		if ctx.Err() != nil {
			return // the client went away; the run goes on
		}
		outcome = outcomeInterrupted
		h.log.Warn("ag-ui: stream ended early", "chat_id", st.chatID, "run", st.run, "error", err)
		_ = send(m.finish(Event{"type": typeRunError, "code": "stream_interrupted",
			"message": "the stream was interrupted (" + err.Error() + "); the run goes on: follow chat " + st.chatID + " at /v1/chats/" + st.chatID})...)
	}
	h.outcome.WithLabelValues(outcome).Inc()
	if outcome != outcomeSuccess {
		h.log.Info("ag-ui: run did not complete", "chat_id", st.chatID, "run", st.run, "outcome", outcome)
	}
}

// follow maps the run's events and deltas to the stream until the run
// ends (its outcome) or the wait passes.
func (h *Handler) follow(ctx context.Context, tenant string, st *started, m *mapper, send func(...Event) error, idle func() error) (string, error) {
	outcome := ""
	fl := &runtime.Follow{Tenant: tenant, ChatID: st.chatID, After: st.after, Wait: h.cfg.RunWait, Heartbeat: h.cfg.Heartbeat, Idle: idle,
		Event: func(e chat.Event) (bool, error) {
			out, done := m.event(e)
			if done {
				outcome = outcomeOf(out[len(out)-1])
			}
			return done, send(out...)
		},
		Delta: func(d chat.Delta) error { return send(m.delta(d)...) }}
	err := fl.Run(ctx, h.rt)
	if errors.Is(err, runtime.ErrFollowWait) {
		err := send(m.finish(Event{"type": typeRunError, "code": "run_timeout",
			"message": fmt.Sprintf("the run did not end within %s; it goes on: follow chat %s at /v1/chats/%s", h.cfg.RunWait, st.chatID, st.chatID)})...)
		return outcomeTimeout, err
	}
	return outcome, err
}

// outcomeOf is the metric's outcome of a run's last event.
func outcomeOf(e Event) string {
	if e.Type() == typeRunError {
		return outcomeError
	}
	if o, ok := e["outcome"].(map[string]any); ok {
		if t, ok := o["type"].(string); ok {
			return t
		}
	}
	return outcomeSuccess
}

// writeEvent writes e as an SSE event with data only, as AG-UI's HTTP
// binding reads them.
func writeEvent(w io.Writer, e Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "data: %s\n\n", b)
	return err
}
