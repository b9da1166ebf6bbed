package agui

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentd/agentd/internal/api"
	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/chat/engine"
)

// AG-UI event types (the type field of every event), as @ag-ui/core 1.0
// names them.
const (
	typeRunStarted         = "RUN_STARTED"
	typeRunFinished        = "RUN_FINISHED"
	typeRunError           = "RUN_ERROR"
	typeStepStarted        = "STEP_STARTED"
	typeStepFinished       = "STEP_FINISHED"
	typeTextMessageStart   = "TEXT_MESSAGE_START"
	typeTextMessageContent = "TEXT_MESSAGE_CONTENT"
	typeTextMessageEnd     = "TEXT_MESSAGE_END"
	typeToolCallStart      = "TOOL_CALL_START"
	typeToolCallArgs       = "TOOL_CALL_ARGS"
	typeToolCallEnd        = "TOOL_CALL_END"
	typeToolCallResult     = "TOOL_CALL_RESULT"
	typeMessagesSnapshot   = "MESSAGES_SNAPSHOT"
	typeStateSnapshot      = "STATE_SNAPSHOT"
)

// Event is one AG-UI event: its type and its fields, written as one SSE
// data line.
type Event map[string]any

// Type is the event's type.
func (e Event) Type() string {
	t, _ := e["type"].(string)
	return t
}

// interrupt is an AG-UI interrupt: what a run that ended needs before
// the thread goes on. Its id is the pending input's request_id.
type interrupt struct {
	ID         string         `json:"id"`
	Reason     string         `json:"reason"`
	Message    string         `json:"message,omitempty"`
	ToolCallID string         `json:"toolCallId,omitempty"`
	Metadata   map[string]any `json:"metadata,omitempty"`
}

// mapper turns the log of one run (and the deltas of its replies) into
// AG-UI events. It holds the open step and the replies being streamed,
// so each message is one TEXT_MESSAGE_START … END whether it streamed or
// not.
type mapper struct {
	threadID, runID string
	// run is the chat's run number this request follows.
	run int
	// started: the run's run.started event was seen.
	started bool
	// step is the agent whose step is open ("" for none).
	step string
	// streams are the replies being streamed, by agent and the seq they
	// follow: their message id and the text sent so far.
	streams map[streamKey]*stream
	// voided: a reply streamed text that its message does not hold (its
	// model call restarted, here or on a replica that took the chat
	// over), so the client holds a fragment the thread does not.
	voided bool
	// landed are the ids the client knows this run's messages by, in the
	// order they landed in the thread (see inOrder).
	landed []string
	// vars are the chat's context variables as the events so far leave
	// them: the AG-UI state, sent whole (STATE_SNAPSHOT) when the run
	// starts and after each change while it streams.
	vars map[string]json.RawMessage
}

type streamKey struct {
	name     string
	afterSeq int64
}

type stream struct {
	id   string
	sent strings.Builder
	// broken: the model call restarted mid-reply (a reset), so what was
	// sent is not a prefix of the message to come.
	broken bool
}

func newMapper(threadID, runID string, run int) *mapper {
	return &mapper{threadID: threadID, runID: runID, run: run, streams: map[streamKey]*stream{}}
}

// maxStreams bounds the replies held open at once; a reply past it
// arrives as its whole text.
const maxStreams = 64

// messageID is the AG-UI id of the chat message at seq.
func messageID(seq int64) string { return fmt.Sprintf("msg-%d", seq) }

// toolResultID is the AG-UI id of the i-th tool result of the chat
// message at seq.
func toolResultID(seq int64, i int) string { return fmt.Sprintf("msg-%d-%d", seq, i) }

// enter opens the step of agent, finishing the one open before.
func (m *mapper) enter(agent string) []Event {
	if m.step == agent {
		return nil
	}
	out := m.leave()
	m.step = agent
	return append(out, Event{"type": typeStepStarted, "stepName": agent})
}

// leave finishes the open step.
func (m *mapper) leave() []Event {
	if m.step == "" {
		return nil
	}
	e := Event{"type": typeStepFinished, "stepName": m.step}
	m.step = ""
	return []Event{e}
}

// delta maps a fragment of a reply in progress.
func (m *mapper) delta(d chat.Delta) []Event {
	if !m.started {
		return nil
	}
	k := streamKey{d.Name, d.AfterSeq}
	s, ok := m.streams[k]
	if d.Reset {
		if ok {
			s.broken = true
		}
		return nil
	}
	if d.Content == "" {
		return nil
	}
	var out []Event
	if !ok {
		if len(m.streams) >= maxStreams {
			return nil
		}
		s = &stream{id: replyID(d.AfterSeq, d.Name)}
		m.streams[k] = s
		out = append(out, m.enter(d.Name)...)
		out = append(out, Event{"type": typeTextMessageStart, "messageId": s.id, "role": "assistant", "name": d.Name})
	}
	if s.broken {
		return out
	}
	s.sent.WriteString(d.Content)
	return append(out, Event{"type": typeTextMessageContent, "messageId": s.id, "delta": d.Content})
}

// event maps one event of the chat's log; done reports that the run has
// ended (its last events are in out).
func (m *mapper) event(e chat.Event) (out []Event, done bool) {
	if e.Type == chat.EventContextUpdated {
		// Folded before the run too: the run starts with the variables
		// the log leaves it.
		if vars, err := engine.FoldContext(m.vars, e); err == nil {
			m.vars = vars
		}
		if m.started {
			return []Event{m.stateSnapshot()}, false
		}
		return nil, false
	}
	if e.Type == chat.EventRunStarted {
		var d chat.RunData
		if chat.DecodeData(e, &d) == nil {
			if d.Run == m.run {
				m.started = true
				return []Event{m.stateSnapshot()}, false
			} else if d.Run > m.run && m.started {
				return m.finish(Event{"type": typeRunFinished, "outcome": map[string]any{"type": "success"}}), true
			}
		}
		return nil, false
	}
	if !m.started {
		return nil, false
	}
	switch {
	case e.Type == chat.EventMessage:
		return m.message(e), false
	case e.Type == chat.EventInputRequested:
		var p chat.PendingInput
		_ = chat.DecodeData(e, &p)
		return m.finish(Event{"type": typeRunFinished, "outcome": map[string]any{"type": "interrupt", "interrupts": []interrupt{newInterrupt(&p)}}}), true
	case e.Type == chat.EventChatCompleted:
		return m.finish(Event{"type": typeRunFinished, "outcome": map[string]any{"type": "success"}}), true
	case e.Type == chat.EventChatCancelled:
		return m.finish(Event{"type": typeRunFinished, "outcome": map[string]any{"type": "cancelled"}}), true
	case e.Type == chat.EventChatFailed:
		var d chat.TerminalData
		_ = chat.DecodeData(e, &d)
		return m.finish(Event{"type": typeRunError, "message": "the run failed: " + api.Failure(d), "code": "run_failed"}), true
	}
	return nil, false
}

// stateSnapshot is the AG-UI state: the chat's variables ({} for none).
func (m *mapper) stateSnapshot() Event {
	return Event{"type": typeStateSnapshot, "snapshot": engine.EncodeContext(m.vars)}
}

// finish ends the run with last: the open replies and step are closed
// first, as the client requires.
func (m *mapper) finish(last Event) []Event {
	var out []Event
	for k, s := range m.streams {
		out = append(out, Event{"type": typeTextMessageEnd, "messageId": s.id})
		delete(m.streams, k)
	}
	out = append(out, m.leave()...)
	if last.Type() != typeRunError {
		last["threadId"], last["runId"] = m.threadID, m.runID
	}
	return append(out, last)
}

// message maps a message of the run: its text (the rest of a streamed
// reply, or the whole text at once), its tool calls and its tool results.
// The task and a human's messages are the client's own and not sent back;
// an inner team's are not part of the thread.
func (m *mapper) message(e chat.Event) []Event {
	msg, _ := chat.MessageFromEvent(e)
	var d chat.MessageData
	_ = chat.DecodeData(e, &d)
	if msg.Team != "" || d.Kind == chat.KindTask || d.Kind == chat.KindHistory || d.Kind == chat.KindHuman {
		return nil
	}
	out := m.enter(msg.Name)
	id := messageID(msg.Seq)
	// parent is the id the client knows the message by: its stream's
	// when it streamed.
	parent := id
	if k, s := m.streamOf(msg); s != nil {
		delete(m.streams, k)
		sent := s.sent.String()
		if !s.broken && strings.HasPrefix(msg.Content, sent) {
			if rest := msg.Content[len(sent):]; rest != "" {
				out = append(out, Event{"type": typeTextMessageContent, "messageId": s.id, "delta": rest})
			}
			out = append(out, Event{"type": typeTextMessageEnd, "messageId": s.id})
			id, parent = "", s.id
		} else {
			// What streamed is not the message: close it and send the
			// message whole under its own id.
			out = append(out, Event{"type": typeTextMessageEnd, "messageId": s.id})
			m.voided = true
		}
	}
	if (id == "" || msg.Content != "" || len(msg.ToolCalls) > 0) && len(msg.ToolResponses) == 0 {
		m.landed = append(m.landed, parent)
	}
	if id != "" && msg.Content != "" && len(msg.ToolResponses) == 0 {
		role := "assistant"
		if msg.Role == chat.RoleUser || msg.Role == chat.RoleSystem {
			role = msg.Role
		}
		out = append(out,
			Event{"type": typeTextMessageStart, "messageId": id, "role": role, "name": msg.Name},
			Event{"type": typeTextMessageContent, "messageId": id, "delta": msg.Content},
			Event{"type": typeTextMessageEnd, "messageId": id})
	}
	for _, tc := range msg.ToolCalls {
		out = append(out, Event{"type": typeToolCallStart, "toolCallId": tc.ID, "toolCallName": tc.Function.Name, "parentMessageId": parent})
		if tc.Function.Arguments != "" {
			out = append(out, Event{"type": typeToolCallArgs, "toolCallId": tc.ID, "delta": tc.Function.Arguments})
		}
		out = append(out, Event{"type": typeToolCallEnd, "toolCallId": tc.ID})
	}
	for i, tr := range msg.ToolResponses {
		rid := toolResultID(msg.Seq, i)
		m.landed = append(m.landed, rid)
		out = append(out, Event{"type": typeToolCallResult, "messageId": rid, "toolCallId": tr.ToolCallID, "content": tr.Content, "role": "tool"})
	}
	return out
}

// streamOf finds the streamed reply a message completes: its agent's
// latest that began before it.
func (m *mapper) streamOf(msg chat.Message) (streamKey, *stream) {
	var best streamKey
	var found *stream
	for k, s := range m.streams {
		if k.name == msg.Name && k.afterSeq < msg.Seq && (found == nil || k.afterSeq > best.afterSeq) {
			best, found = k, s
		}
	}
	return best, found
}

// newInterrupt is the interrupt of a pending input: its kind, the agent
// asking and the choices are in its metadata, and a held tool call is
// named as the interrupt's tool call.
func newInterrupt(p *chat.PendingInput) interrupt {
	in := interrupt{ID: p.RequestID, Reason: "agentd:" + p.Kind, Message: p.Reason,
		Metadata: map[string]any{"kind": p.Kind}}
	if p.Agent != "" {
		in.Metadata["agent"] = p.Agent
	}
	if len(p.Candidates) > 0 {
		in.Metadata["candidates"] = p.Candidates
	}
	if len(p.ToolCalls) > 0 {
		in.ToolCallID = p.ToolCalls[0].ID
		in.Metadata["toolCalls"] = p.ToolCalls
	}
	if len(p.CodeBlocks) > 0 {
		in.Metadata["codeBlocks"] = p.CodeBlocks
	}
	return in
}
