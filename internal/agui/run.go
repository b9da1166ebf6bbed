package agui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/spec"
)

// threadKey is the chat metadata key holding an AG-UI thread's id: the
// client names its threads, and a thread's first run finds no chat by
// that name and creates one.
const threadKey = "ag_ui_thread"

// firstRunKey is the chat metadata key holding the key (runKey) of the
// run that made a thread's chat, so that the same run posted again (a
// client that lost its stream) is that run again and not the thread's
// next one.
const firstRunKey = "ag_ui_run"

// runKey is the idempotency key of a run: the request's Idempotency-Key,
// else its runId, which the client names uniquely per run. A POST with a
// runId the thread already ran is that run again (its answer, streamed
// from its start), never a second run.
func runKey(key string, in *runAgentInput) string {
	if key != "" {
		return key
	}
	return "ag-ui-run:" + in.RunID
}

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
// the request's Idempotency-Key ("" for none: the runId serves, see
// runKey), which a later run takes as POST /v1/chats/{id}/runs does.
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
	h.log.Info("ag-ui run posted", "chat_id", st.chatID, "run", st.run, "thread_id", in.ThreadID, "team", team, "tenant", tenant, "resumed", st.snapshot != nil, "repeated", st.repeated)
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
	// held are the messages the client holds once it has the stream's
	// first events: the snapshot, else the request's.
	held []heldMessage
	// repeated: the run that made the thread's chat, posted again.
	repeated bool
	// vars are the chat's context variables as of after (nil when the
	// stream reads the chat's log from its start).
	vars map[string]json.RawMessage
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
		req := map[string]any{"team_ref": team, "task": task, "metadata": map[string]string{threadKey: in.ThreadID, firstRunKey: runKey(key, in)}}
		if in.state != nil {
			// The client's state over the team's variables.
			req["context_variables"] = in.state
		}
		body, err := json.Marshal(req)
		if err != nil {
			return nil, fmt.Errorf("encode create request: %w", err)
		}
		// The thread names the key: two first runs of one thread at once
		// make one chat.
		ch, _, err := h.rt.Create(ctx, &chat.CreateParams{Tenant: tenant, Body: body, IdempotencyKey: "ag-ui:" + in.ThreadID})
		if err != nil {
			return nil, err
		}
		return &started{chatID: ch.ID, run: 1, held: heldOf(in.Messages)}, nil
	}
	key = runKey(key, in)
	if firstRun(ch) == key {
		// The run that made the thread's chat, posted again: its stream
		// is the run from its start, after a snapshot of the thread as
		// the run began (its history and task). The snapshot drops what
		// the client holds of an earlier stream of the run, to which a
		// client that kept it (HttpAgent run again with the same runId)
		// would otherwise add the replayed text a second time.
		evs, err := h.firstRunStart(ctx, tenant, ch.ID)
		if err != nil {
			return nil, err
		}
		snap := nameSnapshot(snapshotEntries(evs), heldOf(in.Messages), nil)
		return &started{chatID: ch.ID, run: 1, repeated: true, snapshot: snap, held: heldSnapshot(snap)}, nil
	}
	vars, err := decodeVars(ch)
	if err != nil {
		return nil, err
	}
	st := &started{chatID: ch.ID, vars: vars}
	changed := changedVars(in.state, vars)
	// own is the request's last message when the run takes it as its task
	// or a human's answer: the thread will hold it.
	var own *heldMessage
	if n := len(in.Messages); n > 0 && in.Messages[n-1].Role == "user" {
		h := heldOne(in.Messages[n-1])
		own = &h
	}
	if len(in.Resume) > 0 && !awaits(ch, in.Resume) {
		// The interrupt was answered already (a client that lost the
		// stream of its resume posts it again): the run from there.
		if st.run, st.after, err = h.answered(ctx, tenant, ch, in.Resume[0].InterruptID); err != nil {
			return nil, err
		}
		st.answered, st.repeated = true, true
		own = nil
	} else if ch.Status == chat.StatusAwaitingInput {
		var p chat.PendingInput
		if err := json.Unmarshal(ch.PendingInput, &p); err != nil {
			return nil, fmt.Errorf("decode pending input of chat %s: %w", ch.ID, err)
		}
		a, err := in.answer(&p)
		if err != nil {
			return nil, err
		}
		if a.Content == nil || own == nil || *a.Content != own.text {
			own = nil // the answer is not the last message
		}
		if _, err := h.rt.Input(ctx, tenant, ch.ID, key, a); err != nil {
			return nil, err
		}
		st.run, st.after, st.answered = ch.Run, ch.LastSeq, true
		if len(changed) > 0 {
			// The run an answer goes on with has merged its variables
			// already; the next run takes the change.
			h.log.Info("ag-ui: state of a resume not merged: the run is under way", "chat_id", ch.ID, "keys", len(changed))
		}
	} else if task == "" {
		// A client that got some of a run's messages and posts the run
		// again with its runId (HttpAgent run again) sends them after the
		// task: the run its key posted, streamed again as a repeat is.
		posted, n, err := h.rt.RunOfKey(ctx, tenant, ch.ID, key)
		if err != nil {
			return nil, err
		}
		if posted == nil {
			return nil, invalid(spec.Problem{Path: "/messages", Message: "the last message is the run's task, so it must be the user's and hold text"})
		}
		st.run, st.after, st.repeated = n, posted.LastSeq, true
		// The task is the client's last user message.
		own = nil
		for i := len(in.Messages) - 1; i >= 0; i-- {
			if in.Messages[i].Role == "user" {
				h := heldOne(in.Messages[i])
				own = &h
				break
			}
		}
	} else {
		// A repeat of the key answers the chat as the run's post left it:
		// its events start after that.
		req := spec.TextRun(task)
		// The client's state, as far as it differs from the thread's
		// variables, is merged as the run starts.
		req.ContextVariables = changed
		posted, n, err := h.rt.SubmitRun(ctx, tenant, ch.ID, key, req)
		if err != nil {
			return nil, err
		}
		st.run, st.after = n, posted.LastSeq
	}
	// The snapshot is the thread up to where the run starts, which a
	// repeated run's stream then replays, and the message the run takes
	// from the client when the thread does not hold it yet (a run that
	// waits for its turn).
	if st.snapshot, err = h.snapshot(ctx, tenant, ch.ID, st.after, heldOf(in.Messages), own); err != nil {
		return nil, err
	}
	st.held = heldSnapshot(st.snapshot)
	return st, nil
}

// decodeVars reads the context variables of a chat from the runtime.
func decodeVars(ch *chat.Chat) (map[string]json.RawMessage, error) {
	if len(ch.ContextVariables) == 0 {
		return nil, nil
	}
	var vars map[string]json.RawMessage
	if err := json.Unmarshal(ch.ContextVariables, &vars); err != nil {
		return nil, fmt.Errorf("decode context variables of chat %s: %w", ch.ID, err)
	}
	return vars, nil
}

// changedVars are the variables of state whose values vars does not hold
// (nil for none; a null is a removal): AG-UI clients send their whole state with every run,
// which is the thread's own as the last run's snapshots left it, so
// merging only what differs keeps the log free of changes that change
// nothing.
func changedVars(state, vars map[string]json.RawMessage) map[string]json.RawMessage {
	var out map[string]json.RawMessage
	for k, v := range state {
		old, ok := vars[k]
		if (ok && sameJSON(old, v)) || (!ok && string(bytes.TrimSpace(v)) == "null") {
			continue // the same value, or the removal of a variable not set
		}
		if out == nil {
			out = map[string]json.RawMessage{}
		}
		out[k] = v
	}
	return out
}

// sameJSON reports whether two JSON values are equal as values (object
// keys in any order, numbers as written).
func sameJSON(a, b json.RawMessage) bool {
	decode := func(raw json.RawMessage) (any, bool) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		return v, dec.Decode(&v) == nil
	}
	va, oka := decode(a)
	vb, okb := decode(b)
	return oka && okb && reflect.DeepEqual(va, vb)
}

// awaits reports whether ch waits for the input an interrupt of resume
// names.
func awaits(ch *chat.Chat, resume []resumeEntry) bool {
	if ch.Status != chat.StatusAwaitingInput {
		return false
	}
	var p chat.PendingInput
	if json.Unmarshal(ch.PendingInput, &p) != nil {
		return false
	}
	return slices.ContainsFunc(resume, func(e resumeEntry) bool { return e.InterruptID == p.RequestID })
}

// answered finds where an answered interrupt of ch left its run: the run
// and the seq of its input request, from which the run's stream goes on
// as it did after the answer. An interrupt the chat's latest events do
// not hold is a 409.
func (h *Handler) answered(ctx context.Context, tenant string, ch *chat.Chat, interruptID string) (run int, after int64, err error) {
	var from int64
	if ch.LastSeq > maxSnapshotEvents {
		from = ch.LastSeq - maxSnapshotEvents
	}
	later := 0 // runs started after the request
	for from < ch.LastSeq {
		page, err := h.rt.Events(ctx, tenant, ch.ID, from, eventPageSize)
		if err != nil {
			return 0, 0, fmt.Errorf("read events of chat %s: %w", ch.ID, err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			from = e.Seq
			switch e.Type {
			case chat.EventRunStarted:
				later++
			case chat.EventInputRequested:
				var p chat.PendingInput
				if chat.DecodeData(e, &p) == nil && p.RequestID == interruptID {
					after, later = e.Seq, 0
				}
			}
		}
	}
	if after == 0 {
		return 0, 0, fmt.Errorf("%w: the interrupt %s is not the thread's: it was never asked, or too long ago", chat.ErrNoPendingInput, interruptID)
	}
	return ch.Run - later, after, nil
}

// firstRun is the key of the run that made a thread's chat ("" for a
// chat made otherwise).
func firstRun(ch *chat.Chat) string {
	var md map[string]any
	if json.Unmarshal(ch.Metadata, &md) != nil {
		return ""
	}
	id, _ := md[firstRunKey].(string)
	return id
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

// firstRunStart reads a chat's events up to the end of run 1's start:
// its run.started and the task messages that follow it.
func (h *Handler) firstRunStart(ctx context.Context, tenant, chatID string) ([]chat.Event, error) {
	var evs []chat.Event
	started := false
	for {
		page, err := h.rt.Events(ctx, tenant, chatID, lastSeq(evs), eventPageSize)
		if err != nil {
			return nil, fmt.Errorf("read events of chat %s: %w", chatID, err)
		}
		for _, e := range page {
			var d chat.MessageData
			isTask := e.Type == chat.EventMessage && chat.DecodeData(e, &d) == nil && d.Kind == chat.KindTask
			if started && !isTask {
				return evs, nil
			}
			started = started || e.Type == chat.EventRunStarted
			evs = append(evs, e)
		}
		if len(page) < eventPageSize {
			return evs, nil
		}
	}
}

// lastSeq is the seq of the last of evs (0 for none).
func lastSeq(evs []chat.Event) int64 {
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Seq
}

// snapshot reads a chat's messages up to seq upTo as AG-UI messages,
// named for a client that holds held (see nameSnapshot), pending ending
// it unless the thread holds it.
func (h *Handler) snapshot(ctx context.Context, tenant, chatID string, upTo int64, held []heldMessage, pending *heldMessage) ([]map[string]any, error) {
	var evs []chat.Event
	var after int64
	if upTo > maxSnapshotEvents {
		after = upTo - maxSnapshotEvents
	}
	for after < upTo {
		page, err := h.rt.Events(ctx, tenant, chatID, after, eventPageSize)
		if err != nil {
			return nil, fmt.Errorf("read events of chat %s: %w", chatID, err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			if e.Seq <= upTo {
				evs = append(evs, e)
			}
			after = e.Seq
		}
	}
	return nameSnapshot(snapshotEntries(evs), held, pending), nil
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
	m.vars = st.vars
	m.started = st.answered
	if st.answered {
		// The run's run.started is behind: its state is sent now.
		if send(m.stateSnapshot()) != nil {
			return
		}
	}
	outcome, err := h.follow(ctx, tenant, st, m, send, func() error {
		if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
			return err
		}
		return rc.Flush()
	})
	if err != nil {
		if ctx.Err() != nil && !runtime.ServerEnded(ctx) {
			return // the client went away; the run goes on
		}
		if runtime.ServerEnded(ctx) {
			err = runtime.ErrStopped
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
	held := st.held
	fl := &runtime.Follow{Tenant: tenant, ChatID: st.chatID, After: st.after, Wait: h.cfg.RunWait, Heartbeat: h.cfg.Heartbeat, Idle: idle,
		Event: func(e chat.Event) (bool, error) {
			out, done := m.event(e)
			held = heldFrom(held, out)
			if done {
				outcome = outcomeOf(out[len(out)-1])
				if m.voided || !inOrder(held, m.landed) {
					// The client holds a fragment of a reply that was
					// made again, or the run's messages in another order
					// than the thread's (replies streamed side by side,
					// a tool result after a sibling's reply): the thread
					// as it is replaces what it holds.
					snap, err := h.snapshot(ctx, tenant, st.chatID, e.Seq, held, nil)
					if err != nil {
						return true, err
					}
					last := out[len(out)-1]
					out = append(out[:len(out)-1], Event{"type": typeMessagesSnapshot, "messages": snap}, last)
				}
			}
			return done, send(out...)
		},
		Delta: func(d chat.Delta) error {
			out := m.delta(d)
			held = heldFrom(held, out)
			return send(out...)
		}}
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
