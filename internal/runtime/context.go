package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/chat/engine"
	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/spec/problem"
)

// A chat's context variables (docs/context-variables.md): read as the fold
// of its context.updated events, and changed by a client between runs.

// contextPage is how many context.updated events one read takes.
const contextPage = 1000

// contextOf folds a chat's context.updated events up to seq upTo: its
// variables as of that seq.
func (r *Runtime) contextOf(ctx context.Context, id string, upTo int64) (map[string]json.RawMessage, error) {
	var vars map[string]json.RawMessage
	after := int64(0)
	for {
		evs, err := r.store.ListEvents(ctx, &chat.ListEventsParams{ChatID: id, After: after, Limit: contextPage, Type: chat.EventContextUpdated})
		if err != nil {
			return nil, fmt.Errorf("read context variables of chat %s: %w", id, err)
		}
		for _, e := range evs {
			if e.Seq > upTo {
				return vars, nil
			}
			if vars, err = engine.FoldContext(vars, e); err != nil {
				return nil, fmt.Errorf("%w: seq %d: %v", ErrLogBroken, e.Seq, err)
			}
			after = e.Seq
		}
		if len(evs) < contextPage {
			return vars, nil
		}
	}
}

// foldContextEvents is the variables the context.updated events of evs
// (folded already, so they fold) leave.
func foldContextEvents(evs []chat.Event) map[string]json.RawMessage {
	var vars map[string]json.RawMessage
	for _, e := range evs {
		if e.Type == chat.EventContextUpdated {
			if next, err := engine.FoldContext(vars, e); err == nil {
				vars = next
			}
		}
	}
	return vars
}

// withContext sets c.ContextVariables: the chat's variables as of its
// last seq.
func (r *Runtime) withContext(ctx context.Context, c *chat.Chat) (*chat.Chat, error) {
	vars, err := r.contextOf(ctx, c.ID, c.LastSeq)
	if err != nil {
		return nil, err
	}
	c.ContextVariables = engine.EncodeContext(vars)
	return c, nil
}

// checkContextChange refuses (422 at /context_variables) a change that
// would make the chat's variables, as they stand, too large.
func (r *Runtime) checkContextChange(ctx context.Context, c *chat.Chat, change map[string]json.RawMessage, by string) error {
	vars, err := r.contextOf(ctx, c.ID, c.LastSeq)
	if err != nil {
		return err
	}
	if msg := engine.ContextTooLarge(vars, chat.ContextUpdateOf(change, chat.ContextBy{Client: by})); msg != "" {
		return &spec.ValidationError{Problems: []spec.Problem{{Path: "/context_variables", Message: msg}}}
	}
	return nil
}

// patchContextAttempts bounds how often PatchContext tries again when
// its append was fenced: each retry re-reads the chat, and a chat whose
// run started meanwhile is refused, so more than a few means something
// else writes the chat all the time.
const patchContextAttempts = 3

// PatchContext merges change into a chat's context variables between
// runs (PATCH /v1/chats/{id}): a null value removes the variable. It is
// a context.updated event appended to the log like a worker's, fenced by
// the chat's epoch and last seq, so that a run starting meanwhile (whose
// worker takes a new epoch) wins and the change is refused with
// chat.ErrRunActive, as it is while a run is active or queued.
func (r *Runtime) PatchContext(ctx context.Context, tenant, id string, change json.RawMessage) (*chat.Chat, error) {
	var probs problem.List
	m, ok := spec.CheckContext("/context_variables", change, probs.Add)
	if !ok {
		r.appMetrics.contextPatches.WithLabelValues("invalid").Inc()
		return nil, &spec.ValidationError{Problems: probs.Items()}
	}
	for attempt := 1; ; attempt++ {
		c, err := r.patchContextOnce(ctx, tenant, id, m)
		switch {
		case errors.Is(err, chat.ErrFenced) && attempt < patchContextAttempts:
			continue
		case errors.Is(err, chat.ErrFenced), errors.Is(err, chat.ErrRunActive):
			r.appMetrics.contextPatches.WithLabelValues("busy").Inc()
			r.log.Info("context variables not changed: a run is active", "chat_id", id, "tenant", tenant)
			return nil, fmt.Errorf("patch context variables of chat %s: %w", id, chat.ErrRunActive)
		case err != nil:
			var verr *spec.ValidationError
			if errors.As(err, &verr) {
				r.appMetrics.contextPatches.WithLabelValues("invalid").Inc()
			}
			return nil, err
		}
		r.appMetrics.contextPatches.WithLabelValues("applied").Inc()
		r.log.Info("context variables changed", "chat_id", id, "tenant", tenant, "keys", len(m), "seq", c.LastSeq)
		return c, nil
	}
}

// patchContextOnce is one attempt of PatchContext.
func (r *Runtime) patchContextOnce(ctx context.Context, tenant, id string, change map[string]json.RawMessage) (*chat.Chat, error) {
	c, err := r.store.GetChat(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if !c.Status.Terminal() || c.QueuedRuns > 0 {
		return nil, chat.ErrRunActive
	}
	sp, err := r.specs.decode(c.Spec)
	if err != nil {
		return nil, fmt.Errorf("%w: decode stored spec: %v", ErrLogBroken, err)
	}
	_, st, err := r.foldPrefix(ctx, id, sp, c.LastSeq)
	if err != nil {
		return nil, err
	}
	if !st.Status.Terminal() {
		return nil, chat.ErrRunActive
	}
	u := chat.ContextUpdateOf(change, chat.ContextBy{Client: chat.ContextByPatch})
	if msg := engine.ContextTooLarge(st.ContextVariables(), u); msg != "" {
		return nil, &spec.ValidationError{Problems: []spec.Problem{{Path: "/context_variables", Message: msg}}}
	}
	now := r.now()
	var evs []chat.Event
	if err := appendFolded(st, &evs, now, chat.Storable(chat.ContextEvent(u))); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrLogBroken, err)
	}
	evs[0].ChatID = id
	upd := st.Update(now)
	p := &chat.AppendParams{ChatID: id, Epoch: c.Epoch, Events: evs, Update: upd}
	if r.webhooks != nil {
		p.Deliveries = r.webhooks.Route(tenant, sp.Webhook, evs)
	}
	if err := r.store.Append(ctx, p); err != nil {
		return nil, err
	}
	if len(p.Deliveries) > 0 {
		r.webhooks.Queued()
	}
	r.appended(id, nil, evs, st, &upd)
	c, err = r.store.GetChat(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	c.ContextVariables = engine.EncodeContext(st.ContextVariables())
	return c, nil
}
