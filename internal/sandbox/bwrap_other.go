//go:build !linux

package sandbox

import (
	"context"
	"errors"
)

// bwrapManager exists on Linux only: bubblewrap is Linux namespaces.
type bwrapManager struct{ Manager }

func (b *bwrapManager) dir(chatID string) string { return "" }

func openBwrap(context.Context, Config, *metrics) (*bwrapManager, error) {
	return nil, errors.New("bubblewrap needs Linux")
}
