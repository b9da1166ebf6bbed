package chat

// This file holds the data of the log's events as they are stored: the kind
// and bookkeeping of a message, a selection, a run's start, a resume with
// its approvals, an end. Written by the engine, read back by the fold, by
// the runtime and by the HTTP layer's views of a message; their JSON is
// the log's schema, so a field is never renamed.

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
)

// Message kinds recorded in a message event's data.
const (
	KindTask    = "task"
	KindHistory = "history"
	KindModel   = "model"
	KindAuto    = "auto"
	KindHuman   = "human"
	// KindTeam: a team agent's answer made without a model call (its inner
	// team said nothing).
	KindTeam = "team"
)

// More message kinds of the tool loop.
const (
	KindTool    = "tool"    // a tool message with tool_responses
	KindHandoff = "handoff" // an assistant's handoff to another agent
	KindSummary = "summary" // the tool-call summary that ends a turn without reflection
)

// Selection is the outcome of choosing the next speaker; it becomes the data
// of a speaker.selected event.
type Selection struct {
	Agent string `json:"agent"`
	// Agents are the agents of a parallel step (the graph method's ready
	// nodes, which run at once); Agent is the first of them.
	Agents     []string `json:"agents,omitempty"`
	Method     string   `json:"method"`
	Candidates []string `json:"candidates"`
	Turn       int      `json:"turn"`
	// Attempts and Replies record an auto selection's model calls (the
	// selector's replay position is the sum of Attempts in the log).
	Attempts int      `json:"attempts,omitempty"`
	Replies  []string `json:"replies,omitempty"`
	Fallback bool     `json:"fallback,omitempty"`
	Usage    *Usage   `json:"usage,omitempty"`
	// RequestID links a manual selection to the input request it answers.
	RequestID string `json:"request_id,omitempty"`
	// Routed marks a user_proxy chosen because it executes the tool calls
	// of the last message.
	Routed bool `json:"routed,omitempty"`
	// Team names the team agent whose inner team the selection is of.
	Team string `json:"team,omitempty"`
}

// RunData is the data of a run.started event.
type RunData struct {
	Run int `json:"run"`
	// MaxRound is the run's own max_round, when its request set one.
	MaxRound int `json:"max_round,omitempty"`
}

// RunningData is the data of a chat.running event. The one that resumes a
// chat after an approval request records the decisions (the log keeps the
// original calls in their message and the edits here).
type RunningData struct {
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

// StopRequestSatisfied ends a magentic_one run whose progress ledger said
// the request is satisfied; the stop text is the ledger's reason.
const StopRequestSatisfied StopReason = "request_satisfied"

// MagenticData is the orchestrator's record in a message's data.
type MagenticData struct {
	Step  string `json:"step"`
	Facts string `json:"facts,omitempty"`
	Plan  string `json:"plan,omitempty"`
	// Ledger is the progress ledger the message follows from, as the
	// model wrote it.
	Ledger string `json:"ledger,omitempty"`
	// Calls and Usage are the model calls that made the message.
	Calls int   `json:"calls"`
	Usage Usage `json:"usage"`
}

// TerminalData is the data of chat.completed, chat.failed and chat.cancelled.
type TerminalData struct {
	Status     Status     `json:"status"`
	StopReason StopReason `json:"stop_reason"`
	StopDetail string     `json:"stop_detail"`
	Error      string     `json:"error,omitempty"`
	// Run is the run the event ends (set by state.plan).
	Run int `json:"run,omitempty"`
}

// Who changed context variables, in a context.updated event: the agent
// whose turn it was and the tool that did it, or the client request
// (ContextByCreate, …).
type ContextBy struct {
	Agent  string `json:"agent,omitempty"`
	Tool   string `json:"tool,omitempty"`
	Client string `json:"client,omitempty"`
}

// The client requests that change context variables (ContextBy.Client).
const (
	ContextByCreate = "create"
	ContextByRun    = "run"
	ContextByFork   = "fork"
	ContextByPatch  = "patch"
)

// ContextUpdate is the data of a context.updated event: the variables
// set (each a JSON value) and the names removed, in that order.
type ContextUpdate struct {
	Set     map[string]json.RawMessage `json:"set"`
	Removed []string                   `json:"removed,omitempty"`
	By      ContextBy                  `json:"by"`
}

// ContextUpdateOf reads a change of variables, as a client sends it, into
// the update it makes: a null value removes the variable, any other value
// sets it.
func ContextUpdateOf(change map[string]json.RawMessage, by ContextBy) ContextUpdate {
	u := ContextUpdate{Set: map[string]json.RawMessage{}, By: by}
	for _, k := range slices.Sorted(maps.Keys(change)) {
		if v := change[k]; string(bytes.TrimSpace(v)) == "null" {
			u.Removed = append(u.Removed, k)
		} else {
			u.Set[k] = v
		}
	}
	return u
}

// ContextEvent is the context.updated event of an update.
func ContextEvent(u ContextUpdate) Event {
	return WithData(Event{Type: EventContextUpdated}, u)
}
