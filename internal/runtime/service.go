package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/chat/engine"

	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/spec/problem"

	"github.com/google/uuid"
)

// This file is the service API of a Runtime: what the HTTP layer calls.

// Create validates a spec and creates a chat, or returns the chat an
// Idempotency-Key already names with created=false. The chat's first events
// (chat.created, resumed messages, the task) are written with it.
func (r *Runtime) Create(ctx context.Context, p *chat.CreateParams) (*chat.Chat, bool, error) {
	sp, compact, task, team, err := r.checkCreate(ctx, p.Tenant, p.Body)
	if err != nil {
		return nil, false, err
	}
	sum := sha256.Sum256(compact)
	requestHash := sum
	if team != nil {
		// What the client sent identifies the request: a retry of a
		// team_ref without a version is the same request even when the
		// team got a new version meanwhile.
		requestHash = hashRequest(p.Body)
	}
	// The chat's worker, which decodes the stored spec, finds this one.
	sp = r.specs.share(sum, sp)
	id, err := uuid.NewV7()
	if err != nil {
		return nil, false, fmt.Errorf("new chat id: %w", err)
	}
	now := r.now()
	evs := engine.FirstEvents(sp, task, now)
	cp := &chat.CreateChatParams{
		ID: id.String(), Tenant: p.Tenant, Name: sp.Name, Spec: compact, Metadata: sp.Metadata,
		IdempotencyKey: p.IdempotencyKey, RequestHash: hex.EncodeToString(requestHash[:]), CreatedAt: now, Events: evs,
		Team: team,
	}
	if r.webhooks != nil {
		cp.Deliveries = r.webhooks.Route(p.Tenant, sp.Webhook, evs)
	}
	// A chat this replica has room for is created leased to it and its
	// worker started at once: no claim query has to find it again. Without
	// room it waits to be claimed, here or by another replica.
	reserved := r.sched.reserve()
	if reserved {
		cp.Owner, cp.LeaseUntil = r.owner, now.Add(r.sched.leaseDur)
	}
	c, created, err := r.store.CreateChat(ctx, cp)
	if err != nil {
		if reserved {
			// Not created, or not known to be: a chat created leased to us
			// after all is claimed again once that lease runs out.
			r.sched.unreserve()
		}
		return nil, false, err
	}
	if created {
		c.ContextVariables = engine.EncodeContext(foldContextEvents(evs))
		if len(cp.Deliveries) > 0 {
			r.webhooks.Queued()
		}
		r.parents.remember(ctx, c.ID, r.now())
		r.metrics.created.Inc()
		r.log.Info("chat created", "chat_id", c.ID, "tenant", c.Tenant, "name", c.Name)
	}
	switch {
	case created && reserved && c.Owner == r.owner:
		r.sched.startCreated(c, &workerSeed{spec: sp, log: evs})
	case reserved:
		r.sched.unreserve() // an existing chat (idempotency key)
	case created:
		r.sched.kick()
	}
	return c, created, nil
}

// CheckCreate validates a create request exactly as Create does and
// returns the spec the chat would be created from (compacted, a saved
// team's resolved), creating and recording nothing: a dry run.
func (r *Runtime) CheckCreate(ctx context.Context, tenant string, body []byte) ([]byte, error) {
	_, compact, _, _, err := r.checkCreate(ctx, tenant, body)
	return compact, err
}

// checkCreate is the validation of Create: the spec, its compacted body,
// the task of run 1 and the saved team it came from, or every problem.
func (r *Runtime) checkCreate(ctx context.Context, tenant string, body []byte) (*spec.Spec, []byte, []spec.TaskMessage, *chat.TeamRef, error) {
	// A request naming a saved team (team_ref) becomes the team's spec
	// with the request's task and overrides.
	body, team, err := r.resolveTeamRef(ctx, tenant, body)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	sp, compact, probs := spec.Check(body, r.limits, r.env())
	var task []spec.TaskMessage
	if len(probs) == 0 {
		task, probs = engine.SpecTask(sp, r.limits)
	}
	if len(probs) > 0 {
		return nil, nil, nil, nil, &spec.ValidationError{Problems: probs}
	}
	return sp, compact, task, team, nil
}

// Get returns a chat of the tenant.
func (r *Runtime) Get(ctx context.Context, tenant, id string) (*chat.Chat, error) {
	c, err := r.store.GetChat(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return r.withContext(ctx, c)
}

// List returns a page of chats, newest first.
func (r *Runtime) List(ctx context.Context, p *chat.ListChatsParams) ([]*chat.Chat, string, error) {
	return r.store.ListChats(ctx, p)
}

// Events returns up to limit events of a tenant's chat after seq. While the
// chat has local subscribers, they are served from memory (see broker).
func (r *Runtime) Events(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Event, error) {
	return r.broker.events(ctx, tenant, id, after, limit, func() error {
		_, err := r.store.GetChat(ctx, tenant, id)
		return err
	})
}

// Subscribe returns a channel that receives a value (coalesced) whenever new
// events of the chat are committed by this replica, and a function that ends
// the subscription. Subscribe before reading the log, then read after every
// signal: no commit can slip between the two.
func (r *Runtime) Subscribe(chatID string) (<-chan Wake, func()) {
	return r.broker.subscribe(chatID)
}

// Follow subscribes as Subscribe does and also returns where the chat
// stands if a worker of this replica runs it (Known; see Wake): a waiter
// then starts from that instead of reading the store.
func (r *Runtime) Follow(chatID string) (Wake, <-chan Wake, func()) {
	return r.broker.follow(chatID)
}

// Stream subscribes an event stream to the chat: wake-ups as Subscribe
// gives them, and the deltas of the replies being streamed, on whichever
// replica runs the chat (a stream that subscribes during a reply gets its
// text so far at once), and a function that ends the subscription. Take
// the queued deltas before reading the events a wake-up announces: the
// deltas of a reply are queued before its message is committed.
func (r *Runtime) Stream(chatID string) (<-chan Wake, *DeltaQueue, func()) {
	return r.broker.stream(chatID)
}

// Cancel asks a chat to stop; the chat's worker appends chat.cancelled. The
// request is recorded in the store first, so it reaches the worker wherever
// it runs (through lease renewal) and survives restarts. changed is false
// when the chat had already ended.
func (r *Runtime) Cancel(ctx context.Context, tenant, id string) (*chat.Chat, bool, error) {
	c, err := r.store.RequestCancel(ctx, tenant, id)
	if err != nil {
		return nil, false, err
	}
	if c.Status.Terminal() {
		return c, false, nil
	}
	if !r.sched.cancel(id, errCancelRequested) {
		r.sched.kick() // unclaimed: claim it so that a worker records the cancel
	}
	return c, true, nil
}

// Input answers a chat's pending input request: a human message for a
// user_proxy, or the speaker of a manual selection. The answer is stored
// (once per request_id) and the chat becomes claimable; its worker appends
// the answer to the log, since only a worker writes the log. It returns
// the chat as the answer left it; with a key, a repeat gets the first
// answer.
func (r *Runtime) Input(ctx context.Context, tenant, id, key string, in *chat.Input) (*chat.Chat, error) {
	c, err := r.store.GetChat(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	k := keyedRequest(tenant, id, chat.OpInput, key, chat.MustJSON(in))
	if a, err := r.answered(ctx, k); a != nil || err != nil {
		if err != nil {
			return nil, err
		}
		return replayed(a, c.Spec), nil
	}
	if c.Status != chat.StatusAwaitingInput || len(c.PendingInput) == 0 || len(c.InputResponse) > 0 {
		return nil, chat.ErrNoPendingInput
	}
	var p chat.PendingInput
	if err := json.Unmarshal(c.PendingInput, &p); err != nil {
		return nil, fmt.Errorf("decode pending input of chat %s: %w", id, err)
	}
	if in.RequestID != p.RequestID {
		return nil, chat.ErrNoPendingInput
	}
	var probs problem.List
	switch p.Kind {
	case chat.InputApproval:
		probs.AddAll("", r.checkApprovals(ctx, c, &p, in))
	case chat.InputSpeaker:
		switch {
		case in.Speaker == nil:
			probs.Add("/speaker", "this request asks for a speaker: one of %s", engine.PyList(p.Candidates))
		case !engine.ContainsName(p.Candidates, *in.Speaker):
			probs.Add("/speaker", "%q is not a candidate: pick one of %s", *in.Speaker, engine.PyList(p.Candidates))
		}
		if in.Content != nil || in.Parts != nil {
			probs.Add("/content", "this request asks for a speaker, not a message")
		}
	default:
		if in.Parts != nil {
			spec.CheckParts("/content", in.Parts, r.limits.MaxImageBytes, r.limits.MaxTaskBytes, probs.Add)
		} else if in.Content == nil {
			probs.Add("/content", "this request asks for a message (empty content skips or ends, see reason)")
		} else if strings.IndexByte(*in.Content, 0) >= 0 {
			probs.Add("/content", "must not contain the NUL character (\\u0000), which the store cannot hold")
		} else if len(*in.Content) > r.limits.MaxTaskBytes {
			probs.Add("/content", "must be at most %d bytes", r.limits.MaxTaskBytes)
		}
		if in.Speaker != nil {
			probs.Add("/speaker", "this request asks for a message, not a speaker")
		}
	}
	if in.Approvals != nil && p.Kind != chat.InputApproval {
		probs.Add("/approvals", "this request asks for a %s, not approvals", p.Kind)
	}
	if probs.Len() > 0 {
		return nil, &spec.ValidationError{Problems: probs.Items()}
	}
	sc, err := r.store.SubmitInput(ctx, &chat.SubmitInputParams{Tenant: tenant, ChatID: id, RequestID: in.RequestID, Response: chat.MustJSON(in),
		Now: r.now(), Keyed: k})
	if err != nil {
		a, err := r.repeated(ctx, k, err)
		if err != nil {
			return nil, err
		}
		return replayed(a, c.Spec), nil
	}
	r.parents.remember(ctx, id, r.now())
	r.log.Info("input received", "chat_id", id, "input_request_id", in.RequestID, "kind", p.Kind)
	r.sched.kick()
	return sc, nil
}

// SandboxNeeded reports whether a chat may still use its sandbox: it exists
// and has not ended. The sandbox reaper keeps exactly those.
func (r *Runtime) SandboxNeeded(ctx context.Context, chatID string) bool {
	c, err := r.store.GetChat(ctx, "", chatID)
	if err != nil {
		return !errors.Is(err, chat.ErrNotFound) // keep on doubt: a store error is no proof the chat ended
	}
	return !c.Status.Terminal()
}
