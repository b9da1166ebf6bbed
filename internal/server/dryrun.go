package server

import (
	"encoding/json"

	"github.com/agentd/agentd/internal/component"
)

// dryRunResponse answers a request with dry_run=true (POST /v1/chats, PUT
// /v1/teams/{name}): the spec the request stands for, as the server would
// store it (a team file translated, a saved team resolved), and the
// warnings of a translated team file. An editor or a CI job checks a spec
// with it without creating anything.
type dryRunResponse struct {
	Spec     json.RawMessage     `json:"spec"`
	Warnings []component.Warning `json:"warnings"`
}

func newDryRunResponse(spec []byte, warnings []component.Warning) dryRunResponse {
	if warnings == nil {
		warnings = []component.Warning{}
	}
	return dryRunResponse{Spec: spec, Warnings: warnings}
}
