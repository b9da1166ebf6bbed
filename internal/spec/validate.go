package spec

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentd/agentd/internal/spec/problem"
)

// Limits bound everything a client controls in a spec.
type Limits struct {
	MaxAgents          int // agents per chat
	MaxTools           int // tools per chat
	MaxTaskBytes       int // task and each history message
	MaxPromptBytes     int // system messages, selector prompt, auto replies
	MaxHistory         int // resumed messages
	MaxRound           int // the server's cap on max_round
	MaxReplayResponses int // scripted responses per replay model
	MaxMetadataBytes   int
	MaxConditions      int // nodes in the termination tree
	MaxConditionDepth  int
	MaxSandboxDiskMB   int // the server's cap on sandbox.disk_mb
	MaxImageBytes      int // each image of a message (AGENTD_MAX_IMAGE_BYTES)
}

// Upper bounds of the counts and durations a spec sets that no server
// setting bounds. Durations must fit time.Duration; counts must be far from
// overflowing the sums they feed.
const (
	maxModelTokens       = 1_000_000
	maxBufferSize        = 100_000
	maxContextTokens     = 10_000_000
	maxMessagesCondition = 1_000_000
	maxTokenCount        = 1e12
	maxChatTimeoutS      = 30 * 24 * 3600
)

// DefaultLimits are used for every zero field of a Limits.
var DefaultLimits = Limits{
	MaxAgents:          32,
	MaxTools:           64,
	MaxTaskBytes:       64 << 10,
	MaxPromptBytes:     32 << 10,
	MaxHistory:         1000,
	MaxRound:           100,
	MaxReplayResponses: 1000,
	MaxMetadataBytes:   16 << 10,
	MaxConditions:      64,
	MaxConditionDepth:  8,
	MaxSandboxDiskMB:   4096,
	MaxImageBytes:      DefaultMaxImageBytes,
}

// WithDefaults is l with every zero field set from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits
	or := func(v, def int) int {
		if v > 0 {
			return v
		}
		return def
	}
	return Limits{
		MaxAgents:          or(l.MaxAgents, d.MaxAgents),
		MaxTools:           or(l.MaxTools, d.MaxTools),
		MaxTaskBytes:       or(l.MaxTaskBytes, d.MaxTaskBytes),
		MaxPromptBytes:     or(l.MaxPromptBytes, d.MaxPromptBytes),
		MaxHistory:         or(l.MaxHistory, d.MaxHistory),
		MaxRound:           or(l.MaxRound, d.MaxRound),
		MaxReplayResponses: or(l.MaxReplayResponses, d.MaxReplayResponses),
		MaxMetadataBytes:   or(l.MaxMetadataBytes, d.MaxMetadataBytes),
		MaxConditions:      or(l.MaxConditions, d.MaxConditions),
		MaxConditionDepth:  or(l.MaxConditionDepth, d.MaxConditionDepth),
		MaxSandboxDiskMB:   or(l.MaxSandboxDiskMB, d.MaxSandboxDiskMB),
		MaxImageBytes:      or(l.MaxImageBytes, d.MaxImageBytes),
	}
}

// DefaultMaxRound is max_round when a spec leaves it out.
const DefaultMaxRound = 10

var agentNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

// ValidAgentName reports whether name is shaped like an agent's name.
func ValidAgentName(name string) bool { return agentNameRE.MatchString(name) }

// maxSwarmNameBytes bounds an agent's name under the openai_swarm
// protocol, where a name is any text (OpenAI Swarm's are).
const maxSwarmNameBytes = 256

// swarmAgentName reports whether name may name an agent under the
// openai_swarm protocol: text without control characters, which would
// make log lines and event streams ambiguous.
func swarmAgentName(name string) bool {
	if name == "" || len(name) > maxSwarmNameBytes || !utf8.ValidString(name) {
		return false
	}
	return !strings.ContainsFunc(name, unicode.IsControl)
}

// checkProtocol checks the swarm method's protocol, and what OpenAI
// Swarm's run loop has no place for: agents other than assistants,
// hand-offs to user, and the AgentChat options of an assistant's turn.
func (v *validator) checkProtocol(p string, sel *Selection) {
	switch sel.Protocol {
	case "", ProtocolAgentChat:
		return
	case ProtocolOpenAISwarm:
		if sel.Method != SelectSwarm {
			v.add(p+"/protocol", "openai_swarm goes with method swarm")
			return
		}
		if v.inner {
			// A team agent's turn is AgentChat's SocietyOfMindAgent.
			v.add(p+"/protocol", "an inner team speaks AgentChat's protocol: openai_swarm is for a chat's own agents")
			return
		}
	default:
		v.add(p+"/protocol", "must be agentchat or openai_swarm")
		return
	}
	for i, a := range v.spec.Agents {
		ap := "/agents/" + strconv.Itoa(i)
		if a.Type != AgentAssistant {
			v.add(ap+"/type", "must be assistant: OpenAI Swarm's agents are assistants")
		}
		for _, f := range []struct {
			set  bool
			name string
		}{
			{a.ReflectOnToolUse != nil, "reflect_on_tool_use"}, {a.MaxToolIterations != nil, "max_tool_iterations"},
			{a.ToolCallSummaryFormat != nil, "tool_call_summary_format"}, {a.OutputSchema != nil, "output_schema"},
			{a.Context != nil, "context"}, {a.MessageFilter != nil, "message_filter"},
		} {
			if f.set {
				v.add(ap+"/"+f.name, "has no place in OpenAI Swarm's run loop (protocol openai_swarm): the agent calls its model until a reply asks for no tools")
			}
		}
		for j, h := range a.Handoffs {
			hp := ap + "/handoffs/" + strconv.Itoa(j)
			switch {
			case h.Target == UserName:
				v.add(hp, "OpenAI Swarm hands off to agents only; a run ends on a reply without tool calls")
			case h.Conditional():
				v.add(hp+"/condition", "OpenAI Swarm hands off through functions only: a hand-off on a condition has no place in its run loop")
			}
		}
	}
}

// Env is what a server offers the specs it validates.
type Env struct {
	// Providers are the model providers besides "replay".
	Providers []string
	// Tools checks tool definitions; nil: this server runs no tools.
	Tools ToolChecker
	// Models checks that a model of a known provider is served by one of
	// the server's endpoints; nil: no endpoint check.
	Models ModelChecker
	// Sandbox names the code sandbox backend; "": none.
	Sandbox string
	// Webhooks checks a spec's webhook; nil: this server sends no webhooks.
	Webhooks WebhookChecker
	// SandboxHosts checks the hosts of sandbox.network.allow; nil: this
	// server gives sandboxes no network.
	SandboxHosts SandboxHostChecker
}

// SandboxHostChecker validates one entry of sandbox.network.allow at create
// time: its syntax, and that the operator permits it. It returns "" for a
// good entry, else what is wrong. internal/egress implements it.
type SandboxHostChecker interface {
	CheckSandboxHost(entry string) string
}

// MaxSandboxHosts bounds sandbox.network.allow.
const MaxSandboxHosts = 64

// WebhookChecker validates a spec's webhook at create time: its URL (the
// same address rules as tools) and event types. Paths are JSON pointers
// relative to the webhook ("/url", "/events/0"). internal/webhook
// implements it.
type WebhookChecker interface {
	CheckWebhook(w *Webhook) []Problem
}

// ToolChecker validates one tool definition at create time: its parameters
// schema and implementation. Paths are JSON pointers relative to the tool
// ("/parameters", "/implementation/url"). internal/tool implements it.
type ToolChecker interface {
	CheckTool(t *Tool) []Problem
	// CheckSwarmTool is CheckTool for a chat of the openai_swarm
	// protocol, whose python_functions are read as OpenAI Swarm reads them.
	CheckSwarmTool(t *Tool) []Problem
}

// ModelChecker checks, at create time, that one of the server's endpoints
// serves a model whose provider the server offers: the endpoint it names
// exists and is of the provider's kind, or some endpoint serves the model's
// name. Paths are JSON pointers relative to the model object ("/endpoint",
// "/model"). internal/llm implements it.
type ModelChecker interface {
	CheckModel(m *Model) []Problem
	// ProviderSetup says how the operator would offer provider, which
	// the server does not offer ("" when it could not): the refusal of
	// a spec naming it says so.
	ProviderSetup(provider string) string
}

// validator collects every problem of a spec.
type validator struct {
	probs     problem.List
	limits    Limits
	providers []string
	env       Env
	spec      *Spec
	agents    map[string]bool
	// team: the spec is a saved team's, which has no task.
	team bool
	// inner: the spec is a team agent's inner team (validate_team.go).
	inner bool
}

func (v *validator) add(path, format string, args ...any) {
	v.probs.Add(path, format, args...)
}

// checkSandboxNetwork checks sandbox.network: every host asked for must be
// one the operator permits; each one that is not is named.
func (v *validator) checkSandboxNetwork(n *SandboxNetwork) {
	switch {
	case n == nil:
		return
	case len(n.Allow) == 0:
		v.add("/sandbox/network/allow", "must name at least one host (leave sandbox.network out for no network)")
		return
	case len(n.Allow) > MaxSandboxHosts:
		v.add("/sandbox/network/allow", "must name at most %d hosts", MaxSandboxHosts)
		return
	case v.env.Sandbox == "":
		v.add("/sandbox/network", "this server has no code sandbox")
		return
	case v.env.SandboxHosts == nil:
		v.add("/sandbox/network", "this server gives sandboxes no network: the operator permits hosts with AGENTD_SANDBOX_ALLOW_HOSTS")
		return
	}
	for i, h := range n.Allow {
		if len(h) > 300 {
			v.add("/sandbox/network/allow/"+strconv.Itoa(i), "must be at most 300 bytes")
		} else if msg := v.env.SandboxHosts.CheckSandboxHost(h); msg != "" {
			v.add("/sandbox/network/allow/"+strconv.Itoa(i), "%s", msg)
		}
	}
}

// Validate checks a decoded spec against docs/chat-specs.md and what this server
// offers, and returns every problem found.
func Validate(s *Spec, limits Limits, env Env) []Problem {
	return validate(s, limits, env, false)
}

// ValidateTeam checks the spec of a saved team as Validate checks a chat's,
// except that a team has no task: the chats created from it bring theirs.
func ValidateTeam(s *Spec, limits Limits, env Env) []Problem {
	return validate(s, limits, env, true)
}

func validate(s *Spec, limits Limits, env Env, team bool) []Problem {
	v := &validator{limits: limits.WithDefaults(), providers: env.Providers, env: env, spec: s, agents: map[string]bool{}, team: team}
	v.checkTop()
	v.checkContextVariables()
	v.checkModels()
	v.checkAgents()
	v.checkSelection()
	if s.Termination != nil {
		count := 0
		v.checkCondition("/termination", s.Termination, 1, &count)
	}
	v.checkHistory()
	return v.probs.Items()
}

func (v *validator) checkTop() {
	s := v.spec
	if len(s.Name) > 200 {
		v.add("/name", "must be at most 200 characters")
	}
	switch {
	case v.team && !s.Task.Empty():
		v.add("/task", "a saved team has no task: give the task when creating a chat from the team")
	case v.team:
	case s.Task.Empty():
		v.add("/task", "is required")
	case s.Task.Messages != nil:
		// A message or a list: the engine checks it against the agents
		// (chat.Runtime.Create), as a run's task.
	case len(s.Task.Text) > v.limits.MaxTaskBytes:
		v.add("/task", "must be at most %d bytes", v.limits.MaxTaskBytes)
	}
	if s.MaxRound != nil && (*s.MaxRound < 1 || *s.MaxRound > v.limits.MaxRound) {
		v.add("/max_round", "must be between 1 and %d (this server's limit)", v.limits.MaxRound)
	}
	if len(s.Metadata) > 0 {
		if b := bytes.TrimSpace(s.Metadata); len(b) == 0 || (b[0] != '{' && string(b) != "null") {
			v.add("/metadata", "must be an object")
		} else if len(b) > v.limits.MaxMetadataBytes {
			v.add("/metadata", "must be at most %d bytes", v.limits.MaxMetadataBytes)
		}
	}
	v.checkTools()
	if s.Sandbox != nil {
		if s.Sandbox.MemoryMB != nil && (*s.Sandbox.MemoryMB < 16 || *s.Sandbox.MemoryMB > 16384) {
			v.add("/sandbox/memory_mb", "must be between 16 and 16384")
		}
		if s.Sandbox.CPUs != nil && (*s.Sandbox.CPUs <= 0 || *s.Sandbox.CPUs > 16) {
			v.add("/sandbox/cpus", "must be greater than 0 and at most 16")
		}
		if s.Sandbox.DiskMB != nil && (*s.Sandbox.DiskMB < 1 || *s.Sandbox.DiskMB > v.limits.MaxSandboxDiskMB) {
			v.add("/sandbox/disk_mb", "must be between 1 and %d", v.limits.MaxSandboxDiskMB)
		}
		if s.Sandbox.TimeoutS != nil && (*s.Sandbox.TimeoutS < 1 || *s.Sandbox.TimeoutS > 3600) {
			v.add("/sandbox/timeout_s", "must be between 1 and 3600")
		}
		v.checkSandboxNetwork(s.Sandbox.Network)
	}
	if s.InputTimeoutS != nil && (*s.InputTimeoutS < 1 || *s.InputTimeoutS > 7*24*3600) {
		v.add("/input_timeout_s", "must be between 1 and 604800 (a week)")
	}
	if s.Webhook != nil {
		if v.env.Webhooks == nil {
			v.add("/webhook", "this server sends no webhooks: the operator enables them with AGENTD_WEBHOOK_SECRET")
		} else {
			for _, p := range v.env.Webhooks.CheckWebhook(s.Webhook) {
				v.add("/webhook"+p.Path, "%s", p.Message)
			}
		}
	}
}

func (v *validator) checkModels() {
	names := make([]string, 0, len(v.spec.Models))
	for name := range v.spec.Models {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		m := v.spec.Models[name]
		v.checkModel("/models/"+problem.Escape(name), &m)
	}
}

func (v *validator) checkModel(path string, m *Model) {
	switch {
	case m.Provider == "":
		v.add(path+"/provider", "is required")
	case m.Provider == "replay":
		if len(m.Responses) == 0 {
			v.add(path+"/responses", "a replay model needs at least one response")
		} else if len(m.Responses) > v.limits.MaxReplayResponses {
			v.add(path+"/responses", "at most %d responses are allowed", v.limits.MaxReplayResponses)
		}
		if m.Endpoint != "" {
			v.add(path+"/endpoint", "a replay model calls no endpoint")
		}
		for i, r := range m.Responses {
			if len(r.Thought) > v.limits.MaxPromptBytes {
				v.add(path+"/responses/"+strconv.Itoa(i)+"/thought", "must be at most %d bytes", v.limits.MaxPromptBytes)
			}
			for j, c := range r.ToolCalls {
				if c.Name == "" {
					v.add(path+"/responses/"+strconv.Itoa(i)+"/tool_calls/"+strconv.Itoa(j)+"/name", "is required")
				}
			}
			if r.DelayMS < 0 || r.DelayMS > 600_000 {
				v.add(path+"/responses/"+strconv.Itoa(i)+"/delay_ms", "must be between 0 and 600000")
			}
			if u := r.Usage; u != nil {
				for name, n := range map[string]int64{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens} {
					if n < 0 || n > maxTokenCount {
						v.add(path+"/responses/"+strconv.Itoa(i)+"/usage/"+name, "must be between 0 and %d", int64(maxTokenCount))
					}
				}
			}
		}
	case !slices.Contains(v.providers, m.Provider):
		offered := quoteList(append([]string{"replay"}, v.providers...))
		if v.env.Models != nil {
			if how := v.env.Models.ProviderSetup(m.Provider); how != "" {
				v.add(path+"/provider", "provider %q is not configured on this server, which offers %s: %s", m.Provider, offered, how)
				break
			}
		}
		v.add(path+"/provider", "unknown provider %q; this server offers %s", m.Provider, offered)
	default:
		if m.Model == "" {
			v.add(path+"/model", "is required for provider %q", m.Provider)
		}
		if len(m.Responses) > 0 {
			v.add(path+"/responses", "only the replay provider takes responses")
		}
		if v.env.Models != nil {
			for _, p := range v.env.Models.CheckModel(m) {
				v.add(path+p.Path, "%s", p.Message)
			}
		}
	}
	if m.Temperature != nil && (*m.Temperature < 0 || *m.Temperature > 2) {
		v.add(path+"/temperature", "must be between 0 and 2")
	}
	if m.TopP != nil && (*m.TopP < 0 || *m.TopP > 1) {
		v.add(path+"/top_p", "must be between 0 and 1")
	}
	if len(m.Stop) > maxStopSequences {
		v.add(path+"/stop", "at most %d stop sequences (the API's limit)", maxStopSequences)
	}
	for i, st := range m.Stop {
		if st == "" || len(st) > maxStopBytes {
			v.add(path+"/stop/"+strconv.Itoa(i), "must be between 1 and %d bytes", maxStopBytes)
		}
	}
	for _, f := range []struct {
		name string
		p    *float64
	}{{"frequency_penalty", m.FrequencyPenalty}, {"presence_penalty", m.PresencePenalty}} {
		if f.p != nil && (*f.p < -2 || *f.p > 2) {
			v.add(path+"/"+f.name, "must be between -2 and 2")
		}
	}
	if m.ReasoningEffort != "" && !slices.Contains(reasoningEfforts, m.ReasoningEffort) {
		v.add(path+"/reasoning_effort", "must be one of %s", quoteList(reasoningEfforts))
	}
	if m.MaxTokens != nil && (*m.MaxTokens < 1 || *m.MaxTokens > maxModelTokens) {
		v.add(path+"/max_tokens", "must be between 1 and %d", maxModelTokens)
	}
	if m.Thinking != nil {
		v.checkThinking(path, m)
	}
}

// Limits of a model's options, as OpenAI's API sets them.
const (
	maxStopSequences = 4
	maxStopBytes     = 256
)

// reasoningEfforts are the values of OpenAI's reasoning_effort.
var reasoningEfforts = []string{"minimal", "low", "medium", "high"}

// checkThinking checks a model's extended thinking as the Messages API
// does: a budget of at least 1024 tokens and below max_tokens (the
// thinking counts towards it), and only for a model an anthropic endpoint
// serves (a model's provider is the kind of its endpoint).
func (v *validator) checkThinking(path string, m *Model) {
	t, p := m.Thinking, path+"/thinking"
	if m.Provider != "anthropic" {
		v.add(p, "only a model of provider anthropic takes thinking (Anthropic's extended thinking), not one of provider %q", m.Provider)
	}
	switch t.Type {
	case ThinkingEnabled:
		maxTokens, of := DefaultAnthropicMaxTokens, "max_tokens (%d, the default)"
		if m.MaxTokens != nil {
			maxTokens, of = *m.MaxTokens, "max_tokens (%d)"
		}
		switch b := t.BudgetTokens; {
		case b == nil:
			v.add(p+"/budget_tokens", "is required when thinking is enabled")
		case *b < MinThinkingBudget:
			v.add(p+"/budget_tokens", "must be at least %d", MinThinkingBudget)
		case *b >= maxTokens:
			v.add(p+"/budget_tokens", "must be less than "+of+": the thinking counts towards it", maxTokens)
		}
	case ThinkingDisabled:
		if t.BudgetTokens != nil {
			v.add(p+"/budget_tokens", "only enabled thinking takes a budget")
		}
	default:
		v.add(p+"/type", "must be %q or %q, not %q", ThinkingEnabled, ThinkingDisabled, t.Type)
	}
}

// checkModelRef checks an agent's or the selector's model reference.
func (v *validator) checkModelRef(path string, ref *ModelRef) {
	if ref.Inline != nil {
		v.checkModel(path, ref.Inline)
		return
	}
	if _, ok := v.spec.Models[ref.Name]; !ok {
		v.add(path, "names no entry of models: %q", ref.Name)
	}
}

func (v *validator) checkAgents() {
	s := v.spec
	if len(s.Agents) == 0 {
		v.add("/agents", "at least one agent is required")
	}
	if len(s.Agents) > v.limits.MaxAgents {
		v.add("/agents", "at most %d agents are allowed", v.limits.MaxAgents)
	}
	for i := range s.Agents {
		a := &s.Agents[i]
		p := "/agents/" + strconv.Itoa(i)
		switch {
		case s.OpenAISwarm() && !swarmAgentName(a.Name):
			v.add(p+"/name", "must be 1 to %d bytes of text without control characters", maxSwarmNameBytes)
		case !s.OpenAISwarm() && !agentNameRE.MatchString(a.Name):
			v.add(p+"/name", "must match %s", agentNameRE)
		case a.Name == UserName:
			v.add(p+"/name", "%q is reserved for the task and human messages", UserName)
		case v.agents[a.Name]:
			v.add(p+"/name", "duplicate agent name %q", a.Name)
		}
		v.agents[a.Name] = true
		if len(a.Description) > v.limits.MaxPromptBytes {
			v.add(p+"/description", "must be at most %d bytes", v.limits.MaxPromptBytes)
		}
		if a.SystemMessage != nil && len(*a.SystemMessage) > v.limits.MaxPromptBytes {
			v.add(p+"/system_message", "must be at most %d bytes", v.limits.MaxPromptBytes)
		}
		v.checkToolRefs(p+"/tools", a.Tools)
		v.checkToolRefs(p+"/functions", a.Functions)
		v.checkHandoffs(p, &v.spec.Agents[i])
		v.checkTemplate(p, &v.spec.Agents[i])
		if a.ToolCallSummaryFormat != nil && len(*a.ToolCallSummaryFormat) > v.limits.MaxPromptBytes {
			v.add(p+"/tool_call_summary_format", "must be at most %d bytes", v.limits.MaxPromptBytes)
		}
		if ce := a.CodeExecution; ce != nil {
			if a.Type != AgentUserProxy {
				v.add(p+"/code_execution", "only a user_proxy executes code")
			}
			if v.env.Sandbox == "" {
				v.add(p+"/code_execution", "code execution needs a sandbox, and this server has none: run it with AGENTD_SANDBOX=docker and a Docker or Podman engine, or install bubblewrap (AGENTD_SANDBOX=bwrap); code is never run on the host")
			}
			for j, l := range ce.Languages {
				if CanonicalLanguage(l) == "" {
					v.add(p+"/code_execution/languages/"+strconv.Itoa(j), "unknown language %q: use python (py) or sh (bash, shell)", l)
				}
			}
			if ce.TimeoutS != nil && (*ce.TimeoutS < 1 || *ce.TimeoutS > 3600) {
				v.add(p+"/code_execution/timeout_s", "must be between 1 and 3600")
			}
		}
		v.checkContext(p+"/context", a.Context)
		v.checkOutputSchema(p, a)
		v.checkMessageFilter(p+"/message_filter", a)
		v.checkTeamFields(p, a)
		switch a.Type {
		case AgentAssistant:
			if a.Model == nil {
				v.add(p+"/model", "an assistant needs a model")
			} else {
				v.checkModelRef(p+"/model", a.Model)
			}
			if a.HumanInputMode != "" {
				v.add(p+"/human_input_mode", "only user_proxy agents take human input")
			}
			if a.MaxToolIterations != nil && (*a.MaxToolIterations < 1 || *a.MaxToolIterations > 50) {
				v.add(p+"/max_tool_iterations", "must be between 1 and 50")
			}
			if len(a.Functions) > 0 {
				v.add(p+"/functions", "only a user_proxy executes functions for others; an assistant's own tools go in tools")
			}
			v.checkToolApproval(p+"/tool_approval", a)
			if a.CodeApproval != nil {
				v.add(p+"/code_approval", "only a user_proxy with code_execution runs code; an assistant's tools take tool_approval")
			}
		case AgentUserProxy:
			if a.Model != nil {
				v.add(p+"/model", "a user_proxy has no model")
			}
			if len(a.Tools) > 0 || len(a.Handoffs) > 0 {
				v.add(p+"/tools", "a user_proxy calls no tools: list what it executes for others in functions")
			}
			switch a.HumanInputMode {
			case "", HumanInputNever, HumanInputAlways, HumanInputTerminate:
			default:
				v.add(p+"/human_input_mode", "must be one of NEVER, ALWAYS (the default, as in AutoGen), TERMINATE")
			}
			if n := a.MaxConsecutiveAutoReply; n != nil && (*n < 0 || *n > 10000) {
				v.add(p+"/max_consecutive_auto_reply", "must be between 0 and 10000")
			}
			if a.DefaultAutoReply != nil && len(*a.DefaultAutoReply) > v.limits.MaxPromptBytes {
				v.add(p+"/default_auto_reply", "must be at most %d bytes", v.limits.MaxPromptBytes)
			}
			if a.ToolApproval != nil {
				v.add(p+"/tool_approval", "a user_proxy calls no tools; code_approval asks before its code runs")
			}
			if a.CodeApproval != nil && *a.CodeApproval && a.CodeExecution == nil {
				v.add(p+"/code_approval", "needs code_execution: without it the agent runs no code")
			}
		case AgentTeam:
			v.checkTeamAgent(p, a)
		case "":
			v.add(p+"/type", "is required: assistant, user_proxy or team")
		default:
			v.add(p+"/type", "must be assistant, user_proxy or team")
		}
	}
}

func (v *validator) checkSelection() {
	sel := v.spec.SpeakerSelection
	if sel == nil {
		return
	}
	const p = "/speaker_selection"
	if sel.Graph != nil && sel.Method != SelectGraph {
		v.add(p+"/graph", "goes with method graph")
	}
	v.checkMagentic(p, sel)
	v.checkProtocol(p, sel)
	switch sel.Method {
	case SelectMagentic: // checkMagentic
	case SelectGraph:
		v.checkGraphSelection(p, sel)
	case "", SelectRoundRobin, SelectRandom, SelectManual, SelectSwarm:
		if sel.Model != nil {
			v.add(p+"/model", "only the auto method uses a model")
		}
		if sel.MaxAttempts != nil {
			v.add(p+"/max_attempts", "only the auto method makes attempts")
		}
		if sel.SelectorPrompt != nil {
			v.add(p+"/selector_prompt", "only the auto method uses a selector prompt")
		}
		if sel.Context != nil {
			v.add(p+"/context", "only the auto method has a model context")
		}
	case SelectAuto:
		v.checkContext(p+"/context", sel.Context)
		if sel.Model == nil {
			v.add(p+"/model", "the auto method needs a model for the selector")
		} else {
			v.checkModelRef(p+"/model", sel.Model)
		}
		if n := sel.MaxAttempts; n != nil && (*n < 1 || *n > 10) {
			v.add(p+"/max_attempts", "must be between 1 and 10")
		}
		if sp := sel.SelectorPrompt; sp != nil && (len(*sp) > v.limits.MaxPromptBytes || *sp == "") {
			v.add(p+"/selector_prompt", "must be 1 to %d bytes", v.limits.MaxPromptBytes)
		}
	default:
		v.add(p+"/method", "must be one of round_robin, random, auto, manual, swarm, graph, magentic_one")
	}
	if sel.Method == SelectGraph {
		return // transitions are refused above
	}
	switch sel.TransitionsType {
	case "", "allowed", "disallowed":
		if sel.TransitionsType != "" && len(sel.Transitions) == 0 {
			v.add(p+"/transitions_type", "is set, but there are no transitions")
		}
	default:
		v.add(p+"/transitions_type", "must be allowed or disallowed")
	}
	from := make([]string, 0, len(sel.Transitions))
	for k := range sel.Transitions {
		from = append(from, k)
	}
	slices.Sort(from)
	for _, k := range from {
		tp := p + "/transitions/" + problem.Escape(k)
		if !v.agentNamed(k) {
			v.add(tp, "names no agent: %q", k)
		}
		for i, to := range sel.Transitions[k] {
			if !v.agentNamed(to) {
				v.add(tp+"/"+strconv.Itoa(i), "names no agent: %q", to)
			}
		}
	}
}

func (v *validator) checkCondition(path string, c *Condition, depth int, count *int) {
	*count++
	if *count == v.limits.MaxConditions+1 {
		v.add("/termination", "at most %d conditions are allowed", v.limits.MaxConditions)
	}
	if depth > v.limits.MaxConditionDepth {
		v.add(path, "conditions nest at most %d deep", v.limits.MaxConditionDepth)
		return
	}
	set := 0
	for _, b := range []bool{c.MaxMessages != nil, c.TextMention != nil, c.TextMessage != nil, c.TextMatch != nil, c.TokenUsage != nil,
		c.TimeoutS != nil, c.Handoff != nil, c.SourceMatch != nil, c.FunctionCall != nil, c.External != nil, c.Any != nil, c.All != nil} {
		if b {
			set++
		}
	}
	if set != 1 {
		v.add(path, "a condition has exactly one key (found %d)", set)
		return
	}
	if c.IncludeAgentEvent != nil && c.MaxMessages == nil {
		v.add(path+"/include_agent_event", "goes with max_messages only")
	}
	switch {
	case c.TextMessage != nil:
		if s := c.TextMessage.Source; s != "" && s != UserName && !v.agentNamed(s) {
			v.add(path+"/text_message/source", "names no agent: %q (nor user)", s)
		}
	case c.MaxMessages != nil:
		if *c.MaxMessages < 1 || *c.MaxMessages > maxMessagesCondition {
			v.add(path+"/max_messages", "must be between 1 and %d", maxMessagesCondition)
		}
	case c.TextMention != nil:
		if c.TextMention.Text == "" {
			v.add(path+"/text_mention/text", "is required")
		}
		v.checkSources(path+"/text_mention/sources", c.TextMention.Sources)
	case c.TextMatch != nil:
		if c.TextMatch.Pattern == "" {
			v.add(path+"/text_match/pattern", "is required")
		} else if msg := CheckTextMatchPattern(c.TextMatch.Pattern); msg != "" {
			v.add(path+"/text_match/pattern", "%s", msg)
		}
	case c.TokenUsage != nil:
		t := c.TokenUsage
		if t.MaxTotalTokens == nil && t.MaxPromptTokens == nil && t.MaxCompletionTokens == nil {
			v.add(path+"/token_usage", "set at least one of max_total_tokens, max_prompt_tokens, max_completion_tokens")
		}
		for name, p := range map[string]*int64{"max_total_tokens": t.MaxTotalTokens, "max_prompt_tokens": t.MaxPromptTokens, "max_completion_tokens": t.MaxCompletionTokens} {
			if p != nil && (*p < 1 || *p > maxTokenCount) {
				v.add(path+"/token_usage/"+name, "must be between 1 and %d", int64(maxTokenCount))
			}
		}
	case c.TimeoutS != nil:
		if !(*c.TimeoutS > 0 && *c.TimeoutS <= maxChatTimeoutS) {
			v.add(path+"/timeout_s", "must be greater than 0 and at most %d (30 days)", maxChatTimeoutS)
		}
	case c.Handoff != nil:
		if c.Handoff.Target != UserName && !v.agentNamed(c.Handoff.Target) {
			v.add(path+"/handoff/target", "names no agent: %q (nor user)", c.Handoff.Target)
		}
	case c.FunctionCall != nil:
		if c.FunctionCall.Name == "" {
			v.add(path+"/function_call/name", "is required")
		} else if v.spec.Tool(c.FunctionCall.Name) == nil && !v.hasMCP() {
			v.add(path+"/function_call/name", "names no tool: %q", c.FunctionCall.Name)
		}
	case c.SourceMatch != nil:
		if len(c.SourceMatch.Sources) == 0 {
			v.add(path+"/source_match/sources", "at least one source is required")
		}
		v.checkSources(path+"/source_match/sources", c.SourceMatch.Sources)
	case c.Any != nil, c.All != nil:
		key, parts := "any", c.Any
		if c.All != nil {
			key, parts = "all", c.All
		}
		if len(parts) == 0 {
			v.add(path+"/"+key, "at least one condition is required")
		}
		for i := range parts {
			v.checkCondition(path+"/"+key+"/"+strconv.Itoa(i), &parts[i], depth+1, count)
		}
	}
}

// checkContext checks a model context: the sizes its type uses, each at
// least 1 (AgentChat refuses less), and no size of another type.
func (v *validator) checkContext(path string, c *ModelContext) {
	if c == nil {
		return
	}
	kind := c.Kind()
	sizes := []struct {
		name, kind string
		p          *int
		max        int
	}{
		{"buffer_size", ContextBuffered, c.BufferSize, maxBufferSize},
		{"token_limit", ContextTokenLimited, c.TokenLimit, maxContextTokens},
		{"head_size", ContextHeadAndTail, c.HeadSize, maxBufferSize},
		{"tail_size", ContextHeadAndTail, c.TailSize, maxBufferSize},
	}
	switch kind {
	case ContextUnbounded, ContextBuffered, ContextTokenLimited, ContextHeadAndTail:
	default:
		v.add(path+"/type", "must be unbounded, buffered, token_limited or head_and_tail")
		return
	}
	for _, sz := range sizes {
		switch {
		case sz.kind != kind && sz.p != nil:
			v.add(path+"/"+sz.name, "is not an option of a %s context", kind)
		case sz.kind == kind && sz.p == nil:
			v.add(path+"/"+sz.name, "is required for a %s context", kind)
		case sz.p != nil && (*sz.p < 1 || *sz.p > sz.max):
			v.add(path+"/"+sz.name, "must be between 1 and %d", sz.max)
		}
	}
}

// checkToolApproval checks an assistant's tool_approval: "never",
// "always", or a list of the agent's own tools.
func (v *validator) checkToolApproval(path string, a *Agent) {
	ta := a.ToolApproval
	if ta == nil {
		return
	}
	if ta.Mode != "" {
		if ta.Mode != ApprovalNever && ta.Mode != ApprovalAlways {
			v.add(path, `must be "never", "always" or a list of the agent's tools`)
		}
		return
	}
	for i, n := range ta.Tools {
		if !slices.Contains(a.Tools, n) {
			v.add(path+"/"+strconv.Itoa(i), "names no tool of this agent: %q", n)
		}
	}
}

func (v *validator) checkSources(path string, sources []string) {
	for i, s := range sources {
		if s != UserName && !v.agentNamed(s) {
			v.add(path+"/"+strconv.Itoa(i), "names no agent: %q", s)
		}
	}
}

func (v *validator) agentNamed(name string) bool {
	return slices.ContainsFunc(v.spec.Agents, func(a Agent) bool { return a.Name == name })
}

func (v *validator) checkHistory() {
	msgs := v.spec.Messages
	if len(msgs) > v.limits.MaxHistory {
		v.add("/messages", "at most %d messages are allowed", v.limits.MaxHistory)
	}
	for i, m := range msgs {
		p := "/messages/" + strconv.Itoa(i)
		switch m.Role {
		case RoleUser, RoleAssistant, RoleSystem, RoleTool:
		default:
			v.add(p+"/role", "must be one of user, assistant, system, tool")
		}
		switch {
		case m.Content.Parts != nil && (m.Role != RoleUser || m.Type != TypeMultiModalMessage):
			v.add(p+"/content", "a list of texts and images is the content of a user's MultiModalMessage: give role user and type MultiModalMessage")
		case m.Content.Parts != nil:
			CheckParts(p+"/content", msgs[i].Content.Parts, v.limits.MaxImageBytes, v.limits.MaxTaskBytes, v.add)
		case m.Type == TypeMultiModalMessage:
			v.add(p+"/content", "a MultiModalMessage's content is a list of texts and images")
		case len(m.Content.Text) > v.limits.MaxTaskBytes:
			v.add(p+"/content", "must be at most %d bytes", v.limits.MaxTaskBytes)
		}
		if len(m.ToolCalls) > 0 && m.Role != RoleAssistant {
			v.add(p+"/tool_calls", "only assistant messages carry tool calls")
		}
		for j, c := range m.ToolCalls {
			if c.ID == "" || c.Function.Name == "" {
				v.add(p+"/tool_calls/"+strconv.Itoa(j), "needs an id and function.name")
			}
			if c.Type != "" && c.Type != "function" {
				v.add(p+"/tool_calls/"+strconv.Itoa(j)+"/type", "must be function")
			}
		}
		if m.Role == RoleTool && len(m.ToolResponses) == 0 {
			v.add(p+"/tool_responses", "a tool message needs tool_responses")
		}
		if len(m.ToolResponses) > 0 && m.Role != RoleTool {
			v.add(p+"/tool_responses", "only tool messages carry tool_responses")
		}
		for j, r := range m.ToolResponses {
			if r.ToolCallID == "" {
				v.add(p+"/tool_responses/"+strconv.Itoa(j)+"/tool_call_id", "is required")
			}
		}
		if m.Name != "" && m.Name != UserName && !agentNameRE.MatchString(m.Name) {
			v.add(p+"/name", "must match %s", agentNameRE)
		}
		if shape := ShapeType(m.Role, m.ToolCalls, m.ToolResponses); m.Type != "" && m.Type != shape && m.Type != TypeMultiModalMessage &&
			(shape != TypeTextMessage || m.Type != TypeToolCallSummaryMessage || m.Role != RoleAssistant) {
			v.add(p+"/type", "must be %s for this message (or ToolCallSummaryMessage for an assistant's text)", shape)
		}
	}
}

func quoteList(xs []string) string {
	b, _ := json.Marshal(xs)
	return string(b)
}

func (v *validator) checkTools() {
	tools := v.spec.Tools
	if len(tools) > v.limits.MaxTools {
		v.add("/tools", "at most %d tools are allowed", v.limits.MaxTools)
	}
	seen := map[string]bool{}
	for i := range tools {
		p := "/tools/" + strconv.Itoa(i)
		if seen[tools[i].Name] {
			v.add(p+"/name", "duplicate tool name %q", tools[i].Name)
		}
		seen[tools[i].Name] = true
		if strings.HasPrefix(tools[i].Name, HandoffPrefix) {
			v.add(p+"/name", "names starting with %s are reserved for handoffs", HandoffPrefix)
		}
		if v.env.Tools == nil {
			v.add(p, "this server runs no tools")
			continue
		}
		check := v.env.Tools.CheckTool
		if v.spec.OpenAISwarm() {
			check = v.env.Tools.CheckSwarmTool
		}
		for _, pr := range check(&tools[i]) {
			v.add(p+pr.Path, "%s", pr.Message)
		}
	}
}

func (v *validator) checkToolRefs(path string, names []string) {
	for i, n := range names {
		if v.spec.Tool(n) == nil {
			v.add(path+"/"+strconv.Itoa(i), "names no tool: %q", n)
		}
	}
}

func (v *validator) hasMCP() bool {
	for i := range v.spec.Tools {
		if v.spec.Tools[i].ImplementationType() == "mcp" {
			return true
		}
	}
	return false
}
