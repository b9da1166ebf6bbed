package spec

import "strconv"

// MagenticOrchestrator is the name the magentic_one method's orchestrator
// speaks under (AgentChat's MagenticOneOrchestrator): its messages are the
// chat's with this name, so no agent may have it.
const MagenticOrchestrator = "MagenticOneOrchestrator"

// maxStalls bounds magentic_one's max_stalls: more stalls than a chat has
// rounds never re-plan.
const maxStalls = 1000

// magenticMaxRound is max_round of a magentic_one spec that leaves it out:
// MagenticOneGroupChat's default max_turns.
const magenticMaxRound = 20

// DefaultMaxRound is max_round when the spec leaves it out: AgentChat's
// default for its method (MagenticOneGroupChat's 20 for magentic_one),
// else DefaultMaxRound.
func (s *Spec) DefaultMaxRound() int {
	if s.Method() == SelectMagentic {
		return magenticMaxRound
	}
	return DefaultMaxRound
}

// checkMagentic checks the magentic_one method (AgentChat's
// MagenticOneGroupChat): the orchestrator's model, max_stalls and
// final_answer_prompt, and participants it can run. Other methods may not
// set magentic_one's fields, and no team agent's inner team may run it.
func (v *validator) checkMagentic(p string, sel *Selection) {
	for i, a := range v.spec.Agents {
		if a.Team != nil && a.Team.SpeakerSelection != nil && a.Team.SpeakerSelection.Method == SelectMagentic {
			v.add("/agents/"+strconv.Itoa(i)+"/team/speaker_selection/method", "magentic_one is a chat's own method: a team agent's inner team cannot run it")
		}
	}
	if sel.Method != SelectMagentic {
		if sel.MaxStalls != nil {
			v.add(p+"/max_stalls", "only the magentic_one method counts stalls")
		}
		if sel.FinalAnswerPrompt != nil {
			v.add(p+"/final_answer_prompt", "only the magentic_one method gives a final answer")
		}
		return
	}
	if sel.Model == nil {
		v.add(p+"/model", "the magentic_one method needs a model for its orchestrator")
	} else {
		v.checkModelRef(p+"/model", sel.Model)
	}
	if n := sel.MaxStalls; n != nil && (*n < 0 || *n > maxStalls) {
		v.add(p+"/max_stalls", "must be between 0 and %d", maxStalls)
	}
	if fp := sel.FinalAnswerPrompt; fp != nil && len(*fp) > v.limits.MaxPromptBytes {
		v.add(p+"/final_answer_prompt", "must be at most %d bytes", v.limits.MaxPromptBytes)
	}
	for _, f := range []struct {
		set  bool
		name string
	}{
		{sel.AllowRepeatedSpeaker != nil, "allow_repeated_speaker"}, {sel.MaxAttempts != nil, "max_attempts"},
		{sel.Seed != nil, "seed"}, {sel.SelectorPrompt != nil, "selector_prompt"}, {sel.Context != nil, "context"},
		{len(sel.Transitions) > 0, "transitions"}, {sel.TransitionsType != "", "transitions_type"},
	} {
		if f.set {
			v.add(p+"/"+f.name, "the magentic_one method's orchestrator chooses every speaker: it takes no %s", f.name)
		}
	}
	for i, a := range v.spec.Agents {
		ap := "/agents/" + strconv.Itoa(i)
		if a.Type != AgentAssistant {
			v.add(ap+"/type", "the magentic_one method runs assistants only")
		}
		if a.Name == MagenticOrchestrator {
			v.add(ap+"/name", "%s is the magentic_one orchestrator's name", MagenticOrchestrator)
		}
	}
}
