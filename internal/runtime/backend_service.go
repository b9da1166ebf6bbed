package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/chat"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/internal/spec"
)

// The service API of agentd as an application backend (docs/backend.md): metadata changes, erasure and retention,
// saved teams, deliveries. Creating a chat from a saved team (team_ref) is
// in Create, through resolveTeamRef.

// appMetrics are the series of these features.
type appMetrics struct {
	erased  *prometheus.CounterVec
	patched prometheus.Counter
	teams   prometheus.Counter
	errors  *prometheus.CounterVec
}

func newAppMetrics(reg prometheus.Registerer) (*appMetrics, error) {
	m := &appMetrics{
		erased: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_chats_erased_total",
			Help: "Chats erased, by cause (request: DELETE /v1/chats/{id}; retention: AGENTD_RETENTION)."}, []string{"cause"}),
		patched: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_chat_metadata_patches_total",
			Help: "Metadata changes (PATCH /v1/chats/{id})."}),
		teams: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_team_versions_created_total",
			Help: "Saved team versions created."}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_retention_errors_total",
			Help: "Retention passes that failed (the next pass tries again)."}, []string{"stage"}),
	}
	for _, c := range []prometheus.Collector{m.erased, m.patched, m.teams, m.errors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.erased.WithLabelValues("request")
	m.erased.WithLabelValues("retention")
	m.errors.WithLabelValues("erase")
	return m, nil
}

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
	var probs []spec.Problem
	if len(patch) > MaxMetadataPatchKeys {
		probs = append(probs, spec.Problem{Path: "/metadata", Message: fmt.Sprintf("must have at most %d keys", MaxMetadataPatchKeys)})
	}
	for k, v := range patch {
		path := "/metadata/" + escapePointer(k)
		switch {
		case k == "":
			probs = append(probs, spec.Problem{Path: path, Message: "a metadata key must not be empty"})
		case len(k) > MaxMetadataKeyBytes:
			probs = append(probs, spec.Problem{Path: path, Message: fmt.Sprintf("a metadata key must be at most %d bytes", MaxMetadataKeyBytes)})
		case strings.IndexByte(k, 0) >= 0 || bytes.Contains(v, []byte(`\u0000`)):
			probs = append(probs, spec.Problem{Path: path, Message: "must not contain the NUL character (\\u0000), which the store cannot hold"})
		}
	}
	if len(probs) > 0 {
		return nil, &spec.ValidationError{Problems: sortProblems(probs)}
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
	return c, nil
}

// escapePointer escapes a key for a JSON pointer (RFC 6901).
func escapePointer(k string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
}

// sortProblems orders problems by path: those found in a map's order
// would otherwise come in a different order every time.
func sortProblems(ps []spec.Problem) []spec.Problem {
	slices.SortStableFunc(ps, func(a, b spec.Problem) int { return strings.Compare(a.Path, b.Path) })
	return ps
}

// Erase removes a chat that has ended, with everything the store holds of
// it, and leaves a tombstone: from then on its id answers ErrNotFound. A
// chat that has not ended is ErrChatActive (cancel it first). Streams and
// long polls of it, on this replica and (through the store's
// notifications) on others, find it gone and end.
func (r *Runtime) Erase(ctx context.Context, tenant, id string) error {
	if err := r.store.EraseChat(ctx, &chat.EraseChatParams{Tenant: tenant, ChatID: id, Now: r.now()}); err != nil {
		return err
	}
	r.erased(id, "request")
	r.log.Info("chat erased", "chat_id", id, "tenant", tenant, "cause", "request")
	return nil
}

// erased tells the local subscribers of a chat that it is gone.
func (r *Runtime) erased(id, cause string) {
	r.appMetrics.erased.WithLabelValues(cause).Inc()
	r.broker.erased(id)
}

// RetentionConfig configures the erasure of chats that ended long ago.
type RetentionConfig struct {
	// After: chats that ended longer ago than this are erased; 0: never.
	After time.Duration
	// Interval is the time between passes (default 1m, or half the
	// retention when that is shorter, at least 1s).
	Interval time.Duration
	// Batch is how many chats one store call erases (default 50): small
	// transactions, each holding few row locks for little time.
	Batch int
	// Pause is the time between the batches of one pass (default 100ms),
	// so that a large backlog is worked off without crowding out live
	// traffic.
	Pause time.Duration
}

func (c RetentionConfig) withDefaults() RetentionConfig {
	if c.Interval <= 0 {
		// A short retention is looked after as often as it needs.
		c.Interval = min(time.Minute, max(c.After/2, time.Second))
	}
	if c.Batch <= 0 {
		c.Batch = 50
	}
	if c.Pause <= 0 {
		c.Pause = 100 * time.Millisecond
	}
	return c
}

// retentionLoop erases expired chats, one pass per interval, until ctx
// ends. Every replica runs it; the store lets one at a time erase.
func (r *Runtime) retentionLoop(ctx context.Context) {
	t := time.NewTicker(r.retention.Interval)
	defer t.Stop()
	for {
		r.retentionPass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// retentionPass erases, batch by batch, the chats that ended before now
// minus the retention.
func (r *Runtime) retentionPass(ctx context.Context) {
	before := r.now().Add(-r.retention.After)
	total := 0
	for ctx.Err() == nil {
		ids, err := r.store.EraseEnded(ctx, &chat.EraseEndedParams{EndedBefore: before, Limit: r.retention.Batch, Now: r.now()})
		if err != nil {
			if ctx.Err() == nil {
				r.appMetrics.errors.WithLabelValues("erase").Inc()
				r.log.Error("retention: erase ended chats", "err", err)
			}
			return
		}
		for _, id := range ids {
			r.erased(id, "retention")
			r.log.Debug("chat erased", "chat_id", id, "cause", "retention")
		}
		total += len(ids)
		if len(ids) < r.retention.Batch {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(r.retention.Pause):
		}
	}
	if total > 0 {
		r.log.Info("retention: erased chats that ended before the retention", "erased", total, "ended_before", before, "retention", r.retention.After)
	}
}

// Deliveries returns the webhook deliveries of a tenant's chat.
func (r *Runtime) Deliveries(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.DeliveryRecord, error) {
	if _, err := r.store.GetProgress(ctx, tenant, id); err != nil {
		return nil, err
	}
	return r.store.ListDeliveries(ctx, &chat.ListDeliveriesParams{ChatID: id, After: after, Limit: limit})
}

// teamNameRE is what a saved team may be called: no "@", which separates
// a team_ref's version, and nothing a URL path would need to escape.
var teamNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// ValidTeamName reports whether name can name a saved team.
func ValidTeamName(name string) bool { return teamNameRE.MatchString(name) }

// PutTeam stores body, a chat spec without a task, as the next version of
// the tenant's team name, unless it equals the latest version (created is
// then false and that version is returned).
func (r *Runtime) PutTeam(ctx context.Context, tenant, name string, body []byte) (*chat.Team, bool, error) {
	compact, err := r.CheckTeam(name, body)
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
func (r *Runtime) CheckTeam(name string, body []byte) ([]byte, error) {
	if !ValidTeamName(name) {
		return nil, &spec.ValidationError{Problems: []spec.Problem{{Path: "name",
			Message: "a team name is 1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit"}}}
	}
	sp, compact, probs := spec.DecodeCompact(body)
	if len(probs) == 0 {
		probs = spec.ValidateTeam(sp, r.limits, r.env())
	}
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
var teamRefOverrides = map[string]bool{"task": true, "name": true, "metadata": true, "max_round": true, "webhook": true, "messages": true}

// resolveTeamRef turns a create request with team_ref into the spec it
// stands for: the saved team's spec with the request's task and its
// overrides of name, metadata, max_round, webhook and messages. It returns body
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
	var probs []spec.Problem
	for k := range top {
		if k != teamRefKey && !teamRefOverrides[k] {
			probs = append(probs, spec.Problem{Path: "/" + escapePointer(k),
				Message: "comes from the saved team: a request with team_ref sets only task, name, metadata, max_round, webhook and messages"})
		}
	}
	var ref string
	name, version := "", 0
	if err := json.Unmarshal(raw, &ref); err != nil {
		probs = append(probs, spec.Problem{Path: "/team_ref", Message: `must be a string: "name" or "name@version"`})
	} else {
		var perr string
		if name, version, perr = parseTeamRef(ref); perr != "" {
			probs = append(probs, spec.Problem{Path: "/team_ref", Message: perr})
		}
	}
	if len(probs) > 0 {
		return nil, nil, &spec.ValidationError{Problems: sortProblems(probs)}
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
	out, err := json.Marshal(merged)
	if err != nil {
		return nil, nil, fmt.Errorf("merge the request into team %q: %w", name, err)
	}
	return out, &chat.TeamRef{Name: t.Name, Version: t.Version}, nil
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
