//go:build !unix

package store

import "os"

// lockDataDir is a no-op where flock(2) does not exist: there, nothing stops
// a second process on the same data directory.
func lockDataDir(string) (*os.File, error) { return nil, nil }
