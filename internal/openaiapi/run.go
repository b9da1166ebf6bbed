package openaiapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/api"
	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/runtime"
)

// A request of this API answers one run: it follows the chat's log from
// before the run until the run ends, collecting what the answer needs.

// outcome is how a followed run ended, for answers and the metric.
type outcome string

const (
	outcomeCompleted     outcome = "completed"
	outcomeInputRequired outcome = "input_required"
	outcomeFailed        outcome = "failed"
	outcomeCancelled     outcome = "cancelled"
	outcomeTimeout       outcome = "timeout"
	// outcomeInterrupted: the answer could not follow the run to its end
	// (the server shut down under it, the log could not be read); the
	// run goes on.
	outcomeInterrupted outcome = "interrupted"
)

// runResult is what a run said and how it ended.
type runResult struct {
	chatID string
	run    int
	// final is the run's last message (not its task, not an inner team's);
	// nil while none was said.
	final *chat.Message
	// pieces are the streamed fragments of final's reply, when they add up
	// to its content; else nil (the model did not stream, or the stream
	// was replayed on another replica and the pieces were not all seen).
	pieces []string
	usage  chat.Usage
	// started: the run's run.started event was seen; ended: its end (a
	// terminal event or a request for input).
	started, ended bool
	// startedAt is when the run started (its run.started event).
	startedAt time.Time
	outcome   outcome
	detail    string
	endedAt   time.Time
}

// runFollower follows one run of a chat through its events and deltas.
type runFollower struct {
	res *runResult
	// replies are the deltas of the replies in progress, by agent and the
	// seq they follow; candidate's are kept once its message came.
	replies map[replyKey][]string
}

type replyKey struct {
	name     string
	afterSeq int64
}

func newRunFollower(chatID string, run int) *runFollower {
	return &runFollower{res: &runResult{chatID: chatID, run: run}, replies: map[replyKey][]string{}}
}

// maxHeldPieces bounds the fragments held of one reply: a reply that
// streams more arrives as its whole text instead.
const maxHeldPieces = 100_000

// delta records a fragment of a reply in progress.
func (f *runFollower) delta(d chat.Delta) {
	k := replyKey{d.Name, d.AfterSeq}
	if d.Reset {
		delete(f.replies, k) // the reply starts again from its beginning
		return
	}
	if ps, ok := f.replies[k]; ok && len(ps) >= maxHeldPieces {
		return
	}
	f.replies[k] = append(f.replies[k], d.Content)
}

// event applies one event of the log and reports whether the run has ended.
func (f *runFollower) event(e chat.Event) bool {
	res := f.res
	if e.Type == chat.EventRunStarted {
		var d chat.RunData
		if chat.DecodeData(e, &d) == nil {
			if d.Run == res.run {
				res.started, res.startedAt = true, e.CreatedAt
			} else if d.Run > res.run && res.started {
				// A later run started: ours ended (with its terminal
				// event, which was seen before this one).
				return true
			}
		}
		return false
	}
	if !res.started {
		return false
	}
	switch {
	case e.Type == chat.EventSpeakerSelected:
		var s chat.Selection
		if chat.DecodeData(e, &s) == nil && s.Usage != nil {
			res.usage = res.usage.Add(*s.Usage)
		}
	case e.Type == chat.EventMessage:
		f.message(e)
	case e.Type == chat.EventInputRequested:
		res.ended, res.outcome, res.endedAt = true, outcomeInputRequired, e.CreatedAt
		res.detail = fmt.Sprintf("the team asked a human for input; answer it with POST /v1/chats/%s/input", res.chatID)
		return true
	case e.Type.Terminal():
		var d chat.TerminalData
		_ = chat.DecodeData(e, &d)
		res.ended, res.endedAt = true, e.CreatedAt
		switch e.Type {
		case chat.EventChatCompleted:
			res.outcome = outcomeCompleted
		case chat.EventChatCancelled:
			res.outcome, res.detail = outcomeCancelled, "the run was cancelled"
		default:
			res.outcome = outcomeFailed
			res.detail = "the run failed: " + api.Failure(d)
		}
		return true
	}
	return false
}

// message takes a message of the run: its usage, and whether it is the
// answer so far.
func (f *runFollower) message(e chat.Event) {
	res := f.res
	m, _ := chat.MessageFromEvent(e)
	if m.Usage != nil {
		res.usage = res.usage.Add(*m.Usage)
	}
	var d chat.MessageData
	_ = chat.DecodeData(e, &d)
	if m.Team != "" || d.Kind == chat.KindTask || d.Kind == chat.KindHistory {
		return
	}
	res.final = &m
	// The reply's fragments are those of its agent that began last before
	// it; those of its earlier replies are of no more use.
	var best replyKey
	found := false
	for k := range f.replies {
		if k.name == m.Name && k.afterSeq < m.Seq {
			if !found || k.afterSeq > best.afterSeq {
				best, found = k, true
			}
		}
	}
	res.pieces = nil
	if found {
		if strings.Join(f.replies[best], "") == m.Content {
			res.pieces = f.replies[best]
		}
		for k := range f.replies {
			if k.name == m.Name && k.afterSeq <= best.afterSeq {
				delete(f.replies, k)
			}
		}
	}
}

// eventPage is how many events one read takes.
const eventPageSize = 256

// follow follows run of chat from after until the run ends or the wait
// (Config.RunWait) passes, calling idle at each heartbeat while it waits
// (nil: none) and handing the run's replies in progress to live (nil:
// none), whose open replies it closes when the run has ended.
func (h *Handler) follow(ctx context.Context, tenant, chatID string, run int, after int64, idle func() error, live *liveReplies) (*runResult, error) {
	f := newRunFollower(chatID, run)
	fl := &runtime.Follow{Tenant: tenant, ChatID: chatID, After: after, Wait: h.cfg.RunWait, Heartbeat: h.cfg.Heartbeat, Idle: idle,
		Event: func(e chat.Event) (bool, error) { return f.event(e), nil },
		Delta: func(d chat.Delta) error {
			f.delta(d)
			if live == nil || !f.res.started || f.res.ended {
				return nil // not a reply of this run
			}
			return live.delta(d)
		}}
	err := fl.Run(ctx, h.rt)
	if err == nil && live != nil {
		err = live.close()
	}
	if errors.Is(err, runtime.ErrFollowWait) {
		f.res.outcome = outcomeTimeout
		f.res.detail = fmt.Sprintf("the run did not end within %s; it goes on: follow chat %s at /v1/chats/%s", h.cfg.RunWait, chatID, chatID)
		return f.res, nil
	}
	if err != nil {
		return nil, err
	}
	return f.res, nil
}

// streamEnded says why a stream that could not follow its run ends: err,
// or that the server is shutting down; ok is false when the client went
// away and no one is left to tell.
func streamEnded(ctx context.Context, err error) (ok bool, why error) {
	switch {
	case runtime.ServerEnded(ctx):
		return true, runtime.ErrStopped
	case ctx.Err() != nil:
		return false, err
	}
	return true, err
}

// endError is the error answering a run that did not complete, nil for
// one that did.
func endError(res *runResult) *Error {
	var e *Error
	switch res.outcome {
	case outcomeCompleted:
		return nil
	case outcomeInputRequired:
		e = NewError(http.StatusConflict, "input_required", "", res.detail)
	case outcomeCancelled:
		e = NewError(http.StatusConflict, "run_cancelled", "", res.detail)
	case outcomeTimeout:
		e = NewError(http.StatusGatewayTimeout, "run_timeout", "", res.detail)
	default:
		e = NewError(http.StatusInternalServerError, "run_failed", "", res.detail)
	}
	// The chat exists and the run was posted: a retry would run the team
	// again, which is the client's decision (with an Idempotency-Key, a
	// retried create gets this chat's answer instead).
	e.NoRetry = true
	return e
}
