package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
)

// This file plays the world for property tests: what a model, a tool, a
// sandbox or a human would have answered to a step, chosen at random. The
// engine's own property test folds the events it returns; the runtime's
// drives a real worker on a real store with them. It is code, not a
// _test file, because both packages' tests use it.

// magenticEffect does a stepMagentic with random orchestrator replies: a
// progress ledger that is satisfied now and then, stalls (no progress, a
// loop) and names an agent or, rarely, no agent (which fails the run).
func magenticEffect(rng *rand.Rand, s *state, st step) []Event {
	names := agentNames(s.spec)
	evs, err := s.magenticEvents(st, func(msgs []ModelMessage, ledger bool, index int) (*ModelResponse, error) {
		if rng.IntN(40) == 0 {
			return nil, errors.New("the model is down")
		}
		resp := &ModelResponse{Content: []string{"facts", "a plan", "done. STOP"}[rng.IntN(3)],
			Usage: Usage{PromptTokens: int64(rng.IntN(20)), CompletionTokens: int64(rng.IntN(20))}}
		if ledger {
			next := names[rng.IntN(len(names))]
			if rng.IntN(25) == 0 {
				next = "nobody"
			}
			resp.Content = randomLedger(rng.IntN(6) == 0, rng.IntN(4) == 0, rng.IntN(4) > 0, next, "go on")
		}
		return resp, nil
	})
	if err != nil {
		return []Event{failedEvent(err)}
	}
	return evs
}

// randomLedger is a progress ledger reply.
func randomLedger(satisfied, loop, progress bool, next, instruction string) string {
	entry := func(answer any) map[string]any { return map[string]any{"reason": "because", "answer": answer} }
	b, _ := json.Marshal(map[string]any{"is_request_satisfied": entry(satisfied), "is_in_loop": entry(loop),
		"is_progress_being_made": entry(progress), "next_speaker": entry(next), "instruction_or_question": entry(instruction)})
	return string(b)
}

// effect plays the world for one step: what a model, a tool, a sandbox
// would have produced, and returns the events the worker would append.
func effect(rng *rand.Rand, s *state, st step) []Event {
	if st.st != nil {
		// A step of a team agent's inner run: planned on the inner state,
		// its events marked as the team's, as worker.produce does.
		team := st.team
		st.st, st.team = nil, ""
		return tagTeam(effect(rng, s.inners[team].st, st), team)
	}
	switch st.kind {
	case stepAppend:
		return st.events
	case stepSelect:
		var replies []string
		for range 1 + rng.IntN(2) {
			replies = append(replies, st.sel.Candidates[rng.IntN(len(st.sel.Candidates))]+[]string{"", " and a0"}[rng.IntN(2)])
		}
		return []Event{selectedEvent(s.autoSelection(st.sel, replies, Usage{PromptTokens: 5}))}
	case stepModel:
		resp := &ModelResponse{Content: []string{"ok", "STOP", "```python\nprint(1)\n```", "x\x00y"}[rng.IntN(4)],
			Usage: Usage{PromptTokens: int64(rng.IntN(50)), CompletionTokens: int64(rng.IntN(50))}}
		box := &toolbox{byName: map[string]offered{
			"t":             {def: ToolDef{Name: "t"}},
			"f":             {def: ToolDef{Name: "f"}, executor: "p"},
			"transfer_to_p": {def: ToolDef{Name: "transfer_to_p"}, handoff: "p"},
		}}
		if !st.reflect && rng.IntN(2) == 0 {
			for i := range 1 + rng.IntN(2) {
				name := []string{"t", "f", "transfer_to_p", "nope"}[rng.IntN(4)]
				resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: fmt.Sprintf("call_%d_%d", s.lastSeq, i), Type: "function",
					Function: FunctionCall{Name: name, Arguments: "{}"}})
			}
		}
		ev, err := modelReply(st.agent, st.turn, resp, box, st.reflect)
		if err != nil {
			panic(err)
		}
		return []Event{ev}
	case stepTools:
		box := &toolbox{byName: map[string]offered{"t": {def: ToolDef{Name: "t"}}, "transfer_to_p": {def: ToolDef{Name: "transfer_to_p"}, handoff: "p"}}}
		calls, decided := s.approvedCalls(st.open.ToolCalls)
		results := make([]ToolResponse, len(st.open.ToolCalls))
		for i, c := range calls {
			results[i] = ToolResponse{ToolCallID: c.ID, Role: RoleTool, Content: "r " + c.Function.Arguments}
			if decided[i] != nil {
				results[i] = *decided[i]
			}
		}
		return toolTurnEvents(st.agent, st.turn, st.open, results, box)
	case stepRouted:
		results := make([]ToolResponse, len(st.open.ToolCalls))
		for i, c := range st.open.ToolCalls {
			results[i] = ToolResponse{ToolCallID: c.ID, Role: RoleTool, Content: "r"}
		}
		return []Event{routedReply(st.agent, st.turn, st.open, results, map[string]offered{"f": {}})}
	case stepCode:
		return []Event{codeReply(st.agent, st.turn, &CodeResult{ExitCode: rng.IntN(2), Output: "1\n"})}
	case stepMagentic:
		return magenticEffect(rng, s, st)
	}
	return nil
}

func randomInput(rng *rand.Rand, s *state) json.RawMessage {
	p := s.pendingInput
	switch rng.IntN(5) {
	case 0:
		return nil // nobody answered yet
	case 1:
		return mustJSON(Input{RequestID: p.RequestID, Content: new(string)})
	}
	if p.Kind == "speaker" {
		sp := p.Candidates[rng.IntN(len(p.Candidates))]
		return mustJSON(Input{RequestID: p.RequestID, Speaker: &sp})
	}
	if p.Kind == InputApproval {
		var as []Approval
		decide := func(id string) Approval {
			switch rng.IntN(3) {
			case 0:
				return Approval{ToolCallID: id, Approve: false, Reason: "no"}
			case 1:
				return Approval{ToolCallID: id, Approve: true, Arguments: json.RawMessage(`{"edited":1}`)}
			}
			return Approval{ToolCallID: id, Approve: true}
		}
		for _, c := range p.ToolCalls {
			as = append(as, decide(c.ID))
		}
		if len(p.CodeBlocks) > 0 {
			a := decide("")
			a.Arguments = nil
			as = append(as, a)
		}
		return mustJSON(Input{RequestID: p.RequestID, Approvals: as})
	}
	c := []string{"go on", "exit", "STOP"}[rng.IntN(3)]
	return mustJSON(Input{RequestID: p.RequestID, Content: &c})
}

// magenticExtraRound: a magentic_one run may have one turn more than its
// max_round, as AgentChat's orchestrator ends a run when its rounds
// exceed max_turns.
func magenticExtraRound(s *state) int {
	if s.magentic != nil {
		return 1
	}
	return 0
}
