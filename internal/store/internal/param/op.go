package param

import "github.com/agentd/agentd/internal/chat"

// Op is one member of a store's group commit: an append, or the creation
// of a chat, whose store-specific part (its statement's parameters, the
// chat it returned) is a C. Both stores batch the two together, so that a
// create shares the appends' transaction and flush.
type Op[C any] struct {
	Append *chat.AppendParams
	Create *C
	// CreateID is the id of the chat Create makes.
	CreateID string
}

// Chat is the chat o writes to, the group committer's sort key.
func (o *Op[C]) Chat() string {
	if o.Append != nil {
		return o.Append.ChatID
	}
	return o.CreateID
}

// Trace is an append's trace, if it asked for one (see
// chat.AppendParams.Trace).
func (o *Op[C]) Trace() *chat.AppendTrace {
	if o.Append != nil {
		return o.Append.Trace
	}
	return nil
}
