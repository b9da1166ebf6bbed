// Package spec is the chat spec, the request body of POST /v1/chats: its
// types, its strict decoding (every unknown field and wrong type reported
// with its JSON pointer) and its validation against what a server offers
// (docs/chat-specs.md). It also says what a validated spec means where it leaves a
// field out (the defaults, and lookups by name: access.go).
//
// It is a package of its own so that the chat engine (internal/chat) reads
// as an engine: the engine takes a decoded, valid *Spec and never decodes or
// checks one itself. spec imports nothing of agentd's but internal/structured (a leaf); the HTTP layer, the
// team-file translation (internal/component) and the tools check specs with
// it.
//
//   - spec.go, model.go, message.go: the types. The message shapes (tool
//     calls, tool responses, usage) are shared with the chat log, which
//     keeps a resumed history message as it was given.
//   - decode.go: DecodeSpec, the thorough decoder that finds every problem;
//     decodefast.go: the one-pass decode (encoding/json/v2's, from
//     github.com/go-json-experiment/json) that takes every spec without
//     problems, and gives up to the thorough one at anything else.
//   - validate.go: Validate, every rule of the chat spec (docs/chat-specs.md) and the server's Limits;
//     output.go: an assistant's output_schema (structured output), whose
//     schema internal/structured reads, and the property order a stored
//     spec keeps of it.
//   - run.go: the bodies that post a run and fork a chat, decoded into
//     RunRequest and ForkRequest (their shape; the engine's CheckRun checks
//     them against a chat's spec); decode.go's Draft is a saved team's
//     body decoded, which the runtime validates.
package spec
