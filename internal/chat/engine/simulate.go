package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/agentd/agentd/internal/chat"
)

// This file plays the world for property tests: what a model, a tool, a
// sandbox or a human would have answered to a step, chosen at random. The
// engine's own property test folds the events it returns; the runtime's
// drives a real worker on a real store with them. It is code, not a
// _test file, because both packages' tests use it.

// magenticEffect does a stepMagentic with random orchestrator replies: a
// progress ledger that is satisfied now and then, stalls (no progress, a
// loop) and names an agent or, rarely, no agent (which fails the run).
func magenticEffect(rng *rand.Rand, s *State, st Step) []chat.Event {
	names := AgentNames(s.Spec)
	evs, err := s.MagenticEvents(st, func(msgs []chat.ModelMessage, ledger bool, index int) (*chat.ModelResponse, error) {
		if rng.IntN(40) == 0 {
			return nil, errors.New("the model is down")
		}
		resp := &chat.ModelResponse{Content: []string{"facts", "a plan", "done. STOP"}[rng.IntN(3)],
			Usage: chat.Usage{PromptTokens: int64(rng.IntN(20)), CompletionTokens: int64(rng.IntN(20))}}
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
		return []chat.Event{FailedEvent(err)}
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

// Effect plays the world for one step: what a model, a tool, a sandbox
// would have produced, and returns the events the worker would append.
func Effect(rng *rand.Rand, s *State, st Step) []chat.Event {
	if st.Inner != nil {
		// A step of a team agent's inner run: planned on the inner state,
		// its events marked as the team's, as worker.produce does.
		team := st.Team
		st.Inner, st.Team = nil, ""
		return TagTeam(Effect(rng, s.inners[team].st, st), team)
	}
	switch st.Kind {
	case StepAppend:
		return st.Events
	case StepSelect:
		var replies []string
		for range 1 + rng.IntN(2) {
			replies = append(replies, st.Sel.Candidates[rng.IntN(len(st.Sel.Candidates))]+[]string{"", " and a0"}[rng.IntN(2)])
		}
		return []chat.Event{SelectedEvent(s.AutoSelection(st.Sel, replies, chat.Usage{PromptTokens: 5}))}
	case StepModel:
		resp := &chat.ModelResponse{Content: []string{"ok", "STOP", "```python\nprint(1)\n```", "x\x00y"}[rng.IntN(4)],
			Usage: chat.Usage{PromptTokens: int64(rng.IntN(50)), CompletionTokens: int64(rng.IntN(50))}}
		box := &Toolbox{ByName: map[string]Offered{
			"t":             {Def: chat.ToolDef{Name: "t"}},
			"f":             {Def: chat.ToolDef{Name: "f"}, Executor: "p"},
			"transfer_to_p": {Def: chat.ToolDef{Name: "transfer_to_p"}, Handoff: "p"},
		}}
		if !st.Reflect && rng.IntN(2) == 0 {
			for i := range 1 + rng.IntN(2) {
				name := []string{"t", "f", "transfer_to_p", "nope"}[rng.IntN(4)]
				resp.ToolCalls = append(resp.ToolCalls, chat.ToolCall{ID: fmt.Sprintf("call_%d_%d", s.LastSeq, i), Type: "function",
					Function: chat.FunctionCall{Name: name, Arguments: "{}"}})
			}
		}
		ev, err := ModelReply(st.Agent, st.Turn, resp, box, st.Reflect)
		if err != nil {
			panic(err)
		}
		return []chat.Event{ev}
	case StepTools:
		box := &Toolbox{ByName: map[string]Offered{"t": {Def: chat.ToolDef{Name: "t"}}, "transfer_to_p": {Def: chat.ToolDef{Name: "transfer_to_p"}, Handoff: "p"}}}
		calls, decided := s.ApprovedCalls(st.Open.ToolCalls)
		results := make([]chat.ToolResponse, len(st.Open.ToolCalls))
		for i, c := range calls {
			results[i] = chat.ToolResponse{ToolCallID: c.ID, Role: chat.RoleTool, Content: "r " + c.Function.Arguments}
			if decided[i] != nil {
				results[i] = *decided[i]
			}
		}
		evs := ToolTurnEvents(st.Agent, st.Turn, st.Open, results, box)
		if len(s.Spec.ContextNames()) > 0 && len(calls) > 0 {
			// The tool also changes the chat's variables, as a Swarm
			// function returning a Result does: the next model call of the
			// turn, or the agent's next turn, may hand off on them.
			// From the log, not rng: the other tests' draws stay as they were.
			u := chat.ContextUpdate{Set: map[string]json.RawMessage{"level": json.RawMessage(fmt.Sprint(s.LastSeq % 5))},
				By: chat.ContextBy{Agent: st.Agent.Name, Tool: "t"}}
			evs = append([]chat.Event{chat.ContextEvent(u)}, evs...)
		}
		return evs
	case StepRouted:
		results := make([]chat.ToolResponse, len(st.Open.ToolCalls))
		for i, c := range st.Open.ToolCalls {
			results[i] = chat.ToolResponse{ToolCallID: c.ID, Role: chat.RoleTool, Content: "r"}
		}
		return []chat.Event{RoutedReply(st.Agent, st.Turn, st.Open, results, map[string]Offered{"f": {}})}
	case StepCode:
		return []chat.Event{CodeReply(st.Agent, st.Turn, &chat.CodeResult{ExitCode: rng.IntN(2), Output: "1\n"})}
	case StepMagentic:
		return magenticEffect(rng, s, st)
	}
	return nil
}

func RandomInput(rng *rand.Rand, s *State) json.RawMessage {
	p := s.PendingInput
	switch rng.IntN(5) {
	case 0:
		return nil // nobody answered yet
	case 1:
		return chat.MustJSON(chat.Input{RequestID: p.RequestID, Content: new(string)})
	}
	if p.Kind == "speaker" {
		sp := p.Candidates[rng.IntN(len(p.Candidates))]
		return chat.MustJSON(chat.Input{RequestID: p.RequestID, Speaker: &sp})
	}
	if p.Kind == chat.InputApproval {
		var as []chat.Approval
		decide := func(id string) chat.Approval {
			switch rng.IntN(3) {
			case 0:
				return chat.Approval{ToolCallID: id, Approve: false, Reason: "no"}
			case 1:
				return chat.Approval{ToolCallID: id, Approve: true, Arguments: json.RawMessage(`{"edited":1}`)}
			}
			return chat.Approval{ToolCallID: id, Approve: true}
		}
		for _, c := range p.ToolCalls {
			as = append(as, decide(c.ID))
		}
		if len(p.CodeBlocks) > 0 {
			a := decide("")
			a.Arguments = nil
			as = append(as, a)
		}
		return chat.MustJSON(chat.Input{RequestID: p.RequestID, Approvals: as})
	}
	c := []string{"go on", "exit", "STOP"}[rng.IntN(3)]
	return chat.MustJSON(chat.Input{RequestID: p.RequestID, Content: &c})
}

// MagenticExtraRound: a magentic_one run may have one turn more than its
// max_round, as AgentChat's orchestrator ends a run when its rounds
// exceed max_turns.
func MagenticExtraRound(s *State) int {
	if s.magentic != nil {
		return 1
	}
	return 0
}
