package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/spec/problem"
)

// This file is what a run is in the log (DESIGN §3.12): the run.started
// event that opens it, the task messages posted with it, and how a request
// for the next run (POST /runs) is read and checked.

// runData is the data of a run.started event.
type runData struct {
	Run int `json:"run"`
	// MaxRound is the run's own max_round, when its request set one.
	MaxRound int `json:"max_round,omitempty"`
}

// runningData is the data of a chat.running event. The one that resumes a
// chat after an approval request records the decisions (the log keeps the
// original calls in their message and the edits here).
type runningData struct {
	Status    Status     `json:"status"`
	RequestID string     `json:"request_id,omitempty"`
	Approvals []Approval `json:"approvals,omitempty"`
}

// Approval is a client's decision on one tool call (ToolCallID set) or on
// the code a user_proxy is about to run (ToolCallID empty), as POST /input
// gives it for a pending input of kind approval.
type Approval struct {
	ToolCallID string `json:"tool_call_id,omitempty"`
	Approve    bool   `json:"approve"`
	// Arguments, on an approved call, replace the model's arguments (a
	// JSON object valid against the tool's schema).
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Reason    string          `json:"reason,omitempty"`
}

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

// queuedRequest is a run as SubmitRun stores it for the worker that starts
// it: the task checked and made explicit.
type queuedRequest struct {
	// Task is nil for a run without a new message.
	Task     []TaskMessage `json:"task,omitempty"`
	MaxRound int           `json:"max_round,omitempty"`
}

// RunRequest is the body of POST /v1/chats/{id}/runs, decoded.
type RunRequest struct {
	queued queuedRequest
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
		req   = &RunRequest{IfBusy: IfBusyReject}
		probs problem.List
	)
	add := probs.Add
	for _, k := range sortedFields(fields) {
		raw := fields[k]
		switch k {
		case "task":
			req.queued.Task = decodeTask(raw, sp, limits, add)
		case "if_busy":
			if err := json.Unmarshal(raw, &req.IfBusy); err != nil ||
				!slices.Contains([]string{IfBusyReject, IfBusyEnqueue, IfBusyInterrupt}, req.IfBusy) {
				add("/if_busy", "must be %q (the default), %q or %q", IfBusyReject, IfBusyEnqueue, IfBusyInterrupt)
			}
		case "max_round":
			var n int
			if err := json.Unmarshal(raw, &n); err != nil || n < 1 || n > limits.MaxRound {
				add("/max_round", "must be an integer between 1 and %d", limits.MaxRound)
			}
			req.queued.MaxRound = n
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
		m := TaskMessage{Type: TypeTextMessage, Source: UserName, Content: s}
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
	m := TaskMessage{Source: UserName}
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
	if m.Type == TypeMultiModalMessage {
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
	case TypeTextMessage, TypeHandoffMessage:
	case TypeMultiModalMessage:
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
		m.Source = UserName
	case sp.Agent(m.Source) != nil:
		bad(path+"/source", "%q is an agent of the chat: a task comes from outside the team (user, or another name)", m.Source)
	case m.Source != UserName && !spec.ValidAgentName(m.Source):
		bad(path+"/source", "must be user or a name like an agent's (letters, digits, _ and -)")
	}
	switch {
	case m.Type == TypeHandoffMessage && sp.Agent(m.Target) == nil && sp.Method() == spec.SelectSwarm:
		// AgentChat's own text (Swarm's validate_group_state).
		bad(path+"/target", "The target %s is not one of the participants %s. "+
			"If you are resuming Swarm with a new HandoffMessage make sure to set the target to a valid participant as the target.",
			m.Target, pyList(agentNames(sp)))
	case m.Type == TypeHandoffMessage && sp.Agent(m.Target) == nil:
		bad(path+"/target", "a HandoffMessage hands over to an agent of the chat: one of %s", pyList(agentNames(sp)))
	case m.Type != TypeHandoffMessage && m.Target != "":
		bad(path+"/target", "only a HandoffMessage has a target")
	}
	return n == 0
}

// taskEvents are the message events of a run's task.
func taskEvents(task []TaskMessage) []Event {
	evs := make([]Event, 0, len(task))
	for _, m := range task {
		d := messageData{Kind: kindTask}
		content := m.Content
		switch m.Type {
		case TypeHandoffMessage:
			d.Type, d.Handoff = TypeHandoffMessage, m.Target
		case TypeMultiModalMessage:
			d.Type, d.Parts, content = TypeMultiModalMessage, m.Parts, spec.PartsText(m.Parts)
		}
		evs = append(evs, withData(Event{Type: EventMessage, Role: RoleUser, Name: m.Source, Content: content}, d))
	}
	return evs
}

// runStartEvents are the events that start a queued run: run.started, its
// task, and chat.running. A Swarm that cannot go on is refused as
// AgentChat refuses it (validate_group_state): the run then ends at once,
// failed with AgentChat's text, and its task is not added to the thread.
func (s *state) runStartEvents(run int, req queuedRequest) []Event {
	evs := []Event{withData(Event{Type: EventRunStarted}, runData{Run: run, MaxRound: req.MaxRound})}
	if msg := s.swarmResumeProblem(req.Task); msg != "" {
		return append(evs, terminalEvent(StatusFailed, StopError, msg, msg))
	}
	evs = append(evs, taskEvents(req.Task)...)
	return append(evs, runningEvent())
}

// swarmResumeProblem is AgentChat's Swarm check when a run starts: a
// HandoffMessage in the task must name a participant (checked when the
// run was posted); without one, the thread's latest handoff must.
func (s *state) swarmResumeProblem(task []TaskMessage) string {
	if s.spec.Method() != spec.SelectSwarm {
		return ""
	}
	if slices.ContainsFunc(task, func(m TaskMessage) bool { return m.Type == TypeHandoffMessage }) {
		return ""
	}
	for i := len(s.msgs) - 1; i >= 0; i-- {
		m := &s.msgs[i]
		if m.Type != TypeHandoffMessage {
			continue
		}
		if s.agent(m.Handoff) != nil {
			return ""
		}
		return fmt.Sprintf("The existing handoff target %s is not one of the participants %s. "+
			"If you are resuming Swarm with a new task make sure to include in your task a HandoffMessage with a valid participant as the target. "+
			"For example, if you are resuming from a HandoffTermination, make sure the new task is a HandoffMessage with a valid participant as the target.",
			m.Handoff, pyList(agentNames(s.spec)))
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
