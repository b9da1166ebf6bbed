package pgtest

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
)

// Server is a Postgres server of one test's own, started from the local
// initdb and postgres binaries, which the test may stop and start again on
// the same port and data: a database outage under a running program. (The
// shared server of URL must never be stopped by a test.)
type Server struct {
	bin  string
	cred *syscall.Credential
	dir  string
	port int

	mu  sync.Mutex
	srv *server
}

// NewServer initialises and starts a throwaway server; it is stopped and
// its data removed when the test ends. Without local Postgres binaries the
// test is skipped, or fails when CI=true.
func NewServer(tb testing.TB) *Server {
	tb.Helper()
	bin, err := findBinDir()
	if err != nil {
		unavailable(tb, err, os.Getenv("CI") == "true")
		return nil
	}
	cred, err := credential()
	if err != nil {
		unavailable(tb, err, os.Getenv("CI") == "true")
		return nil
	}
	dir, err := initCluster(bin, cred)
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{bin: bin, cred: cred, dir: dir}
	tb.Cleanup(func() {
		if err := errors.Join(s.Stop(), os.RemoveAll(dir)); err != nil {
			tb.Error(err)
		}
	})
	for range 3 { // a port taken between freePort and bind is retried
		if s.port, err = freePort(); err != nil {
			tb.Fatal(err)
		}
		if err = s.Start(); err == nil {
			return s
		}
	}
	tb.Fatalf("start postgres: %v", err)
	return nil
}

// URL is the admin URL of the server's postgres database.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Start starts the server (again) and waits until it accepts connections.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return nil
	}
	srv, err := runServer(s.bin, s.cred, s.dir, s.port)
	if err != nil {
		return err
	}
	s.srv = srv
	return nil
}

// Stop shuts the server down (fast: clients are disconnected) and keeps its
// data; safe to call when stopped.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return nil
	}
	err := s.srv.halt()
	s.srv = nil
	return err
}
