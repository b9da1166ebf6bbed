package spec

import (
	"encoding/json"
	"slices"
)

// This file answers what a validated spec means where it leaves a field
// out: the defaults, and the lookups the engine needs by name.

// Agent returns the agent of that name, or nil.
func (s *Spec) Agent(name string) *Agent {
	i := s.AgentIndex(name)
	if i < 0 {
		return nil
	}
	return &s.Agents[i]
}

// AgentIndex is the index in Agents of the agent of that name, or -1.
func (s *Spec) AgentIndex(name string) int {
	return slices.IndexFunc(s.Agents, func(a Agent) bool { return a.Name == name })
}

// IsUserProxy reports whether name is a user_proxy of the chat.
func (s *Spec) IsUserProxy(name string) bool {
	a := s.Agent(name)
	return a != nil && a.Type == AgentUserProxy
}

// Tool returns the tool of that name, or nil.
func (s *Spec) Tool(name string) *Tool {
	for i := range s.Tools {
		if s.Tools[i].Name == name {
			return &s.Tools[i]
		}
	}
	return nil
}

// Executes reports whether a user_proxy runs the function: one of its
// functions is that tool, or an mcp tool that may offer it.
func (s *Spec) Executes(p *Agent, fn string) bool {
	for _, name := range p.Functions {
		if name == fn {
			return true
		}
		if t := s.Tool(name); t != nil && t.ImplementationType() == "mcp" {
			return true
		}
	}
	return false
}

// NeedsSandbox reports whether the chat runs code: a code-executing
// user_proxy or a sandbox tool.
func (s *Spec) NeedsSandbox() bool {
	for i := range s.Agents {
		if s.Agents[i].CodeExecution != nil {
			return true
		}
	}
	for i := range s.Tools {
		if s.Tools[i].ImplementationType() == "sandbox" {
			return true
		}
	}
	return false
}

// ResolveModel turns a validated model reference into its configuration.
func (s *Spec) ResolveModel(ref *ModelRef) Model {
	if ref == nil {
		return Model{}
	}
	if ref.Inline != nil {
		return *ref.Inline
	}
	return s.Models[ref.Name]
}

// Method is the speaker selection method, round_robin when unset.
func (s *Spec) Method() string {
	if s.SpeakerSelection != nil && s.SpeakerSelection.Method != "" {
		return s.SpeakerSelection.Method
	}
	return SelectRoundRobin
}

// OpenAISwarm reports whether the chat speaks OpenAI Swarm's protocol: the
// swarm method with protocol openai_swarm.
func (s *Spec) OpenAISwarm() bool {
	return s.SpeakerSelection != nil && s.SpeakerSelection.Method == SelectSwarm && s.SpeakerSelection.Protocol == ProtocolOpenAISwarm
}

// AllowRepeat is allow_repeated_speaker. Its default is AutoGen's for the
// method: false for auto (AgentChat's SelectorGroupChat), true otherwise
// (AutoGen 0.2's GroupChat, which random follows).
func (s *Spec) AllowRepeat() bool {
	sel := s.SpeakerSelection
	if sel == nil || sel.AllowRepeatedSpeaker == nil {
		return s.Method() != SelectAuto
	}
	return *sel.AllowRepeatedSpeaker
}

// InputMode is the agent's human_input_mode; ALWAYS when unset, as
// AutoGen's UserProxyAgent.
func (a *Agent) InputMode() string {
	if a.HumanInputMode == "" {
		return HumanInputAlways
	}
	return a.HumanInputMode
}

// ImplementationType is the tool's implementation "type" ("http",
// "sandbox", "mcp"), or "" when it has none.
func (t *Tool) ImplementationType() string {
	var impl struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(t.Implementation, &impl)
	return impl.Type
}

// InnerSpec is the spec a team agent's inner team runs as: its agents,
// speaker selection, termination and max_round, with the chat's models,
// tools, sandbox and context variables.
func (s *Spec) InnerSpec(a *Agent) *Spec {
	t := a.Team
	return &Spec{Name: a.Name, Agents: t.Agents, SpeakerSelection: t.SpeakerSelection, Termination: t.Termination,
		MaxRound: t.MaxRound, Models: s.Models, Tools: s.Tools, Sandbox: s.Sandbox, ContextVariables: s.ContextVariables}
}
