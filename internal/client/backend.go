package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/agentd/agentd/internal/api"
)

// The client side of agentd as an application backend (docs/backend.md): erasing chats, changing their metadata,
// saved teams.

// Erase erases a chat that has ended (DELETE /v1/chats/{id}).
func (c *Client) Erase(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/chats/"+url.PathEscape(id), nil, nil, nil)
}

// Patch merges p into a chat's metadata and context variables (PATCH
// /v1/chats/{id}); a nil value removes its key. The server changes the
// variables only between runs (a 409 Problem during one).
func (c *Client) Patch(ctx context.Context, id string, p api.ChatPatch) (*Chat, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	var ch Chat
	return &ch, c.do(ctx, http.MethodPatch, "/v1/chats/"+url.PathEscape(id), body, &ch, &ch.Raw)
}

// Team is one version of a saved team. Raw is the JSON the server sent.
type Team struct {
	api.Team
	Raw json.RawMessage `json:"-"`
}

// TeamList is a page of teams.
type TeamList struct {
	api.TeamList
	Raw json.RawMessage `json:"-"`
}

// PutTeam saves body (a spec without a task, or an AgentChat team
// component) as the next version of the team name.
func (c *Client) PutTeam(ctx context.Context, name string, body []byte) (*Team, error) {
	var t Team
	return &t, c.do(ctx, http.MethodPut, "/v1/teams/"+url.PathEscape(name), body, &t, &t.Raw)
}

// GetTeam returns a version of a team, the latest for version 0.
func (c *Client) GetTeam(ctx context.Context, name string, version int) (*Team, error) {
	path := "/v1/teams/" + url.PathEscape(name)
	if version > 0 {
		path += "/versions/" + strconv.Itoa(version)
	}
	var t Team
	return &t, c.do(ctx, http.MethodGet, path, nil, &t, &t.Raw)
}

// ListTeams returns a page of the latest version of each team.
func (c *Client) ListTeams(ctx context.Context, limit int, cursor string) (*TeamList, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	path := "/v1/teams"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var l TeamList
	return &l, c.do(ctx, http.MethodGet, path, nil, &l, &l.Raw)
}
