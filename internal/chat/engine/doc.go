// Package engine is the group chat itself, as a pure state machine: the
// fold of a chat's log into its State, and the choice of what happens next.
// It does no I/O — no database, model, sandbox, clock or log of its own —
// and a test (TestNoIO) holds it to that, so every rule of a group chat can
// be read and tested without a store or a model. internal/runtime runs it,
// the way an application runs a raft node: it persists what the engine
// asks for, and only then applies it.
//
// The API is small:
//
//   - NewState and State.Apply: the fold of the log (state.go). A state
//     rebuilt from the stored log is the live one, field for field
//     (State.Diff checks it).
//   - State.Next: the next Step (manager.go): select a speaker, call a
//     model, run tools or code, ask for input, start a queued run, append
//     events, stop, or wait. The StepEnv gives it the time and fresh ids.
//   - State.Plan: the state the events of a step would make, checked before
//     they are appended, so a worker never appends what its fold refuses.
//   - State.Update: the chat record's view of the state.
//
// Where each decision lives:
//
//   - who speaks next: selection.go (State.selectStep), with the graph
//     (graph.go), magentic_one (magentic.go) and team agents' inner runs
//     (team.go);
//   - what a model sees: modelcontext.go and context.go (AgentChat's model
//     context), structured.go (output types), tools.go (the tool loop);
//   - why a chat stopped: stop.go makes every terminal event; the
//     conditions are in termination.go;
//   - runs, human input and approvals: runs.go and input.go.
package engine
