package component

import (
	"slices"
	"strings"

	"github.com/agentd/agentd/internal/spec"
)

// AgentChat 0.7.5's SocietyOfMindAgent: an agent whose inner team runs on
// each of its turns, after which its model answers for the team. It is a
// spec's agent of type team.
const (
	provSocietyOfMind = "autogen_agentchat.agents.SocietyOfMindAgent"

	// societyOfMindDescription is SocietyOfMindAgent.DEFAULT_DESCRIPTION,
	// which is also the description its component dump has.
	societyOfMindDescription = "An agent that uses an inner team of agents to generate responses."
)

// societyOfMind translates a SocietyOfMindAgent into a team agent: its
// team (translated as a team file's team is, its agents' tools joining the
// chat's), the model client that answers, its description, instruction
// and response prompt. AgentChat reads an empty description, instruction
// or response prompt as its default, and so does agentd; the defaults are
// left out of the spec.
func (tr *translator) societyOfMind(c *comp) spec.Agent {
	cfg := c.cfg
	ap := idx("/agents", len(tr.t.Agents))
	a := spec.Agent{Type: spec.AgentTeam, Name: cfg.required("name"), Description: societyOfMindDescription}
	tr.mapPath(ap+"/name", cfg.at("name"))
	if d := cfg.str("description"); d != nil && *d != "" {
		a.Description = *d
	}
	tr.mapPath(ap+"/description", cfg.at("description"))
	if s := cfg.str("instruction"); s != nil && *s != "" && *s != spec.DefaultInstruction {
		a.Instruction = s
	}
	tr.mapPath(ap+"/instruction", cfg.at("instruction"))
	if s := cfg.str("response_prompt"); s != nil && *s != "" && *s != spec.DefaultResponsePrompt {
		a.ResponsePrompt = s
	}
	tr.mapPath(ap+"/response_prompt", cfg.at("response_prompt"))
	a.Model = tr.modelClient(cfg, ap+"/model", "is required: the model client that answers for the team")
	if mc := cfg.raw("model_context"); mc != nil {
		if ctx := tr.context(cfg.at("model_context"), mc, cfg.raw("model_client")); ctx != nil {
			// The context holds the messages given to the agent before,
			// which its inner team gets as "relevant previous messages".
			tr.r.problem(cfg.at("model_context"), "provider %q: a model_context other than UnboundedChatCompletionContext is not supported: "+
				"agentd gives the inner team every message given to the agent before (AgentChat's default); leave model_context out", c.raw)
		}
	}
	if raw := cfg.raw("team"); raw != nil {
		a.Team = tr.innerTeam(cfg.at("team"), ap, raw)
	} else {
		tr.r.problem(cfg.at("team"), "is required: the inner team")
	}
	return a
}

// innerTeam translates a SocietyOfMindAgent's team with a translator of
// its own, whose spec paths are moved under the agent's (ap + "/team"); the
// report and the chat's tools are shared. A GraphFlow is translated too:
// the spec's validation says why an inner team cannot be one.
func (tr *translator) innerTeam(path, ap string, raw any) *spec.Team {
	sub := &translator{r: tr.r, t: &Translation{paths: map[string]string{}, Tools: tr.t.Tools}, eps: tr.eps, root: tr.root, raw: tr.raw}
	sub.team(path, raw)
	tr.r = sub.r
	tr.t.Tools = sub.t.Tools
	for k, v := range sub.t.paths {
		if !strings.HasPrefix(k, "/tools") {
			k = ap + "/team" + k
		}
		tr.t.paths[k] = v
	}
	if n := sub.t.Name; n != "" && !slices.Contains(teamProviders, "autogen_agentchat.teams."+n) {
		tr.r.warn(path+"/config/name", "ignored: an inner team has no name of its own in agentd (the team agent's name is the one the chat shows)")
	}
	t := &spec.Team{Agents: sub.t.Agents, SpeakerSelection: sub.t.SpeakerSelection, Termination: sub.t.Termination, MaxRound: sub.t.MaxRound}
	if t.Agents == nil {
		t.Agents = []spec.Agent{}
	}
	if t.MaxRound == nil {
		tr.r.warn(path+"/config/max_turns", "not set: AgentChat would run the inner team until its termination condition fires; agentd stops it after max_round turns (default %d); set max_turns", spec.DefaultMaxRound)
	}
	return t
}

// exportSocietyOfMind writes a team agent as AgentChat's SocietyOfMindAgent,
// its inner team exported as a chat's team is (problems under the agent's
// path + "/team").
func (e *exporter) exportSocietyOfMind(path string, a *spec.Agent) Component {
	cfg := map[string]any{"name": a.Name, "description": a.Description,
		"instruction": spec.DefaultInstruction, "response_prompt": spec.DefaultResponsePrompt,
		"model_context": newComponent(provUnbounded, "An unbounded chat completion context that keeps a view of the all the messages.", map[string]any{})}
	if a.Instruction != nil {
		cfg["instruction"] = *a.Instruction
	}
	if a.ResponsePrompt != nil {
		cfg["response_prompt"] = *a.ResponsePrompt
	}
	if a.Model != nil {
		if m := e.model(path+"/model", a.Model); m != nil {
			cfg["model_client"] = *m
		}
	}
	if a.Team != nil {
		t := a.Team
		sub := &exporter{spec: &spec.Spec{Agents: t.Agents, SpeakerSelection: t.SpeakerSelection, Termination: t.Termination,
			MaxRound: t.MaxRound, Models: e.spec.Models, Tools: e.spec.Tools}, eps: e.eps}
		cfg["team"] = sub.team()
		e.r.probs.AddAll(path+"/team", sub.r.probs.Items())
	}
	return newComponent(provSocietyOfMind, societyOfMindDescription, cfg)
}
