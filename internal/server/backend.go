package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/api"
	"github.com/agentd/agentd/internal/runtime"

	"github.com/go-chi/chi/v5"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/component"
	"github.com/agentd/agentd/internal/spec"
)

// The handlers of agentd as an application backend (docs/backend.md): metadata search and changes, erasure, webhook
// deliveries, saved teams.

// Backend is what these handlers need of the chat runtime; *runtime.Runtime
// satisfies it.
type Backend interface {
	// PatchMetadata merges a patch into a chat's metadata (null removes a key).
	PatchMetadata(ctx context.Context, tenant, id string, patch map[string]json.RawMessage) (*chat.Chat, error)
	// PatchContext merges a change into a chat's context variables (null
	// removes one), between runs only: chat.ErrRunActive during one.
	PatchContext(ctx context.Context, tenant, id string, change json.RawMessage) (*chat.Chat, error)
	// Erase removes an ended chat; chat.ErrChatActive if it has not ended.
	Erase(ctx context.Context, tenant, id string) error
	// Deliveries lists the webhook deliveries of a chat's events after a seq.
	Deliveries(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.DeliveryRecord, error)
	// PutTeam stores a spec without a task (its body decoded by
	// spec.DecodeDraft) as the next version of a team.
	PutTeam(ctx context.Context, tenant, name string, team *spec.Draft) (*chat.Team, bool, error)
	// CheckTeam validates a team version as PutTeam does and returns the
	// spec it would store, storing nothing.
	CheckTeam(name string, team *spec.Draft) ([]byte, error)
	// GetTeam returns a version of a team (the latest for 0).
	GetTeam(ctx context.Context, tenant, name string, version int) (*chat.Team, error)
	// ListTeams returns the latest version of each team.
	ListTeams(ctx context.Context, p *chat.ListTeamsParams) ([]*chat.Team, string, error)
}

// Limits of the list filters.
const (
	maxMetadataFilters    = 16
	maxFilterValueBytes   = 1024
	metadataFilterPrefix  = "metadata."
	defaultDeliveryLimit  = 100
	defaultTeamLimit      = 50
	kindChatNotEnded      = "chat-not-ended"
	kindTeamNotFound      = "team-not-found"
	errTeamNotFoundDetail = "team not found"
)

// listFilters reads the filters of GET /v1/chats into p: metadata.KEY=VALUE
// (every one must hold), name, team, created_after and created_before.
func listFilters(q *queryParser, p *chat.ListChatsParams) {
	for key, values := range q.q {
		k, ok := strings.CutPrefix(key, metadataFilterPrefix)
		if !ok {
			continue
		}
		switch {
		case k == "":
			q.problem(key, "name the metadata key: metadata.KEY=VALUE")
		case len(k) > runtime.MaxMetadataKeyBytes:
			q.problem(key, fmt.Sprintf("a metadata key must be at most %d bytes", runtime.MaxMetadataKeyBytes))
		}
		for _, v := range values {
			if len(v) > maxFilterValueBytes {
				q.problem(key, fmt.Sprintf("must be at most %d bytes", maxFilterValueBytes))
			}
			p.Metadata = append(p.Metadata, chat.MetadataMatch{Key: k, Value: v})
		}
	}
	if len(p.Metadata) > maxMetadataFilters {
		q.problem("metadata", fmt.Sprintf("at most %d metadata filters", maxMetadataFilters))
	}
	// Map order is random: the store's query should not be.
	sortMatches(p.Metadata)
	p.Name = q.q.Get("name")
	if len(p.Name) > 200 {
		q.problem("name", "must be at most 200 characters")
	}
	p.Team = q.q.Get("team")
	if p.Team != "" && !runtime.ValidTeamName(p.Team) {
		q.problem("team", "is not a team name")
	}
	p.CreatedAfter = q.time("created_after")
	p.CreatedBefore = q.time("created_before")
}

func sortMatches(ms []chat.MetadataMatch) {
	slices.SortFunc(ms, func(a, b chat.MetadataMatch) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.Value, b.Value))
	})
}

// time returns an RFC 3339 time parameter, nil when absent.
func (p *queryParser) time(name string) *time.Time {
	s := p.q.Get(name)
	if s == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		p.problem(name, "must be an RFC 3339 time, e.g. 2026-01-02T15:04:05Z")
		return nil
	}
	return &t
}

// patchRequest is the body of PATCH /v1/chats/{id}.
type patchRequest struct {
	Metadata         map[string]json.RawMessage `json:"metadata"`
	ContextVariables json.RawMessage            `json:"context_variables"`
}

// patch handles PATCH /v1/chats/{id}: the metadata and the context
// variables are merged, a null value removes its key. The variables are
// changed first, and only between runs (409 during one): a refusal
// changes nothing.
func (c *chatsResource) patch(w http.ResponseWriter, r *http.Request) {
	id, withSpec, ok := c.chatParams(w, r)
	if !ok {
		return
	}
	body, err := readBody(w, r, c.cfg.MaxBodyBytes)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	var req patchRequest
	if err := decodeStrict(body, &req); err != nil {
		c.writeError(w, r, err)
		return
	}
	vars := req.ContextVariables != nil && string(req.ContextVariables) != "null"
	if req.Metadata == nil && !vars {
		c.writeError(w, r, &spec.ValidationError{Problems: []spec.Problem{{Path: "",
			Message: "give metadata and/or context_variables: an object of the keys to set, and to remove (null)"}}})
		return
	}
	var ch *chat.Chat
	if vars {
		if ch, err = c.chats.PatchContext(r.Context(), Tenant(r.Context()), id, req.ContextVariables); err != nil {
			c.writeError(w, r, err)
			return
		}
	}
	if req.Metadata != nil {
		if ch, err = c.chats.PatchMetadata(r.Context(), Tenant(r.Context()), id, req.Metadata); err != nil {
			c.writeError(w, r, err)
			return
		}
	}
	c.writeChat(w, r, http.StatusOK, ch, withSpec)
}

// erase handles DELETE /v1/chats/{id}: 204, and 404 for the chat from then
// on; 409 while it has not ended.
func (c *chatsResource) erase(w http.ResponseWriter, r *http.Request) {
	id, err := chatIDParam(r)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	if err := c.chats.Erase(r.Context(), Tenant(r.Context()), id); err != nil {
		c.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// deliveries handles GET /v1/chats/{id}/deliveries.
func (c *chatsResource) deliveries(w http.ResponseWriter, r *http.Request) {
	id, err := chatIDParam(r)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	q := newQueryParser(r)
	after := q.seq("after")
	limit := q.int("limit", defaultDeliveryLimit, 1, maxListLimit)
	if err := q.err(); err != nil {
		c.writeError(w, r, err)
		return
	}
	ds, err := c.chats.Deliveries(r.Context(), Tenant(r.Context()), id, after, int(limit))
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	resp := api.DeliveryList{Deliveries: make([]api.Delivery, len(ds))}
	for i, d := range ds {
		out := api.Delivery{WebhookID: d.WebhookID(), Seq: d.Seq, URL: d.URL, Event: d.Event, Status: d.Status,
			Attempts: d.Sent, LastAttemptBy: nullable(d.SentBy), LastError: nullable(d.LastError), CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt,
			DeliveredAt: d.DeliveredAt}
		if d.LastStatusCode != 0 {
			out.LastStatusCode = &d.LastStatusCode
		}
		if d.Status == chat.DeliveryPending {
			out.NextAttemptAt = &d.NextAttemptAt
		}
		resp.Deliveries[i] = out
	}
	c.writeJSON(w, r, http.StatusOK, resp)
}

// teamsResource serves /v1/teams.
type teamsResource struct {
	responder
	cfg   Config
	chats Chats
	// saved is told of every new team version (the MCP tools follow).
	saved func(ctx context.Context, tenant string)
}

// Routes returns the router of the teams resource, to be mounted at
// /v1/teams behind authentication.
func (t *teamsResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Get("/", t.list)
	r.Put("/{name}", t.put)
	r.Get("/{name}", t.get)
	r.Get("/{name}/versions/{version}", t.get)
	return r
}

func newTeamResponse(tm *chat.Team, withSpec bool) api.Team {
	out := api.Team{Name: tm.Name, Version: tm.Version, CreatedAt: tm.CreatedAt}
	if withSpec {
		out.Spec = rawOrNull(tm.Spec)
	}
	return out
}

var errTeamNotFound = &requestError{status: http.StatusNotFound, kind: kindTeamNotFound, detail: errTeamNotFoundDetail}

// put handles PUT /v1/teams/{name}: 201 with a new version, 200 when the
// body is the latest version's; with dry_run=true, 200 with the spec it
// would store, storing nothing.
func (t *teamsResource) put(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	q := newQueryParser(r)
	dryRun := q.bool("dry_run")
	if err := q.err(); err != nil {
		t.writeError(w, r, err)
		return
	}
	body, err := readBody(w, r, t.cfg.MaxBodyBytes)
	if err != nil {
		t.writeError(w, r, err)
		return
	}
	if err := checkOneJSONValue(body); err != nil {
		t.writeError(w, r, err)
		return
	}
	specBody, tr, prefix, err := teamSpec(body, t.cfg.ModelEndpoints)
	if err != nil {
		t.writeError(w, r, err)
		return
	}
	mapErr := func(err error) error {
		var ve *spec.ValidationError
		if tr != nil && errors.As(err, &ve) {
			return &spec.ValidationError{Problems: stripPrefix(tr.MapProblems(ve.Problems), prefix)}
		}
		return err
	}
	var warnings []component.Warning
	if tr != nil {
		warnings = stripWarnings(tr.Warnings, prefix)
	}
	if dryRun {
		checked, err := t.chats.CheckTeam(name, spec.DecodeDraft(specBody))
		if err != nil {
			t.writeError(w, r, mapErr(err))
			return
		}
		t.writeJSON(w, r, http.StatusOK, newDryRunResponse(checked, warnings))
		return
	}
	tm, created, err := t.chats.PutTeam(r.Context(), Tenant(r.Context()), name, spec.DecodeDraft(specBody))
	if err != nil {
		t.writeError(w, r, mapErr(err))
		return
	}
	if created && t.saved != nil {
		t.saved(r.Context(), Tenant(r.Context()))
	}
	resp := newTeamResponse(tm, true)
	resp.Warnings = warnings
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/teams/"+tm.Name+"/versions/"+strconv.Itoa(tm.Version))
	}
	t.writeJSON(w, r, status, resp)
}

// teamSpec returns the spec a PUT /v1/teams body stands for: the body
// itself (a spec without task), or the translation of an AgentChat team
// component, given alone or as {"team": …} with spec options beside it.
// For a component alone, problems name paths in the body, not under
// /team: prefix is what to strip. eps maps the component's model clients
// onto the server's endpoints.
func teamSpec(body []byte, eps component.Endpoints) ([]byte, *component.Translation, string, error) {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return body, nil, "", nil // the spec decoder says what is wrong
	}
	prefix := ""
	if _, ok := top["component_type"]; ok {
		wrapped, err := json.Marshal(map[string]json.RawMessage{"team": body})
		if err != nil {
			return nil, nil, "", err
		}
		body, prefix = wrapped, "/team"
	}
	req, err := component.ParseRequest(body, eps)
	var ve *spec.ValidationError
	if errors.As(err, &ve) {
		return nil, nil, "", &spec.ValidationError{Problems: stripPrefix(ve.Problems, prefix)}
	}
	if err != nil || req == nil {
		return body, nil, "", err
	}
	return req.Spec, req.Translation, prefix, nil
}

func stripPrefix(ps []spec.Problem, prefix string) []spec.Problem {
	if prefix == "" {
		return ps
	}
	out := make([]spec.Problem, len(ps))
	for i, p := range ps {
		if rest, ok := strings.CutPrefix(p.Path, prefix); ok && (rest == "" || rest[0] == '/') {
			p.Path = rest
		}
		out[i] = p
	}
	return out
}

func stripWarnings(ws []component.Warning, prefix string) []component.Warning {
	out := make([]component.Warning, len(ws))
	for i, w := range ws {
		if rest, ok := strings.CutPrefix(w.Path, prefix); ok && prefix != "" && (rest == "" || rest[0] == '/') {
			w.Path = rest
		}
		out[i] = w
	}
	return out
}

// get handles GET /v1/teams/{name} (the latest version) and
// /v1/teams/{name}/versions/{version}.
func (t *teamsResource) get(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	version := 0
	if v := chi.URLParam(r, "version"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || strconv.Itoa(n) != v {
			t.writeError(w, r, errTeamNotFound)
			return
		}
		version = n
	}
	if !runtime.ValidTeamName(name) {
		t.writeError(w, r, errTeamNotFound)
		return
	}
	tm, err := t.chats.GetTeam(r.Context(), Tenant(r.Context()), name, version)
	if err != nil {
		t.writeError(w, r, err)
		return
	}
	t.writeJSON(w, r, http.StatusOK, newTeamResponse(tm, true))
}

// list handles GET /v1/teams: the latest version of each team, by name.
func (t *teamsResource) list(w http.ResponseWriter, r *http.Request) {
	q := newQueryParser(r)
	limit := q.int("limit", defaultTeamLimit, 1, maxListLimit)
	withSpec := q.includeSpec()
	if err := q.err(); err != nil {
		t.writeError(w, r, err)
		return
	}
	ts, next, err := t.chats.ListTeams(r.Context(), &chat.ListTeamsParams{Tenant: Tenant(r.Context()), Limit: int(limit), Cursor: q.q.Get("cursor")})
	if err != nil {
		t.writeError(w, r, err)
		return
	}
	resp := api.TeamList{Teams: make([]api.Team, len(ts)), NextCursor: nullable(next)}
	for i, tm := range ts {
		resp.Teams[i] = newTeamResponse(tm, withSpec)
	}
	t.writeJSON(w, r, http.StatusOK, resp)
}

// streamGone reports, for a stream whose read found no new events, whether
// the chat is gone (erased): the stream then ends.
func (c *chatsResource) streamGone(ctx context.Context, tenant, id string) bool {
	_, err := c.chats.Progress(ctx, tenant, id)
	return errors.Is(err, chat.ErrNotFound)
}
