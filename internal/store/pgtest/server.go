package pgtest

import "path/filepath"

// Server is a throwaway Postgres server of its own, for programs (such as
// the side-by-side benchmark) that need to configure the server and watch
// its processes, which a shared server does not allow.
type Server struct{ s *server }

// StartServer runs initdb in a temporary directory and starts postgres on a
// free port of 127.0.0.1 with trust authentication, as Main's throwaway
// server, adding the given settings ("name=value", passed as -c). As root
// the server runs as the "postgres" user. Stop it with Stop; if this
// process dies first, the server gets SIGINT from the kernel.
func StartServer(settings ...string) (*Server, error) {
	s, err := startServer(settings...)
	if err != nil {
		return nil, err
	}
	return &Server{s: s}, nil
}

// URL is the superuser's connection URL of the postgres database.
func (s *Server) URL() string { return s.s.url }

// PID is the postmaster's process id: its children are the backends and the
// background processes.
func (s *Server) PID() int { return s.s.cmd.Process.Pid }

// DataDir is the data directory (pg_wal is beneath it).
func (s *Server) DataDir() string { return filepath.Join(s.s.dir, "data") }

// BinDir is the directory of the server binaries used, symbolic links
// followed: pgbench, psql and pg_waldump are there too on the usual
// installations, even when only initdb and postgres are linked onto PATH.
func (s *Server) BinDir() (string, error) {
	dir, err := findBinDir()
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(filepath.Join(dir, "initdb"))
	if err != nil {
		return "", err
	}
	return filepath.Dir(real), nil
}

// Stop shuts the server down (fast shutdown) and removes its directory.
func (s *Server) Stop() error { return s.s.stop() }
