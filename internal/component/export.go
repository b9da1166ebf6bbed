package component

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/structured"
)

// componentTypes are the component_type values AgentChat 0.7.5 writes.
var componentTypes = map[string]string{
	provRoundRobin: "team", provSelector: "team", provSwarm: "team", provGraphFlow: "team",
	provAssistant: "agent", provUserProxy: "agent", provCodeExecutor: "agent", provMessageFilter: "agent", provSocietyOfMind: "agent",
	provOpenAI: "model", provAzure: "model", provAnthropic: "model", provReplay: "replay_chat_completion_client",
	provBuffered: "chat_completion_context", provUnbounded: "chat_completion_context",
	provHeadAndTail: "chat_completion_context", provTokenLimited: "chat_completion_context",
	provStaticStreamWorkbench: "workbench", provMcpWorkbench: "workbench",
	provDockerExecutor: "code_executor",
	provFunctionTool:   "tool", provCodeTool: "tool", provHTTPTool: "tool",
	provStructured: "structured_message",
	provMagentic:   "team",
}

// newComponent builds a component as dump_component() writes it: version
// and component_version (AssistantAgent's config is at version 2), a short
// description, the class name as label, and the config without nulls.
func newComponent(provider, description string, config any) Component {
	v := 1
	if provider == provAssistant {
		v = 2
	}
	typ, ok := componentTypes[provider]
	if !ok {
		typ = "termination"
	}
	cfg, err := marshal(config)
	if err != nil {
		panic(fmt.Sprintf("encode %s config: %v", provider, err)) // only maps, strings and numbers
	}
	return Component{Provider: provider, ComponentType: typ, Version: &v, ComponentVersion: &v,
		Description: description, Label: shortName(provider), Config: cfg}
}

// exporter collects the problems of one export.
type exporter struct {
	r    report
	spec *spec.Spec
	eps  Endpoints // nil: no endpoint is described
}

// ToTeam exports a chat spec as an AgentChat team component that
// Team.load_component of AgentChat 0.7.5 loads. What AgentChat cannot
// express (random or manual selection, transitions, functions a user_proxy
// runs for others, http and sandbox tools, text_match, ...) is reported as
// problems, every one at once, with paths into the spec.
//
// eps describes the server's endpoints, so that an Azure model exports with
// its resource, deployment and api-version, and a model of another endpoint
// than the default with its base URL. Keys are never exported.
func ToTeam(spec *spec.Spec, eps Endpoints) (*Component, []spec.Problem) {
	e := &exporter{spec: spec, eps: eps}
	team := e.team()
	if e.r.probs.Len() > 0 {
		return nil, e.r.probs.Items()
	}
	return &team, nil
}

func (e *exporter) team() Component {
	s := e.spec
	cfg := map[string]any{"description": defaultTeamDescription, "emit_team_events": false}
	parts := make([]Component, 0, len(s.Agents))
	for i := range s.Agents {
		parts = append(parts, e.agent(idx("/agents", i), &s.Agents[i]))
	}
	cfg["participants"] = parts
	if s.Termination != nil {
		if c, ok := e.condition("/termination", s.Termination); ok {
			cfg["termination_condition"] = c
		}
	}
	if s.MaxRound != nil {
		cfg["max_turns"] = *s.MaxRound
	}
	if s.Sandbox != nil {
		e.r.problem("/sandbox", "AgentChat has no sandbox limits; the team file cannot carry them")
	}
	if s.InputTimeoutS != nil {
		e.r.problem("/input_timeout_s", "AgentChat has no input timeout")
	}
	if len(s.Messages) > 0 {
		e.r.problem("/messages", "a team file holds no conversation history")
	}
	if len(s.ContextVariables) > 0 && string(s.ContextVariables) != "null" {
		e.r.problem("/context_variables", "AgentChat's teams have no context variables")
	}
	provider, desc := provRoundRobin, "A team that runs a group chat with participants taking turns in a round-robin fashion to publish a message to all."
	sel := s.SpeakerSelection
	method := spec.SelectRoundRobin
	if sel != nil && sel.Method != "" {
		method = sel.Method
	}
	if sel != nil {
		if len(sel.Transitions) > 0 || sel.TransitionsType != "" {
			e.r.problem("/speaker_selection/transitions", "AgentChat's teams have no allowed or disallowed transitions")
		}
		if sel.Seed != nil {
			e.r.problem("/speaker_selection/seed", "AgentChat's teams have no seeded selection")
		}
	}
	switch method {
	case spec.SelectRoundRobin:
		if sel != nil && sel.AllowRepeatedSpeaker != nil {
			e.r.problem("/speaker_selection/allow_repeated_speaker", "RoundRobinGroupChat has no allow_repeated_speaker")
		}
	case spec.SelectSwarm:
		provider, desc = provSwarm, "A group chat team that selects the next speaker based on handoff message only."
		if sel.Protocol == spec.ProtocolOpenAISwarm {
			e.r.problem("/speaker_selection/protocol", "AgentChat's Swarm speaks its own protocol: OpenAI Swarm's run loop is agentd's")
		}
		if sel.AllowRepeatedSpeaker != nil {
			e.r.problem("/speaker_selection/allow_repeated_speaker", "Swarm has no allow_repeated_speaker")
		}
	case spec.SelectAuto:
		provider, desc = provSelector, "A group chat team that have participants takes turn to publish a message to all, using a ChatCompletion model to select the next speaker after each message."
		if sel.Model != nil {
			if m := e.model("/speaker_selection/model", sel.Model); m != nil {
				cfg["model_client"] = *m
			}
		}
		cfg["selector_prompt"] = defaultSelectorPrompt
		if sel.SelectorPrompt != nil {
			cfg["selector_prompt"] = *sel.SelectorPrompt
		}
		// agentd repeats speakers unless told not to (AgentChat: the reverse).
		cfg["allow_repeated_speaker"] = sel.AllowRepeatedSpeaker == nil || *sel.AllowRepeatedSpeaker
		cfg["max_selector_attempts"] = 3
		if sel.MaxAttempts != nil {
			cfg["max_selector_attempts"] = *sel.MaxAttempts
		}
		cfg["model_client_streaming"] = false
		if mc := e.modelContext(sel.Context, cfg["model_client"]); mc != nil {
			cfg["model_context"] = *mc
		}
	case spec.SelectGraph:
		// GraphFlowConfig has no emit_team_events, and its own default
		// description.
		provider, desc = provGraphFlow, graphFlowDescription
		delete(cfg, "emit_team_events")
		cfg["description"] = graphFlowTeamDescription
		if sel.Graph != nil {
			cfg["graph"] = e.exportGraph("/speaker_selection/graph", sel.Graph)
		}
	case spec.SelectMagentic:
		provider, desc = provMagentic, magenticDescription
		e.exportMagentic(sel, cfg)
	default:
		e.r.problem("/speaker_selection/method", "AgentChat has no team for %s selection (only round_robin, auto, swarm, graph and magentic_one)", method)
	}
	cfg["name"] = shortName(provider)
	if s.Name != "" {
		cfg["name"] = s.Name
	}
	return newComponent(provider, desc, cfg)
}

func (e *exporter) agent(path string, a *spec.Agent) Component {
	if a.MessageFilter != nil {
		f := *a
		f.MessageFilter = nil
		return exportMessageFilter(a.Name, e.agent(path, &f), a.MessageFilter)
	}
	switch a.Type {
	case spec.AgentAssistant:
		return e.assistant(path, a)
	case spec.AgentTeam:
		return e.exportSocietyOfMind(path, a)
	case spec.AgentUserProxy:
		if len(a.Functions) > 0 {
			e.r.problem(path+"/functions", "AgentChat has no agent that executes functions for others; give the tools to the assistant")
		}
		if a.MaxConsecutiveAutoReply != nil {
			e.r.problem(path+"/max_consecutive_auto_reply", "AgentChat's agents have no max_consecutive_auto_reply")
		}
		if a.CodeExecution != nil {
			return e.codeExecutor(path, a)
		}
		if a.HumanInputMode != "" && a.HumanInputMode != spec.HumanInputAlways {
			e.r.problem(path+"/human_input_mode", "AgentChat's UserProxyAgent asks the human every time (ALWAYS); %s has no equivalent", a.HumanInputMode)
		}
		if a.DefaultAutoReply != nil {
			e.r.problem(path+"/default_auto_reply", "AgentChat's UserProxyAgent has no auto-reply")
		}
		return newComponent(provUserProxy, "An agent that can represent a human user through an input function.",
			map[string]any{"name": a.Name, "description": a.Description})
	default:
		e.r.problem(path+"/type", "unknown agent type %q", a.Type)
		return Component{}
	}
}

func (e *exporter) assistant(path string, a *spec.Agent) Component {
	if a.ToolApproval != nil && (a.ToolApproval.Mode == spec.ApprovalAlways || len(a.ToolApproval.Tools) > 0) {
		e.r.problem(path+"/tool_approval", "AgentChat's AssistantAgent runs its tool calls without asking: its component has no approval")
	}
	cfg := map[string]any{"name": a.Name, "model_client_stream": false, "metadata": map[string]string{}}
	if a.Model != nil {
		if m := e.model(path+"/model", a.Model); m != nil {
			cfg["model_client"] = *m
		}
	}
	// A spec's description is written as it is, also when empty: both sides
	// show it to the selector as the agent's role.
	cfg["description"] = a.Description
	sys := defaultSystemMessage
	if a.SystemMessage != nil {
		sys = *a.SystemMessage
	}
	if a.SystemMessageTemplate != nil {
		e.r.problem(path+"/system_message_template", "AgentChat's system_message is a fixed text: a template over context variables is agentd's")
	}
	if a.ParallelToolCalls != nil {
		e.r.problem(path+"/parallel_tool_calls", "AgentChat's AssistantAgent has no parallel_tool_calls: it is its model client's option")
	}
	if sys != "" {
		cfg["system_message"] = sys
	}
	cfg["reflect_on_tool_use"] = a.ReflectOnToolUse != nil && *a.ReflectOnToolUse
	cfg["tool_call_summary_format"] = "{result}"
	if a.ToolCallSummaryFormat != nil {
		cfg["tool_call_summary_format"] = *a.ToolCallSummaryFormat
	}
	cfg["max_tool_iterations"] = 1
	if a.MaxToolIterations != nil {
		cfg["max_tool_iterations"] = *a.MaxToolIterations
	}
	if mc := e.modelContext(a.Context, cfg["model_client"]); mc != nil {
		cfg["model_context"] = *mc
	} else {
		cfg["model_context"] = newComponent(provUnbounded, "An unbounded chat completion context that keeps a view of the all the messages.", map[string]any{})
	}
	if o := a.OutputSchema; o != nil {
		if sm, ok := e.outputSchema(path+"/output_schema", o); ok {
			cfg["structured_message_factory"] = sm
		}
	}
	if len(a.Handoffs) > 0 {
		hs := make([]map[string]string, len(a.Handoffs))
		for i, h := range a.Handoffs {
			if h.Conditional() {
				e.r.problem(idx(path+"/handoffs", i)+"/condition", "AgentChat's Handoff has no condition: a hand-off on a condition over the context variables is agentd's (AG2's OnContextCondition)")
			}
			hs[i] = map[string]string{"target": h.Target, "description": h.ToolDescription(), "name": h.ToolName(),
				"message": fmt.Sprintf("Transferred to %s, adopting the role of %s immediately.", h.Target, h.Target)}
		}
		cfg["handoffs"] = hs
	}
	var workbenches []Component
	var static []Component // python_function and python_code tools
	for i, name := range a.Tools {
		wb, isStatic, ok := e.toolWorkbench(idx(path+"/tools", i), name)
		switch {
		case !ok:
		case isStatic:
			static = append(static, wb)
		default:
			workbenches = append(workbenches, wb)
		}
	}
	if len(static) > 0 || len(workbenches) == 0 {
		tools := []Component{}
		tools = append(tools, static...)
		workbenches = append([]Component{newComponent(provStaticStreamWorkbench, "A workbench that provides a static set of tools that do not change after each tool execution, and supports streaming results.",
			map[string]any{"tools": tools, "tool_overrides": map[string]any{}})}, workbenches...)
	}
	cfg["workbench"] = workbenches
	return newComponent(provAssistant, "An agent that provides assistance with tool use.", cfg)
}

// toolWorkbench exports an mcp tool as an McpWorkbench, and a
// python_function or python_code tool as the component that goes into the
// agent's static workbench (isStatic).
func (e *exporter) toolWorkbench(path, name string) (c Component, isStatic, ok bool) {
	var t *spec.Tool
	for i := range e.spec.Tools {
		if e.spec.Tools[i].Name == name {
			t = &e.spec.Tools[i]
		}
	}
	if t == nil {
		e.r.problem(path, "names no tool: %q", name)
		return Component{}, false, false
	}
	var impl toolImpl
	_ = json.Unmarshal(t.Implementation, &impl)
	switch impl.Type {
	case "mcp":
	case "python_function", "python_code", "http_api":
		c, ok := e.exportTool(path, t, impl)
		return c, true, ok
	default:
		e.r.problem(path, "tool %q is a %s tool: AgentChat would need its code (a FunctionTool) to run it; mcp, python_function, python_code and http_api tools export", name, impl.Type)
		return Component{}, false, false
	}
	if impl.Tools != nil {
		e.r.problem(path, "tool %q lists the MCP tools it offers; McpWorkbench offers all of a server's tools", name)
		return Component{}, false, false
	}
	params := map[string]any{"type": "StreamableHttpServerParams", "url": impl.URL, "timeout": 30.0, "sse_read_timeout": 300.0, "terminate_on_close": true}
	if impl.Transport == "sse" {
		params = map[string]any{"type": "SseServerParams", "url": impl.URL, "timeout": 5.0, "sse_read_timeout": 300.0}
	}
	if impl.TimeoutS != nil {
		params["timeout"] = *impl.TimeoutS
	}
	if impl.Headers != nil {
		params["headers"] = impl.Headers
	}
	return newComponent(provMcpWorkbench, "A workbench that wraps an MCP server and provides an interface to list and call tools provided by the server.",
		map[string]any{"server_params": params, "tool_overrides": map[string]any{}}), false, true
}

func (e *exporter) codeExecutor(path string, a *spec.Agent) Component {
	if a.HumanInputMode != spec.HumanInputNever {
		e.r.problem(path+"/human_input_mode", "AgentChat's CodeExecutorAgent never asks a human: only NEVER exports")
	}
	if a.CodeApproval != nil && *a.CodeApproval {
		e.r.problem(path+"/code_approval", "AgentChat's CodeExecutorAgent keeps its approval_func out of its component (it refuses to dump one)")
	}
	if a.DefaultAutoReply != nil && *a.DefaultAutoReply != noCodeBlocksMessage {
		e.r.problem(path+"/default_auto_reply", "AgentChat's CodeExecutorAgent answers a turn without code with its own fixed message")
	}
	exec := map[string]any{"image": "python:3-slim", "timeout": 60, "auto_remove": true, "stop_container": true,
		"functions_module": "functions", "extra_volumes": map[string]any{}, "extra_hosts": map[string]any{}, "delete_tmp_files": false}
	if t := a.CodeExecution.TimeoutS; t != nil {
		exec["timeout"] = *t
	}
	cfg := map[string]any{"name": a.Name, "description": a.Description, "model_client_stream": false,
		"code_executor": newComponent(provDockerExecutor, "Executes code through a command line environment in a Docker container.", exec),
		"model_context": newComponent(provUnbounded, "An unbounded chat completion context that keeps a view of the all the messages.", map[string]any{}),
	}
	if len(a.CodeExecution.Languages) > 0 {
		cfg["supported_languages"] = a.CodeExecution.Languages
	}
	return newComponent(provCodeExecutor, "(Experimental) An agent that generates and executes code snippets based on user instructions.", cfg)
}

// modelInfo is what an exported client declares about its model, so that
// AgentChat loads it for any model name (it refuses names it does not know
// without model_info), with the model's vision: whether AgentChat's agents
// send it images.
func modelInfo(m *spec.Model) map[string]any {
	return map[string]any{"vision": m.SeesImages(), "function_calling": true, "json_output": true,
		"family": "unknown", "structured_output": true, "multiple_system_messages": true}
}

func (e *exporter) model(path string, ref *spec.ModelRef) *Component {
	m := ref.Inline
	if m == nil {
		cfg, ok := e.spec.Models[ref.Name]
		if !ok {
			e.r.problem(path, "names no entry of models: %q", ref.Name)
			return nil
		}
		m = &cfg
	}
	switch m.Provider {
	case "replay":
		items := make([]any, len(m.Responses))
		for i, r := range m.Responses {
			items[i] = e.replayItem(idx(path+"/responses", i), r)
		}
		c := newComponent(provReplay, "A mock chat completion client that replays predefined responses using an index-based approach.",
			map[string]any{"chat_completions": items, "model_info": modelInfo(m)})
		return &c
	case "openai", "azure", "anthropic":
	default:
		e.r.problem(path+"/provider", "provider %q has no AgentChat model client; only openai, azure, anthropic and replay export", m.Provider)
		return nil
	}
	cfg := map[string]any{"model": m.Model, "model_info": modelInfo(m)}
	put := func(k string, v any, set bool) {
		if set {
			cfg[k] = v
		}
	}
	put("temperature", deref(m.Temperature), m.Temperature != nil)
	put("top_p", deref(m.TopP), m.TopP != nil)
	put("max_tokens", deref(m.MaxTokens), m.MaxTokens != nil)
	put("seed", deref(m.Seed), m.Seed != nil)
	put("parallel_tool_calls", deref(m.ParallelToolCalls), m.ParallelToolCalls != nil)
	put("frequency_penalty", deref(m.FrequencyPenalty), m.FrequencyPenalty != nil)
	put("presence_penalty", deref(m.PresencePenalty), m.PresencePenalty != nil)
	put("reasoning_effort", m.ReasoningEffort, m.ReasoningEffort != "")
	if len(m.Stop) > 0 {
		if m.Provider == "anthropic" {
			cfg["stop_sequences"] = m.Stop
		} else {
			cfg["stop"] = m.Stop
		}
	}
	put("response_format", m.ResponseFormat, len(m.ResponseFormat) > 0)
	var info EndpointInfo
	known := false
	if e.eps != nil {
		name := m.Endpoint
		if name == "" {
			// The endpoint the model is routed to.
			name, _ = e.eps.Match(ModelClient{Kind: m.Provider, Model: m.Model})
		}
		if name != "" {
			info, known = e.eps.Describe(name)
		}
	}
	switch m.Provider {
	case "azure":
		// AgentChat's Azure client needs the resource and api-version to be
		// built at all.
		if !known || info.BaseURL == "" {
			e.r.problem(path+"/endpoint", "the Azure resource of the model's endpoint is not known to this server, and AzureOpenAIChatCompletionClient needs it")
			return nil
		}
		// AgentChat's Azure client keeps no model_info in its dump (it knows
		// the Azure models).
		delete(cfg, "model_info")
		cfg["azure_endpoint"] = info.BaseURL
		cfg["azure_deployment"] = cmp.Or(info.Deployment, m.Model)
		cfg["api_version"] = info.APIVersion
		c := newComponent(provAzure, "Chat completion client for Azure OpenAI hosted models.", cfg)
		return &c
	case "anthropic":
		// As AgentChat's dump always writes it (its default; the API agentd
		// speaks has no temperature).
		cfg["temperature"] = 1.0
		if t := m.Thinking; t != nil {
			th := map[string]any{"type": t.Type}
			if t.BudgetTokens != nil {
				th["budget_tokens"] = *t.BudgetTokens
			}
			cfg["thinking"] = th
		}
		if known && info.BaseURL != "" && info.BaseURL != defaultAnthropicURL {
			cfg["base_url"] = info.BaseURL
		}
		c := newComponent(provAnthropic, "Chat completion client for Anthropic's Claude models.", cfg)
		return &c
	default:
		if known && info.BaseURL != "" && info.BaseURL != defaultOpenAIURL {
			cfg["base_url"] = info.BaseURL
		}
		c := newComponent(provOpenAI, "Chat completion client for OpenAI hosted models.", cfg)
		return &c
	}
}

// The base URLs AgentChat's clients use when a config names none: an export
// leaves them out.
const (
	defaultOpenAIURL    = "https://api.openai.com/v1"
	defaultAnthropicURL = "https://api.anthropic.com"
)

// replayItem is a scripted response as ReplayChatCompletionClient holds it:
// a string, or a CreateResult for tool calls and usage.
func (e *exporter) replayItem(path string, r spec.ReplayResponse) any {
	if r.DelayMS != 0 {
		e.r.problem(path+"/delay_ms", "ReplayChatCompletionClient has no delay")
	}
	if len(r.ToolCalls) == 0 && r.Usage == nil && r.Thought == "" {
		return r.Content
	}
	usage := chat.Usage{}
	if r.Usage != nil {
		usage = *r.Usage
	}
	res := map[string]any{"finish_reason": "stop", "content": r.Content, "cached": false,
		"usage": map[string]int64{"prompt_tokens": usage.PromptTokens, "completion_tokens": usage.CompletionTokens}}
	if len(r.ToolCalls) > 0 {
		calls := make([]map[string]string, len(r.ToolCalls))
		for i, tc := range r.ToolCalls {
			calls[i] = map[string]string{"id": "call_" + strconv.Itoa(i), "name": tc.Name, "arguments": argumentString(tc.Arguments)}
		}
		res["finish_reason"] = "function_calls"
		res["content"] = calls
		if r.Content != "" {
			res["thought"] = r.Content
		} else if r.Thought != "" {
			res["thought"] = r.Thought
		}
	} else if r.Thought != "" {
		res["thought"] = r.Thought
	}
	return res
}

// argumentString is the JSON string of a scripted call's arguments, as the
// replay provider sends it (see internal/llm's replayArguments).
func argumentString(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}"
	}
	if jsonString(raw) {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}

func (e *exporter) condition(path string, c *spec.Condition) (Component, bool) {
	mk := func(p string, cfg any) (Component, bool) { return newComponent(p, "", cfg), true }
	switch {
	case c.MaxMessages != nil:
		return mk(provMaxMessage, map[string]any{"max_messages": *c.MaxMessages, "include_agent_event": deref(c.IncludeAgentEvent)})
	case c.TextMessage != nil:
		cfg := map[string]any{} // AgentChat leaves out a source of None
		if c.TextMessage.Source != "" {
			cfg["source"] = c.TextMessage.Source
		}
		return mk(provTextMessage, cfg)
	case c.TextMention != nil:
		if len(c.TextMention.Sources) > 0 {
			e.r.problem(path+"/text_mention/sources", "AgentChat does not save TextMentionTermination's sources in a component")
		}
		return mk(provTextMention, map[string]any{"text": c.TextMention.Text})
	case c.TokenUsage != nil:
		cfg := map[string]any{}
		for k, v := range map[string]*int64{"max_total_token": c.TokenUsage.MaxTotalTokens, "max_prompt_token": c.TokenUsage.MaxPromptTokens, "max_completion_token": c.TokenUsage.MaxCompletionTokens} {
			if v != nil {
				cfg[k] = *v
			}
		}
		return mk(provTokenUsage, cfg)
	case c.TimeoutS != nil:
		return mk(provTimeout, map[string]any{"timeout_seconds": *c.TimeoutS})
	case c.Handoff != nil:
		return mk(provHandoff, map[string]any{"target": c.Handoff.Target})
	case c.SourceMatch != nil:
		return mk(provSourceMatch, map[string]any{"sources": c.SourceMatch.Sources})
	case c.FunctionCall != nil:
		return mk(provFunction, map[string]any{"function_name": c.FunctionCall.Name})
	case c.External != nil:
		return mk(provExternal, map[string]any{})
	case c.TextMatch != nil:
		e.r.problem(path+"/text_match", "AgentChat has no regular-expression termination condition")
		return Component{}, false
	case c.Any != nil, c.All != nil:
		prov, key, parts := provOr, "any", c.Any
		if c.All != nil {
			prov, key, parts = provAnd, "all", c.All
		}
		subs := make([]Component, 0, len(parts))
		for i := range parts {
			if sc, ok := e.condition(idx(path+"/"+key, i), &parts[i]); ok {
				subs = append(subs, sc)
			}
		}
		return mk(prov, map[string]any{"conditions": subs})
	default:
		e.r.problem(path, "empty condition")
		return Component{}, false
	}
}

// modelContext is a bounded model context as AgentChat dumps it (nil for
// none); a token-limited one holds the model client it counts with.
func (e *exporter) modelContext(c *spec.ModelContext, client any) *Component {
	var out Component
	switch c.Kind() {
	case spec.ContextBuffered:
		out = newComponent(provBuffered, "A buffered chat completion context that keeps a view of the last n messages, where n is the buffer size.",
			map[string]any{"buffer_size": *c.BufferSize})
	case spec.ContextHeadAndTail:
		out = newComponent(provHeadAndTail, "A chat completion context that keeps a view of the first n and last m messages, where n is the head size and m is the tail size.",
			map[string]any{"head_size": *c.HeadSize, "tail_size": *c.TailSize})
	case spec.ContextTokenLimited:
		out = newComponent(provTokenLimited, "(Experimental) A token based chat completion context maintains a view of the context up to a token limit.",
			map[string]any{"model_client": client, "token_limit": *c.TokenLimit, "tool_schema": []any{}})
	default:
		return nil
	}
	return &out
}

func deref[T any](p *T) T {
	if p == nil {
		var z T
		return z
	}
	return *p
}

// outputSchema exports an output_schema as AgentChat's
// StructuredMessageFactory: the JSON Schema with its properties in order
// (the order of the fields of the pydantic model AgentChat makes of it).
func (e *exporter) outputSchema(path string, o *spec.OutputSchema) (Component, bool) {
	sc, probs := structured.Parse(o.Schema, o.PropertyOrder)
	if len(probs) > 0 {
		e.r.problem(path+"/schema"+probs[0].Path, "%s", probs[0].Message)
		return Component{}, false
	}
	cfg := map[string]any{"json_schema": sc.JSON(), "content_model_name": o.Name}
	if o.FormatString != nil {
		cfg["format_string"] = *o.FormatString
	}
	return newComponent(provStructured, ":meta private:", cfg), true
}
