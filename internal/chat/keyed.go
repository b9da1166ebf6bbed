package chat

import (
	"context"
	"encoding/json"
	"fmt"
)

// The operations a KeyedRequest names: the POSTs on a chat that create
// something and take an Idempotency-Key.
const (
	OpRun   = "runs"
	OpFork  = "fork"
	OpStop  = "stop"
	OpInput = "input"
)

// KeyedRequest is a request on a chat that its client may repeat with the
// same Idempotency-Key (POST /runs, /fork, /stop, /input). Keys are scoped
// to the chat the request names (and so to its tenant) and to the
// operation: one key may serve a run and a stop of the same chat.
type KeyedRequest struct {
	Tenant string // "" matches any tenant
	ChatID string
	Op     string
	Key    string
	// RequestHash identifies the request's content: a repeat with another
	// hash is a conflict, not a repeat.
	RequestHash string
	// AnyRequest looks the key's answer up whatever request it answered:
	// for a front-end whose client names a run by its id alone and posts
	// it again with what it holds now (Store.Answered only).
	AnyRequest bool
}

// Answer is what a keyed request was answered, stored with its key in the
// transaction of what it created, and given again to each repeat: a
// client that lost the answer learns exactly what it missed, from any
// replica, even if the one that answered died before sending it.
type Answer struct {
	// Chat is the chat the request created or changed, as the request
	// left it, without its Spec (which never changes: a repeat reads it
	// from the chat).
	Chat *Chat `json:"chat"`
	// Run is the run a POST /runs posted.
	Run int `json:"run,omitempty"`
}

// AnsweredError is returned by a store write that carried a KeyedRequest
// whose key was already answered with the same RequestHash: nothing was
// written, and Answer is what the first request got. A key answered with
// another hash is ErrConflict.
type AnsweredError struct {
	Answer *Answer
}

func (e *AnsweredError) Error() string {
	return fmt.Sprintf("the request was answered before (chat %s)", e.Answer.Chat.ID)
}

// KeyedStore is the part of Store that keeps the answers of keyed
// requests (see KeyedRequest); each write method that takes one stores
// its answer in its own transaction.
type KeyedStore interface {
	// Answered returns the answer stored for r's key on r's chat: ErrNotFound
	// if there is none (or the chat is not r's tenant's), ErrConflict if
	// it answered another RequestHash.
	Answered(ctx context.Context, r *KeyedRequest) (*Answer, error)
}

// EncodeAnswer is how a store keeps an answer: JSON, without the chat's
// spec. Kept as bytes, not as a JSON column, so a repeat's answer is the
// first one byte for byte (a JSON column may reorder an object's keys).
func EncodeAnswer(c *Chat, run int) ([]byte, error) {
	cc := *c
	cc.Spec = nil
	return json.Marshal(&Answer{Chat: &cc, Run: run})
}

// DecodeAnswer reads what EncodeAnswer wrote.
func DecodeAnswer(b []byte) (*Answer, error) {
	var a Answer
	if err := json.Unmarshal(b, &a); err != nil || a.Chat == nil {
		return nil, fmt.Errorf("decode a stored answer: %v", err)
	}
	// A nil json.RawMessage is encoded null, and decoded as that text.
	for _, r := range []*json.RawMessage{&a.Chat.Spec, &a.Chat.Metadata, &a.Chat.PendingInput, &a.Chat.InputResponse} {
		if string(*r) == "null" {
			*r = nil
		}
	}
	return &a, nil
}
