package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/spec"
)

// This file is the magentic_one method, AgentChat's MagenticOneGroupChat,
// as a function of the log. Its orchestrator (named
// spec.MagenticOrchestrator) keeps a task ledger (facts and a plan, made
// by two model calls when a run starts) and asks its model for a progress
// ledger before every turn: is the request satisfied, are we in a loop, is
// progress being made, who speaks next and what to tell them. A satisfied
// request gets a final answer and ends the run with the ledger's reason;
// stalls (no progress, or a loop) count up, progress counts them down, and
// max_stalls of them re-plan (the facts and the plan updated, the agents
// reset); more rounds than max_round end the run with a final answer too.
//
// Each of the orchestrator's steps is one append: its model calls first,
// then its message (the task ledger, an instruction with the speaker's
// selection, or the final answer with the run's end), with the calls'
// replies in the message's data. The state below is the fold of those
// messages, so a worker rebuilt from the log continues a ledger mid-plan
// with the same counts, and redoes only calls whose message was not
// committed.

// kindOrchestrator marks the orchestrator's messages.
const kindOrchestrator = "orchestrator"

// maxRoundsText is the stop text of a magentic_one run that used up its
// rounds, AgentChat's.
const maxRoundsText = "Max rounds reached."

// The orchestrator's steps, as its messages record them.
const (
	// magenticPlan: the task ledger a run starts with (facts, plan).
	magenticPlan = "plan"
	// magenticReplan: a progress ledger that stalled once too often, and
	// the task ledger made anew (facts and plan updated).
	magenticReplan = "replan"
	// magenticInstruct: a progress ledger and the instruction it gives the
	// next speaker.
	magenticInstruct = "instruct"
	// magenticFinal: the final answer (after a satisfied progress ledger,
	// or once the rounds are used up).
	magenticFinal = "final"
)

// magenticState is the orchestrator's state, folded from the log.
type magenticState struct {
	// task holds the text of each task message of the current run
	// (to_model_text); the task is their join with spaces.
	task []string
	// planned: the run's task ledger exists.
	planned     bool
	facts, plan string
	// start is the index in msgs of the latest task ledger: the thread the
	// orchestrator and the agents see begins there (AgentChat clears both
	// when it enters its outer loop).
	start int
	// rounds counts progress ledgers over the chat's runs (AgentChat's
	// n_rounds, which only a reset clears); stalls since the run's plan.
	rounds, stalls int
	// calls counts the orchestrator's model calls: its replay position.
	calls int
}

func newMagenticState(sp *spec.Spec) *magenticState {
	if sel := sp.SpeakerSelection; sel != nil && sel.Method == spec.SelectMagentic {
		return &magenticState{}
	}
	return nil
}

func (g *magenticState) clone() *magenticState {
	if g == nil {
		return nil
	}
	c := *g
	c.task = slices.Clip(g.task)
	return &c
}

// runStarted: a new run plans for its own task (AgentChat's handle_start).
func (g *magenticState) runStarted() {
	if g != nil {
		g.task, g.planned = nil, false
	}
}

// foldMagentic folds the messages of a magentic_one chat that are no
// agent's response: the run's task and the orchestrator's messages. It
// reports whether m was one. AgentChat's orchestrator checks the
// termination condition on its agents' responses only, so these are not
// counted or checked.
func (s *State) foldMagentic(m chat.Message, d chat.MessageData) (bool, error) {
	g := s.magentic
	switch d.Kind {
	case chat.KindTask:
		g.task = append(g.task, modelText(m))
		return true, nil
	case kindOrchestrator:
	default:
		return false, nil
	}
	md := d.Magentic
	if md == nil {
		return true, errors.New("an orchestrator message without its record")
	}
	g.calls += md.Calls
	s.usage = s.usage.Add(md.Usage)
	if md.Ledger != "" {
		l, err := s.readLedger(md.Ledger)
		if err != nil {
			return true, err
		}
		g.rounds++
		if !l.satisfied {
			g.stalls = g.stallsAfter(l)
		}
	}
	switch md.Step {
	case magenticPlan:
		g.facts, g.plan, g.planned, g.start, g.stalls = md.Facts, md.Plan, true, len(s.Msgs)-1, 0
	case magenticReplan:
		g.facts, g.plan, g.start = md.Facts, md.Plan, len(s.Msgs)-1
	}
	return true, nil
}

// stallsAfter is the stall count after an unsatisfied progress ledger: up
// by one without progress or in a loop, else down by one (not below 0).
func (g *magenticState) stallsAfter(l *progressLedger) int {
	if !l.progress || l.loop {
		return g.stalls + 1
	}
	return max(0, g.stalls-1)
}

// magenticNext is the orchestrator's next step when no agent's turn is in
// progress: the run's task ledger, else a progress ledger, else (more
// rounds than max_round) the final answer.
func (s *State) magenticNext() Step {
	g := s.magentic
	switch {
	case !g.planned && len(g.task) == 0:
		return AppendStep(FailedEvent(errors.New(magenticNeedsTask)))
	case !g.planned:
		return Step{Kind: StepMagentic, Magentic: magenticPlan}
	case g.rounds > s.MaxRound:
		return Step{Kind: StepMagentic, Magentic: magenticFinal}
	}
	return Step{Kind: StepMagentic, Magentic: magenticInstruct}
}

// magenticNeedsTask is why a magentic_one run without a task is refused
// (AgentChat's orchestrator fails such a run with a bare assertion).
const magenticNeedsTask = "a magentic_one run needs a task: its orchestrator plans for one"

// askFunc makes one model call of the orchestrator: index is its replay
// position, ledger asks for a progress ledger (LedgerEntry structured
// output).
type askFunc func(msgs []chat.ModelMessage, ledger bool, index int) (*chat.ModelResponse, error)

// MagenticEvents does a stepMagentic: the orchestrator's model calls,
// through ask, and the events that record them. An error is the run's
// failure (a progress ledger AgentChat would not accept, or a model call
// that failed).
func (s *State) MagenticEvents(st Step, ask askFunc) ([]chat.Event, error) {
	g := s.magentic
	sel := s.Spec.SpeakerSelection
	var (
		calls int
		usage chat.Usage
	)
	call := func(msgs []chat.ModelMessage, ledger bool) (string, error) {
		resp, err := ask(msgs, ledger, g.calls+calls)
		if err != nil {
			return "", err
		}
		calls++
		usage = usage.Add(resp.Usage)
		return resp.Content, nil
	}
	message := func(content string, md chat.MagenticData) chat.Event {
		md.Calls, md.Usage = calls, usage
		return chat.WithData(chat.Event{Type: chat.EventMessage, Role: chat.RoleAssistant, Name: spec.MagenticOrchestrator, Content: content},
			chat.MessageData{Kind: kindOrchestrator, Magentic: &md})
	}
	task, team := strings.Join(g.task, " "), s.magenticTeam()
	final := func(ledger string, reason chat.StopReason, detail string) ([]chat.Event, error) {
		prompt := magenticFinalAnswerPrompt
		if p := sel.FinalAnswerPrompt; p != nil {
			prompt = *p
		}
		if prompt == magenticFinalAnswerPrompt {
			prompt = fillPrompt(prompt, "{task}", task)
		}
		answer, err := call(append(s.orchestratorThread(), orchestratorAsks(prompt)), false)
		if err != nil {
			return nil, err
		}
		return []chat.Event{message(answer, chat.MagenticData{Step: magenticFinal, Ledger: ledger}), terminalEvent(chat.StatusCompleted, reason, detail, "")}, nil
	}
	switch st.Magentic {
	case magenticPlan:
		conv := []chat.ModelMessage{orchestratorAsks(fillPrompt(magenticFactsPrompt, "{task}", task))}
		facts, err := call(conv, false)
		if err != nil {
			return nil, err
		}
		conv = append(conv, chat.ModelMessage{Role: chat.RoleAssistant, Content: facts}, orchestratorAsks(fillPrompt(magenticPlanPrompt, "{team}", team)))
		plan, err := call(conv, false)
		if err != nil {
			return nil, err
		}
		return []chat.Event{message(taskLedger(task, team, facts, plan), chat.MagenticData{Step: magenticPlan, Facts: facts, Plan: plan})}, nil
	case magenticFinal:
		return final("", chat.StopMaxRound, maxRoundsText)
	}
	thread := s.orchestratorThread()
	names := AgentNames(s.Spec)
	prompt := fillPrompt(magenticProgressPrompt, "{task}", task, "{team}", team, "{names}", strings.Join(names, ", "))
	reply, err := call(append(slices.Clip(thread), orchestratorAsks(prompt)), true)
	if err != nil {
		return nil, err
	}
	l, err := s.readLedger(reply)
	if err != nil {
		return nil, err
	}
	if l.satisfied {
		return final(reply, chat.StopRequestSatisfied, l.reason)
	}
	if g.stallsAfter(l) >= DerefOr(sel.MaxStalls, 3) {
		// Re-plan: the facts updated, then a new plan, in one
		// conversation after the thread.
		conv := append(slices.Clip(thread), orchestratorAsks(fillPrompt(magenticFactsUpdatePrompt, "{task}", task, "{facts}", g.facts)))
		facts, err := call(conv, false)
		if err != nil {
			return nil, err
		}
		conv = append(conv, chat.ModelMessage{Role: chat.RoleAssistant, Content: facts}, orchestratorAsks(fillPrompt(magenticPlanUpdatePrompt, "{team}", team)))
		plan, err := call(conv, false)
		if err != nil {
			return nil, err
		}
		return []chat.Event{message(taskLedger(task, team, facts, plan), chat.MagenticData{Step: magenticReplan, Facts: facts, Plan: plan, Ledger: reply})}, nil
	}
	return []chat.Event{
		message(l.instruction, chat.MagenticData{Step: magenticInstruct, Ledger: reply}),
		SelectedEvent(chat.Selection{Agent: l.next, Method: spec.SelectMagentic, Candidates: names, Turn: s.nextTurn()}),
	}, nil
}

// orchestratorAsks is one of the orchestrator's prompts as its model
// request holds it: a user message with the orchestrator's name.
func orchestratorAsks(prompt string) chat.ModelMessage {
	return chat.ModelMessage{Role: chat.RoleUser, Name: spec.MagenticOrchestrator, Content: prompt}
}

// taskLedger is the task ledger message.
func taskLedger(task, team, facts, plan string) string {
	return fillPrompt(magenticLedgerPrompt, "{task}", task, "{team}", team, "{facts}", facts, "{plan}", plan)
}

// fillPrompt fills a prompt's format fields in one pass, as Python's
// str.format does: a value is never filled in again.
func fillPrompt(prompt string, fields ...string) string {
	return strings.NewReplacer(fields...).Replace(prompt)
}

// defaultAgentDescription is AgentChat's AssistantAgent description when
// none is given.
const defaultAgentDescription = "An agent that provides assistance with ability to use tools."

// magenticTeam is the team as the orchestrator describes it: a line per
// agent, "name: description" with whitespace runs made one space.
func (s *State) magenticTeam() string {
	lines := make([]string, 0, len(s.Spec.Agents))
	for _, a := range s.Spec.Agents {
		desc := a.Description
		if desc == "" {
			desc = defaultAgentDescription
		}
		lines = append(lines, strings.Join(strings.Fields(a.Name+": "+desc), " "))
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// orchestratorThread is the orchestrator's view of the thread since its
// latest task ledger (AgentChat's _thread_to_context): its own messages as
// assistant messages, and the message each agent's turn ended with as a
// user message with the agent's name (their tool calls and results are
// not in its thread).
func (s *State) orchestratorThread() []chat.ModelMessage {
	var out []chat.ModelMessage
	for i := s.magentic.start; i < len(s.Msgs); i++ {
		m, d := &s.Msgs[i], &s.Meta[i]
		switch {
		case d.Kind == kindOrchestrator:
			out = append(out, chat.ModelMessage{Role: chat.RoleAssistant, Content: m.Content})
		case d.Turn > 0 && d.End && isChatMessage(*m):
			out = append(out, chat.ModelMessage{Role: chat.RoleUser, Name: m.Name, Content: sharedText(*m)})
		}
	}
	return out
}

// magenticView is the part of the log an agent of a magentic_one chat
// sees: AgentChat resets its agents when the orchestrator (re-)plans and
// never gives them the task, so their thread starts at the latest task
// ledger.
func (s *State) magenticView() ([]chat.Message, []chat.MessageData) {
	if s.magentic == nil {
		return s.Msgs, s.Meta
	}
	return s.Msgs[s.magentic.start:], s.Meta[s.magentic.start:]
}

// progressLedger is what the orchestrator takes from a progress ledger.
type progressLedger struct {
	satisfied, loop, progress bool
	next, instruction, reason string
}

// fencedJSON is autogen_core's extract_json_from_str pattern: code blocks
// (an optional language, a newline, then anything up to the closing
// fence).
var fencedJSON = regexp.MustCompile("```(?:\\s*([\\w+\\-]+))?\\n([\\s\\S]*?)```")

// readLedger reads a progress ledger reply as AgentChat 0.7.5 does with a
// model that has structured output. The OpenAI client first validates the
// reply as a LedgerEntry (pydantic, lax: a boolean answer may also be
// 0/1 or a word such as "yes"); a reply that does not validate fails the
// run. The orchestrator then reads the reply again as JSON (from its
// code blocks if it has any: exactly one object) and takes the answers as
// they stand there, each boolean by Python's truth value. With one agent
// the next speaker is that agent; an unsatisfied ledger naming no agent
// fails the run.
func (s *State) readLedger(reply string) (*progressLedger, error) {
	if err := validateLedgerEntry(reply); err != nil {
		return nil, fmt.Errorf("the magentic_one orchestrator's progress ledger is not a valid LedgerEntry: %w", err)
	}
	var objs []any
	if ms := fencedJSON.FindAllStringSubmatch(reply, -1); len(ms) > 0 {
		for _, m := range ms {
			if lang := strings.TrimSpace(m[1]); lang != "" && !strings.EqualFold(lang, "json") {
				return nil, fmt.Errorf("the magentic_one orchestrator's progress ledger holds a %s code block, not JSON", lang)
			}
			var v any
			if err := json.Unmarshal([]byte(m[2]), &v); err != nil {
				return nil, fmt.Errorf("the magentic_one orchestrator's progress ledger: %w", err)
			}
			objs = append(objs, v)
		}
	} else {
		var v any
		_ = json.Unmarshal([]byte(reply), &v) // validateLedgerEntry parsed it
		objs = append(objs, v)
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("the magentic_one orchestrator's progress ledger holds %d JSON objects, not one", len(objs))
	}
	obj, _ := objs[0].(map[string]any)
	entry := func(key string) (any, bool) {
		e, ok := obj[key].(map[string]any)
		if !ok {
			return nil, false
		}
		_, hasReason := e["reason"]
		a, hasAnswer := e["answer"]
		return a, hasReason && hasAnswer
	}
	l := &progressLedger{}
	names := AgentNames(s.Spec)
	if len(names) == 1 {
		obj["next_speaker"] = map[string]any{"reason": "The team consists of only one agent.", "answer": names[0]}
	}
	keys := []string{"is_request_satisfied", "is_progress_being_made", "is_in_loop", "instruction_or_question", "next_speaker"}
	for _, k := range keys {
		if _, ok := entry(k); !ok {
			return nil, fmt.Errorf("the magentic_one orchestrator's progress ledger has no %s with a reason and an answer", k)
		}
	}
	sat, _ := entry("is_request_satisfied")
	loop, _ := entry("is_in_loop")
	progress, _ := entry("is_progress_being_made")
	next, _ := entry("next_speaker")
	instruction, _ := entry("instruction_or_question")
	l.satisfied, l.loop, l.progress = pyTruth(sat), pyTruth(loop), pyTruth(progress)
	l.next, _ = next.(string)
	l.instruction, _ = instruction.(string)
	l.reason, _ = obj["is_request_satisfied"].(map[string]any)["reason"].(string)
	if !l.satisfied && !slices.Contains(names, l.next) {
		return nil, fmt.Errorf("the magentic_one orchestrator's progress ledger names no agent to speak next: %v (agents: %s)", next, strings.Join(names, ", "))
	}
	if _, ok := instruction.(string); !ok && !l.satisfied {
		return nil, fmt.Errorf("the magentic_one orchestrator's progress ledger gives no instruction text")
	}
	return l, nil
}

// pyTruth is a JSON value's truth in Python.
func pyTruth(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		return x != ""
	case float64:
		return x != 0
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return false
}

// validateLedgerEntry checks a reply as pydantic validates the JSON of a
// LedgerEntry (lax mode): an object with each of the five entries, each an
// object with a string reason and an answer, a string for next_speaker
// and instruction_or_question, a boolean (or 0, 1, or one of pydantic's
// words for true and false) for the others. Other members are ignored.
func validateLedgerEntry(reply string) error {
	if !json.Valid([]byte(reply)) {
		return errors.New("invalid JSON")
	}
	dec := json.NewDecoder(strings.NewReader(reply))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return errors.New("not a JSON object")
	}
	for _, k := range []string{"is_request_satisfied", "is_in_loop", "is_progress_being_made", "next_speaker", "instruction_or_question"} {
		e, ok := obj[k].(map[string]any)
		if !ok {
			return fmt.Errorf("%s: missing, or not an object", k)
		}
		if _, ok := e["reason"].(string); !ok {
			return fmt.Errorf("%s.reason: missing, or not a string", k)
		}
		a, ok := e["answer"]
		if !ok {
			return fmt.Errorf("%s.answer: missing", k)
		}
		if k == "next_speaker" || k == "instruction_or_question" {
			if _, ok := a.(string); !ok {
				return fmt.Errorf("%s.answer: not a string", k)
			}
		} else if !laxBool(a) {
			return fmt.Errorf("%s.answer: not a boolean", k)
		}
	}
	return nil
}

// laxBool reports whether pydantic's lax mode reads v as a boolean.
func laxBool(v any) bool {
	switch x := v.(type) {
	case bool:
		return true
	case json.Number:
		f, err := x.Float64()
		return err == nil && (f == 0 || f == 1)
	case string:
		switch strings.ToLower(x) {
		case "0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes":
			return true
		}
	}
	return false
}
