package component

import "github.com/agentd/agentd/internal/spec"

// AgentChat 0.7.5's MagenticOneGroupChat: its provider, the description
// its dump gives the component, and the defaults of its config that a
// spec leaves to the engine but a dump always writes out.
const (
	provMagentic        = "autogen_agentchat.teams.MagenticOneGroupChat"
	magenticDescription = "A team that runs a group chat with participants managed by the MagenticOneOrchestrator."

	// magenticMaxTurns and magenticMaxStalls are MagenticOneGroupChat's
	// defaults for max_turns and max_stalls.
	magenticMaxTurns  = 20
	magenticMaxStalls = 3
	// magenticFinalAnswerPrompt is AgentChat's
	// ORCHESTRATOR_FINAL_ANSWER_PROMPT, the default final_answer_prompt
	// (the fixture magentic_one holds it as AgentChat dumps it).
	magenticFinalAnswerPrompt = "\nWe are working on the following task:\n{task}\n\nWe have completed the task.\n\n" +
		"The above messages contain the conversation that took place to complete the task.\n\n" +
		"Based on the information gathered, provide the final answer to the original request.\n" +
		"The answer should be phrased as if you were speaking to the user.\n"
)

// magentic translates a MagenticOneGroupChat's own config into the
// magentic_one method: the orchestrator's model client, max_stalls and
// final_answer_prompt. The spec's validation checks the rest (assistants
// only, no agent named as the orchestrator), with problems pointing into
// the file.
func (tr *translator) magentic(c *comp) {
	cfg := c.cfg
	sel := &spec.Selection{Method: spec.SelectMagentic}
	tr.mapPath("/speaker_selection", c.path+"/config")
	sel.Model = tr.modelClient(cfg, "/speaker_selection/model", "is required: the orchestrator's model client")
	// A dump always writes both (MagenticOneGroupChatConfig requires
	// them); a hand-written file without them gets AgentChat's defaults.
	sel.MaxStalls = cfg.integer("max_stalls")
	tr.mapPath("/speaker_selection/max_stalls", cfg.at("max_stalls"))
	sel.FinalAnswerPrompt = cfg.str("final_answer_prompt")
	tr.mapPath("/speaker_selection/final_answer_prompt", cfg.at("final_answer_prompt"))
	tr.t.SpeakerSelection = sel
}

// exportMagentic writes the magentic_one method's part of a
// MagenticOneGroupChat's config, every default written out as AgentChat's
// dump writes it. max_turns is always written: a MagenticOneGroupChat
// loaded without it runs without a turn limit, a spec without max_round
// stops after MagenticOneGroupChat's default 20.
func (e *exporter) exportMagentic(sel *spec.Selection, cfg map[string]any) {
	if sel.Model != nil {
		if m := e.model("/speaker_selection/model", sel.Model); m != nil {
			cfg["model_client"] = *m
		}
	} else {
		e.r.problem("/speaker_selection/model", "MagenticOneGroupChat needs the orchestrator's model client")
	}
	if _, ok := cfg["max_turns"]; !ok {
		cfg["max_turns"] = magenticMaxTurns
	}
	cfg["max_stalls"] = magenticMaxStalls
	if sel.MaxStalls != nil {
		cfg["max_stalls"] = *sel.MaxStalls
	}
	cfg["final_answer_prompt"] = magenticFinalAnswerPrompt
	if sel.FinalAnswerPrompt != nil {
		cfg["final_answer_prompt"] = *sel.FinalAnswerPrompt
	}
}
