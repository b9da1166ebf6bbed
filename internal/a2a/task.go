package a2a

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/api"
	"github.com/agentd/agentd/internal/chat"
)

// This file is the mapping itself, a pure function of a chat's log: a
// task is one run of a chat (its context), and what A2A says of the task
// (state, history, the result artifact, stream events) is folded from the
// run's events. Resubscribing replays the same fold up to a seq and
// streams what follows, so a stream and a snapshot never disagree.

// taskSep separates the chat id and the run number in a task id.
const taskSep = "-run-"

// TaskID is the A2A task id of a chat's run.
func TaskID(chatID string, run int) string {
	return chatID + taskSep + strconv.Itoa(run)
}

// ParseTaskID splits a task id into the chat id and the run number.
func ParseTaskID(id string) (chatID string, run int, ok bool) {
	c, r, found := strings.Cut(id, taskSep)
	if !found || c == "" {
		return "", 0, false
	}
	n, err := strconv.Atoi(r)
	if err != nil || n < 1 || strconv.Itoa(n) != r {
		return "", 0, false
	}
	return c, n, true
}

// resultArtifactID names the artifact holding a run's final message.
const resultArtifactID = "result"

// runView folds a chat's events into the state of one of its runs.
type runView struct {
	chatID string
	run    int
	// started: the run's run.started was folded; over: a later run's was.
	started, over bool
	// running: chat.running was folded since the run started, so the
	// messages that follow are the team's (the task comes before it).
	running bool
	status  TaskStatus
	history []Message
	// final is the last message the team said in the run: its result.
	final   *Message
	lastSeq int64
	// statusSeq is the seq of the event that set the status.
	statusSeq int64
}

func newRunView(chatID string, run int) *runView {
	return &runView{chatID: chatID, run: run, status: TaskStatus{State: StateSubmitted}}
}

// state is the task's state.
func (v *runView) state() string { return v.status.State }

// settled reports whether the task has ended or waits for the client: a
// blocking send answers then, and a stream ends.
func (v *runView) settled() bool {
	return terminalState(v.status.State) || v.status.State == StateInputRequired
}

// settledAfter reports whether the task settled by an event after seq
// since: the input request a message just answered does not count.
func (v *runView) settledAfter(since int64) bool {
	return v.settled() && v.statusSeq > since
}

// apply folds the next event of the chat's log and returns what a stream
// of the task sends for it.
func (v *runView) apply(e chat.Event) []StreamResponse {
	if e.Seq > v.lastSeq {
		v.lastSeq = e.Seq
	}
	if run, ok := api.StartedRun(e); ok {
		switch {
		case run == v.run:
			v.started = true
		case run > v.run && v.started:
			v.over = true
		}
		return nil
	}
	if !v.started || v.over || terminalState(v.status.State) {
		return nil
	}
	out := v.fold(e)
	if len(out) > 0 {
		v.statusSeq = e.Seq
	}
	return out
}

// fold applies an event of the run.
func (v *runView) fold(e chat.Event) []StreamResponse {
	ts := e.CreatedAt.UTC().Format(time.RFC3339Nano)
	switch {
	case e.Type == chat.EventChatRunning:
		v.running = true
		if v.status.State == StateWorking {
			return nil
		}
		v.status = TaskStatus{State: StateWorking, Timestamp: ts}
		return []StreamResponse{v.statusUpdate()}
	case e.Type == chat.EventMessage:
		cm, _ := chat.MessageFromEvent(e)
		m, ok := v.message(cm)
		if !ok {
			return nil
		}
		v.history = append(v.history, m)
		if !v.running {
			return nil // the task, which the client sent
		}
		v.final = &v.history[len(v.history)-1]
		v.status = TaskStatus{State: StateWorking, Message: &m, Timestamp: ts}
		return []StreamResponse{v.statusUpdate()}
	case e.Type == chat.EventInputRequested:
		msg := v.agentText(fmt.Sprintf("%s-%d", v.chatID, e.Seq), inputPrompt(e.Data))
		msg.Metadata = mustJSON(map[string]json.RawMessage{"pendingInput": e.Data})
		v.status = TaskStatus{State: StateInputRequired, Message: &msg, Timestamp: ts}
		return []StreamResponse{v.statusUpdate()}
	case e.Type.Terminal():
		d, _ := api.EndingOf(e)
		var out []StreamResponse
		st := TaskStatus{Timestamp: ts}
		switch d.Status {
		case chat.StatusCompleted:
			st.State, st.Message = StateCompleted, v.final
			if a := v.artifact(); a != nil {
				out = append(out, StreamResponse{ArtifactUpdate: &TaskArtifactUpdateEvent{
					TaskID: TaskID(v.chatID, v.run), ContextID: v.chatID, Artifact: *a, LastChunk: true}})
			}
		case chat.StatusCancelled:
			m := v.agentText(fmt.Sprintf("%s-%d", v.chatID, e.Seq), d.StopDetail)
			st.State, st.Message = StateCanceled, &m
		default:
			m := v.agentText(fmt.Sprintf("%s-%d", v.chatID, e.Seq), cmp.Or(d.Error, d.StopDetail, "the run failed"))
			st.State, st.Message = StateFailed, &m
		}
		v.status = st
		return append(out, v.statusUpdate())
	}
	return nil
}

// message is a chat message as an A2A message, or false for what is not
// part of the conversation a client follows (tool calls and results, a
// team agent's inner messages).
func (v *runView) message(cm chat.Message) (Message, bool) {
	if cm.Content == "" || cm.Team != "" || len(cm.ToolCalls) > 0 ||
		(cm.Role != chat.RoleUser && cm.Role != chat.RoleAssistant) {
		return Message{}, false
	}
	role := RoleAgent
	if cm.Role == chat.RoleUser {
		role = RoleUser
	}
	text := cm.Content
	return Message{
		MessageID: fmt.Sprintf("%s-%d", v.chatID, cm.Seq), ContextID: v.chatID, TaskID: TaskID(v.chatID, v.run),
		Role: role, Parts: []Part{{Text: &text}},
		Metadata: mustJSON(map[string]any{"name": cm.Name, "type": cm.Type, "seq": cm.Seq}),
	}, true
}

// agentText is a message of the agent (the team) with one text part.
func (v *runView) agentText(id, text string) Message {
	return Message{MessageID: id, ContextID: v.chatID, TaskID: TaskID(v.chatID, v.run), Role: RoleAgent, Parts: []Part{{Text: &text}}}
}

// artifact is the run's result: its final message, once it completed.
func (v *runView) artifact() *Artifact {
	if v.final == nil {
		return nil
	}
	return &Artifact{ArtifactID: resultArtifactID, Name: "result", Description: "The team's final message.", Parts: v.final.Parts}
}

func (v *runView) statusUpdate() StreamResponse {
	return StreamResponse{StatusUpdate: &TaskStatusUpdateEvent{TaskID: TaskID(v.chatID, v.run), ContextID: v.chatID, Status: v.status}}
}

// task is the task as it stands, with at most historyLength messages of
// its history (the latest; nil: all of them).
func (v *runView) task(historyLength *int) *Task {
	t := &Task{ID: TaskID(v.chatID, v.run), ContextID: v.chatID, Status: v.status,
		Metadata: mustJSON(map[string]any{"chatId": v.chatID, "run": v.run})}
	h := v.history
	if historyLength != nil && *historyLength < len(h) {
		h = h[len(h)-max(*historyLength, 0):]
	}
	if len(h) > 0 {
		t.History = append([]Message(nil), h...)
	}
	if v.status.State == StateCompleted {
		if a := v.artifact(); a != nil {
			t.Artifacts = []Artifact{*a}
		}
	}
	return t
}

// inputPrompt is what a client is asked when a chat waits for input: the
// request's reason, and the choices of a speaker selection or the calls
// and code held for approval.
func inputPrompt(data json.RawMessage) string {
	var p chat.PendingInput
	if err := json.Unmarshal(data, &p); err != nil {
		return "The team waits for input."
	}
	var b strings.Builder
	b.WriteString(cmp.Or(p.Reason, "The team waits for input."))
	switch p.Kind {
	case chat.InputSpeaker:
		fmt.Fprintf(&b, "\nReply with the name of the next speaker: %s.", strings.Join(p.Candidates, ", "))
	case chat.InputApproval:
		for _, tc := range p.ToolCalls {
			fmt.Fprintf(&b, "\nHeld call %s: %s(%s)", tc.ID, tc.Function.Name, tc.Function.Arguments)
		}
		for _, cb := range p.CodeBlocks {
			fmt.Fprintf(&b, "\nHeld %s code:\n%s", cb.Language, cb.Code)
		}
		b.WriteString("\nReply \"approve\" to run it all, anything else to reject it (the text is the reason), or a data part {\"approvals\": [...]}.")
	}
	return b.String()
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode %T: %v", v, err)) // only our own plain values are encoded
	}
	return b
}
