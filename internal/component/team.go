package component

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/spec/problem"
	"github.com/agentd/agentd/internal/structured"
)

// Translation is a team component translated into the parts of a chat spec
// that a team determines.
type Translation struct {
	Name             string
	Agents           []spec.Agent
	Tools            []spec.Tool
	SpeakerSelection *spec.Selection
	MaxRound         *int
	Termination      *spec.Condition
	// Warnings lists what the file holds that agentd ignores.
	Warnings []Warning
	// paths maps pointers into the translated spec parts to the pointers of
	// the components they came from, so that problems found later by the
	// spec's own validation point into the file (see MapProblems).
	paths map[string]string
}

// AgentChat defaults that a dump may leave out (exclude_none) and that
// differ from a spec's defaults.
const (
	defaultAssistantDescription = "An agent that provides assistance with ability to use tools."
	defaultSystemMessage        = "You are a helpful AI assistant. Solve tasks using your tools. Reply with TERMINATE when the task has been completed."
	defaultUserDescription      = "A human user"
	defaultTerminalDescription  = "A computer terminal that performs no other action than running Python scripts (provided to it quoted in ```python code blocks), or sh shell scripts (provided to it quoted in ```sh code blocks)."
	noCodeBlocksMessage         = "No code blocks found in the thread. Please provide at least one markdown-encoded code block to execute (i.e., quoting code in ```python or ```sh code blocks)."
	defaultSelectorPrompt       = "You are in a role play game. The following roles are available:\n{roles}.\nRead the following conversation. Then select the next role from {participants} to play. Only return the role.\n\n{history}\n\nRead the above conversation. Then select the next role from {participants} to play. Only return the role.\n"
	defaultTeamDescription      = "A team of agents."
)

// FromTeam translates a team component found at path (a JSON pointer into
// the request, such as /team) and returns every problem of it at once.
//
// eps maps the file's model clients onto the server's endpoints; with nil,
// a client becomes a model of its kind that names no endpoint.
func FromTeam(path string, raw json.RawMessage, eps Endpoints) (*Translation, []spec.Problem) {
	if d, err := depth(raw); err != nil || d > maxDepth {
		return nil, []spec.Problem{{Path: path, Message: fmt.Sprintf("must be a JSON object nested at most %d levels deep", maxDepth)}}
	}
	tree, err := decodeTree(raw)
	if err != nil {
		return nil, []spec.Problem{{Path: path, Message: "is not valid JSON: " + err.Error()}}
	}
	tr := &translator{t: &Translation{paths: map[string]string{}}, eps: eps, root: path, raw: raw}
	tr.team(path, tree)
	tr.t.Warnings = tr.r.warns
	if tr.r.probs.Len() > 0 {
		return nil, tr.r.probs.Items()
	}
	return tr.t, nil
}

// MapProblems rewrites the paths of problems found in the spec made from
// this translation so that they point into the team component where they
// came from it (the longest mapped prefix wins; the rest is kept as is).
func (t *Translation) MapProblems(probs []spec.Problem) []spec.Problem {
	out := make([]spec.Problem, len(probs))
	for i, p := range probs {
		out[i] = p
		best := ""
		for from := range t.paths {
			if (p.Path == from || strings.HasPrefix(p.Path, from+"/")) && len(from) > len(best) {
				best = from
			}
		}
		if best != "" {
			out[i].Path = t.paths[best] + strings.TrimPrefix(p.Path, best)
		}
	}
	return out
}

type translator struct {
	r   report
	t   *Translation
	eps Endpoints // nil: model clients keep their kind and name no endpoint
	// root and raw are the team's path and bytes, for the few values whose
	// keys' order matters (rawAt).
	root string
	raw  json.RawMessage
}

// rawAt returns the compacted bytes of the value at path (a pointer under
// root), keys in the file's order, which the decoded tree does not keep: an
// HttpTool's json_schema, whose property order is the order of the
// parameters the model is shown. Only the one path is walked.
func (tr *translator) rawAt(path string) json.RawMessage {
	rest, ok := strings.CutPrefix(path, tr.root)
	if !ok {
		return nil
	}
	cur := tr.raw
	for _, tok := range strings.Split(strings.TrimPrefix(rest, "/"), "/") {
		if rest == "" {
			break
		}
		tok = problem.Unescape(tok)
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) == nil {
			if cur, ok = obj[tok]; !ok {
				return nil
			}
			continue
		}
		var arr []json.RawMessage
		i, err := strconv.Atoi(tok)
		if json.Unmarshal(cur, &arr) != nil || err != nil || i < 0 || i >= len(arr) {
			return nil
		}
		cur = arr[i]
	}
	var b bytes.Buffer
	if json.Compact(&b, cur) != nil {
		return nil
	}
	return b.Bytes()
}

func (tr *translator) mapPath(spec, comp string) { tr.t.paths[spec] = comp }

// remapPrefix moves the mappings of spec pointers under from to under to
// (a condition moved up when nested lists are flattened).
func (tr *translator) remapPrefix(from, to string) {
	moved := map[string]string{}
	for k, v := range tr.t.paths {
		if k == from || strings.HasPrefix(k, from+"/") {
			moved[to+strings.TrimPrefix(k, from)] = v
			delete(tr.t.paths, k)
		}
	}
	for k, v := range moved {
		tr.t.paths[k] = v
	}
}

var teamProviders = []string{provRoundRobin, provSelector, provSwarm, provGraphFlow, provMagentic}

func (tr *translator) team(path string, raw any) {
	c := readComponent(&tr.r, path, raw)
	if c == nil {
		return
	}
	if !slices.Contains(teamProviders, c.provider) {
		c.unsupported(&tr.r, "team", teamProviders...)
		return
	}
	cfg := c.cfg
	if n := cfg.str("name"); n != nil {
		tr.t.Name = *n
	}
	cfg.ignore("description", "emit_team_events")
	parts := cfg.list("participants")
	if len(parts) == 0 && !cfg.has("participants") {
		tr.r.problem(cfg.at("participants"), "is required")
	}
	for i, p := range parts {
		pp := idx(cfg.at("participants"), i)
		tr.mapPath(idx("/agents", len(tr.t.Agents)), pp)
		// An agent's type is its provider in the file.
		tr.mapPath(idx("/agents", len(tr.t.Agents))+"/type", pp+"/provider")
		tr.agent(pp, p)
	}
	if tc := cfg.raw("termination_condition"); tc != nil {
		cond, never := tr.condition(cfg.at("termination_condition"), tc, "/termination")
		if !never {
			tr.t.Termination = cond
		}
	}
	if mt := cfg.integer("max_turns"); mt != nil {
		tr.t.MaxRound = mt
		tr.mapPath("/max_round", cfg.at("max_turns"))
	}
	switch c.provider {
	case provSelector:
		tr.selector(c)
	case provSwarm:
		tr.t.SpeakerSelection = &spec.Selection{Method: spec.SelectSwarm}
		tr.mapPath("/speaker_selection", c.path)
	case provGraphFlow:
		tr.graphFlow(c)
	case provMagentic:
		tr.magentic(c)
	}
	cfg.done()
}

func (tr *translator) selector(c *comp) {
	cfg := c.cfg
	sel := &spec.Selection{Method: spec.SelectAuto}
	tr.mapPath("/speaker_selection", c.path+"/config")
	sel.Model = tr.modelClient(cfg, "/speaker_selection/model", "is required: the selector's model client")
	sel.SelectorPrompt = cfg.str("selector_prompt")
	tr.mapPath("/speaker_selection/selector_prompt", cfg.at("selector_prompt"))
	// AgentChat's SelectorGroupChat does not repeat a speaker unless told
	// to; a spec's default is the other way round, so it is always set.
	repeat := false
	if b := cfg.boolean("allow_repeated_speaker"); b != nil {
		repeat = *b
	}
	sel.AllowRepeatedSpeaker = &repeat
	sel.MaxAttempts = cfg.integer("max_selector_attempts")
	tr.mapPath("/speaker_selection/max_attempts", cfg.at("max_selector_attempts"))
	cfg.ignore("model_client_streaming")
	for _, fn := range []string{"selector_func", "candidate_func"} {
		cfg.used[fn] = true
		if cfg.has(fn) {
			tr.r.problem(cfg.at(fn), "provider %q: %s is Python code that would run on the server, and agentd never runs code from a file; "+
				"use selector_prompt, and allowed or disallowed transitions in a native spec", c.raw, fn)
		}
	}
	if mc := cfg.raw("model_context"); mc != nil {
		sel.Context = tr.context(cfg.at("model_context"), mc, cfg.raw("model_client"))
		tr.mapPath("/speaker_selection/context", cfg.at("model_context")+"/config")
	}
	tr.t.SpeakerSelection = sel
}

var agentProviders = []string{provAssistant, provUserProxy, provCodeExecutor, provMessageFilter, provSocietyOfMind}

func (tr *translator) agent(path string, raw any) {
	c := readComponent(&tr.r, path, raw)
	if c == nil {
		tr.t.Agents = append(tr.t.Agents, spec.Agent{})
		return
	}
	var a spec.Agent
	switch c.provider {
	case provAssistant:
		a = tr.assistant(c)
	case provUserProxy:
		a = tr.userProxy(c)
	case provCodeExecutor:
		a = tr.codeExecutor(c)
	case provMessageFilter:
		a = tr.messageFilter(c)
	case provSocietyOfMind:
		a = tr.societyOfMind(c)
	default:
		if slices.Contains(teamProviders, c.provider) || c.typ == "team" {
			tr.r.problem(path, "provider %q: nested teams are not supported as participants; wrap the inner team in a SocietyOfMindAgent (agentd's team agent), or make its agents participants of the team", c.raw)
		} else {
			c.unsupported(&tr.r, "agent", agentProviders...)
		}
	}
	c.cfg.done()
	tr.t.Agents = append(tr.t.Agents, a)
}

// modelClient reads the model_client of an agent's, a selector's or an
// orchestrator's config as a model of the spec, whose JSON pointer is to:
// the spec's problems there point into the file's model client. It is nil
// when the model client is missing, which is the problem missing says, or
// does not translate.
func (tr *translator) modelClient(cfg *object, to, missing string) *spec.ModelRef {
	mc := cfg.raw("model_client")
	if mc == nil {
		tr.r.problem(cfg.at("model_client"), "%s", missing)
		return nil
	}
	m := tr.model(cfg.at("model_client"), mc)
	if m == nil {
		return nil
	}
	tr.mapPath(to, cfg.at("model_client")+"/config")
	tr.mapPath(to+"/provider", cfg.at("model_client")+"/provider")
	return &spec.ModelRef{Inline: m}
}

func (tr *translator) assistant(c *comp) spec.Agent {
	cfg := c.cfg
	a := spec.Agent{Type: spec.AgentAssistant, Name: cfg.required("name")}
	ap := idx("/agents", len(tr.t.Agents))
	a.Model = tr.modelClient(cfg, ap+"/model", "is required")
	a.Description = defaultAssistantDescription
	if d := cfg.str("description"); d != nil {
		a.Description = *d
	}
	// A dump leaves system_message out when the agent has none (None).
	sys := ""
	if s := cfg.str("system_message"); s != nil {
		sys = *s
	}
	a.SystemMessage = &sys
	reflect := false
	if b := cfg.boolean("reflect_on_tool_use"); b != nil {
		reflect = *b
	}
	a.ReflectOnToolUse = &reflect
	a.ToolCallSummaryFormat = cfg.str("tool_call_summary_format")
	a.MaxToolIterations = cfg.integer("max_tool_iterations")
	for _, f := range []string{"system_message", "description", "reflect_on_tool_use", "tool_call_summary_format", "max_tool_iterations"} {
		tr.mapPath(ap+"/"+f, cfg.at(f))
	}
	tr.mapPath(ap+"/name", cfg.at("name"))
	if mc := cfg.raw("model_context"); mc != nil {
		a.Context = tr.context(cfg.at("model_context"), mc, cfg.raw("model_client"))
		tr.mapPath(ap+"/context", cfg.at("model_context")+"/config")
	}
	for i, h := range cfg.list("handoffs") {
		if t := tr.handoff(idx(cfg.at("handoffs"), i), h); t.Target != "" {
			tr.mapPath(idx(ap+"/handoffs", len(a.Handoffs)), idx(cfg.at("handoffs"), i))
			a.Handoffs = append(a.Handoffs, t)
		}
	}
	for i, t := range cfg.list("tools") {
		tr.tool(idx(cfg.at("tools"), i), t, &a)
	}
	for i, wb := range cfg.list("workbench") {
		tr.workbench(idx(cfg.at("workbench"), i), wb, &a)
	}
	cfg.refuse("memory is not supported: agentd agents see the conversation only", "memory")
	if sm := cfg.raw("structured_message_factory"); sm != nil {
		at := cfg.at("structured_message_factory")
		a.OutputSchema = tr.outputSchema(at, sm)
		tr.mapPath(ap+"/output_schema", at+"/config")
		tr.mapPath(ap+"/output_schema/name", at+"/config/content_model_name")
		tr.mapPath(ap+"/output_schema/schema", at+"/config/json_schema")
		tr.mapPath(ap+"/output_schema/format_string", at+"/config/format_string")
	}
	cfg.ignore("model_client_stream", "metadata")
	return a
}

// outputSchema translates an AssistantAgent's structured_message_factory
// (its output_content_type): the model's class name, its JSON Schema with
// the properties in the file's order, and the format string. The spec's
// validation checks the schema, and its problems point into the file.
func (tr *translator) outputSchema(path string, raw any) *spec.OutputSchema {
	c := readComponent(&tr.r, path, raw)
	if c == nil {
		return nil
	}
	defer c.cfg.done()
	if c.provider != provStructured {
		c.unsupported(&tr.r, "structured message factory", provStructured)
		return nil
	}
	o := &spec.OutputSchema{Name: c.cfg.required("content_model_name"), FormatString: c.cfg.str("format_string")}
	if !c.cfg.has("json_schema") {
		tr.r.problem(c.cfg.at("json_schema"), "is required")
		return nil
	}
	c.cfg.used["json_schema"] = true
	schema := tr.rawAt(c.cfg.at("json_schema"))
	if schema == nil {
		tr.r.problem(c.cfg.at("json_schema"), "must be a JSON Schema object")
		return nil
	}
	o.Schema = schema
	if sc, probs := structured.Parse(schema, nil); len(probs) == 0 {
		o.PropertyOrder = sc.Properties()
	}
	return o
}

// handoff reads a handoff (a target name or a Handoff object): its
// target, and its tool's name and description where they are not
// AgentChat's defaults. AgentChat's message is always its default in
// agentd, so another one is a warning.
func (tr *translator) handoff(path string, raw any) spec.Handoff {
	if target, ok := raw.(string); ok {
		return spec.HandoffTo(target)
	}
	o := newObject(&tr.r, path, raw)
	if o == nil {
		return spec.Handoff{}
	}
	h := spec.HandoffTo(o.required("target"))
	if n := o.str("name"); n != nil && *n != "" && *n != h.ToolName() {
		h = spec.Handoff{Target: h.Target, Name: *n}
	}
	if d := o.str("description"); d != nil && *d != "" && *d != h.ToolDescription() {
		h = spec.Handoff{Target: h.Target, Name: h.Name, Description: *d}
	}
	if m := o.str("message"); m != nil && *m != "" && *m != fmt.Sprintf("Transferred to %s, adopting the role of %s immediately.", h.Target, h.Target) {
		tr.r.warn(o.at("message"), "ignored: agentd's handoff message is AgentChat's default")
	}
	o.done()
	return h
}

func (tr *translator) userProxy(c *comp) spec.Agent {
	cfg := c.cfg
	a := spec.Agent{Type: spec.AgentUserProxy, Name: cfg.required("name"), HumanInputMode: spec.HumanInputAlways}
	a.Description = defaultUserDescription
	if d := cfg.str("description"); d != nil {
		a.Description = *d
	}
	// input_func is never serialized by AgentChat (always null); input
	// comes through POST /v1/chats/{id}/input.
	cfg.refuse(fmt.Sprintf("provider %q: input_func is code; agentd takes human input through POST /v1/chats/{id}/input", c.raw), "input_func")
	return a
}

// codeExecutor maps a CodeExecutorAgent without a model client onto a
// user_proxy that runs the code blocks addressed to it in agentd's sandbox.
func (tr *translator) codeExecutor(c *comp) spec.Agent {
	cfg := c.cfg
	a := spec.Agent{Type: spec.AgentUserProxy, Name: cfg.required("name"), HumanInputMode: spec.HumanInputNever}
	a.Description = defaultTerminalDescription
	if d := cfg.str("description"); d != nil {
		a.Description = *d
	}
	reply := noCodeBlocksMessage
	a.DefaultAutoReply = &reply
	ce := &spec.CodeExecution{Languages: cfg.strings("supported_languages")}
	if cfg.has("model_client") {
		tr.r.problem(cfg.at("model_client"), "provider %q: a CodeExecutorAgent with a model client is not supported; "+
			"pair an AssistantAgent that writes code with a CodeExecutorAgent without model_client", c.raw)
	}
	cfg.ignore("model_client", "system_message", "model_client_stream", "model_context")
	cfg.refuse("sources is not supported: agentd's executor runs the code blocks of every message since its last turn", "sources")
	if ex := cfg.raw("code_executor"); ex != nil {
		ep := cfg.at("code_executor")
		if ec := readComponent(&tr.r, ep, ex); ec != nil {
			if ec.provider != provDockerExecutor {
				ec.unsupported(&tr.r, "code executor", provDockerExecutor)
			} else {
				if t := ec.cfg.integer("timeout"); t != nil {
					ce.TimeoutS = t
				}
				sandboxedExecutor(ec.cfg)
			}
		}
	} else {
		tr.r.problem(cfg.at("code_executor"), "is required")
	}
	a.CodeExecution = ce
	return a
}

// context translates a model context. owner is the model client of the
// agent (or selector) it belongs to: a token-limited context counts with
// that model in agentd, so its own model client must be the same.
func (tr *translator) context(path string, raw any, owner any) *spec.ModelContext {
	c := readComponent(&tr.r, path, raw)
	if c == nil {
		return nil
	}
	defer c.cfg.done()
	c.cfg.refuse("initial_messages are not supported: resume from history with the spec's messages instead", "initial_messages")
	size := func(key string) *int {
		n := c.cfg.integer(key)
		if n == nil {
			tr.r.problem(c.cfg.at(key), "is required")
		}
		return n
	}
	switch c.provider {
	case provUnbounded:
		return nil
	case provBuffered:
		return &spec.ModelContext{BufferSize: size("buffer_size")}
	case provHeadAndTail:
		return &spec.ModelContext{Type: spec.ContextHeadAndTail, HeadSize: size("head_size"), TailSize: size("tail_size")}
	case provTokenLimited:
		ctx := &spec.ModelContext{Type: spec.ContextTokenLimited}
		if ctx.TokenLimit = c.cfg.integer("token_limit"); ctx.TokenLimit == nil {
			tr.r.problem(c.cfg.at("token_limit"), "is required: agentd does not know the model's own context window "+
				"(AgentChat's limit without token_limit); set the number of tokens to keep")
		}
		if ts := c.cfg.list("tool_schema"); len(ts) > 0 {
			tr.r.problem(c.cfg.at("tool_schema"), "tool schemas counted into the limit are not supported; leave tool_schema empty")
		}
		if mc := c.cfg.raw("model_client"); !sameModelClient(mc, owner) {
			tr.r.problem(c.cfg.at("model_client"), "agentd counts a context's tokens with the model of the agent (or selector) it belongs to: "+
				"the context's model_client must be that model client")
		}
		return ctx
	default:
		c.unsupported(&tr.r, "model context", provBuffered, provUnbounded, provHeadAndTail, provTokenLimited)
		return nil
	}
}

// sameModelClient reports whether two model client components name the
// same provider and model, which is what their token counts depend on.
func sameModelClient(a, b any) bool {
	key := func(v any) (string, string, bool) {
		m, ok := v.(map[string]any)
		if !ok {
			return "", "", false
		}
		p, _ := m["provider"].(string)
		cfg, _ := m["config"].(map[string]any)
		model, _ := cfg["model"].(string)
		return canonical(p), model, p != ""
	}
	pa, ma, oka := key(a)
	pb, mb, okb := key(b)
	return oka && okb && pa == pb && ma == mb
}

var modelProviders = []string{provOpenAI, provAzure, provAnthropic, provOllama, provReplay}

// modelKinds are the endpoint kinds of the model clients agentd maps onto
// its endpoints. An Ollama client is served by an openai endpoint (Ollama's
// OpenAI-compatible /v1).
var modelKinds = map[string]string{provOpenAI: "openai", provAzure: "azure", provAnthropic: "anthropic", provOllama: "openai"}

// model translates a model client. Keys, endpoints and client options of
// the file are never used to call anything: the client is mapped onto the
// server's endpoint that serves it (by base URL, Azure endpoint and
// deployment, or model), and that endpoint's key and retry policy are used.
func (tr *translator) model(path string, raw any) *spec.Model {
	c := readComponent(&tr.r, path, raw)
	if c == nil {
		return nil
	}
	defer c.cfg.done()
	cfg := c.cfg
	if c.provider == provReplay {
		return tr.replay(c)
	}
	kind, ok := modelKinds[c.provider]
	if !ok {
		c.unsupported(&tr.r, "model client", modelProviders...)
		return nil
	}
	m := &spec.Model{Provider: kind, Model: cfg.required("model")}
	m.MaxTokens = cfg.integer("max_tokens")
	switch c.provider {
	case provAnthropic:
		// AgentChat's dump always holds its default temperature, 1.0: that
		// one says nothing.
		if t := cfg.number("temperature"); t != nil && *t != 1 {
			tr.r.warn(cfg.at("temperature"), "ignored: the Messages API version agentd speaks (2026-10-21) has no sampling parameters")
		}
		cfg.ignoreWarn("the Messages API version agentd speaks (2026-10-21) has no sampling parameters", "top_p", "top_k")
		cfg.ignoreWarn("agentd does not pass this option to the model", "metadata", "tools", "tool_choice", "response_format")
		m.Stop = stopOf(cfg, "stop_sequences")
		m.Thinking = thinking(&tr.r, cfg)
	case provOllama:
		cfg.ignoreWarn("agentd does not pass this option to the model", "options", "response_format", "think", "keep_alive", "format")
	default:
		m.Temperature = cfg.number("temperature")
		m.TopP = cfg.number("top_p")
		m.Seed = cfg.integer("seed")
		m.ParallelToolCalls = cfg.boolean("parallel_tool_calls")
		m.ResponseFormat = cfg.rawJSON("response_format")
		m.Stop = stopOf(cfg, "stop")
		m.FrequencyPenalty = cfg.number("frequency_penalty")
		m.PresencePenalty = cfg.number("presence_penalty")
		if s := cfg.str("reasoning_effort"); s != nil {
			m.ReasoningEffort = *s
		}
		cfg.ignoreWarn("agentd does not pass this option to the model", "logit_bias", "n",
			"user", "stream_options", "add_name_prefixes", "include_name_in_message")
	}
	ref := ModelClient{Kind: kind, Model: m.Model}
	if s := cfg.str("base_url"); s != nil {
		ref.BaseURL = *s
	}
	if s := cfg.str("azure_endpoint"); s != nil && c.provider == provAzure {
		ref.BaseURL = *s
	}
	if s := cfg.str("azure_deployment"); s != nil && c.provider == provAzure {
		ref.Deployment = *s
	}
	// The keys and options of the server's own configuration: never used.
	var ignored []string
	for _, k := range []string{"api_key", "base_url", "organization", "azure_endpoint", "azure_deployment", "api_version",
		"azure_ad_token", "azure_ad_token_provider", "default_headers", "timeout", "max_retries", "host", "headers", "follow_redirects", "auth_token"} {
		cfg.used[k] = true
		if !cfg.has(k) {
			continue
		}
		switch {
		case tr.eps != nil && k == "base_url" && c.provider != provAzure, tr.eps != nil && (k == "azure_endpoint" || k == "azure_deployment") && c.provider == provAzure:
			// Used to find the endpoint.
		default:
			ignored = append(ignored, k)
		}
	}
	m.Vision = vision(cfg)
	if tr.eps == nil {
		if len(ignored) > 0 {
			tr.r.warn(path+"/config", "ignored: %s; agentd calls the model through the endpoint, key and retry policy of its own configuration",
				strings.Join(ignored, ", "))
		}
		return m
	}
	if m.Model == "" {
		return m
	}
	name, err := tr.eps.Match(ref)
	if err != nil && c.provider == provOpenAI && ref.BaseURL != "" {
		// OpenAIChatCompletionClient: by base_url, else by model.
		if byModel, merr := tr.eps.Match(ModelClient{Kind: kind, Model: m.Model}); merr == nil {
			tr.r.warn(path+"/config/base_url", "no endpoint of this server has the base URL %s: the model is called through endpoint %q, which serves it", ref.BaseURL, byModel)
			name, err = byModel, nil
		}
	}
	if err != nil {
		tr.r.problem(path, "%s: %v", c.provider, err)
		return m
	}
	m.Endpoint = name
	if len(ignored) > 0 {
		tr.r.warn(path+"/config", "ignored: %s; agentd calls the model through its endpoint %q, with that endpoint's key and retry policy",
			strings.Join(ignored, ", "), name)
	}
	return m
}

// thinking reads an Anthropic client's thinking create argument, which
// AgentChat passes to the Messages API as it is: {"type": "enabled",
// "budget_tokens": N} or {"type": "disabled"}. The spec's validation checks
// its values as the API would.
func thinking(r *report, cfg *object) *spec.Thinking {
	if !cfg.has("thinking") {
		cfg.ignore("thinking")
		return nil
	}
	t := newObject(r, cfg.at("thinking"), cfg.raw("thinking"))
	if t == nil {
		return nil
	}
	defer t.done()
	return &spec.Thinking{Type: t.required("type"), BudgetTokens: t.integer("budget_tokens")}
}

// stopOf reads a client's stop sequences: a string (OpenAI's client takes
// one as its stop) or a list of them.
func stopOf(cfg *object, key string) []string {
	if s, ok := cfg.m[key].(string); ok {
		cfg.used[key] = true
		return []string{s}
	}
	return cfg.strings(key)
}

// vision reads a model client's model_info (or the older
// model_capabilities) for "vision", which decides whether AgentChat's
// agents send the model images; the rest of it describes what agentd asks
// its endpoints, and is not used.
func vision(cfg *object) *bool {
	var v *bool
	for _, k := range []string{"model_info", "model_capabilities"} {
		if info, ok := cfg.raw(k).(map[string]any); ok && v == nil {
			if b, ok := info["vision"].(bool); ok {
				v = &b
			}
		}
	}
	cfg.ignore("model_info", "model_capabilities")
	if v != nil && *v {
		return nil // agentd's default
	}
	return v
}

// replay translates ReplayChatCompletionClient's chat_completions: strings,
// or CreateResults whose content is text or a list of function calls.
func (tr *translator) replay(c *comp) *spec.Model {
	cfg := c.cfg
	// The replay client's own model_info, when the file has none, is
	// AgentChat's default: no vision.
	m := &spec.Model{Provider: "replay", Vision: vision(cfg)}
	if !cfg.has("model_info") && !cfg.has("model_capabilities") {
		m.Vision = new(false)
	}
	items := cfg.list("chat_completions")
	if !cfg.has("chat_completions") {
		tr.r.problem(cfg.at("chat_completions"), "is required")
	}
	for i, it := range items {
		p := idx(cfg.at("chat_completions"), i)
		if s, ok := it.(string); ok {
			m.Responses = append(m.Responses, spec.ReplayResponse{Content: s})
			continue
		}
		o := newObject(&tr.r, p, it)
		if o == nil {
			continue
		}
		var r spec.ReplayResponse
		switch content := o.raw("content").(type) {
		case string:
			r.Content = content
			if t := o.str("thought"); t != nil {
				r.Thought = *t
			}
		case nil:
			tr.r.problem(o.at("content"), "is required")
		default:
			var calls []struct {
				ID        string `json:"id"`
				Arguments string `json:"arguments"`
				Name      string `json:"name"`
			}
			o.get("content", &calls, "a string or a list of function calls {id, arguments, name}")
			for _, fc := range calls {
				args, _ := json.Marshal(fc.Arguments)
				r.ToolCalls = append(r.ToolCalls, spec.ReplayToolCall{Name: fc.Name, Arguments: args})
			}
			if t := o.str("thought"); t != nil {
				r.Content = *t
			}
		}
		var u struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		}
		if o.get("usage", &u, "an object {prompt_tokens, completion_tokens}") {
			r.Usage = &chat.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
		}
		o.ignore("finish_reason", "cached", "logprobs")
		o.done()
		m.Responses = append(m.Responses, r)
	}
	return m
}

var workbenchProviders = []string{provStaticWorkbench, provStaticStreamWorkbench, provMcpWorkbench}

func (tr *translator) workbench(path string, raw any, a *spec.Agent) {
	c := readComponent(&tr.r, path, raw)
	if c == nil {
		return
	}
	defer c.cfg.done()
	cfg := c.cfg
	cfg.refuse("tool_overrides are not supported: agentd offers tools under their own names and descriptions", "tool_overrides")
	switch c.provider {
	case provStaticWorkbench, provStaticStreamWorkbench:
		for i, t := range cfg.list("tools") {
			tr.tool(idx(cfg.at("tools"), i), t, a)
		}
	case provMcpWorkbench:
		cfg.ignoreWarn("agentd does not answer MCP sampling requests", "model_client")
		if sp := cfg.raw("server_params"); sp != nil {
			tr.mcp(cfg.at("server_params"), sp, c.raw, nil, a)
		} else {
			tr.r.problem(cfg.at("server_params"), "is required")
		}
	default:
		c.unsupported(&tr.r, "workbench", workbenchProviders...)
	}
}

func (tr *translator) tool(path string, raw any, a *spec.Agent) {
	c := readComponent(&tr.r, path, raw)
	if c == nil {
		return
	}
	defer c.cfg.done()
	switch c.provider {
	case provFunctionTool:
		tr.functionTool(c, a)
		return
	case provCodeTool:
		tr.codeTool(c, a)
		return
	case provHTTPTool:
		tr.httpTool(c, a)
		return
	case provMcpHTTPAdapter, provMcpSseAdapter:
	default:
		c.unsupported(&tr.r, "tool", append(toolProviders, provMcpWorkbench)...)
		return
	}
	var name string
	if t := newObject(&tr.r, c.cfg.at("tool"), c.cfg.raw("tool")); t != nil {
		name = t.required("name")
	}
	if sp := c.cfg.raw("server_params"); sp != nil {
		tr.mcp(c.cfg.at("server_params"), sp, c.raw, []string{name}, a)
	} else {
		tr.r.problem(c.cfg.at("server_params"), "is required")
	}
}

// mcp adds an agentd mcp tool for MCP server parameters.
func (tr *translator) mcp(path string, raw any, provider string, only []string, a *spec.Agent) {
	o := newObject(&tr.r, path, raw)
	if o == nil {
		return
	}
	defer o.done()
	transport := "streamable_http"
	switch typ := o.str("type"); {
	case typ == nil || *typ == "StreamableHttpServerParams":
		o.ignore("sse_read_timeout", "terminate_on_close")
	case *typ == "SseServerParams":
		transport = "sse"
		o.ignore("sse_read_timeout")
	case *typ == "StdioServerParams":
		o.ignore("command", "args", "env", "cwd", "encoding", "encoding_error_handler", "read_timeout_seconds")
		tr.r.problem(path, "provider %q: a stdio MCP server is a command that would run on the server's host; run the MCP server yourself and use StreamableHttpServerParams or SseServerParams with its URL", provider)
		return
	default:
		tr.r.problem(o.at("type"), "unknown MCP server parameters %q", *typ)
		return
	}
	impl := map[string]any{"type": "mcp", "url": o.required("url")}
	if transport == "sse" {
		impl["transport"] = transport
	}
	if t := o.number("timeout"); t != nil {
		impl["timeout_s"] = int(math.Ceil(*t))
	}
	if len(only) > 0 {
		impl["tools"] = only
	}
	// Headers are taken as a native spec takes them: a string is sent as it
	// is, {"secret": "NAME"} is the server's secret NAME; the tool runner
	// checks them (problems map back to this object's headers).
	if h := o.rawJSON("headers"); h != nil {
		tr.warnLiteralHeaders(o.at("headers"), h)
		impl["headers"] = h
	}
	b, _ := json.Marshal(impl)
	name := fmt.Sprintf("%s_mcp%d", a.Name, len(tr.t.Tools)+1)
	if len(name) > 64 {
		name = name[len(name)-64:]
	}
	at := idx("/tools", len(tr.t.Tools))
	tr.mapPath(at, path)
	tr.mapPath(at+"/implementation/url", o.at("url"))
	tr.mapPath(at+"/implementation/headers", o.at("headers"))
	tr.mapPath(at+"/implementation/transport", o.at("type"))
	tr.t.Tools = append(tr.t.Tools, spec.Tool{Name: name, Implementation: b})
	a.Tools = append(a.Tools, name)
}

var conditionProviders = []string{provMaxMessage, provTextMention, provTextMessage, provTokenUsage, provHandoff, provTimeout,
	provSourceMatch, provFunction, provStopMessage, provExternal, provOr, provAnd}

// condition translates a termination condition. never reports a condition
// that cannot fire in agentd (StopMessageTermination: no agentd agent sends
// a StopMessage). ExternalTermination is POST /v1/chats/{id}/stop.
func (tr *translator) condition(path string, raw any, specPath string) (*spec.Condition, bool) {
	c := readComponent(&tr.r, path, raw)
	if c == nil {
		return nil, false
	}
	defer c.cfg.done()
	cfg := c.cfg
	tr.mapPath(specPath, path)
	var cond spec.Condition
	switch c.provider {
	case provMaxMessage:
		n := cfg.integer("max_messages")
		if n == nil {
			tr.r.problem(cfg.at("max_messages"), "is required")
		}
		if b := cfg.boolean("include_agent_event"); b != nil && *b {
			cond.IncludeAgentEvent = b
		}
		cond.MaxMessages = n
	case provTextMessage:
		cond.TextMessage = &spec.TextMessageCondition{}
		if s := cfg.str("source"); s != nil {
			cond.TextMessage.Source = *s
		}
	case provTextMention:
		cond.TextMention = &spec.TextMentionCondition{Text: cfg.required("text")}
	case provTokenUsage:
		u := &spec.TokenUsageCondition{}
		for key, dst := range map[string]**int64{"max_total_token": &u.MaxTotalTokens, "max_prompt_token": &u.MaxPromptTokens, "max_completion_token": &u.MaxCompletionTokens} {
			if n := cfg.integer(key); n != nil {
				v := int64(*n)
				*dst = &v
			}
		}
		cond.TokenUsage = u
	case provHandoff:
		cond.Handoff = &spec.HandoffCondition{Target: cfg.required("target")}
	case provTimeout:
		t := cfg.number("timeout_seconds")
		if t == nil {
			tr.r.problem(cfg.at("timeout_seconds"), "is required")
		}
		cond.TimeoutS = t
	case provSourceMatch:
		cond.SourceMatch = &spec.SourceMatchCondition{Sources: cfg.strings("sources")}
	case provFunction:
		cond.FunctionCall = &spec.FunctionCallCond{Name: cfg.required("function_name")}
	case provStopMessage:
		tr.r.warn(path, "StopMessageTermination never fires in agentd: no agent sends a StopMessage; dropped")
		return nil, true
	case provExternal:
		// POST /v1/chats/{id}/stop sets it, as AgentChat's set() does.
		cond.External = &spec.ExternalCondition{}
	case provOr, provAnd:
		key, list := "any", &cond.Any
		if c.provider == provAnd {
			key, list = "all", &cond.All
		}
		never := false
		subs := cfg.list("conditions")
		for i, sub := range subs {
			sp := idx(specPath+"/"+key, len(*list))
			sc, n := tr.condition(idx(cfg.at("conditions"), i), sub, sp)
			switch {
			case n:
				never = true
			case sc != nil && (c.provider == provOr && sc.Any != nil || c.provider == provAnd && sc.All != nil):
				// a | b | c dumps as Or(Or(a, b), c); one flat list means the
				// same (and the same stop text) and keeps the tree shallow.
				inner := sc.Any
				if c.provider == provAnd {
					inner = sc.All
				}
				for j := range inner {
					tr.remapPrefix(idx(sp+"/"+key, j), idx(specPath+"/"+key, len(*list)))
					*list = append(*list, inner[j])
				}
			case sc != nil:
				*list = append(*list, *sc)
			}
		}
		if c.provider == provAnd && never {
			tr.r.warn(path, "this AndTerminationCondition can never fire in agentd (one of its parts never fires); dropped")
			return nil, true
		}
		switch {
		case len(*list) > 0:
		case never:
			return nil, true
		case len(subs) == 0:
			tr.r.problem(cfg.at("conditions"), "at least one condition is required")
		}
	default:
		c.unsupported(&tr.r, "termination condition", conditionProviders...)
		return nil, false
	}
	return &cond, false
}

// maxDepth bounds how deeply a team file nests (objects and arrays). A team
// needs about 12 levels, and each | or & of a dumped condition chain three
// more; the bound keeps the translation, which reads each level's subtree,
// from costing depth times size on a hostile file.
const maxDepth = 128

// depth is the deepest nesting of objects and arrays in raw, found in one
// pass without building anything.
func depth(raw json.RawMessage) (int, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	cur, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return deepest, nil
		}
		if err != nil {
			return 0, err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			cur++
			if cur > deepest {
				deepest = cur
			}
			if cur > maxDepth {
				return cur, nil
			}
		case json.Delim('}'), json.Delim(']'):
			cur--
		}
	}
}

// jsonString reports whether raw is a JSON string.
func jsonString(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	return len(b) > 0 && b[0] == '"'
}

// sandboxedExecutor reads the rest of a code executor's config, whose
// options about where and how code runs give way to agentd's sandbox.
func sandboxedExecutor(cfg *object) {
	cfg.ignoreWarn("code runs in agentd's sandbox, whose image and limits are the server's (and the spec's sandbox options)",
		"image", "work_dir", "bind_dir", "extra_volumes", "extra_hosts", "init_command", "functions_module")
	cfg.ignore("container_name", "auto_remove", "stop_container", "delete_tmp_files")
	cfg.refuse("functions are Python code and are not supported", "functions")
	cfg.done()
}
