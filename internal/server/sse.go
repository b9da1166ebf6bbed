package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/api"
	"github.com/agentd/agentd/internal/runtime"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/jsonstr"
)

// lastEventIDHeader is where a reconnecting EventSource says what it saw last.
const lastEventIDHeader = "Last-Event-ID"

// heartbeatComment is an SSE comment: clients ignore it, proxies see traffic.
const heartbeatComment = ": heartbeat\n\n"

// events handles GET /v1/chats/{id}/events, the chat's log as server-sent
// events: first every event after the resume point, then each new event as
// it is committed, ending after the terminal event.
//
// The log is the source of truth and the subscription only a wake-up call:
// after each signal the handler reads the log from the last seq it sent. So
// coalesced or lost signals cost latency, never events, and a client that
// resumes from Last-Event-ID gets every later event exactly once, in order.
func (c *chatsResource) events(w http.ResponseWriter, r *http.Request) {
	id, err := chatIDParam(r)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	after, err := resumePoint(r)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	q := newQueryParser(r)
	follow := q.bool("follow")
	if err := q.err(); err != nil {
		c.writeError(w, r, err)
		return
	}
	ctx, tenant := r.Context(), Tenant(r.Context())
	ch, err := c.chats.Get(ctx, tenant, id)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	if !follow && ch.Status.Terminal() && after >= ch.LastSeq {
		// The client has seen the end. 204 is what makes an EventSource stop
		// reconnecting (HTML Living Standard, server-sent events), where an
		// empty 200 stream would have it reconnect forever.
		w.WriteHeader(http.StatusNoContent)
		return
	}

	defer c.waiting(r, c.metrics.sseOpen)()
	// Subscribe before the first read, so a commit between the read and the
	// wait still wakes us.
	signal, deltas, unsubscribe := c.chats.Stream(id)
	defer unsubscribe()

	if r.Method == http.MethodHead {
		// The headers of the stream, without waiting for its events.
		setStreamHeaders(w.Header())
		w.WriteHeader(http.StatusOK)
		return
	}

	rc := http.NewResponseController(w)
	// A stream lives far longer than the server's timeouts allow an
	// ordinary request: nothing more is read (the read deadline would end
	// the stream), and each write gets a deadline of its own, so a client
	// that stops reading is cut off once its buffers are full.
	// Writers without deadlines have nothing to set.
	_ = rc.SetReadDeadline(time.Time{})
	// The deadline is moved on once a tenth of it has passed, not before
	// every write: a stream that writes a token at a time would otherwise
	// reset a runtime timer per token. A write then has between nine
	// tenths of the timeout and all of it.
	writeTimeout := c.cfg.StreamWriteTimeout
	var deadlineSet time.Time
	deadline := func() {
		if now := time.Now(); now.Sub(deadlineSet) >= writeTimeout/10 {
			deadlineSet = now
			_ = rc.SetWriteDeadline(now.Add(writeTimeout))
		}
	}
	deadline()
	setStreamHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	// From here on, a stream that ends before the terminal event is aborted
	// (see abortUnfinished), and the retry field says how soon to come back.
	finished := false
	defer abortUnfinished(&finished)
	if _, err := fmt.Fprintf(w, "retry: %d\n\n", c.cfg.StreamRetry.Milliseconds()); err != nil {
		return
	}
	if err := rc.Flush(); err != nil {
		c.logger.Error("sse: response cannot be flushed", "request_id", RequestID(ctx), "error", err)
		return
	}

	heartbeat := time.NewTicker(c.cfg.Heartbeat)
	defer heartbeat.Stop()
	// Deltas are ordered against the log by the seq they follow: one whose
	// AfterSeq is the last event sent belongs to the reply in the making and
	// goes out now; an older one belongs to a message already sent and is
	// dropped; a newer one waits until the events before it are sent.
	var pending []chat.Delta
	var taken []chat.Delta
	var dw deltaWriter
	take := func() {
		taken = deltas.Take(taken[:0])
		for _, d := range taken {
			pending = runtime.JoinDeltas(pending, d)
		}
		clear(taken)
	}
	// retryRead fires while the store is unreachable: the stream stays open
	// (heartbeats go on) and reads again, so clients ride out a database
	// outage instead of reconnecting into 503s.
	var retryRead <-chan time.Time
	read := true
	// known: the last wake-up came from an append by this replica, so the
	// chat was there (an erasure wakes with an unknown progress). Only a
	// read after an unknown wake-up that finds nothing new asks the store
	// whether the chat was erased; after a known one it is a wake-up whose
	// events an earlier read already sent, common when commits come close
	// together, and a store query per stream each time would load the
	// database with one query per follower. The chat was just read, so the
	// first read needs no check either.
	known := true
	// woke is the wake-up being served: it may bring the events to send
	// (Wake.Events).
	var woke runtime.Wake
	for {
		if read {
			read = false
			deadline()
			// The deltas queued before the wake-up go out before the
			// events it announces: a reply's deltas are queued before its
			// message is committed.
			take()
			var err error
			if pending, err = dw.write(w, pending, after); err != nil {
				return
			}
			before := after
			done, err := c.sendEvents(ctx, w, &dw, tenant, id, &after, follow, &pending, woke)
			woke = runtime.Wake{}
			progressed := after > before
			if errors.Is(err, chat.ErrNotFound) {
				// The chat was erased while it streamed: it ends here,
				// cleanly; a client that comes back gets 404.
				finished = true
				return
			}
			if err != nil && errors.Is(err, chat.ErrUnavailable) && ctx.Err() == nil {
				c.logger.Warn("sse: store unavailable; the stream waits", "request_id", RequestID(ctx), "chat_id", id, "after", after, "error", err)
				retryRead = time.After(time.Second)
			} else if err != nil {
				// The status line is out, so there is no problem to send:
				// abort the stream and let the client resume from its last
				// event id.
				if ctx.Err() == nil {
					c.logger.Warn("sse: stream ended early", "request_id", RequestID(ctx), "chat_id", id, "after", after, "error", err)
				}
				return
			}
			if done {
				finished = true
				_ = rc.Flush()
				// A chat ends for all its streams at once. The last events
				// are out; what is left (the response's end, the
				// connection's return to reading requests) yields first,
				// so that on a replica with many streams of the chat it
				// comes after every stream's last events, not before
				// those of the streams served after this one.
				goruntime.Gosched()
				return
			}
			if err == nil && !progressed && !known && c.streamGone(ctx, tenant, id) {
				// The chat was erased: there is nothing more to stream.
				// The stream ends cleanly; a client that comes back gets 404.
				finished = true
				return
			}
		}
		deadline()
		var err error
		if pending, err = dw.write(w, pending, after); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case wk, ok := <-signal:
			if !ok {
				// The runtime ended the subscription (shutting down): abort
				// so that the client reconnects, maybe to another replica.
				return
			}
			read, known, woke = true, wk.Known, wk
		case <-retryRead:
			retryRead, read, known = nil, true, false
		case <-deltas.Ready():
			take()
		case <-heartbeat.C:
			deadline()
			if _, err := io.WriteString(w, heartbeatComment); err != nil {
				return
			}
		case <-ctx.Done():
			// The client went away, or the server is shutting down and
			// ends every stream: abort it (below) so the client reconnects.
			return
		}
	}
}

// abortUnfinished aborts a stream that ends before its chat's terminal
// event. A cleanly ended chunked response reads as "the stream is over" to
// common clients — Go's r3labs/sse and @microsoft/fetch-event-source stop
// instead of reconnecting — so a stream the server cuts short (shutdown,
// a failed read) must not look finished: net/http's ErrAbortHandler closes
// the connection without the final chunk (HTTP/1.1) or resets the stream
// (HTTP/2), which every client treats as an error and reconnects from its
// Last-Event-ID. A stream that ends after the terminal event ends cleanly.
func abortUnfinished(finished *bool) {
	if v := recover(); v != nil {
		panic(v) // a real panic goes on as it was, for the recoverer to log
	}
	if !*finished {
		panic(http.ErrAbortHandler)
	}
}

// setStreamHeaders sets the headers of an event stream.
func setStreamHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	// Tells nginx-style proxies not to buffer the stream.
	h.Set("X-Accel-Buffering", "no")
}

// deltaWriter writes message.delta events — ephemeral: no id, so a
// reconnecting client resumes after the last persisted event. A stream
// writes one per token, so it encodes them itself into a buffer it keeps,
// and the deltas of one wake-up go out in one write.
type deltaWriter struct{ buf []byte }

// write writes the pending deltas that follow the last event sent, drops
// those of replies already sent, and returns those that must wait for more
// events (in pending's array).
func (dw *deltaWriter) write(w io.Writer, pending []chat.Delta, after int64) ([]chat.Delta, error) {
	if len(pending) == 0 {
		return pending, nil
	}
	b := dw.buf[:0]
	wait := pending[:0]
	for _, d := range pending {
		switch {
		case d.AfterSeq > after:
			wait = append(wait, d)
		case d.AfterSeq == after:
			b = appendDeltaEvent(b, d)
		}
	}
	clear(pending[len(wait):])
	var err error
	if len(b) > 0 {
		_, err = w.Write(b)
	}
	if cap(b) <= maxKeptDeltaBuffer {
		dw.buf = b
	} else {
		dw.buf = nil // a burst (a reply replayed whole) does not keep its room
	}
	if err != nil {
		return nil, err
	}
	return wait, nil
}

// maxKeptDeltaBuffer is the most a stream's delta buffer keeps between
// writes.
const maxKeptDeltaBuffer = 16 << 10

// appendDeltaEvent appends d as writeSSE writes a message.delta event with
// d's JSON encoding as its data: one data line, since encoded JSON holds no
// raw line break.
func appendDeltaEvent(b []byte, d chat.Delta) []byte {
	b = append(b, "event: "+string(chat.EventMessageDelta)+"\ndata: {\"name\":"...)
	b = jsonstr.Append(b, d.Name)
	b = append(b, `,"content":`...)
	b = jsonstr.Append(b, d.Content)
	if d.Reset {
		b = append(b, `,"reset":true`...)
	}
	return append(b, "}\n\n"...)
}

// sendEvents writes every committed event after *after, advancing *after as
// it goes, and after each event the pending deltas that follow it; done
// reports that the stream is over: the last event written ends a run and
// nothing follows it yet (a chat's earlier runs, replayed, do not end it).
// A stream that follows the chat (follow) is never over: it waits for the
// next run. The first page comes from woke, the wake-up being served, when
// it brought the events (Wake.Events), else from a read.
func (c *chatsResource) sendEvents(ctx context.Context, w io.Writer, dw *deltaWriter, tenant, id string, after *int64, follow bool, pending *[]chat.Delta, woke runtime.Wake) (done bool, err error) {
	encode := func(e chat.Event) []byte {
		data, err := json.Marshal(api.EventPayload(e))
		if err != nil {
			// Only corrupt event data gets here. Still send the event:
			// the client's resume point must move past it, or it would
			// reconnect into the same failure forever.
			c.logger.Error("sse: encode event data", "request_id", RequestID(ctx), "chat_id", id, "seq", e.Seq, "error", err)
			data = []byte("null")
		}
		return appendSSE(nil, e.Seq, string(e.Type), data)
	}
	for {
		var events []chat.Event
		var more bool
		if page, ok := woke.Events(*after, eventPageSize); ok {
			// The first page from the wake-up, without a read.
			events, more = page, len(page) == eventPageSize
			woke = runtime.Wake{}
		} else if events, more, err = c.eventPage(ctx, tenant, id, *after); err != nil {
			return false, fmt.Errorf("read events: %w", err)
		}
		for i, e := range events {
			// The streams of this replica share the event's frame.
			if _, err := w.Write(e.Encoded(encode)); err != nil {
				return false, err
			}
			*after = e.Seq
			if e.Type.Terminal() && !follow && i == len(events)-1 && !more {
				return true, nil
			}
			if *pending, err = dw.write(w, *pending, e.Seq); err != nil {
				return false, err
			}
		}
		if !more {
			return false, nil
		}
	}
}

// writeSSE writes one event in the text/event-stream format. seq 0 means an
// ephemeral event (message.delta), which has no id: it is not in the log, so
// a client cannot resume from it.
//
// SSE ends a line at CR, LF or CRLF, and a line break inside a field would
// end it early and let the rest forge another field (an id, say). Encoded
// JSON never holds a raw line break, but this function does not rely on
// that: the event name loses any, and data is split into one data line per
// line, which a client joins back with LF.
func writeSSE(w io.Writer, seq int64, event string, data []byte) error {
	_, err := w.Write(appendSSE(nil, seq, event, data))
	return err
}

// appendSSE appends the event as writeSSE writes it to b.
func appendSSE(b []byte, seq int64, event string, data []byte) []byte {
	if seq > 0 {
		b = append(b, "id: "...)
		b = strconv.AppendInt(b, seq, 10)
		b = append(b, '\n')
	}
	if strings.ContainsAny(event, "\r\n") {
		event = lineBreaks.Replace(event)
	}
	b = append(b, "event: "...)
	b = append(b, event...)
	b = append(b, '\n')
	if !bytes.ContainsAny(data, "\r\n") {
		// Encoded JSON: one line, kept as it is.
		b = append(b, "data: "...)
		b = append(b, data...)
		return append(b, "\n\n"...)
	}
	for _, line := range strings.Split(normalizeLineBreaks.Replace(string(data)), "\n") {
		b = append(b, "data: "...)
		b = append(b, line...)
		b = append(b, '\n')
	}
	return append(b, '\n')
}

var (
	// lineBreaks removes CR and LF.
	lineBreaks = strings.NewReplacer("\r\n", "", "\r", "", "\n", "")
	// normalizeLineBreaks turns every SSE line ending into LF.
	normalizeLineBreaks = strings.NewReplacer("\r\n", "\n", "\r", "\n")
)

// resumePoint returns the seq to stream after: the Last-Event-ID header a
// reconnecting EventSource sends, else ?after=, else 0 (from the start). The
// header wins because the browser updates it on every reconnect while the
// URL, and so ?after, stays as first opened.
func resumePoint(r *http.Request) (int64, error) {
	if v := r.Header.Get(lastEventIDHeader); v != "" {
		seq, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || seq < 0 {
			return 0, badRequest("invalid Last-Event-ID header",
				api.ProblemField{Path: lastEventIDHeader, Message: "must be a non-negative integer (an event seq)"})
		}
		return seq, nil
	}
	q := newQueryParser(r)
	after := q.seq("after")
	return after, q.err()
}
