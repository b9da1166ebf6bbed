package runtime

import (
	"context"
	"encoding/hex"
	"errors"

	"github.com/agentd/agentd/internal/chat"
)

// This file is the Idempotency-Key of the POSTs on a chat that create
// something (runs, fork, stop, input): the store keeps each keyed
// request's answer in the transaction of what it created, and a repeat of
// the key gets that answer again, on any replica, without doing anything.

// keyedRequest is the keyed request of a POST on a chat; nil without a
// key. body is what identifies the request's content.
func keyedRequest(tenant, id, op, key string, body []byte) *chat.KeyedRequest {
	if key == "" {
		return nil
	}
	sum := hashRequest(body)
	return &chat.KeyedRequest{Tenant: tenant, ChatID: id, Op: op, Key: key, RequestHash: hex.EncodeToString(sum[:])}
}

// answered returns the stored answer of k, if its key was answered: it is
// looked up before the request is checked against the chat as it stands
// now, which may have moved on (an answered input request is no longer
// pending). nil, nil for a fresh key (or none).
func (r *Runtime) answered(ctx context.Context, k *chat.KeyedRequest) (*chat.Answer, error) {
	if k == nil {
		return nil, nil
	}
	a, err := r.store.Answered(ctx, k)
	switch {
	case errors.Is(err, chat.ErrNotFound):
		return nil, nil
	case err != nil:
		r.keyedFailed(k, err)
		return nil, err
	}
	r.metrics.keyed.WithLabelValues(k.Op, "repeated").Inc()
	return a, nil
}

// repeated turns the error of a keyed write into the answer a repeat
// gets: the store found the key answered (by a request that committed
// after answered looked, or one that raced this one to the key).
// Otherwise the error stands.
func (r *Runtime) repeated(ctx context.Context, k *chat.KeyedRequest, err error) (*chat.Answer, error) {
	if k == nil {
		return nil, err
	}
	var ae *chat.AnsweredError
	switch {
	case errors.As(err, &ae):
		r.metrics.keyed.WithLabelValues(k.Op, "repeated").Inc()
		return ae.Answer, nil
	case errors.Is(err, chat.ErrConflict):
		// Two requests with one key inserted its answer at once (the
		// second found the first's row at commit), or the key answered
		// another request.
		a, aerr := r.store.Answered(ctx, k)
		if aerr == nil {
			r.metrics.keyed.WithLabelValues(k.Op, "repeated").Inc()
			return a, nil
		}
		if errors.Is(aerr, chat.ErrConflict) {
			err = aerr
		}
	}
	r.keyedFailed(k, err)
	return nil, err
}

// keyedFailed logs and counts a keyed request refused for its key: the
// key answered another request (a client reusing keys, or two clients
// sharing one).
func (r *Runtime) keyedFailed(k *chat.KeyedRequest, err error) {
	if !errors.Is(err, chat.ErrConflict) {
		return
	}
	r.metrics.keyed.WithLabelValues(k.Op, "conflict").Inc()
	r.log.Warn("idempotency key reused with another request", "chat_id", k.ChatID, "op", k.Op, "tenant", k.Tenant, "err", err)
}

// replayed is the chat of a stored answer as a repeat returns it, with
// the spec (the same for ever) of the chat it came from.
func replayed(a *chat.Answer, spec []byte) *chat.Chat {
	c := *a.Chat
	c.Spec = spec
	return &c
}
