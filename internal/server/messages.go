package server

import (
	"context"
	"net/http"
	"time"

	"github.com/agentd/agentd/internal/api"
	"github.com/agentd/agentd/internal/runtime"

	"github.com/agentd/agentd/internal/chat"
)

// eventPageSize is how many events one Chats.Events call asks for. Handlers
// page through the log rather than read it whole, so a long chat costs
// bounded memory per request.
const eventPageSize = 200

// messages handles GET /v1/chats/{id}/messages, a long poll: with wait_s, a
// request that finds no message after `after` on a chat that is not terminal
// waits for the next commit (or wait_s) instead of returning empty, so a
// client without SSE still sees messages as they happen.
func (c *chatsResource) messages(w http.ResponseWriter, r *http.Request) {
	id, err := chatIDParam(r)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	q := newQueryParser(r)
	after := q.seq("after")
	limit := int(q.int("limit", defaultMessageLimit, 1, maxListLimit))
	wait := q.wait(c.cfg.MaxWait)
	if err := q.err(); err != nil {
		c.writeError(w, r, err)
		return
	}
	ctx, tenant := r.Context(), Tenant(r.Context())

	var (
		signal <-chan runtime.Wake
		expiry <-chan time.Time
		// known is the progress a wake-up brought (see runtime.Wake): the
		// next round needs no read of the store for it.
		known *chat.Progress
	)
	if wait > 0 {
		extendWriteDeadline(w, wait)
		defer c.waiting(r, c.metrics.pollsOpen)()
		// Subscribe before the first read, so that a message committed
		// between that read and the wait still wakes us.
		var unsubscribe func()
		signal, unsubscribe = c.chats.Subscribe(id)
		defer unsubscribe()
		timer := time.NewTimer(wait)
		defer timer.Stop()
		expiry = timer.C
	}

	for expired := false; ; {
		// Read the chat's progress before its events: if it is terminal,
		// every event was committed before this read, so the scan below sees
		// them all and "terminal + no messages" really means there are no
		// more. Only the progress: no spec on every wake-up.
		var ch chat.Progress
		if known != nil {
			ch, known = *known, nil
		} else if ch, err = c.chats.Progress(ctx, tenant, id); err != nil {
			c.writeError(w, r, err)
			return
		}
		msgs, lastSeq, err := c.collectMessages(ctx, tenant, id, after, limit)
		if err != nil {
			c.writeError(w, r, err)
			return
		}
		if len(msgs) > 0 || settledProgress(ch) || wait == 0 || expired {
			reported := lastSeq
			if reported == after && reported > ch.LastSeq {
				// Nothing was examined because the client asked for
				// messages after the end of the log: last_seq is the
				// log's, never an echo of a seq that does not exist.
				reported = ch.LastSeq
			}
			c.writeJSON(w, r, http.StatusOK, api.MessageList{Messages: msgs, LastSeq: reported, Status: ch.Status})
			return
		}
		// Events that are not messages were examined: don't read them again.
		after = lastSeq
		select {
		case wk, ok := <-signal:
			if !ok {
				// The runtime ended the subscription (shutting down).
				signal = nil
			}
			if wk.Known && wk.Progress.LastSeq >= ch.LastSeq {
				// Not older than what was read: a wake-up pending from
				// before the read must not move the chat back.
				known = &wk.Progress
			}
		case <-expiry:
			// Answer with one last read rather than a stale one.
			expired = true
		case <-ctx.Done():
			return
		}
	}
}

// collectMessages returns up to limit messages with seq > after, and the seq
// of the last event it examined (after, if none).
func (c *chatsResource) collectMessages(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Message, int64, error) {
	msgs := []chat.Message{}
	for {
		events, more, err := c.eventPage(ctx, tenant, id, after)
		if err != nil {
			return nil, 0, err
		}
		for _, e := range events {
			after = e.Seq
			if m, ok := chat.MessageFromEvent(e); ok {
				msgs = append(msgs, m)
				if len(msgs) == limit {
					return msgs, after, nil
				}
			}
		}
		if !more {
			return msgs, after, nil
		}
	}
}

// eventPage reads the next page of a chat's events after seq `after`. It
// keeps only events in strictly increasing seq order past after, so that
// whatever the source returns, a caller never repeats an event or loops on
// the same page; more says whether another page may follow.
func (c *chatsResource) eventPage(ctx context.Context, tenant, id string, after int64) (events []chat.Event, more bool, err error) {
	page, err := c.chats.Events(ctx, tenant, id, after, eventPageSize)
	if err != nil {
		return nil, false, err
	}
	if ascending(page, after) {
		// The usual page: nothing to drop, and nothing to copy (a page from
		// the kept tail is shared by every stream of the chat).
		return page, len(page) == eventPageSize && len(page) > 0, nil
	}
	events = make([]chat.Event, 0, len(page))
	for _, e := range page {
		if e.Seq > after {
			events = append(events, e)
			after = e.Seq
		}
	}
	return events, len(page) == eventPageSize && len(events) > 0, nil
}

// ascending reports whether every event of page follows after and the one
// before it.
func ascending(page []chat.Event, after int64) bool {
	for _, e := range page {
		if e.Seq <= after {
			return false
		}
		after = e.Seq
	}
	return true
}
