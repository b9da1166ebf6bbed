package spec

import "strconv"

// checkTeamAgent checks a team agent (AgentChat's SocietyOfMindAgent): its
// model, which answers for the team, its instruction and response prompt,
// the options of other agent types it has none of, and its inner team.
func (v *validator) checkTeamAgent(p string, a *Agent) {
	if v.inner {
		// The inner team runs inside one turn of the team agent; a team
		// within it would be a third level that AgentChat allows but no
		// one needs, and that agentd does not run.
		v.add(p+"/type", "a team agent cannot be in another team agent's inner team: put its agents into this inner team instead")
		return
	}
	if a.Model == nil {
		v.add(p+"/model", "a team agent needs a model: it answers for its team")
	} else {
		v.checkModelRef(p+"/model", a.Model)
	}
	for _, f := range []struct {
		name string
		text *string
	}{{"instruction", a.Instruction}, {"response_prompt", a.ResponsePrompt}} {
		if f.text != nil && (*f.text == "" || len(*f.text) > v.limits.MaxPromptBytes) {
			// AgentChat's team file reads an empty one as its default.
			v.add(p+"/"+f.name, "must be 1 to %d bytes; leave it out for AgentChat's default", v.limits.MaxPromptBytes)
		}
	}
	v.refuseTeamAgentOptions(p, a)
	if a.Team == nil {
		v.add(p+"/team", "a team agent needs a team: its agents, speaker_selection, termination and max_round")
		return
	}
	v.checkInnerTeam(p+"/team", a)
}

// checkTeamFields reports a team agent's fields on an agent of another
// type.
func (v *validator) checkTeamFields(p string, a *Agent) {
	if a.Type == AgentTeam {
		return
	}
	for _, f := range []struct {
		set  bool
		name string
	}{{a.Team != nil, "team"}, {a.Instruction != nil, "instruction"}, {a.ResponsePrompt != nil, "response_prompt"}} {
		if f.set {
			v.add(p+"/"+f.name, "only a team agent (type team) has %s", f.name)
		}
	}
}

// refuseTeamAgentOptions reports each option of the other agent types that
// a team agent has: it neither calls tools nor runs code nor takes human
// input; its inner team does the work and its model only answers. Options
// the agent checks report for every type (code_execution, output_schema,
// message_filter) are not repeated.
func (v *validator) refuseTeamAgentOptions(p string, a *Agent) {
	const why = "a team agent has no %s: %s"
	for _, o := range []struct {
		set        bool
		name, hint string
	}{
		{len(a.Tools) > 0, "tools", "give the tools to the agents of its inner team"},
		{len(a.Handoffs) > 0, "handoffs", "its reply is a text message; give handoffs to other agents of the chat"},
		{a.SystemMessage != nil, "system_message", "its model is given instruction and response_prompt around the inner team's messages"},
		{a.SystemMessageTemplate != nil, "system_message_template", "its model is given instruction and response_prompt around the inner team's messages"},
		{a.Context != nil, "context", "its model sees the inner team's messages of the turn, all of them (AgentChat's unbounded context)"},
		{a.ToolApproval != nil, "tool_approval", "it calls no tools"},
		{a.ReflectOnToolUse != nil, "reflect_on_tool_use", "it calls no tools"},
		{a.MaxToolIterations != nil, "max_tool_iterations", "it calls no tools"},
		{a.ToolCallSummaryFormat != nil, "tool_call_summary_format", "it calls no tools"},
		{a.HumanInputMode != "", "human_input_mode", "only a user_proxy takes human input"},
		{len(a.Functions) > 0, "functions", "only a user_proxy executes functions for others"},
		{a.MaxConsecutiveAutoReply != nil, "max_consecutive_auto_reply", "it is an option of a user_proxy"},
		{a.DefaultAutoReply != nil, "default_auto_reply", "it is an option of a user_proxy"},
		{a.CodeApproval != nil, "code_approval", "it runs no code"},
	} {
		if o.set {
			v.add(p+"/"+o.name, why, o.name, o.hint)
		}
	}
}

// checkInnerTeam checks a team agent's inner team as the chat's own agents,
// selection, termination and max_round are checked (a validator of the
// inner spec, its paths under the team), and what an inner team may not
// have: agents other than assistants, anything that waits for a client
// (nobody can answer inside a team: the inner run happens within one turn
// of the team agent), handoffs out of the team, and the manual and graph
// methods. Agent names are unique across the whole chat.
func (v *validator) checkInnerTeam(p string, a *Agent) {
	t := a.Team
	inner := v.spec.InnerSpec(a)
	w := &validator{limits: v.limits, providers: v.providers, env: v.env, spec: inner, agents: map[string]bool{}, inner: true}
	// Names taken elsewhere in the chat: every outer agent's, and the
	// inner agents' of the team agents before this one.
	taken := map[string]bool{}
	before := true
	for i := range v.spec.Agents {
		o := &v.spec.Agents[i]
		taken[o.Name] = true
		if o == a {
			before = false
		}
		if before && o.Type == AgentTeam && o.Team != nil {
			for _, ia := range o.Team.Agents {
				taken[ia.Name] = true
			}
		}
	}
	// Problems of the inner validator replaced by a more precise one.
	replaced := map[string]bool{}
	for i := range t.Agents {
		ia := &t.Agents[i]
		ap := "/agents/" + strconv.Itoa(i)
		if taken[ia.Name] && ia.Name != "" {
			v.add(p+ap+"/name", "duplicate agent name %q: agent names are unique across the chat, inner teams included", ia.Name)
			replaced[ap+"/name"] = true
		}
		if ia.Type == AgentUserProxy {
			v.add(p+ap+"/type", "an inner team's agents are assistants: nobody can answer a user_proxy inside a team, whose run happens within one turn of the team agent")
		}
		if ia.ToolApproval != nil && ia.ToolApproval.Mode != ApprovalNever {
			v.add(p+ap+"/tool_approval", "nobody can approve tool calls inside a team, whose run happens within one turn of the team agent: leave tool_approval out")
			replaced[ap+"/tool_approval"] = true
		}
		for j, ho := range ia.Handoffs {
			hp, h := ap+"/handoffs/"+strconv.Itoa(j), ho.Target
			switch {
			case h == UserName:
				v.add(p+hp, "an inner team hands off to no user: nobody can answer inside a team; its run ends by its termination, and the team agent answers")
				replaced[hp] = true
			case taken[h] && !w.agentNamed(h):
				v.add(p+hp, "%q is not in this inner team: an inner team's agents hand off to each other only (the team agent answers for them all)", h)
				replaced[hp] = true
			}
		}
	}
	w.checkAgents()
	if t.MaxRound != nil && (*t.MaxRound < 1 || *t.MaxRound > v.limits.MaxRound) {
		w.add("/max_round", "must be between 1 and %d (this server's limit)", v.limits.MaxRound)
	}
	switch m := inner.Method(); m {
	case SelectManual:
		w.add("/speaker_selection/method", "an inner team cannot use manual selection: it asks a client for each speaker, and nobody can answer inside a team; use round_robin, random, auto or swarm")
	case SelectGraph:
		w.add("/speaker_selection/method", "an inner team cannot use the graph method: agentd runs a graph's parallel turns only as the chat's own speaker selection; use round_robin, random, auto or swarm")
	}
	if inner.Method() != SelectGraph {
		w.checkSelection()
	}
	if t.Termination != nil {
		count := 0
		w.checkCondition("/termination", t.Termination, 1, &count)
	}
	for _, pr := range w.probs.Items() {
		if replaced[pr.Path] {
			continue
		}
		v.probs.Add(p+pr.Path, "%s", pr.Message)
	}
}
