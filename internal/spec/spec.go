package spec

import (
	"bytes"
	"encoding/json"
	"slices"
)

// Spec is the request body of POST /v1/chats (docs/chat-specs.md).
type Spec struct {
	Name             string           `json:"name,omitempty"`
	Task             Task             `json:"task"`
	Agents           []Agent          `json:"agents"`
	Models           map[string]Model `json:"models,omitempty"`
	Tools            []Tool           `json:"tools,omitempty"`
	SpeakerSelection *Selection       `json:"speaker_selection,omitempty"`
	MaxRound         *int             `json:"max_round,omitempty"`
	Termination      *Condition       `json:"termination,omitempty"`
	Sandbox          *Sandbox         `json:"sandbox,omitempty"`
	Messages         []HistoryMessage `json:"messages,omitempty"`
	Metadata         json.RawMessage  `json:"metadata,omitempty"`
	InputTimeoutS    *int             `json:"input_timeout_s,omitempty"`
	Webhook          *Webhook         `json:"webhook,omitempty"`
	// ContextVariables are the chat's shared state when it starts (a JSON
	// object; docs/context-variables.md). They name the variables that
	// hand-off and graph-edge expressions may use; a null names one
	// without setting it.
	ContextVariables json.RawMessage `json:"context_variables,omitempty"`
}

// Webhook is a chat's own webhook endpoint (docs/backend.md): the chat's events
// of the listed types (default: the terminal events, input.requested and
// run.started) are POSTed to URL as Standard Webhooks.
type Webhook struct {
	URL    string   `json:"url"`
	Events []string `json:"events,omitempty"`
}

// Agent types.
const (
	AgentAssistant = "assistant"
	AgentUserProxy = "user_proxy"
	// AgentTeam is AgentChat's SocietyOfMindAgent: an inner team runs,
	// then the agent's model answers for it.
	AgentTeam = "team"
)

// Human input modes of a user_proxy (AutoGen 0.2).
const (
	HumanInputNever     = "NEVER"
	HumanInputAlways    = "ALWAYS"
	HumanInputTerminate = "TERMINATE"
)

// AgentSpec is one participant of the chat.
type Agent struct {
	Name          string  `json:"name"`
	Type          string  `json:"type"`
	Description   string  `json:"description,omitempty"`
	SystemMessage *string `json:"system_message,omitempty"`
	// SystemMessageTemplate is a system message rendered from the chat's
	// context variables for each model call (Python's str.format; a
	// variable that is not set is empty, as in Swarm).
	SystemMessageTemplate   *string        `json:"system_message_template,omitempty"`
	Model                   *ModelRef      `json:"model,omitempty"`
	Tools                   []string       `json:"tools,omitempty"`
	Handoffs                []Handoff      `json:"handoffs,omitempty"`
	ReflectOnToolUse        *bool          `json:"reflect_on_tool_use,omitempty"`
	MaxToolIterations       *int           `json:"max_tool_iterations,omitempty"`
	ToolCallSummaryFormat   *string        `json:"tool_call_summary_format,omitempty"`
	Context                 *ModelContext  `json:"context,omitempty"`
	HumanInputMode          string         `json:"human_input_mode,omitempty"`
	CodeExecution           *CodeExecution `json:"code_execution,omitempty"`
	Functions               []string       `json:"functions,omitempty"`
	MaxConsecutiveAutoReply *int           `json:"max_consecutive_auto_reply,omitempty"`
	DefaultAutoReply        *string        `json:"default_auto_reply,omitempty"`
	// ParallelToolCalls is sent as the request's parallel_tool_calls when
	// the agent offers tools (OpenAI Swarm's Agent.parallel_tool_calls;
	// true by default under the openai_swarm protocol, the model's option
	// otherwise).
	ParallelToolCalls *bool `json:"parallel_tool_calls,omitempty"`
	// ToolApproval pauses an assistant's turn before its tool calls run,
	// for a client to approve, edit or reject each (docs/runs.md).
	ToolApproval *ToolApproval `json:"tool_approval,omitempty"`
	// CodeApproval pauses a code-executing user_proxy before its code
	// runs (AgentChat's CodeExecutorAgent approval_func).
	CodeApproval *bool `json:"code_approval,omitempty"`
	// OutputSchema asks an assistant for structured output (AgentChat's
	// output_content_type): its replies are StructuredMessages.
	OutputSchema *OutputSchema `json:"output_schema,omitempty"`
	// MessageFilter limits what the agent sees of the messages given to
	// it each turn (AgentChat's MessageFilterAgent).
	MessageFilter *MessageFilter `json:"message_filter,omitempty"`
	// Team is a team agent's inner team; Instruction and ResponsePrompt
	// frame the inner team's messages when the agent's model answers
	// (AgentChat's SocietyOfMindAgent; defaults are AgentChat's).
	Team           *Team   `json:"team,omitempty"`
	Instruction    *string `json:"instruction,omitempty"`
	ResponsePrompt *string `json:"response_prompt,omitempty"`
}

// Team is the inner team of a team agent: its agents (named apart from
// every other agent of the chat), how they take turns, and when the inner
// run stops. Models and tools are the chat's.
type Team struct {
	Agents           []Agent    `json:"agents"`
	SpeakerSelection *Selection `json:"speaker_selection,omitempty"`
	Termination      *Condition `json:"termination,omitempty"`
	MaxRound         *int       `json:"max_round,omitempty"`
}

// AgentChat's SocietyOfMindAgent defaults.
const (
	DefaultInstruction    = "Earlier you were asked to fulfill a request. You and your team worked diligently to address that request. Here is a transcript of that conversation:"
	DefaultResponsePrompt = "Output a standalone response to the original request, without mentioning any of the intermediate discussion."
)

// OutputSchema is an assistant's structured-output type, as AgentChat's
// component JSON holds an output_content_type (StructuredMessageFactory):
// the type's name, its JSON Schema and an optional format string that
// renders a reply for people (and for termination conditions).
type OutputSchema struct {
	Name         string          `json:"name"`
	Schema       json.RawMessage `json:"schema"`
	FormatString *string         `json:"format_string,omitempty"`
	// PropertyOrder is the order of the schema's properties, which is the
	// order of the reply's fields as the model's later readers see them.
	// A stored JSON object keeps no order, so it is written down at
	// create time from the request (see DecodeCompact).
	PropertyOrder []string `json:"property_order,omitempty"`
}

// Values of ToolApproval's mode.
const (
	ApprovalNever  = "never"
	ApprovalAlways = "always"
)

// ToolApproval is an assistant's tool_approval: "never" (the default),
// "always", or the names of the tools whose calls need approval.
type ToolApproval struct {
	Mode  string
	Tools []string
}

// UnmarshalJSON accepts a string (the mode) or a list of tool names.
func (t *ToolApproval) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &t.Mode)
	}
	return json.Unmarshal(b, &t.Tools)
}

// MarshalJSON writes the form it was given in.
func (t ToolApproval) MarshalJSON() ([]byte, error) {
	if t.Mode != "" || t.Tools == nil {
		return json.Marshal(t.Mode)
	}
	return json.Marshal(t.Tools)
}

// Needs reports whether a call of the named tool needs approval.
func (t *ToolApproval) Needs(tool string) bool {
	if t == nil {
		return false
	}
	if t.Mode != "" {
		return t.Mode == ApprovalAlways
	}
	return slices.Contains(t.Tools, tool)
}

// ModelContext bounds what an assistant (or the auto selector) sees of the
// conversation, as AgentChat's model contexts do: unbounded (everything),
// buffered (the last buffer_size messages), token_limited (messages taken
// out of the middle until the rest counts at most token_limit tokens) or
// head_and_tail (the first head_size and last tail_size messages, with a
// note of how many were skipped). Without a type, buffer_size alone means
// buffered and nothing means unbounded.
type ModelContext struct {
	Type       string `json:"type,omitempty"`
	BufferSize *int   `json:"buffer_size,omitempty"`
	TokenLimit *int   `json:"token_limit,omitempty"`
	HeadSize   *int   `json:"head_size,omitempty"`
	TailSize   *int   `json:"tail_size,omitempty"`
}

// The model context types.
const (
	ContextUnbounded    = "unbounded"
	ContextBuffered     = "buffered"
	ContextTokenLimited = "token_limited"
	ContextHeadAndTail  = "head_and_tail"
)

// Kind is the context's type, buffered or unbounded when it names none;
// a nil context is unbounded.
func (c *ModelContext) Kind() string {
	switch {
	case c == nil:
		return ContextUnbounded
	case c.Type != "":
		return c.Type
	case c.BufferSize != nil:
		return ContextBuffered
	}
	return ContextUnbounded
}

// CodeExecutionSpec configures a user_proxy that runs code blocks.
type CodeExecution struct {
	Languages []string `json:"languages,omitempty"`
	TimeoutS  *int     `json:"timeout_s,omitempty"`
}

// ModelRef is an agent's model: the name of an entry of Spec.Models, or an
// inline model object.
type ModelRef struct {
	Name   string
	Inline *Model
}

// UnmarshalJSON accepts a string (a key of models) or a model object.
func (m *ModelRef) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &m.Name)
	}
	m.Inline = new(Model)
	return json.Unmarshal(b, m.Inline)
}

// MarshalJSON writes the form the ref was given in.
func (m ModelRef) MarshalJSON() ([]byte, error) {
	if m.Inline != nil {
		return json.Marshal(m.Inline)
	}
	return json.Marshal(m.Name)
}

// ToolSpec is a tool that agents may use or execute.
type Tool struct {
	Name           string          `json:"name"`
	Description    string          `json:"description,omitempty"`
	Parameters     json.RawMessage `json:"parameters,omitempty"`
	Implementation json.RawMessage `json:"implementation,omitempty"`
}

// Speaker selection methods.
const (
	SelectRoundRobin = "round_robin"
	SelectRandom     = "random"
	SelectAuto       = "auto"
	SelectManual     = "manual"
	SelectSwarm      = "swarm"
	SelectGraph      = "graph"
	SelectMagentic   = "magentic_one"
)

// SelectionSpec configures how the next speaker is chosen (docs/chat-specs.md).
type Selection struct {
	Method               string              `json:"method,omitempty"`
	Model                *ModelRef           `json:"model,omitempty"`
	AllowRepeatedSpeaker *bool               `json:"allow_repeated_speaker,omitempty"`
	MaxAttempts          *int                `json:"max_attempts,omitempty"`
	Seed                 *int64              `json:"seed,omitempty"`
	SelectorPrompt       *string             `json:"selector_prompt,omitempty"`
	Transitions          map[string][]string `json:"transitions,omitempty"`
	TransitionsType      string              `json:"transitions_type,omitempty"`
	// Context bounds the conversation the auto selector's prompt shows
	// (SelectorGroupChat's model_context).
	Context *ModelContext `json:"context,omitempty"`
	// Graph is the graph method's DiGraph (AgentChat's GraphFlow).
	Graph *Graph `json:"graph,omitempty"`
	// MaxStalls and FinalAnswerPrompt are the magentic_one method's
	// (MagenticOneGroupChat's max_stalls and final_answer_prompt).
	MaxStalls         *int    `json:"max_stalls,omitempty"`
	FinalAnswerPrompt *string `json:"final_answer_prompt,omitempty"`
	// Protocol is what the swarm method's models see: AgentChat's Swarm
	// (agentchat, the default) or OpenAI Swarm's own run loop
	// (openai_swarm, docs/openai-swarm.md).
	Protocol string `json:"protocol,omitempty"`
}

// Protocols of the swarm method.
const (
	ProtocolAgentChat   = "agentchat"
	ProtocolOpenAISwarm = "openai_swarm"
)

// Graph is AgentChat's DiGraph as its component JSON holds it: the nodes
// by agent name, each with its outgoing edges, and the node to start at
// (default: every node without incoming edges).
type Graph struct {
	Nodes            map[string]GraphNode `json:"nodes"`
	DefaultStartNode *string              `json:"default_start_node,omitempty"`
}

// GraphNode is a DiGraphNode. Activation is kept as the file gives it;
// GraphFlow 0.7.5 decides by its edges' activation conditions alone.
type GraphNode struct {
	Name       string      `json:"name"`
	Edges      []GraphEdge `json:"edges,omitempty"`
	Activation string      `json:"activation,omitempty"`
}

// GraphEdge is a DiGraphEdge. Condition is the text the source's message
// must contain for the edge to be taken (null: always taken); it is raw
// JSON so that a condition of another kind can be refused by name.
// ActivationGroup defaults to the target; ActivationCondition (all, the
// default, or any) says whether every edge of the group must have been
// taken or one is enough.
type GraphEdge struct {
	Target              string          `json:"target"`
	Condition           json.RawMessage `json:"condition,omitempty"`
	ActivationGroup     string          `json:"activation_group,omitempty"`
	ActivationCondition string          `json:"activation_condition,omitempty"`
}

// Text is the edge's condition text, and whether it has one.
func (e *GraphEdge) Text() (string, bool) {
	if len(e.Condition) == 0 || string(e.Condition) == "null" {
		return "", false
	}
	var s string
	if err := json.Unmarshal(e.Condition, &s); err != nil {
		return "", false
	}
	return s, true
}

// Expression is the edge's condition when it is an expression over the
// context variables ({"expression": "severity >= 8"}), and whether it is.
func (e *GraphEdge) Expression() (string, bool) {
	c := bytes.TrimSpace(e.Condition)
	if len(c) == 0 || c[0] != '{' {
		return "", false
	}
	var x struct {
		Expression string `json:"expression"`
	}
	if err := json.Unmarshal(c, &x); err != nil {
		return "", false
	}
	return x.Expression, true
}

// Group is the edge's activation group: the target when none is given.
func (e *GraphEdge) Group() string {
	if e.ActivationGroup == "" {
		return e.Target
	}
	return e.ActivationGroup
}

// Any reports whether one taken edge of the group activates the target.
func (e *GraphEdge) Any() bool { return e.ActivationCondition == ActivationAny }

// Activation conditions of graph edges and nodes.
const (
	ActivationAll = "all"
	ActivationAny = "any"
)

// MessageFilter is AgentChat's MessageFilterAgent's filter: of the
// messages given to the agent for a turn, it sees, source by source in
// this order, those of each listed source (the first or last count of
// them, or all).
type MessageFilter struct {
	PerSource []SourceFilter `json:"per_source"`
}

// SourceFilter is one PerSourceFilter.
type SourceFilter struct {
	Source   string `json:"source"`
	Position string `json:"position,omitempty"`
	Count    *int   `json:"count,omitempty"`
}

// SandboxSpec sets the limits of the chat's code sandbox.
type Sandbox struct {
	MemoryMB *int     `json:"memory_mb,omitempty"`
	CPUs     *float64 `json:"cpus,omitempty"`
	TimeoutS *int     `json:"timeout_s,omitempty"`
	// DiskMB bounds the chat's work dir (default and maximum: the server's).
	DiskMB *int `json:"disk_mb,omitempty"`
	// Network lets the sandbox reach hosts through agentd's egress proxy;
	// nil: no network at all.
	Network *SandboxNetwork `json:"network,omitempty"`
}

// SandboxNetwork is what a chat's sandbox may reach (docs/tools.md).
type SandboxNetwork struct {
	// Allow lists hosts: "pypi.org" (ports 80 and 443),
	// "files.example.com:8443", "*.example.com" (every name below it),
	// "*.example.com:443", an IP address or CIDR. Each must be permitted by
	// the operator's AGENTD_SANDBOX_ALLOW_HOSTS.
	Allow []string `json:"allow"`
}

// HistoryMessage is a message of a prior conversation to resume from.
type HistoryMessage struct {
	// Type is AgentChat's type of the message when its shape does not say
	// it: "ToolCallSummaryMessage" for an assistant's tool-call summary
	// (which the assistant itself does not see again); default TextMessage.
	Type string `json:"type,omitempty"`
	Role string `json:"role"`
	Name string `json:"name,omitempty"`
	// Content is a text, or of a MultiModalMessage (a user message) a list
	// of texts and images.
	Content       MessageContent `json:"content,omitzero"`
	ToolCalls     []ToolCall     `json:"tool_calls,omitempty"`
	ToolResponses []ToolResponse `json:"tool_responses,omitempty"`
}

// Condition is one node of the termination tree: exactly one field is set.
type Condition struct {
	MaxMessages *int `json:"max_messages,omitempty"`
	// IncludeAgentEvent goes with MaxMessages only: the count includes the
	// agents' inner events (tool calls, tool results, thoughts), as
	// MaxMessageTermination(include_agent_event=True) counts them.
	IncludeAgentEvent *bool                 `json:"include_agent_event,omitempty"`
	TextMention       *TextMentionCondition `json:"text_mention,omitempty"`
	// TextMessage is AgentChat's TextMessageTermination: it fires on a
	// TextMessage (from Source, when set).
	TextMessage  *TextMessageCondition `json:"text_message,omitempty"`
	TextMatch    *TextMatchCondition   `json:"text_match,omitempty"`
	TokenUsage   *TokenUsageCondition  `json:"token_usage,omitempty"`
	TimeoutS     *float64              `json:"timeout_s,omitempty"`
	Handoff      *HandoffCondition     `json:"handoff,omitempty"`
	SourceMatch  *SourceMatchCondition `json:"source_match,omitempty"`
	FunctionCall *FunctionCallCond     `json:"function_call,omitempty"`
	// External is AgentChat's ExternalTermination: it fires at the first
	// check after POST /stop. A tree without one still stops on POST /stop,
	// as if it were or-ed with one.
	External *ExternalCondition `json:"external,omitempty"`
	Any      []Condition        `json:"any,omitempty"`
	All      []Condition        `json:"all,omitempty"`
}

// TextMentionCondition fires when a message's content contains Text.
type TextMentionCondition struct {
	Text    string   `json:"text"`
	Sources []string `json:"sources,omitempty"`
}

// TextMessageCondition fires on a TextMessage, from Source when it is set.
type TextMessageCondition struct {
	Source string `json:"source,omitempty"`
}

// TextMatchCondition fires when a message's content matches an RE2 pattern.
type TextMatchCondition struct {
	Pattern string `json:"pattern"`
}

// TokenUsageCondition fires when the chat's token usage reaches a limit.
type TokenUsageCondition struct {
	MaxTotalTokens      *int64 `json:"max_total_tokens,omitempty"`
	MaxPromptTokens     *int64 `json:"max_prompt_tokens,omitempty"`
	MaxCompletionTokens *int64 `json:"max_completion_tokens,omitempty"`
}

// HandoffCondition fires on a handoff to Target.
type HandoffCondition struct {
	Target string `json:"target"`
}

// SourceMatchCondition fires when one of Sources has spoken.
type SourceMatchCondition struct {
	Sources []string `json:"sources"`
}

// ExternalCondition is the (empty) body of an external condition.
type ExternalCondition struct{}

// FunctionCallCond fires after the named function ran.
type FunctionCallCond struct {
	Name string `json:"name"`
}
