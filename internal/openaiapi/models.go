package openaiapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/runtime"
)

// modelPrefix starts every model name: a saved team is the model
// "team:<name>", or "team:<name>@<version>" pinned to a version.
const modelPrefix = "team:"

// maxListedModels bounds the models list: teams are listed a page at a
// time from the store, and a tenant with more gets the first ones.
const maxListedModels = 1000

// modelObject is a model of the list, in the API's shape.
type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

// Models serves GET /openai/v1/models: the tenant's saved teams.
func (h *Handler) Models(w http.ResponseWriter, r *http.Request, tenant string) {
	list := modelList{Object: "list", Data: []modelObject{}}
	cursor := ""
	for len(list.Data) < maxListedModels {
		teams, next, err := h.rt.ListTeams(r.Context(), &chat.ListTeamsParams{Tenant: tenant, Limit: 100, Cursor: cursor})
		if err != nil {
			h.fail(w, r, err)
			return
		}
		for _, t := range teams {
			list.Data = append(list.Data, modelObject{ID: modelPrefix + t.Name, Object: "model", Created: t.CreatedAt.Unix(), OwnedBy: "agentd"})
		}
		if next == "" || len(teams) == 0 {
			break
		}
		cursor = next
	}
	h.writeJSON(w, r, list)
}

// teamModel is a model name read as a saved team.
type teamModel struct {
	name    string
	version int
}

// ref is the team_ref of a create request.
func (m teamModel) ref() string {
	if m.version > 0 {
		return m.name + "@" + strconv.Itoa(m.version)
	}
	return m.name
}

// parseModel reads "team:<name>[@<version>]"; anything else is the
// API's 404 for a model that does not exist.
func parseModel(model string) (teamModel, *Error) {
	rest, ok := strings.CutPrefix(model, modelPrefix)
	name, v, hasVersion := strings.Cut(rest, "@")
	m := teamModel{name: name}
	if hasVersion {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || strconv.Itoa(n) != v {
			ok = false
		}
		m.version = n
	}
	if !ok || !runtime.ValidTeamName(name) {
		return teamModel{}, modelNotFound(model)
	}
	return m, nil
}

// modelNotFound is the API's answer for an unknown model.
func modelNotFound(model string) *Error {
	return NewError(http.StatusNotFound, "model_not_found", "model",
		fmt.Sprintf("The model `%s` does not exist: models are saved teams, named team:<name> (GET /openai/v1/models lists them).", model))
}

// checkTeam makes sure the model names a saved team of the tenant.
func (h *Handler) checkTeam(ctx context.Context, tenant, model string) (teamModel, error) {
	m, e := parseModel(model)
	if e != nil {
		return m, e
	}
	if _, err := h.rt.GetTeam(ctx, tenant, m.name, m.version); err != nil {
		if errors.Is(err, chat.ErrTeamNotFound) {
			return m, modelNotFound(model)
		}
		return m, err
	}
	return m, nil
}
