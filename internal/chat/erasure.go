package chat

import "time"

// Erasure: a chat that ended removed, by request or by retention.

// EraseChatParams are the arguments of Store.EraseChat.
type EraseChatParams struct {
	Tenant string // "" matches any tenant
	ChatID string
	Now    time.Time
}

// EraseEndedParams are the arguments of Store.EraseEnded.
type EraseEndedParams struct {
	// EndedBefore: chats that ended before this time are erased.
	EndedBefore time.Time
	Limit       int
	Now         time.Time
}
