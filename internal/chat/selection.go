package chat

import (
	"math/rand/v2"
	"slices"
)

// selection is the outcome of choosing the next speaker; it becomes the data
// of a speaker.selected event.
type selection struct {
	Agent      string   `json:"agent"`
	Method     string   `json:"method"`
	Candidates []string `json:"candidates"`
	Turn       int      `json:"turn"`
}

// selectSpeaker picks the speaker of turn `turn` (1-based) after lastSpeaker
// ("" or a non-agent name before the first agent turn). It is a pure function
// of the spec and the log-derived arguments, so a rebuilt worker chooses as
// the original one would have (random without a seed excepted, which is why
// the choice is persisted before the turn runs).
func selectSpeaker(spec *Spec, lastSpeaker string, turn int) selection {
	names := agentNames(spec)
	method := SelectRoundRobin
	sel := spec.SpeakerSelection
	if sel != nil && sel.Method != "" {
		method = sel.Method
	}
	switch method {
	case SelectRandom:
		candidates := names
		allowRepeat := sel.AllowRepeatedSpeaker == nil || *sel.AllowRepeatedSpeaker
		if !allowRepeat && len(names) > 1 {
			candidates = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == lastSpeaker })
		}
		var i int
		if sel.Seed != nil {
			// Seeded per turn, not per chat: the choice of turn N depends on
			// nothing but the seed and N, so it is reproducible after a restart
			// without storing generator state.
			i = rand.New(rand.NewPCG(uint64(*sel.Seed), uint64(turn))).IntN(len(candidates))
		} else {
			i = rand.IntN(len(candidates))
		}
		return selection{Agent: candidates[i], Method: method, Candidates: candidates, Turn: turn}
	default:
		// AutoGen's round robin: the agent after the last speaker in agents
		// order, wrapping; the first agent when the last speaker is no agent.
		next := 0
		if i := slices.Index(names, lastSpeaker); i >= 0 {
			next = (i + 1) % len(names)
		}
		return selection{Agent: names[next], Method: SelectRoundRobin, Candidates: []string{names[next]}, Turn: turn}
	}
}

func agentNames(spec *Spec) []string {
	names := make([]string, len(spec.Agents))
	for i, a := range spec.Agents {
		names[i] = a.Name
	}
	return names
}
