package a2a

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/agentd/agentd/internal/runtime"
)

// streamTask answers a streaming call with an event stream: the task as
// it stood at seq since when the call was a message (or v, as it stands,
// for a subscription), then a status or artifact update per later event
// of the run, until the task settles after since (ends, or asks for
// input). A message's stream thus shows its whole run however fast the
// team is. The stream subscribes before it reads the log, so no event
// falls between the snapshot and the updates, and none is sent twice.
func (c *call) streamTask(chatID string, run int, since int64, historyLength *int, v *runView) {
	ctx := c.r.Context()
	wake, stop := c.h.chats.Subscribe(chatID)
	defer stop()
	var err error
	if v == nil {
		v = newRunView(chatID, run)
		err = c.follow(ctx, v, since, nil)
	} else {
		err = c.follow(ctx, v, 0, nil)
	}
	if err != nil {
		c.failErr(err, TaskID(chatID, run))
		return
	}
	c.h.metrics.calls.WithLabelValues(c.method, "ok").Inc()
	c.h.metrics.streams.Inc()
	defer c.h.metrics.streams.Dec()
	rc := http.NewResponseController(c.w)
	h := c.w.Header()
	h.Set("Content-Type", sseContentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	c.w.WriteHeader(http.StatusOK)
	// written is false once a write failed: the client is gone, which is
	// no error of ours to log.
	written := true
	send := func(out []StreamResponse) (err error) {
		defer func() { written = err == nil }()
		for i := range out {
			b, err := json.Marshal(rpcResponse{JSONRPC: jsonRPCVersion, ID: nullIfEmpty(c.id), Result: out[i]})
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(c.w, "data: %s\n\n", b); err != nil {
				return err
			}
		}
		return rc.Flush()
	}
	if err := send([]StreamResponse{{Task: v.task(c.historyLength(historyLength))}}); err != nil {
		return
	}
	// cut ends a stream before its task settled with the JSON-RPC error
	// the client raises, so that it subscribes again instead of taking
	// the stream's end for the task's: the server shutting down, or the
	// log that cannot be read. A client gone is told nothing.
	cut := func(err error) {
		switch {
		case runtime.ServerEnded(ctx):
			c.h.log.Warn("a2a stream: cut by shutdown", "chat_id", chatID, "run", run, "method", c.method)
			c.h.metrics.cut.WithLabelValues(cutShutdown).Inc()
			err = runtime.ErrStopped
		case ctx.Err() != nil || !written:
			return
		default:
			c.h.log.Error("a2a stream: read the chat's log", "chat_id", chatID, "run", run, "error", err)
			c.h.metrics.cut.WithLabelValues(cutError).Inc()
		}
		e, _ := rpcErrorOf(err, TaskID(chatID, run))
		b, _ := json.Marshal(rpcResponse{JSONRPC: jsonRPCVersion, ID: nullIfEmpty(c.id), Error: e})
		_, _ = fmt.Fprintf(c.w, "data: %s\n\n", b)
		_ = rc.Flush()
	}
	beat := time.NewTicker(c.h.cfg.Heartbeat)
	defer beat.Stop()
	for {
		// What came after the snapshot, or since the last read.
		if err := c.follow(ctx, v, 0, send); err != nil {
			cut(err)
			return
		}
		if v.settledAfter(since) {
			return
		}
		select {
		case <-ctx.Done():
			cut(ctx.Err())
			return
		case <-beat.C:
			// A comment keeps proxies from closing an idle stream; the
			// log is read again too, in case a notification was lost.
			if _, err := fmt.Fprint(c.w, ": keep-alive\n\n"); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		case <-wake:
		}
	}
}
