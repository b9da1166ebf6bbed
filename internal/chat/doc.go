// Package chat holds agentd's domain: what a chat is (Chat, Status,
// StopReason), the entries of its append-only log (Event, Message, and the
// data each event carries, with its JSON encoding), the requests and
// answers of its API (Input, PendingInput, Delta), and the small interfaces
// through which the rest of agentd reaches the outside world: Store (the
// log and the chat records), ModelClient, Tools and Sandboxes.
//
// It is the leaf every other package compiles against: internal/store,
// internal/llm, internal/tool, internal/sandbox and internal/webhook
// implement its interfaces; internal/chat/engine decides what a chat does
// next from its log; internal/runtime does it. It imports no package of
// agentd but internal/spec (the chat spec) and its own writer of the
// log's hottest event data (internal/chat/internal/jsonobj), and none of
// the third-party libraries the adapters wrap, so a change of database or
// model client never reaches it.
//
// docs/architecture.md draws the packages and follows one turn through
// them.
package chat
