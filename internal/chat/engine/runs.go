package engine

import (
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

// QueuedRequest is a run as SubmitRun stores it for the worker that starts
// it: the task checked and made explicit.
type QueuedRequest struct {
	// Task is nil for a run without a new message.
	Task     []spec.TaskMessage `json:"task,omitempty"`
	MaxRound int                `json:"max_round,omitempty"`
	// ContextVariables are merged into the chat's variables as the run
	// starts (a null removes one).
	ContextVariables map[string]json.RawMessage `json:"context_variables,omitempty"`
}

// CheckRun checks a run request decoded by spec.DecodeRunRequest against
// the chat's spec and the server's limits: a task message's source must
// not be an agent, a handoff must name one, sizes and max_round must be in
// bounds, a magentic_one run needs a task. It returns the run to queue, or
// every problem, those decoding found among them (in the body's order).
func CheckRun(req *spec.RunRequest, sp *spec.Spec, limits spec.Limits) (*QueuedRequest, []spec.Problem) {
	limits = limits.WithDefaults()
	var probs problem.List
	probs.AddAll("", req.Problems)
	maxRound := DerefOr(req.MaxRound, 0)
	if req.MaxRound != nil && (maxRound < 1 || maxRound > limits.MaxRound) {
		probs.Add("/max_round", "must be an integer between 1 and %d", limits.MaxRound)
	}
	checkTask(req.Task, sp, limits, probs.Add)
	if sp.Method() == spec.SelectMagentic && req.Task == nil && !problem.Under(req.Problems, "/task") {
		probs.Add("/task", magenticNeedsTask)
	}
	if probs.Len() > 0 {
		return nil, inBodyOrder(probs.Items())
	}
	return &QueuedRequest{Task: req.Task, MaxRound: maxRound, ContextVariables: req.ContextVariables}, nil
}

// inBodyOrder orders problems as the body's fields come (by name) and a
// task's messages (by index), keeping the order of the problems of one
// message: what decoding found, then what the check against the spec did.
func inBodyOrder(ps []spec.Problem) []spec.Problem {
	key := func(path string) (string, int) {
		field, rest, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
		i, err := strconv.Atoi(strings.SplitN(rest, "/", 2)[0])
		if err != nil {
			i = -1
		}
		return field, i
	}
	slices.SortStableFunc(ps, func(a, b spec.Problem) int {
		fa, ia := key(a.Path)
		fb, ib := key(b.Path)
		return cmp.Or(cmp.Compare(fa, fb), cmp.Compare(ia, ib))
	})
	return ps
}

// checkTask checks decoded task messages against the chat's agents and
// the limits on their size.
func checkTask(task []spec.TaskMessage, sp *spec.Spec, limits spec.Limits, add func(path, format string, args ...any)) {
	for i := range task {
		checkTaskMessage(&task[i], sp, limits, add)
	}
}

func checkTaskMessage(m *spec.TaskMessage, sp *spec.Spec, limits spec.Limits, add func(path, format string, args ...any)) {
	path := m.Path
	if m.Type == chat.TypeMultiModalMessage {
		spec.CheckParts(path+"/content", m.Parts, limits.MaxImageBytes, limits.MaxTaskBytes, add)
	}
	if len(m.Content) > limits.MaxTaskBytes && strings.IndexByte(m.Content, 0) < 0 {
		add(path+"/content", "must be at most %d bytes", limits.MaxTaskBytes)
	}
	if sp.Agent(m.Source) != nil {
		add(path+"/source", "%q is an agent of the chat: a task comes from outside the team (user, or another name)", m.Source)
	}
	switch {
	case m.Type != chat.TypeHandoffMessage || sp.Agent(m.Target) != nil:
	case sp.Method() == spec.SelectSwarm:
		// AgentChat's own text (Swarm's validate_group_state).
		add(path+"/target", "The target %s is not one of the participants %s. "+
			"If you are resuming Swarm with a new HandoffMessage make sure to set the target to a valid participant as the target.",
			m.Target, PyList(AgentNames(sp)))
	default:
		add(path+"/target", "a HandoffMessage hands over to an agent of the chat: one of %s", PyList(AgentNames(sp)))
	}
}

// taskEvents are the message events of a run's task.
func taskEvents(task []spec.TaskMessage) []chat.Event {
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
	if len(req.ContextVariables) > 0 {
		// The run's variables are merged before its task: what its first
		// turn (and a graph's edges from the task) sees.
		u := chat.ContextUpdateOf(req.ContextVariables, chat.ContextBy{Client: chat.ContextByRun})
		if msg := ContextTooLarge(s.vars, u); msg != "" {
			return append(evs, terminalEvent(chat.StatusFailed, chat.StopError, msg, msg))
		}
		evs = append(evs, chat.ContextEvent(u))
	}
	evs = append(evs, taskEvents(req.Task)...)
	return append(evs, runningEvent())
}

// swarmResumeProblem is AgentChat's Swarm check when a run starts: a
// HandoffMessage in the task must name a participant (checked when the
// run was posted); without one, the thread's latest handoff must.
func (s *State) swarmResumeProblem(task []spec.TaskMessage) string {
	if s.Spec.Method() != spec.SelectSwarm {
		return ""
	}
	if slices.ContainsFunc(task, func(m spec.TaskMessage) bool { return m.Type == chat.TypeHandoffMessage }) {
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

// FirstEvents are a new chat's first events, written with it: chat.created,
// the resumed history, and run 1 with its task (see specTask).
func FirstEvents(sp *spec.Spec, task []spec.TaskMessage, now time.Time) []chat.Event {
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
func SpecTask(sp *spec.Spec, limits spec.Limits) ([]spec.TaskMessage, []spec.Problem) {
	if sp.Task.Messages == nil {
		return []spec.TaskMessage{{Type: chat.TypeTextMessage, Source: chat.UserName, Content: sp.Task.Text}}, nil
	}
	task, decoded := spec.DecodeTask(sp.Task.Messages)
	var probs problem.List
	probs.AddAll("", decoded)
	checkTask(task, sp, limits.WithDefaults(), probs.Add)
	if probs.Len() > 0 {
		return nil, inBodyOrder(probs.Items())
	}
	return task, nil
}
