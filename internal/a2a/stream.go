package a2a

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// streamTask answers a streaming call with an event stream: the task as
// it stands (v, or folded now), then a status or artifact update per
// event of the run, until the task settles after seq since (ends, or asks
// for input). The stream subscribes before it reads the log, so no event
// falls between the snapshot and the updates, and none is sent twice.
func (c *call) streamTask(chatID string, run int, since int64, historyLength *int, v *runView) {
	ctx := c.r.Context()
	wake, stop := c.h.chats.Subscribe(chatID)
	defer stop()
	var err error
	if v == nil {
		v, err = c.load(ctx, chatID, run)
	} else {
		err = c.follow(ctx, v, nil)
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
	send := func(out []StreamResponse) error {
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
	beat := time.NewTicker(c.h.cfg.Heartbeat)
	defer beat.Stop()
	for !v.settledAfter(since) {
		select {
		case <-ctx.Done():
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
		if err := c.follow(ctx, v, send); err != nil {
			if !errors.Is(err, ctx.Err()) && ctx.Err() == nil {
				c.h.log.Error("a2a stream: read the chat's log", "chat_id", chatID, "run", run, "error", err)
				e, _ := rpcErrorOf(err, TaskID(chatID, run))
				b, _ := json.Marshal(rpcResponse{JSONRPC: jsonRPCVersion, ID: nullIfEmpty(c.id), Error: e})
				_, _ = fmt.Fprintf(c.w, "data: %s\n\n", b)
				_ = rc.Flush()
			}
			return
		}
	}
}
