package engine

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/spec/problem"
)

// This file is what a run is in the log (docs/runs.md): the run.started
// event that opens it, the task messages posted with it, and how a request
// for the next run (POST /runs) is read and checked.

// TaskMessage is one message of a run's task: AgentChat's TextMessage, or
// a HandoffMessage that resumes a Swarm at its target.
type TaskMessage struct {
	Type    string `json:"type"`
	Source  string `json:"source,omitempty"`
	Content string `json:"content"`
	Target  string `json:"target,omitempty"`
	// Parts are a MultiModalMessage's content (its Content is empty).
	Parts []spec.Part `json:"parts,omitempty"`
}

// QueuedRequest is a run as SubmitRun stores it for the worker that starts
// it: the task checked and made explicit.
type QueuedRequest struct {
	// Task is nil for a run without a new message.
	Task     []TaskMessage `json:"task,omitempty"`
	MaxRound int           `json:"max_round,omitempty"`
}

// RunRequest is the body of POST /v1/chats/{id}/runs, decoded.
type RunRequest struct {
	Queued QueuedRequest
	// IfBusy is reject (the default), enqueue or interrupt.
	IfBusy string
}

// maxTaskMessages bounds the messages of one run's task.
const maxTaskMessages = 100

// DecodeRunRequest reads the body of POST /runs against the chat's spec
// and reports every problem with its JSON pointer.
func DecodeRunRequest(body []byte, sp *spec.Spec, limits spec.Limits) (*RunRequest, []spec.Problem) {
	limits = limits.WithDefaults()
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&fields); err != nil || dec.More() {
		return nil, []spec.Problem{{Path: "", Message: "must be one JSON object: {\"task\"?, \"if_busy\"?, \"max_round\"?}"}}
	}
	var (
		req   = &RunRequest{IfBusy: chat.IfBusyReject}
		probs problem.List
	)
	add := probs.Add
	for _, k := range sortedFields(fields) {
		raw := fields[k]
		switch k {
		case "task":
			req.Queued.Task = decodeTask(raw, sp, limits, add)
		case "if_busy":
			if err := json.Unmarshal(raw, &req.IfBusy); err != nil ||
				!slices.Contains([]string{chat.IfBusyReject, chat.IfBusyEnqueue, chat.IfBusyInterrupt}, req.IfBusy) {
				add("/if_busy", "must be %q (the default), %q or %q", chat.IfBusyReject, chat.IfBusyEnqueue, chat.IfBusyInterrupt)
			}
		case "max_round":
			var n int
			if err := json.Unmarshal(raw, &n); err != nil || n < 1 || n > limits.MaxRound {
				add("/max_round", "must be an integer between 1 and %d", limits.MaxRound)
			}
			req.Queued.MaxRound = n
		default:
			add(problem.Key("", k), "is not a field of a run: use task, if_busy, max_round")
		}
	}
	checkMagenticRun(fields["task"], sp, add)
	if probs.Len() > 0 {
		return nil, probs.Items()
	}
	return req, nil
}

// decodeTask reads a run's task: a string (a TextMessage from user), a
// message, a non-empty list of messages, or null (no new message).
func decodeTask(raw json.RawMessage, sp *spec.Spec, limits spec.Limits, add func(path, format string, args ...any)) []TaskMessage {
	raw = bytes.TrimSpace(raw)
	switch {
	case string(raw) == "null":
		return nil
	case len(raw) > 0 && raw[0] == '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		m := TaskMessage{Type: chat.TypeTextMessage, Source: chat.UserName, Content: s}
		checkTaskMessage("/task", &m, sp, limits, add)
		return []TaskMessage{m}
	case len(raw) > 0 && raw[0] == '{':
		m, ok := decodeTaskMessage("/task", raw, sp, limits, add)
		if !ok {
			return nil
		}
		return []TaskMessage{m}
	case len(raw) > 0 && raw[0] == '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			add("/task", "must be a list of messages")
			return nil
		}
		if len(items) == 0 {
			add("/task", "a list of task messages cannot be empty (leave task out to continue without a new message)")
		}
		if len(items) > maxTaskMessages {
			add("/task", "holds at most %d messages", maxTaskMessages)
			return nil
		}
		var out []TaskMessage
		for i, it := range items {
			if m, ok := decodeTaskMessage("/task/"+strconv.Itoa(i), it, sp, limits, add); ok {
				out = append(out, m)
			}
		}
		return out
	}
	add("/task", "must be a string, a message ({\"type\": \"TextMessage\" | \"MultiModalMessage\" | \"HandoffMessage\", \"source\"?, \"content\", \"target\"?}), a list of messages, or null")
	return nil
}

func decodeTaskMessage(path string, raw json.RawMessage, sp *spec.Spec, limits spec.Limits, add func(path, format string, args ...any)) (TaskMessage, bool) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		add(path, "must be a message object")
		return TaskMessage{}, false
	}
	m := TaskMessage{Source: chat.UserName}
	ok := true
	str := func(k string, dst *string) {
		if v, present := fields[k]; present {
			if err := json.Unmarshal(v, dst); err != nil {
				add(path+"/"+k, "must be a string")
				ok = false
			}
		}
	}
	for _, k := range sortedFields(fields) {
		switch k {
		case "type", "source", "content", "target":
		default:
			add(problem.Key(path, k), "is not a field of a task message: use type, source, content, target")
			ok = false
		}
	}
	str("type", &m.Type)
	str("source", &m.Source)
	str("target", &m.Target)
	if m.Type == chat.TypeMultiModalMessage {
		if c, present := fields["content"]; present && !decodeParts(path+"/content", c, &m.Parts, add) {
			ok = false
		}
	} else {
		str("content", &m.Content)
	}
	if _, present := fields["content"]; !present {
		add(path+"/content", "is required")
		ok = false
	}
	if !ok {
		return TaskMessage{}, false
	}
	return m, checkTaskMessage(path, &m, sp, limits, add)
}

// checkTaskMessage checks one task message against the chat's agents.
func checkTaskMessage(path string, m *TaskMessage, sp *spec.Spec, limits spec.Limits, add func(path, format string, args ...any)) bool {
	n := 0
	bad := func(p, format string, args ...any) {
		add(p, format, args...)
		n++
	}
	switch m.Type {
	case chat.TypeTextMessage, chat.TypeHandoffMessage:
	case chat.TypeMultiModalMessage:
		spec.CheckParts(path+"/content", m.Parts, limits.MaxImageBytes, limits.MaxTaskBytes, bad)
	case "":
		bad(path+"/type", "is required: TextMessage, MultiModalMessage or HandoffMessage")
	default:
		bad(path+"/type", "must be TextMessage, MultiModalMessage or HandoffMessage")
	}
	switch {
	case strings.IndexByte(m.Content, 0) >= 0:
		bad(path+"/content", "must not contain the NUL character (\\u0000), which the store cannot hold")
	case len(m.Content) > limits.MaxTaskBytes:
		bad(path+"/content", "must be at most %d bytes", limits.MaxTaskBytes)
	}
	switch {
	case m.Source == "":
		m.Source = chat.UserName
	case sp.Agent(m.Source) != nil:
		bad(path+"/source", "%q is an agent of the chat: a task comes from outside the team (user, or another name)", m.Source)
	case m.Source != chat.UserName && !spec.ValidAgentName(m.Source):
		bad(path+"/source", "must be user or a name like an agent's (letters, digits, _ and -)")
	}
	switch {
	case m.Type == chat.TypeHandoffMessage && sp.Agent(m.Target) == nil && sp.Method() == spec.SelectSwarm:
		// AgentChat's own text (Swarm's validate_group_state).
		bad(path+"/target", "The target %s is not one of the participants %s. "+
			"If you are resuming Swarm with a new HandoffMessage make sure to set the target to a valid participant as the target.",
			m.Target, PyList(AgentNames(sp)))
	case m.Type == chat.TypeHandoffMessage && sp.Agent(m.Target) == nil:
		bad(path+"/target", "a HandoffMessage hands over to an agent of the chat: one of %s", PyList(AgentNames(sp)))
	case m.Type != chat.TypeHandoffMessage && m.Target != "":
		bad(path+"/target", "only a HandoffMessage has a target")
	}
	return n == 0
}

// taskEvents are the message events of a run's task.
func taskEvents(task []TaskMessage) []chat.Event {
	evs := make([]chat.Event, 0, len(task))
	for _, m := range task {
		d := chat.MessageData{Kind: chat.KindTask}
		content := m.Content
		switch m.Type {
		case chat.TypeHandoffMessage:
			d.Type, d.Handoff = chat.TypeHandoffMessage, m.Target
		case chat.TypeMultiModalMessage:
			d.Type, d.Parts, content = chat.TypeMultiModalMessage, m.Parts, spec.PartsText(m.Parts)
		}
		evs = append(evs, chat.WithData(chat.Event{Type: chat.EventMessage, Role: chat.RoleUser, Name: m.Source, Content: content}, d))
	}
	return evs
}

// RunStartEvents are the events that start a queued run: run.started, its
// task, and chat.running. A Swarm that cannot go on is refused as
// AgentChat refuses it (validate_group_state): the run then ends at once,
// failed with AgentChat's text, and its task is not added to the thread.
func (s *State) RunStartEvents(run int, req QueuedRequest) []chat.Event {
	evs := []chat.Event{chat.WithData(chat.Event{Type: chat.EventRunStarted}, chat.RunData{Run: run, MaxRound: req.MaxRound})}
	if msg := s.swarmResumeProblem(req.Task); msg != "" {
		return append(evs, terminalEvent(chat.StatusFailed, chat.StopError, msg, msg))
	}
	evs = append(evs, taskEvents(req.Task)...)
	return append(evs, runningEvent())
}

// swarmResumeProblem is AgentChat's Swarm check when a run starts: a
// HandoffMessage in the task must name a participant (checked when the
// run was posted); without one, the thread's latest handoff must.
func (s *State) swarmResumeProblem(task []TaskMessage) string {
	if s.Spec.Method() != spec.SelectSwarm {
		return ""
	}
	if slices.ContainsFunc(task, func(m TaskMessage) bool { return m.Type == chat.TypeHandoffMessage }) {
		return ""
	}
	for i := len(s.Msgs) - 1; i >= 0; i-- {
		m := &s.Msgs[i]
		if m.Type != chat.TypeHandoffMessage {
			continue
		}
		if s.agent(m.Handoff) != nil {
			return ""
		}
		return fmt.Sprintf("The existing handoff target %s is not one of the participants %s. "+
			"If you are resuming Swarm with a new task make sure to include in your task a HandoffMessage with a valid participant as the target. "+
			"For example, if you are resuming from a HandoffTermination, make sure the new task is a HandoffMessage with a valid participant as the target.",
			m.Handoff, PyList(AgentNames(s.Spec)))
	}
	return ""
}

// sortedFields is the keys of an object in order, so that problems come in
// a stable order.
func sortedFields(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// decodeParts reads a MultiModalMessage's content: a list of texts and
// images (spec.Part), each problem reported at its item.
func decodeParts(path string, raw json.RawMessage, dst *[]spec.Part, add func(path, format string, args ...any)) bool {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		add(path, "a MultiModalMessage's content must be a list of texts and images ({\"image\": {\"data\": \"<base64>\"}})")
		return false
	}
	ok := true
	parts := make([]spec.Part, len(items))
	for i, it := range items {
		if err := json.Unmarshal(it, &parts[i]); err != nil {
			add(path+"/"+strconv.Itoa(i), "%s", err.Error())
			ok = false
		}
	}
	*dst = parts
	return ok
}

// FirstEvents are a new chat's first events, written with it: chat.created,
// the resumed history, and run 1 with its task (see specTask).
func FirstEvents(sp *spec.Spec, task []TaskMessage, now time.Time) []chat.Event {
	evs := []chat.Event{{Seq: 1, Type: chat.EventChatCreated, Data: chat.MustJSON(map[string]any{"status": chat.StatusQueued, "name": sp.Name}), CreatedAt: now}}
	if ev, ok := InitialContextEvent(sp); ok {
		// The variables are in the log from the start, as every later
		// change is: a stream, a webhook or a fork sees them as events.
		evs = append(evs, ev)
	}
	for _, m := range sp.Messages {
		// Tool calls and responses are kept: the agent that made them sees
		// them in its model context as AgentChat keeps them.
		evs = append(evs, chat.WithData(chat.Event{Type: chat.EventMessage, Role: m.Role, Name: cmp.Or(m.Name, chat.UserName), Content: m.Content.String(),
			ToolCalls: m.ToolCalls, ToolResponses: m.ToolResponses, CreatedAt: now}, chat.MessageData{Kind: chat.KindHistory, Type: m.Type, Parts: m.Content.Parts}))
	}
	// Run 1 opens with the task, as every later run does with its own.
	evs = append(evs, chat.WithData(chat.Event{Type: chat.EventRunStarted, CreatedAt: now}, chat.RunData{Run: 1}))
	evs = append(evs, taskEvents(task)...)
	for i := range evs {
		evs[i].Seq = int64(i + 1)
		evs[i].CreatedAt = now
	}
	return evs
}

// SpecTask is the task of run 1, read from the spec (checked) as a run's
// task is read: a text is a TextMessage from user; a message or a list of
// messages is checked against the chat's agents, its problems at /task.
func SpecTask(sp *spec.Spec, limits spec.Limits) ([]TaskMessage, []spec.Problem) {
	if sp.Task.Messages == nil {
		return []TaskMessage{{Type: chat.TypeTextMessage, Source: chat.UserName, Content: sp.Task.Text}}, nil
	}
	var probs problem.List
	task := decodeTask(sp.Task.Messages, sp, limits.WithDefaults(), probs.Add)
	return task, probs.Items()
}
