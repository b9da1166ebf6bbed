package spec

// checkTeamAgent checks a team agent (AgentChat's SocietyOfMindAgent): its
// model, which answers for the team, and its inner team.
func (v *validator) checkTeamAgent(p string, a *Agent) {
	if a.Model == nil {
		v.add(p+"/model", "a team agent needs a model: it answers for its team")
	} else {
		v.checkModelRef(p+"/model", a.Model)
	}
	if a.Team == nil || len(a.Team.Agents) == 0 {
		v.add(p+"/team/agents", "a team agent needs an inner team of at least one agent")
	}
}
