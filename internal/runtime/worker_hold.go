package runtime

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/chat/engine"
)

// defaultHoldSelection is how long a turn's speaker.selected may wait to be
// written together with the turn's first output.
const defaultHoldSelection = 20 * time.Millisecond

// heldAppend is a speaker selection (and, for a chat that starts, its
// chat.running) the worker acts on before it is durable. A turn is then one
// append and one commit wait, not two: the selection is written with the
// turn's first output (commit), and the model call starts at once instead
// of after the selection's commit. A turn slower than the hold delay gets
// its selection appended alone meanwhile (flushHeld), so that followers see
// who speaks during a long model call.
//
// Holding is safe because a selection can be made again from the log: if
// the worker stops before the selection is durable, it was neither
// published nor recorded, and the next worker selects again from the same
// log as it redoes the turn (for auto selection, with another selector
// call). A chat whose chat.running was not written is still queued, under
// the worker's lease, and the next worker starts it again.
type heldAppend struct {
	// evs are the planned events (seqs and times set); st is the worker's
	// state after them and base the confirmed state before them.
	evs      []chat.Event
	st, base *engine.State
	timer    *time.Timer
	// flushed: evs were appended alone; err: that append failed, with an
	// outcome the worker does not know.
	flushed bool
	err     error
}

// holdable reports whether a step is a speaker selection, or the start of
// a queued chat, that the worker may act on before it is durable.
func (w *worker) holdable(s *engine.Step) bool {
	if s.Kind != engine.StepAppend || len(s.Before) > 0 || len(s.Events) == 0 || w.inputResponse != nil ||
		w.rt.holdSelection < 0 {
		return false
	}
	if w.st.Status == chat.StatusQueued {
		// A new chat's chat.running goes with its first turn: one commit
		// wait less before the first reply.
		return len(s.Events) == 1 && s.Events[0].Type == chat.EventChatRunning
	}
	if w.st.Status != chat.StatusRunning {
		return false
	}
	// By index: a copy of each event would sit in the frame of step, which
	// holdable is inlined into and a waiting chat's stack holds.
	for i := range s.Events {
		if s.Events[i].Type != chat.EventSpeakerSelected {
			return false
		}
	}
	return true
}

// hold applies a selection to the worker's state without appending it,
// and arranges for it to be appended alone if the turn's first output has
// not come within the hold delay. A selection that would change more than
// the turn in progress (the plan added a stop) is committed at once.
func (w *worker) hold(ctx context.Context, evs ...chat.Event) error {
	next, out, err := w.st.Plan(evs, w.env(), w.id)
	if err != nil {
		return fmt.Errorf("fold events of chat %s: %w", w.id, err)
	}
	if len(out) != len(evs) || next.Status != chat.StatusRunning {
		return w.commit(ctx, evs...)
	}
	// What is held already (a chat's start) is held on with these events.
	prev, base, err := w.takeUnwritten()
	if err != nil {
		return err
	}
	if base == nil {
		base = w.st
	}
	h := &heldAppend{evs: append(prev, out...), st: next, base: base}
	w.st = next
	w.holdMu.Lock()
	w.held = h
	h.timer = time.AfterFunc(w.rt.holdSelection, func() { w.flushHeld(w.runCtx, h) })
	w.holdMu.Unlock()
	return nil
}

// flushHeld appends a held selection alone, if it is still held.
func (w *worker) flushHeld(ctx context.Context, h *heldAppend) {
	w.holdMu.Lock()
	defer w.holdMu.Unlock()
	if w.held != h || h.flushed || h.err != nil {
		return
	}
	upd := h.st.Update(w.rt.now())
	err := w.append(ctx, &chat.AppendParams{ChatID: w.id, Epoch: w.epoch, Events: h.evs, Update: upd})
	if err != nil {
		h.err = &appendError{err: fmt.Errorf("append seq %d..%d to chat %s: %w", h.evs[0].Seq, h.evs[len(h.evs)-1].Seq, w.id, err)}
		return
	}
	h.flushed = true
	w.rt.appended(w.id, w.topic, h.evs, h.st, &upd)
	// Durable now: nothing is left to write or to go back to. A chat
	// waits on its model with a flushed selection for as long as the
	// model takes, so the hold, its events and the state before them
	// (which the worker's state no longer shares) are let go now rather
	// than at the turn's end.
	w.held = nil
}

// takeHeld removes the held selection, if any, waiting for a flush in
// progress to end; after it no flush of that selection can start.
func (w *worker) takeHeld() *heldAppend {
	w.holdMu.Lock()
	defer w.holdMu.Unlock()
	h := w.held
	if h != nil {
		h.timer.Stop()
		w.held = nil
	}
	return h
}

// settleHeld ends holding before the worker decides from what is durable
// (a stop, the worker's end): a selection that was not appended is
// dropped, and the worker's state is the confirmed one again. It returns
// the error of a flush whose outcome is unknown.
func (w *worker) settleHeld() error {
	_, base, err := w.takeUnwritten()
	if base != nil {
		w.st = base
	}
	return err
}

// takeUnwritten removes the held events and returns those still to be
// appended, with the confirmed state before them; none and a nil state when
// nothing is held or the flush wrote it. A flush whose outcome is unknown
// puts the worker back on the confirmed state and returns its error.
func (w *worker) takeUnwritten() ([]chat.Event, *engine.State, error) {
	h := w.takeHeld()
	switch {
	case h == nil || h.flushed:
		return nil, nil, nil
	case h.err != nil:
		w.st = h.base
		return nil, nil, h.err
	}
	return slices.Clip(h.evs), h.base, nil
}
