package a2a

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/chat"
)

// Card is the agent card of a tenant's saved team at its latest version;
// endpoint is the team's JSON-RPC URL (see EndpointURL). An unknown team
// is chat.ErrTeamNotFound.
func (h *Handler) Card(ctx context.Context, tenant, team, endpoint string) (*AgentCard, error) {
	t, err := h.chats.GetTeam(ctx, tenant, team, 0)
	if err != nil {
		h.metrics.calls.WithLabelValues("AgentCard", cardOutcome(err)).Inc()
		return nil, err
	}
	h.metrics.calls.WithLabelValues("AgentCard", "ok").Inc()
	c := h.card(t, endpoint)
	return &c, nil
}

// card is a team's agent card; endpoint is its JSON-RPC URL.
func (h *Handler) card(t *chat.Team, endpoint string) AgentCard {
	desc := teamDescription(t.Spec)
	c := AgentCard{
		Name: t.Name, Description: desc, Version: strconv.Itoa(t.Version),
		SupportedInterfaces: []AgentInterface{{URL: endpoint, ProtocolBinding: protocolBindingJSONRPC, ProtocolVersion: protocolVersion}},
		Provider:            &AgentProvider{Organization: "agentd", URL: strings.TrimSuffix(endpoint, "/a2a/"+url.PathEscape(t.Name))},
		Capabilities:        AgentCapabilities{Streaming: true, PushNotifications: true},
		DefaultInputModes:   []string{contentTypeText, contentTypeJSON},
		DefaultOutputModes:  []string{contentTypeText},
		Skills: []AgentSkill{{ID: t.Name, Name: t.Name, Description: desc, Tags: []string{"team", "agentd"},
			InputModes: []string{contentTypeText, contentTypeJSON}, OutputModes: []string{contentTypeText}}},
	}
	if h.cfg.AuthRequired {
		c.SecuritySchemes = map[string]SecurityScheme{bearerSchemeName: {HTTPAuthSecurityScheme: &HTTPAuthSecurityScheme{
			Scheme: "Bearer", Description: "an agentd API key"}}}
		c.SecurityRequirements = []SecurityRequirement{{Schemes: map[string]StringList{bearerSchemeName: {List: []string{}}}}}
	}
	return c
}

// teamDescription describes a team for its card: the string its spec's
// metadata holds as "description", else its agents and what they do.
func teamDescription(specJSON json.RawMessage) string {
	var sp struct {
		Metadata struct {
			Description any `json:"description"`
		} `json:"metadata"`
		Agents []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"agents"`
	}
	_ = json.Unmarshal(specJSON, &sp)
	if d, ok := sp.Metadata.Description.(string); ok && d != "" {
		return d
	}
	if len(sp.Agents) == 0 {
		return defaultAgentDescription
	}
	parts := make([]string, len(sp.Agents))
	for i, a := range sp.Agents {
		parts[i] = a.Name
		if a.Description != "" {
			parts[i] += " (" + strings.TrimSuffix(a.Description, ".") + ")"
		}
	}
	return defaultAgentDescription + " Agents: " + strings.Join(parts, ", ") + "."
}

// EndpointURL is the absolute URL of a team's A2A endpoint as the client
// reached this server: its Host, and https when the request came over TLS
// or a proxy in front says so (X-Forwarded-Proto).
func EndpointURL(r *http.Request, team string) string {
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/a2a/" + url.PathEscape(team)
}

func cardOutcome(err error) string {
	if errorsIsNotFound(err) {
		return "not_found"
	}
	return internalOutcome
}
