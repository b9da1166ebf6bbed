package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/agentd/agentd/internal/api"
	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/component"
	"github.com/agentd/agentd/internal/spec"
)

// The team form of POST /v1/chats ({"task", "team": <AgentChat team
// component>, ...}) and GET /v1/chats/{id}/team. The translation itself is
// internal/component's; this file only wires it into the chats resource.

// teamForm is a create request in the team form, translated.
type teamForm struct {
	req *component.Request
}

// parseTeamForm translates a create body in the team form into the spec body
// the runtime creates the chat from. It returns body unchanged and a nil form
// for a native spec.
func parseTeamForm(body []byte, eps component.Endpoints) ([]byte, *teamForm, error) {
	req, err := component.ParseRequest(body, eps)
	if err != nil || req == nil {
		return body, nil, err
	}
	return req.Spec, &teamForm{req: req}, nil
}

// mapError points the spec problems of a chat made from a team at the
// components they came from.
func (f *teamForm) mapError(err error) error {
	var ve *spec.ValidationError
	if f == nil || !errors.As(err, &ve) {
		return err
	}
	return &spec.ValidationError{Problems: f.req.Translation.MapProblems(ve.Problems)}
}

// response is the body answering a create: the chat object, with warnings
// when it came from a team file.
func (f *teamForm) response(ch *chat.Chat, withSpec bool) (api.Chat, error) {
	resp, err := newChatResponse(ch, withSpec)
	if f != nil {
		resp.Warnings = f.warnings()
	}
	return resp, err
}

// warnings are the translation's warnings, never null; none for a native
// spec.
func (f *teamForm) warnings() []component.Warning {
	if f == nil || f.req.Translation.Warnings == nil {
		return []component.Warning{}
	}
	return f.req.Translation.Warnings
}

// team handles GET /v1/chats/{id}/team: the chat's team as an AgentChat
// component, or 422 listing what AgentChat cannot express.
func (c *chatsResource) team(w http.ResponseWriter, r *http.Request) {
	id, err := chatIDParam(r)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	ch, err := c.chats.Get(r.Context(), Tenant(r.Context()), id)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	spec, probs := spec.DecodeSpec(ch.Spec)
	if len(probs) > 0 {
		c.writeError(w, r, fmt.Errorf("decode stored spec of chat %s: %v", id, probs))
		return
	}
	team, probs := component.ToTeam(spec, c.cfg.ModelEndpoints)
	if len(probs) > 0 {
		c.writeError(w, r, &requestError{status: http.StatusUnprocessableEntity, kind: kindNotExpressible,
			detail:   fmt.Sprintf("the chat's team cannot be written as an AgentChat component: %d problem(s), see errors", len(probs)),
			problems: (probs)})
		return
	}
	c.writeJSON(w, r, http.StatusOK, team)
}

// kindNotExpressible is the problem kind of a chat whose spec uses what
// AgentChat has no equivalent for.
const kindNotExpressible = "not-expressible"
