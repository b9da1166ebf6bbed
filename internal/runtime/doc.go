// Package runtime runs chats: it drives each chat's engine.State from its
// log to a terminal status, doing the effects the engine asks for, and it
// is the service the HTTP layer calls.
//
//   - worker.go: the effects runner of one chat, and where a message is
//     appended (worker.commit): events are appended, and only once the
//     store confirmed them does the worker adopt the new state and publish
//     them. worker_model.go, worker_tools.go, worker_code.go,
//     worker_magentic.go and worker_branches.go do a step's effects (model
//     calls, tool calls, code in the sandbox, the orchestrator, parallel
//     branches); worker_hold.go holds a turn's speaker selection, acted on
//     but not yet durable, to append it with the turn's first output; an
//     error that cut a step becomes a terminal event in worker.stop.
//   - scheduler.go: claims, leases and one worker per claimed chat;
//     runtime.go: the Runtime's lifecycle and configuration.
//   - broker.go: committed events and deltas to this replica's streams,
//     from memory; deltas.go: a stream's queue of deltas and the text of
//     replies in progress; relay.go: deltas between replicas, through the
//     store.
//   - service.go, service_runs.go, progress.go: what the HTTP layer calls —
//     create, read, input, cancel; runs, stop and forks; and, for agentd
//     as an application backend, teams.go (saved teams), metadata.go,
//     retention.go (erasure) and deliveries.go.
//   - metrics.go and trace.go: Prometheus series and spans.
//
// Its name is the job it does; callers that also need Go's runtime package
// import that one under another name.
package runtime
