package chat

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/spec"
)

// Status is the lifecycle state of a chat. The strings are part of the public
// API.
type Status string

// The chat statuses: queued → running ⇄ awaiting_input → completed | failed | cancelled.
const (
	StatusQueued        Status = "queued"
	StatusRunning       Status = "running"
	StatusAwaitingInput Status = "awaiting_input"
	StatusCompleted     Status = "completed"
	StatusFailed        Status = "failed"
	StatusCancelled     Status = "cancelled"
)

// AllStatuses lists every status, in lifecycle order.
var AllStatuses = []Status{StatusQueued, StatusRunning, StatusAwaitingInput, StatusCompleted, StatusFailed, StatusCancelled}

// Terminal reports whether no more events will be appended to a chat in this status.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Valid reports whether s is one of the known statuses.
func (s Status) Valid() bool {
	for _, v := range AllStatuses {
		if s == v {
			return true
		}
	}
	return false
}

// StopReason says why a chat ended. The strings are part of the public API.
type StopReason string

// The stop reasons (docs/chat-specs.md).
const (
	StopMaxRound    StopReason = "max_round"
	StopMaxMessages StopReason = "max_messages"
	StopTextMention StopReason = "text_mention"
	StopTextMatch   StopReason = "text_match"
	// StopTextMessage: a TextMessage arrived (AgentChat's
	// TextMessageTermination).
	StopTextMessage       StopReason = "text_message"
	StopTokenUsage        StopReason = "token_usage"
	StopTimeout           StopReason = "timeout"
	StopHandoff           StopReason = "handoff"
	StopSourceMatch       StopReason = "source_match"
	StopFunctionCall      StopReason = "function_call"
	StopHumanExit         StopReason = "human_exit"
	StopInputTimeout      StopReason = "input_timeout"
	StopNoEligibleSpeaker StopReason = "no_eligible_speaker"
	// StopMaxAutoReply: a user_proxy without a human (NEVER) reached its
	// max_consecutive_auto_reply, which ends an AutoGen group chat.
	StopMaxAutoReply StopReason = "max_consecutive_auto_reply"
	StopCancelled    StopReason = "cancelled"
	StopError        StopReason = "error"
	// StopExternal: POST /stop (AgentChat's ExternalTermination) ended the
	// run after its current turn.
	StopExternal StopReason = "external"
	// StopGraphComplete: a graph chat has no node ready to run (GraphFlow's
	// "Digraph execution is complete").
	StopGraphComplete StopReason = "graph_complete"
	// StopSwarmComplete: under the openai_swarm protocol an agent replied
	// without tool calls, which ends OpenAI Swarm's run loop.
	StopSwarmComplete StopReason = "swarm_complete"
)

// AllStopReasons lists every stop reason, in the order docs/chat-specs.md lists them.
var AllStopReasons = []StopReason{StopMaxRound, StopMaxMessages, StopTextMention, StopTextMatch, StopTextMessage, StopTokenUsage,
	StopTimeout, StopHandoff, StopSourceMatch, StopFunctionCall, StopHumanExit, StopInputTimeout,
	StopNoEligibleSpeaker, StopMaxAutoReply, StopExternal, StopGraphComplete, StopSwarmComplete, StopRequestSatisfied, StopCancelled, StopError}

// EventType names an entry of the log (and the SSE event name).
type EventType string

// Event types. All but EventMessageDelta are persisted and carry a seq.
const (
	EventChatCreated     EventType = "chat.created"
	EventChatRunning     EventType = "chat.running"
	EventSpeakerSelected EventType = "speaker.selected"
	EventMessage         EventType = "message"
	EventInputRequested  EventType = "input.requested"
	EventChatCompleted   EventType = "chat.completed"
	EventChatFailed      EventType = "chat.failed"
	EventChatCancelled   EventType = "chat.cancelled"
	// EventRunStarted opens a run (docs/runs.md): the first right after
	// chat.created (and the history), each later one when a worker starts
	// a queued run.
	EventRunStarted   EventType = "run.started"
	EventMessageDelta EventType = "message.delta"
	// EventContextUpdated changes the chat's context variables
	// (docs/context-variables.md): the spec's at creation, a run's or a
	// fork's, a client's PATCH between runs, a tool's during a turn.
	EventContextUpdated EventType = "context.updated"
)

// Terminal reports whether the event ends a chat's log.
func (t EventType) Terminal() bool {
	return t == EventChatCompleted || t == EventChatFailed || t == EventChatCancelled
}

// The roles and the name of the task's and humans' messages are the spec's
// (a spec's history names them too).
const (
	RoleUser      = spec.RoleUser
	RoleAssistant = spec.RoleAssistant
	RoleTool      = spec.RoleTool
	RoleSystem    = spec.RoleSystem
	UserName      = spec.UserName
)

// CodeResult is the seed's CodeExecutionResult.
type CodeResult struct {
	ExitCode int    `json:"exit_code"`
	Output   string `json:"output"`
}

// Message is a chat message as clients see it: an event of type "message".
type Message struct {
	Seq int64 `json:"seq"`
	// Type is AgentChat's name for the message (see MessageType).
	Type          string         `json:"type"`
	Role          string         `json:"role"`
	Name          string         `json:"name"`
	Content       string         `json:"content"`
	ToolCalls     []ToolCall     `json:"tool_calls,omitempty"`
	ToolResponses []ToolResponse `json:"tool_responses,omitempty"`
	CodeResult    *CodeResult    `json:"code_result,omitempty"`
	Handoff       string         `json:"handoff,omitempty"`
	Usage         *Usage         `json:"usage,omitempty"`
	// Thought is the model's reasoning behind the message, apart from its
	// content (AgentChat's ThoughtEvent before the message).
	Thought string `json:"thought,omitempty"`
	// Structured is a StructuredMessage's object (its content is the
	// object as text, or its format string filled in), written as
	// pydantic's model_dump_json writes it.
	Structured json.RawMessage `json:"structured,omitempty"`
	// Parts are a MultiModalMessage's texts and images, in order; its
	// content is their text (AgentChat's to_text: an "<image>" line for
	// each image).
	Parts []spec.Part `json:"parts,omitempty"`
	// Team names the team agent whose inner team said the message: it is
	// not part of the chat's thread (AgentChat's SocietyOfMindAgent).
	Team      string    `json:"team,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// MessageData is what a message event keeps in the log's data column: the
// fields of Message that have no column of their own, plus bookkeeping the
// worker derives its state from.
type MessageData struct {
	CodeResult *CodeResult `json:"code_result,omitempty"`
	Handoff    string      `json:"handoff,omitempty"`
	// Condition is the expression over the context variables that made a
	// hand-off (a conditional hand-off's HandoffMessage).
	Condition string `json:"condition,omitempty"`
	Usage     *Usage `json:"usage,omitempty"`
	// Thought is the model's reasoning (Message.Thought).
	Thought string `json:"thought,omitempty"`
	// Thinking are the signed thinking blocks of a reply that asked for
	// tools (ModelResponse.Thinking): what the agent's own next calls of
	// the tool loop send back. Never part of Message.
	Thinking []ThinkingBlock `json:"thinking_blocks,omitempty"`
	// Structured is a StructuredMessage's object as pydantic's
	// model_dump_json writes it: kept as text, since a stored JSON object
	// (jsonb) keeps no member order, and this text is what other agents
	// are shown of the message.
	Structured string `json:"structured,omitempty"`
	// Reply is the model's own text of a StructuredMessage where it
	// differs from the content: what the agent itself sees again.
	Reply string `json:"reply,omitempty"`
	// Parts are a MultiModalMessage's texts and images, as the client gave
	// them (Message.Parts).
	Parts []spec.Part `json:"parts,omitempty"`
	// Kind says where the message came from: "task", "history" (resumed
	// spec messages), "model" (one model call), "human", "auto" (auto-reply).
	// The replay position of an agent is the number of its "model" messages.
	Kind string `json:"kind,omitempty"`
	// Type is the message's AgentChat type where its shape and kind do not
	// tell it (a resumed history message that says it is a summary).
	Type string `json:"type,omitempty"`
	// Turn is the 1-based agent turn the message belongs to (0: not a turn).
	Turn int `json:"turn,omitempty"`
	// End marks the last message of its turn: a turn without it was cut by
	// a crash and is redone by the next worker.
	End bool `json:"end,omitempty"`
	// RequestID links a human message to the input request it answers.
	RequestID string `json:"request_id,omitempty"`
	// Functions are the names of the calls a tool message answers, in order
	// (what function_call termination looks for).
	Functions []string `json:"functions,omitempty"`
	// ResetTermination marks a human's decision to go on after the
	// termination conditions fired: they count afresh from here.
	ResetTermination bool `json:"reset_termination,omitempty"`
	// Stop marks the message that ended a turn while POST /stop asked the
	// run to end: an external condition fires on it.
	Stop bool `json:"stop,omitempty"`
	// Magentic is the magentic_one orchestrator's record of its message.
	Magentic *MagenticData `json:"magentic,omitempty"`
	// Team names the team agent whose inner team said the message.
	Team string `json:"team,omitempty"`
	// Context is what a message made for a team's inner run carries as
	// AgentChat's HandoffMessage context (see innerTask); derived, never
	// stored.
	Context []ModelMessage `json:"-"`
	// HiddenFrom are the agents that see the message only after their own
	// turn: the siblings of a parallel step still running when it ended
	// (see state.fold and viewOrder). It is derived from the log, not
	// stored.
	HiddenFrom []string `json:"-"`
}

// Event is one entry of a chat's append-only log. Seq is dense per chat
// (1, 2, 3 …) and is also the SSE event id. Message events use the Role …
// ToolResponses columns; every event may carry type-specific Data.
type Event struct {
	ChatID        string          `json:"chat_id"`
	Seq           int64           `json:"seq"`
	Type          EventType       `json:"type"`
	Role          string          `json:"role,omitempty"`
	Name          string          `json:"name,omitempty"`
	Content       string          `json:"content,omitempty"`
	ToolCalls     []ToolCall      `json:"tool_calls,omitempty"`
	ToolResponses []ToolResponse  `json:"tool_responses,omitempty"`
	Data          json.RawMessage `json:"data,omitempty"`
	CreatedAt     time.Time       `json:"created_at"`

	// typed is the value Data was encoded from, on the events a worker
	// makes (see withData), so that its fold does not decode them again.
	// It is dropped before the events are published; events read from a
	// store never have it.
	typed any
	// wire is where the event's wire form is kept once made, on the events
	// of a chat's kept tail (see Encoded).
	wire *wireMemo
}

// wireMemo holds the wire form of one committed event.
type wireMemo struct {
	once sync.Once
	b    []byte
}

// MemoizeWire gives each event of evs that has none a place to keep its
// wire form (see Encoded), all of them in one allocation: a chat's kept
// tail does this for the events it takes in.
func MemoizeWire(evs []Event) {
	var memos []wireMemo
	for i := range evs {
		if evs[i].wire == nil {
			if len(memos) == 0 {
				memos = make([]wireMemo, len(evs)-i)
			}
			evs[i].wire, memos = &memos[0], memos[1:]
		}
	}
}

// Encoded returns enc(e), made once for all the callers that get e from the
// same kept tail: the streams of one chat on this replica send the bytes
// of each committed event made by its first stream, instead of encoding it
// once per stream. Every caller must pass the same encoding (the SSE
// frame); the bytes are shared and must not be changed.
func (e Event) Encoded(enc func(Event) []byte) []byte {
	m := e.wire
	if m == nil {
		return enc(e)
	}
	m.once.Do(func() { m.b = enc(e) })
	return m.b
}

// Chat is the record of one chat: its spec and the summary of its log.
type Chat struct {
	ID               string
	Tenant           string
	Name             string
	Spec             json.RawMessage
	Metadata         json.RawMessage
	Status           Status
	StopReason       StopReason
	StopDetail       string
	Error            string
	LastSeq          int64
	Turns            int
	MessageCount     int
	PromptTokens     int64
	CompletionTokens int64
	PendingInput     json.RawMessage
	// InputResponse is a client's answer to PendingInput, waiting for the
	// chat's next worker to append it to the log.
	InputResponse   json.RawMessage
	InputExpiresAt  *time.Time
	IdempotencyKey  string
	RequestHash     string
	CancelRequested bool
	Owner           string
	LeaseExpiresAt  *time.Time
	Epoch           int64
	CreatedAt       time.Time
	UpdatedAt       time.Time
	CompletedAt     *time.Time
	// Run is the number of the chat's latest run (1 until it is run again,
	// docs/runs.md); QueuedRuns counts the runs posted after it that have
	// not started.
	Run        int
	QueuedRuns int
	// StopRequested: POST /stop asked the active run to end after its
	// current turn (AgentChat's ExternalTermination).
	StopRequested bool
	// ForkedFrom is where a fork's log was copied from; nil for other chats.
	ForkedFrom *ForkRef
	// Team is the saved team the chat was created from, if any.
	Team *TeamRef
	// ContextVariables are the chat's variables as of LastSeq (a JSON
	// object), when the runtime read them for a response; the store
	// leaves them nil (they are the fold of the log's context.updated
	// events).
	ContextVariables json.RawMessage `json:"-"`
}

// ForkRef names the chat and seq a fork's log was copied from.
type ForkRef struct {
	ChatID string `json:"chat_id"`
	Seq    int64  `json:"seq"`
}
