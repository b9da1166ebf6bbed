package pgtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Server is a throwaway Postgres server of its own, started from the local
// initdb and postgres binaries, for what the shared server of URL must never
// be used for: a test may stop it and start it again on the same port and
// data (a database outage under a running program), and a program such as
// the side-by-side benchmark may configure it and watch its processes.
type Server struct {
	bin      string
	cred     *syscall.Credential
	dir      string
	port     int
	settings []string

	mu  sync.Mutex
	srv *server
}

// NewServer initialises and starts a throwaway server with the given
// settings (as StartServer); it is stopped and its data removed when the
// test ends. Without local Postgres binaries the test is skipped, or fails
// when CI=true.
func NewServer(tb testing.TB, settings ...string) *Server {
	tb.Helper()
	s, err := StartServer(settings...)
	if errors.Is(err, errUnavailable) {
		unavailable(tb, err, os.Getenv("CI") == "true")
		return nil
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Remove(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

// StartServer runs initdb in a temporary directory and starts postgres on a
// free port of 127.0.0.1 with trust authentication, as Main's throwaway
// server, adding the given settings ("name=value", passed as -c). As root
// the server runs as the "postgres" user. Remove it with Remove; if this
// process dies first, the server gets SIGINT from the kernel.
func StartServer(settings ...string) (*Server, error) {
	bin, err := findBinDir()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := initCluster(bin, cred)
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, cred: cred, dir: dir, settings: settings}
	for range 3 { // a port taken between freePort and bind is retried
		if s.port, err = freePort(); err != nil {
			break
		}
		if err = s.Start(); err == nil {
			return s, nil
		}
		if !strings.Contains(err.Error(), "could not bind") && !strings.Contains(err.Error(), "already in use") {
			break
		}
	}
	os.RemoveAll(dir)
	return nil, fmt.Errorf("start postgres: %w", err)
}

// URL is the superuser's connection URL of the postgres database.
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
	srv, err := runServer(s.bin, s.cred, s.dir, s.port, s.settings)
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

// Remove stops the server and removes its directory.
func (s *Server) Remove() error {
	return errors.Join(s.Stop(), os.RemoveAll(s.dir))
}

// PID is the postmaster's process id (0 when stopped): its children are the
// backends and the background processes.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return 0
	}
	return s.srv.cmd.Process.Pid
}

// DataDir is the data directory (pg_wal is beneath it).
func (s *Server) DataDir() string { return filepath.Join(s.dir, "data") }

// BinDir is the directory of the server binaries used, symbolic links
// followed: pgbench, psql and pg_waldump are there too on the usual
// installations, even when only initdb and postgres are linked onto PATH.
func (s *Server) BinDir() (string, error) {
	real, err := filepath.EvalSymlinks(filepath.Join(s.bin, "initdb"))
	if err != nil {
		return "", err
	}
	return filepath.Dir(real), nil
}
