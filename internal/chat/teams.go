package chat

import (
	"encoding/json"
	"time"
)

// Saved teams: a tenant's named, versioned chat specs without a task.

// TeamRef names one version of a saved team: what a chat created from it
// records.
type TeamRef struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
}

// Team is one immutable version of a saved team: a chat spec without a task.
type Team struct {
	Tenant    string
	Name      string
	Version   int
	Spec      json.RawMessage
	CreatedAt time.Time
}

// PutTeamParams are the arguments of Store.PutTeam.
type PutTeamParams struct {
	Tenant string
	Name   string
	Spec   json.RawMessage
	Now    time.Time
}

// ListTeamsParams are the arguments of Store.ListTeams.
type ListTeamsParams struct {
	Tenant string
	Limit  int
	Cursor string
}
