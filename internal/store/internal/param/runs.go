package param

import "github.com/agentd/agentd/internal/chat"

// RunPlan is what SubmitRun does to a chat, decided from its state the
// same way by every store.
type RunPlan struct {
	// Run is the number the posted run gets: always the highest posted so
	// far plus one, so that no number is given out twice.
	Run int
	// DropQueued: delete the runs queued after the chat's latest.
	DropQueued bool
	// Cancel: ask the active run to cancel.
	Cancel bool
}

// PlanRun decides SubmitRun for a chat in status whose latest run is run
// and whose highest posted run is lastRun. A busy chat (a run active, or
// one waiting to start) answers as ifBusy says; reject is a
// *chat.BusyError naming the run that is active or about to start.
func PlanRun(status chat.Status, run, lastRun int, ifBusy string) (RunPlan, error) {
	terminal := status.Terminal()
	busy := !terminal || lastRun > run
	plan := RunPlan{Run: lastRun + 1}
	switch {
	case busy && ifBusy == chat.IfBusyReject:
		active := run
		if terminal {
			active = run + 1 // ended; the next is about to start
		}
		return RunPlan{}, &chat.BusyError{Run: active}
	case busy && ifBusy == chat.IfBusyInterrupt:
		plan.DropQueued, plan.Cancel = true, !terminal
	}
	return plan, nil
}
