package server

import (
	"github.com/agentd/agentd/internal/api"
	"github.com/agentd/agentd/internal/component"
)

// newDryRunResponse answers a request with dry_run=true: an editor or a
// CI job checks a spec with it without creating anything.
func newDryRunResponse(spec []byte, warnings []component.Warning) api.DryRun {
	if warnings == nil {
		warnings = []component.Warning{}
	}
	return api.DryRun{Spec: spec, Warnings: warnings}
}
