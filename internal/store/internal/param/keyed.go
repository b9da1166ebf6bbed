package param

import (
	"fmt"

	"github.com/agentd/agentd/internal/chat"
)

// Answer judges the answer a driver found stored for k (found false: none):
// nil for none, the answer for the same request, ErrConflict for another.
func Answer(k *chat.KeyedRequest, found bool, hash string, answer []byte) (*chat.Answer, error) {
	switch {
	case !found:
		return nil, nil
	case hash != k.RequestHash && !k.AnyRequest:
		return nil, fmt.Errorf("%s key %q on chat %s was used for another request: %w", k.Op, k.Key, k.ChatID, chat.ErrConflict)
	}
	return chat.DecodeAnswer(answer)
}

// Repeat is what a write that carries a keyed request returns, given what
// Answer said of its key: nil for a fresh key (the write goes on), the
// error, or a *chat.AnsweredError with the stored answer.
func Repeat(a *chat.Answer, err error) error {
	switch {
	case err != nil:
		return err
	case a != nil:
		return &chat.AnsweredError{Answer: a}
	}
	return nil
}

// NotAnswered is the error of Store.Answered for a key with no answer.
func NotAnswered(k *chat.KeyedRequest) error {
	return fmt.Errorf("answer of %s key %q on chat %s: %w", k.Op, k.Key, k.ChatID, chat.ErrNotFound)
}
