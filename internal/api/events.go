package api

// How clients and the protocol mappings read a chat's events.

import (
	"strings"

	"github.com/agentd/agentd/internal/chat"
)

// EventPayload is the JSON value a client sees as an event's data (the SSE
// data line): the message for message events, the event's data otherwise.
func EventPayload(e chat.Event) any {
	if m, ok := chat.MessageFromEvent(e); ok {
		return m
	}
	if len(e.Data) == 0 {
		return struct{}{}
	}
	return e.Data
}

// Readers of the data of run.started and terminal events, for the
// packages that map a chat's log onto other protocols.

// Ending is what a terminal event says of how a run ended.
type Ending struct {
	Status     chat.Status
	StopReason chat.StopReason
	StopDetail string
	Error      string
	// Run is the run the event ends (0 in logs written before runs).
	Run int
}

// EndingOf reads a terminal event's data; false for any other event.
func EndingOf(e chat.Event) (Ending, bool) {
	var d chat.TerminalData
	if !e.Type.Terminal() || chat.DecodeData(e, &d) != nil {
		return Ending{}, false
	}
	return Ending(d), true
}

// StartedRun is the number of the run a run.started event opens; false
// for any other event.
func StartedRun(e chat.Event) (int, bool) {
	var d chat.RunData
	if e.Type != chat.EventRunStarted || chat.DecodeData(e, &d) != nil {
		return 0, false
	}
	return d.Run, true
}

// Failure says why a run failed: its error, and the stop's detail when
// that says more (it often repeats the error), else the stop reason.
func Failure(d chat.TerminalData) string {
	switch {
	case d.Error != "" && d.StopDetail != "" && !strings.Contains(d.Error, d.StopDetail):
		return d.Error + ": " + d.StopDetail
	case d.Error != "":
		return d.Error
	case d.StopDetail != "":
		return d.StopDetail
	default:
		return string(d.StopReason)
	}
}
