//go:build unix

package store

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDataDir takes an exclusive lock on the data directory's lock file, so
// that one process at a time uses an embedded store: a second one would
// share the file but not the in-process notifications that wake SSE streams
// and workers, and would serve streams that stall. The kernel releases the
// lock when the process ends, however it ends, so a crash leaves no stale
// lock behind. Release it by closing the returned file.
func lockDataDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrDataDirLocked
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// The holder's pid, for the operator who wonders which process it is.
	if err := f.Truncate(0); err == nil {
		_, _ = fmt.Fprintf(f, "%d\n", os.Getpid())
	}
	return f, nil
}
