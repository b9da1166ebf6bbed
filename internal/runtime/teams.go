package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/spec/problem"
)

// Saved teams (docs/backend.md): versions put, read and listed, and a
// create request naming one (team_ref) made into the spec it stands for.

// teamNameRE is what a saved team may be called: no "@", which separates
// a team_ref's version, and nothing a URL path would need to escape.
var teamNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// ValidTeamName reports whether name can name a saved team.
func ValidTeamName(name string) bool { return teamNameRE.MatchString(name) }

// PutTeam stores team, a chat spec without a task (spec.DecodeDraft of
// the body), as the next version of the tenant's team name, unless it
// equals the latest version (created is then false and that version is
// returned).
func (r *Runtime) PutTeam(ctx context.Context, tenant, name string, team *spec.Draft) (*chat.Team, bool, error) {
	compact, err := r.CheckTeam(name, team)
	if err != nil {
		return nil, false, err
	}
	t, created, err := r.store.PutTeam(ctx, &chat.PutTeamParams{Tenant: tenant, Name: name, Spec: compact, Now: r.now()})
	if err != nil {
		return nil, false, err
	}
	if created {
		r.appMetrics.teams.Inc()
		r.log.Info("team version saved", "tenant", tenant, "team", name, "version", t.Version)
	}
	return t, created, nil
}

// CheckTeam validates a team version exactly as PutTeam does and returns
// the spec it would store (compacted), storing nothing: a dry run.
func (r *Runtime) CheckTeam(name string, team *spec.Draft) ([]byte, error) {
	if !ValidTeamName(name) {
		return nil, &spec.ValidationError{Problems: []spec.Problem{{Path: "name",
			Message: "a team name is 1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit"}}}
	}
	_, compact, probs := team.CheckTeam(r.limits, r.env())
	if len(probs) > 0 {
		return nil, &spec.ValidationError{Problems: probs}
	}
	return compact, nil
}

// GetTeam returns a version of a tenant's team (the latest for 0).
func (r *Runtime) GetTeam(ctx context.Context, tenant, name string, version int) (*chat.Team, error) {
	return r.store.GetTeam(ctx, tenant, name, version)
}

// ListTeams returns the latest version of each of the tenant's teams.
func (r *Runtime) ListTeams(ctx context.Context, p *chat.ListTeamsParams) ([]*chat.Team, string, error) {
	return r.store.ListTeams(ctx, p)
}

// teamRefKey is the create-request field that names a saved team.
const teamRefKey = "team_ref"

// teamRefOverrides are the fields a request with team_ref may set besides
// the task: everything else comes from the saved team. messages, the
// conversation before the task, is how a client that keeps its own
// history (the OpenAI-compatible API's chat completions) runs a team on it.
// context_variables are merged over the team's (teamRefContextKey), so a
// client that brings its own state (AG-UI's) keeps the team's defaults.
var teamRefOverrides = map[string]bool{"task": true, "name": true, "metadata": true, "max_round": true, "webhook": true, "messages": true,
	teamRefContextKey: true}

// teamRefContextKey is the override merged key by key into the team's.
const teamRefContextKey = "context_variables"

// resolveTeamRef turns a create request with team_ref into the spec it
// stands for: the saved team's spec with the request's task and its
// overrides of name, metadata, max_round, webhook, messages and
// context_variables (merged over the team's). It returns body
// unchanged and a nil ref for a request without team_ref.
func (r *Runtime) resolveTeamRef(ctx context.Context, tenant string, body []byte) ([]byte, *chat.TeamRef, error) {
	if !bytes.Contains(body, []byte(teamRefKey)) && !bytes.Contains(body, []byte(`\u`)) {
		return body, nil, nil // nearly every request: no decode just to find no team_ref
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		return body, nil, nil // not an object: the spec decoder says so
	}
	raw, ok := top[teamRefKey]
	if !ok {
		return body, nil, nil
	}
	var probs problem.List
	for k := range top {
		if k != teamRefKey && !teamRefOverrides[k] {
			probs.Add(problem.Key("", k), "comes from the saved team: a request with team_ref sets only task, name, metadata, max_round, webhook, messages and context_variables")
		}
	}
	var ref string
	name, version := "", 0
	if err := json.Unmarshal(raw, &ref); err != nil {
		probs.Add("/team_ref", `must be a string: "name" or "name@version"`)
	} else {
		var perr string
		if name, version, perr = parseTeamRef(ref); perr != "" {
			probs.Add("/team_ref", "%s", perr)
		}
	}
	if probs.Len() > 0 {
		return nil, nil, &spec.ValidationError{Problems: probs.Sorted()}
	}
	t, err := r.store.GetTeam(ctx, tenant, name, version)
	if errors.Is(err, chat.ErrTeamNotFound) {
		msg := fmt.Sprintf("no saved team %q", name)
		if version > 0 {
			msg = fmt.Sprintf("no version %d of the saved team %q", version, name)
		}
		return nil, nil, &spec.ValidationError{Problems: []spec.Problem{{Path: "/team_ref", Message: msg}}}
	}
	if err != nil {
		return nil, nil, err
	}
	var merged map[string]json.RawMessage
	if err := json.Unmarshal(t.Spec, &merged); err != nil {
		return nil, nil, fmt.Errorf("decode saved team %q version %d: %w", name, t.Version, err)
	}
	for k := range teamRefOverrides {
		if v, ok := top[k]; ok {
			merged[k] = v
		}
	}
	if v, ok := top[teamRefContextKey]; ok {
		merged[teamRefContextKey] = mergeObjects(t.Spec, v)
	}
	out, err := json.Marshal(merged)
	if err != nil {
		return nil, nil, fmt.Errorf("merge the request into team %q: %w", name, err)
	}
	return out, &chat.TeamRef{Name: t.Name, Version: t.Version}, nil
}

// mergeObjects is the team spec's context_variables with the request's
// set over them, key by key; a request's value that is not an object is
// returned as it is, for the spec's check to refuse.
func mergeObjects(teamSpec []byte, req json.RawMessage) json.RawMessage {
	var over map[string]json.RawMessage
	if json.Unmarshal(req, &over) != nil || over == nil {
		return req
	}
	var team struct {
		Vars map[string]json.RawMessage `json:"context_variables"`
	}
	if json.Unmarshal(teamSpec, &team) != nil || len(team.Vars) == 0 {
		return req
	}
	maps.Copy(team.Vars, over)
	out, err := json.Marshal(team.Vars)
	if err != nil {
		return req
	}
	return out
}

// parseTeamRef parses "name" or "name@version"; msg says what is wrong.
func parseTeamRef(ref string) (name string, version int, msg string) {
	name, v, hasVersion := strings.Cut(ref, "@")
	if !ValidTeamName(name) {
		return "", 0, `must be "name" or "name@version" with the name of a saved team`
	}
	if hasVersion {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || strconv.Itoa(n) != v {
			return "", 0, "the version after @ must be a whole number from 1"
		}
		version = n
	}
	return name, version, ""
}

// hashRequest is the SHA-256 of a request body, compacted so that
// whitespace does not make two equal requests differ.
func hashRequest(body []byte) [32]byte {
	var b bytes.Buffer
	if err := json.Compact(&b, body); err != nil {
		return sha256.Sum256(body)
	}
	return sha256.Sum256(b.Bytes())
}
