package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/spec/problem"
)

// A chat's metadata changed by a client (docs/backend.md).

// Limits of metadata patches and list filters a client sends.
const (
	// MaxMetadataKeyBytes bounds a metadata key in a patch or a filter.
	MaxMetadataKeyBytes = 256
	// MaxMetadataPatchKeys bounds the keys of one patch.
	MaxMetadataPatchKeys = 100
)

// PatchMetadata merges patch into a chat's metadata: a key whose value is
// the JSON null is removed, any other value is set. It returns the chat as
// it is afterwards. The result is bounded like a spec's metadata.
func (r *Runtime) PatchMetadata(ctx context.Context, tenant, id string, patch map[string]json.RawMessage) (*chat.Chat, error) {
	var probs problem.List
	if len(patch) > MaxMetadataPatchKeys {
		probs.Add("/metadata", "must have at most %d keys", MaxMetadataPatchKeys)
	}
	for k, v := range patch {
		path := problem.Key("/metadata", k)
		switch {
		case k == "":
			probs.Add(path, "a metadata key must not be empty")
		case len(k) > MaxMetadataKeyBytes:
			probs.Add(path, "a metadata key must be at most %d bytes", MaxMetadataKeyBytes)
		case strings.IndexByte(k, 0) >= 0 || bytes.Contains(v, []byte(`\u0000`)):
			probs.Add(path, "must not contain the NUL character (\\u0000), which the store cannot hold")
		}
	}
	if probs.Len() > 0 {
		return nil, &spec.ValidationError{Problems: probs.Sorted()}
	}
	c, err := r.store.PatchMetadata(ctx, &chat.PatchMetadataParams{Tenant: tenant, ChatID: id, Patch: patch, MaxBytes: r.limits.MaxMetadataBytes})
	if errors.Is(err, chat.ErrMetadataTooLarge) {
		return nil, &spec.ValidationError{Problems: []spec.Problem{{Path: "/metadata",
			Message: fmt.Sprintf("the chat's metadata with these changes would be over %d bytes", r.limits.MaxMetadataBytes)}}}
	}
	if err != nil {
		return nil, err
	}
	r.appMetrics.patched.Inc()
	r.log.Info("chat metadata changed", "chat_id", id, "tenant", tenant, "keys", len(patch))
	return r.withContext(ctx, c)
}
