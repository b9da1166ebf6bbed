// Package api holds the bodies of agentd's HTTP API (api/openapi.yaml) as
// Go types: the server encodes its answers with them and the Go client
// (internal/client) decodes them with the same types, so the two cannot
// drift apart. A test checks every type's JSON fields against its schema
// in api/openapi.yaml, both ways.
//
// The types are written by hand, not generated from the OpenAPI file:
// generated code would be checked in although `go generate` can make it,
// and a generator's names and shapes (every optional field a pointer, every
// oneOf an interface) would leak into the server's handlers. The test is
// what keeps the file and the types one contract.
//
// A message, a tool call, a pending input request and the other shapes
// the chat log keeps as clients see them are the domain's own types
// (internal/chat): the log, the stream and the API share one definition
// of them, named here again so that a client needs only this package.
//
// Requests the server decodes with checks of its own (a chat spec, a run,
// an input) are read in internal/spec and internal/server; the types here
// are what a client sends.
package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/component"
	"github.com/agentd/agentd/internal/spec/problem"
)

// The shapes the chat log keeps as the API shows them.
type (
	// Message is a chat message (GET /messages, the data of a message
	// event).
	Message = chat.Message
	// ToolCall is a function call a model asked for.
	ToolCall = chat.ToolCall
	// FunctionCall is a ToolCall's function and its arguments (a JSON
	// string).
	FunctionCall = chat.FunctionCall
	// ToolResponse answers one ToolCall.
	ToolResponse = chat.ToolResponse
	// CodeResult is the result of a code execution.
	CodeResult = chat.CodeResult
	// Usage counts tokens.
	Usage = chat.Usage
	// PendingInput is what a chat in awaiting_input waits for.
	PendingInput = chat.PendingInput
	// PendingCode is a code block waiting for approval.
	PendingCode = chat.PendingCode
	// Approval is a decision on a held tool call or on held code.
	Approval = chat.Approval
	// TeamRef names a saved team's version.
	TeamRef = chat.TeamRef
	// ForkRef says which chat a fork was copied from, and to where.
	ForkRef = chat.ForkRef
	// Status is a chat's status.
	Status = chat.Status
	// Warning is something of a team file that was translated
	// approximately or left out.
	Warning = component.Warning
	// ProblemField is one problem of a request: a JSON pointer into its
	// body (/agents/1/model), or the name of a query parameter or header,
	// and what is wrong there.
	ProblemField = problem.Problem
)

// Chat is the chat object.
type Chat struct {
	ID           string          `json:"id"`
	Name         *string         `json:"name"`
	Status       Status          `json:"status"`
	StopReason   *string         `json:"stop_reason"`
	StopDetail   *string         `json:"stop_detail"`
	Error        *string         `json:"error"`
	Turns        int             `json:"turns"`
	MessageCount int             `json:"message_count"`
	LastSeq      int64           `json:"last_seq"`
	Usage        Usage           `json:"usage"`
	PendingInput *PendingInput   `json:"pending_input"`
	CreatedAt    time.Time       `json:"created_at"`
	UpdatedAt    time.Time       `json:"updated_at"`
	CompletedAt  *time.Time      `json:"completed_at"`
	Metadata     json.RawMessage `json:"metadata"`
	// Run is the number of the chat's latest run; QueuedRuns counts the
	// runs posted after it that have not started (docs/runs.md).
	Run        int      `json:"run"`
	QueuedRuns int      `json:"queued_runs"`
	ForkedFrom *ForkRef `json:"forked_from"`
	// Team is the saved team (name and version) the chat was created
	// from, null for a chat from a spec.
	Team *TeamRef `json:"team"`
	// ContextVariables are the chat's variables as of LastSeq
	// (docs/context-variables.md), in the answers about one chat (GET,
	// PATCH, fork, create); lists leave them out, as reading them reads
	// the chat's log.
	ContextVariables json.RawMessage `json:"context_variables,omitempty"`
	// Spec is the spec the chat was created from, only with ?include=spec:
	// it can be large, and most clients (lists, polls) never look at it.
	Spec json.RawMessage `json:"spec,omitempty"`
	// PostedRun is the number of the run a POST /runs posted, only in its
	// answer.
	PostedRun int `json:"posted_run,omitempty"`
	// Warnings are those of the team file a chat was created from, only
	// in the answer to that create, and then always present (possibly
	// empty): a nil slice is left out, an empty one is [].
	Warnings []Warning `json:"warnings,omitzero"`
}

// Terminal reports whether the chat has ended.
func (c *Chat) Terminal() bool { return c.Status.Terminal() }

// ChatList is the body of GET /v1/chats: a page of chats.
type ChatList struct {
	Chats      []Chat  `json:"chats"`
	NextCursor *string `json:"next_cursor"`
}

// MessageList is the body of GET /v1/chats/{id}/messages.
type MessageList struct {
	Messages []Message `json:"messages"`
	// LastSeq is the seq of the last event examined: pass it as after to
	// continue. It may be past the last message returned, since events
	// that are not messages are skipped.
	LastSeq int64  `json:"last_seq"`
	Status  Status `json:"status"`
}

// RunRequest is the body of POST /v1/chats/{id}/runs as a client writes
// it (the server reads it with spec.DecodeRunRequest). Task is a string, a
// TaskMessage, a list of them, or nil.
type RunRequest struct {
	Task     any    `json:"task,omitempty"`
	IfBusy   string `json:"if_busy,omitempty"`
	MaxRound int    `json:"max_round,omitempty"`
	// ContextVariables are merged into the chat's as the run starts (a
	// null value removes one).
	ContextVariables map[string]any `json:"context_variables,omitempty"`
}

// ChatPatch is the body of PATCH /v1/chats/{id}: keys to set in the
// chat's metadata and its context variables; a nil value removes its key.
// Either may be left out, not both.
type ChatPatch struct {
	Metadata         map[string]any `json:"metadata,omitempty"`
	ContextVariables map[string]any `json:"context_variables,omitempty"`
}

// TaskMessage is a message of a run's task.
type TaskMessage struct {
	Type    string `json:"type"`
	Source  string `json:"source,omitempty"`
	Content string `json:"content"`
	Target  string `json:"target,omitempty"`
}

// ForkRequest is the body of POST /v1/chats/{id}/fork: the copy of the log
// ends at AtSeq (0: its last event), and Run, when set, starts on the fork.
type ForkRequest struct {
	AtSeq int64       `json:"at_seq,omitempty"`
	Run   *RunRequest `json:"run,omitempty"`
	// ContextVariables are merged into the variables the copy leaves.
	ContextVariables map[string]any `json:"context_variables,omitempty"`
}

// Input is the body of POST /v1/chats/{id}/input as a client writes it
// (the server reads it with checks of its own): exactly one of a message's
// Content (a string, or a list of texts and images), a Speaker, or
// Approvals.
type Input struct {
	RequestID string     `json:"request_id"`
	Content   any        `json:"content,omitempty"`
	Speaker   *string    `json:"speaker,omitempty"`
	Approvals []Approval `json:"approvals,omitempty"`
}

// Team is one version of a saved team.
type Team struct {
	Name      string          `json:"name"`
	Version   int             `json:"version"`
	CreatedAt time.Time       `json:"created_at"`
	Spec      json.RawMessage `json:"spec,omitempty"`
	// Warnings are those of a translated AgentChat component (PUT only).
	Warnings []Warning `json:"warnings,omitempty"`
}

// TeamList is the body of GET /v1/teams.
type TeamList struct {
	Teams      []Team  `json:"teams"`
	NextCursor *string `json:"next_cursor"`
}

// DryRun answers a request with dry_run=true (POST /v1/chats, PUT
// /v1/teams/{name}): the spec the request stands for, as the server would
// store it (a team file translated, a saved team resolved), and the
// warnings of a translated team file.
type DryRun struct {
	Spec     json.RawMessage `json:"spec"`
	Warnings []Warning       `json:"warnings"`
}

// Delivery is one webhook delivery of a chat's event.
type Delivery struct {
	WebhookID      string              `json:"webhook_id"`
	Seq            int64               `json:"seq"`
	URL            string              `json:"url"`
	Event          chat.EventType      `json:"event"`
	Status         chat.DeliveryStatus `json:"status"`
	Attempts       int                 `json:"attempts"`
	LastAttemptBy  *string             `json:"last_attempt_by"`
	LastStatusCode *int                `json:"last_status_code"`
	LastError      *string             `json:"last_error"`
	CreatedAt      time.Time           `json:"created_at"`
	UpdatedAt      time.Time           `json:"updated_at"`
	NextAttemptAt  *time.Time          `json:"next_attempt_at"`
	DeliveredAt    *time.Time          `json:"delivered_at"`
}

// DeliveryList is the body of GET /v1/chats/{id}/deliveries.
type DeliveryList struct {
	Deliveries []Delivery `json:"deliveries"`
}

// Problem is an error answer (RFC 9457 problem details).
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	// Errors is always present (possibly empty) so that clients can range
	// over it without a presence check.
	Errors []ProblemField `json:"errors"`
}

// Error says what the problem is, with each of its fields.
func (p *Problem) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s: %s", p.Status, p.Title, p.Detail)
	for _, e := range p.Errors {
		fmt.Fprintf(&b, "\n  %s: %s", e.Path, e.Message)
	}
	return b.String()
}
