package chat

// Readers of the data of run.started and terminal events, for the
// packages that map a chat's log onto other protocols.

// Ending is what a terminal event says of how a run ended.
type Ending struct {
	Status     Status
	StopReason StopReason
	StopDetail string
	Error      string
	// Run is the run the event ends (0 in logs written before runs).
	Run int
}

// EndingOf reads a terminal event's data; false for any other event.
func EndingOf(e Event) (Ending, bool) {
	var d terminalData
	if !e.Type.Terminal() || decodeData(e, &d) != nil {
		return Ending{}, false
	}
	return Ending(d), true
}

// StartedRun is the number of the run a run.started event opens; false
// for any other event.
func StartedRun(e Event) (int, bool) {
	var d runData
	if e.Type != EventRunStarted || decodeData(e, &d) != nil {
		return 0, false
	}
	return d.Run, true
}
