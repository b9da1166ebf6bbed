// Package chat is agentd's engine: the messages and events of a chat's
// append-only log, and the runtime that drives a chat from its log to a
// terminal status (speaker selection, model turns, termination). What a
// chat is asked to do, the spec, is decoded and validated by package spec
// before it gets here.
//
// A chat is a pure state machine folded from its log, run by a thin effects
// runner, as a raft node's state machine is run by the code that persists
// before it applies:
//
//   - state.go: the state, the fold of the log (state.apply). No I/O.
//   - manager.go: the group chat manager as a function of that state
//     (state.next): the next step — select a speaker, call a model, run
//     tools, run code, ask for input, stop — and the events each step
//     appends. No I/O.
//   - selection.go: where the next speaker is chosen (state.selectStep).
//   - modelcontext.go and context.go: what an assistant's model sees of the
//     log (state.modelContext), as AgentChat's AssistantAgent keeps its
//     model context; msgtype.go: AgentChat's type of each message;
//     structured.go: an output_schema's response format and the
//     StructuredMessage a reply becomes.
//   - stop.go: where a chat stops — every terminal event is made there; the
//     conditions are in termination.go, and worker.stop maps an error that
//     cut a step to its terminal event.
//   - worker.go: the effects runner, and where a message is appended
//     (worker.commit): events are appended, and only once the store
//     confirmed them does the worker adopt the new state and publish them.
//     worker_model.go, worker_tools.go and worker_code.go do the step's
//     effects (model calls, tool calls, code in the sandbox).
//     worker_hold.go holds a turn's speaker.selected, acted on but not yet
//     durable, to append it with the turn's first output: one append per
//     turn.
//   - runtime.go (lifecycle), scheduler.go (claims, leases, one worker per
//     claimed chat), broker.go (committed events and deltas to local
//     subscribers, from memory; deltas.go holds a stream's queue of deltas
//     and the text of replies in progress), relay.go (deltas between
//     replicas, through the store) and service.go (the API the HTTP layer
//     calls).
//
// chat declares the small interfaces it needs from the outside world (Store,
// ModelClient, Tools, Sandboxes) and imports none of the packages that
// implement them, so the rules of a group chat can be read and tested without
// a database or a model.
package chat
