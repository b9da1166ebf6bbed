// Package pgtest gives tests a real, empty Postgres database of their own.
//
// Where the database comes from, in order (docs/testing.md):
//
//  0. With AGENTD_TEST_POSTGRES=testcontainers: a container started once
//     per test binary through testcontainers-go from AGENTD_TEST_POSTGRES_IMAGE
//     (default agentd-postgres-test:latest, built without a registry by
//     build-image.sh beside this file), on any Docker-API engine (DOCKER_HOST;
//     Podman's service works). Databases are created per call as in 1.
//  1. AGENTD_TEST_DATABASE_URL: a postgres:// URL of a server on which the
//     URL's user may CREATE DATABASE. Each call of URL creates a uniquely
//     named database there and drops it when the test ends.
//  2. Otherwise a throwaway server, started once per test binary from the
//     local initdb and postgres binaries (on PATH, or under
//     /usr/lib/postgresql/*/bin and similar): a temporary data directory, a
//     free port on 127.0.0.1, trust authentication. As root (initdb refuses
//     to run as root) the server runs as the "postgres" user. Databases are
//     created per call as in 1. Stop the server at the end of the test
//     binary with Main, Wrap or Stop; should the binary die first, the
//     server gets SIGINT (fast shutdown) from the kernel (parent-death
//     signal) and only the temporary directory is left behind.
//  3. Otherwise the test is skipped, or, when CI=true, fails: in CI a
//     missing Postgres is a broken environment, never a reason to pass.
//
// Usage:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Wrap(m)) }
//
//	func TestX(t *testing.T) {
//		url := pgtest.URL(t) // fresh database, dropped in t.Cleanup
//		…
//	}
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the environment variable with the admin connection URL.
const EnvURL = "AGENTD_TEST_DATABASE_URL"

// errUnavailable means there is no way to get a Postgres here at all (as
// opposed to one that fails to work): tests skip, or fail in CI.
var errUnavailable = errors.New("no Postgres available")

// URL returns the connection URL of a new, empty database for this test and
// drops the database when the test ends. Close every pool on it before then
// (register the pool's Close with t.Cleanup after calling URL: cleanups run
// last-in first-out); the drop forces remaining connections off anyway.
func URL(tb testing.TB) string {
	tb.Helper()
	admin, err := adminURL()
	if errors.Is(err, errUnavailable) {
		unavailable(tb, err, os.Getenv("CI") == "true")
		return ""
	}
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	u, err := url.Parse(admin)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		tb.Fatalf("pgtest: %s must be a postgres:// URL", EnvURL)
	}

	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	name := "agentd_test_" + hex.EncodeToString(b[:])
	if err := adminExec(admin, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("pgtest: create database: %v", err)
	}
	tb.Cleanup(func() {
		// WITH (FORCE) (Postgres 13+) ends connections a test left open, so a
		// leak shows up as the test's own failure rather than as a drop
		// that fails here.
		err := adminExec(admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		if err != nil {
			err = adminExec(admin, "DROP DATABASE IF EXISTS "+name)
		}
		if err != nil {
			tb.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}

// unavailable skips the test, or fails it in CI, saying how to provide a
// Postgres.
func unavailable(tb testing.TB, err error, ci bool) {
	tb.Helper()
	msg := fmt.Sprintf("pgtest: %v. Set %s to a postgres:// URL of a server where the user may CREATE DATABASE, "+
		"or install the Postgres server binaries (initdb, postgres)", err, EnvURL)
	if ci {
		tb.Fatal(msg + " (CI=true: a missing Postgres is a failure, not a skip)")
		return
	}
	tb.Skip(msg)
}

func adminExec(admin, sql string) error {
	// Not t.Context(): cleanups run after it is cancelled.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// TestingM is what TestMain passes around: *testing.M, or a wrapper of it
// such as Wrap's (and what goleak.VerifyTestMain accepts).
type TestingM interface{ Run() int }

// Wrap returns m whose Run also stops the throwaway server, if URL started
// one, after the tests (and before, say, goleak looks for stray goroutines).
func Wrap(m TestingM) TestingM { return wrapped{m} }

type wrapped struct{ m TestingM }

// Run runs the tests, then stops the server.
func (w wrapped) Run() int {
	code := w.m.Run()
	if err := Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Main runs the tests, stops the throwaway server and exits: a TestMain in
// one line, for packages that do not use goleak.
func Main(m *testing.M) { os.Exit(Wrap(m).Run()) }

// The throwaway server is per process by nature: one test binary, one
// server, shared by its tests. Hence package state, which Stop tears down.
var local struct {
	once sync.Once
	url  string
	err  error

	mu  sync.Mutex
	srv *server
}

// Stop stops the throwaway server or container (if URL started one) and
// removes its data. It is safe to call when none was started; after it, URL
// fails.
func Stop() error {
	cerr := stopContainer()
	local.once.Do(func() { local.err = errors.New("pgtest: server stopped") })
	local.mu.Lock()
	srv := local.srv
	local.srv = nil
	local.mu.Unlock()
	if srv == nil {
		return cerr
	}
	return errors.Join(cerr, srv.stop())
}

func adminURL() (string, error) {
	if os.Getenv(EnvSource) == SourceTestcontainers {
		return containerURL()
	}
	if u := os.Getenv(EnvURL); u != "" {
		return u, nil
	}
	local.once.Do(func() {
		var srv *server
		srv, local.err = startServer()
		if local.err == nil {
			local.mu.Lock()
			local.srv = srv
			local.mu.Unlock()
			local.url = srv.url
		}
	})
	return local.url, local.err
}

type server struct {
	dir    string
	url    string
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has exited
}

// startServer runs initdb and postgres; a port collision (the free port we
// found was taken before postgres bound it) is retried.
func startServer() (*server, error) {
	bin, err := findBinDir()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 3 {
		srv, err := startOnce(bin, cred)
		if err == nil {
			return srv, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "could not bind") && !strings.Contains(err.Error(), "already in use") {
			break
		}
	}
	return nil, lastErr
}

func startOnce(bin string, cred *syscall.Credential) (*server, error) {
	dir, err := initCluster(bin, cred)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	srv, err := runServer(bin, cred, dir, port, nil)
	if err != nil {
		os.RemoveAll(dir)
	}
	return srv, err
}

// initCluster creates a temporary directory with a new cluster in data/.
func initCluster(bin string, cred *syscall.Credential) (string, error) {
	dir, err := os.MkdirTemp("", "agentd-pgtest-")
	if err != nil {
		return "", err
	}
	fail := func(err error) (string, error) {
		os.RemoveAll(dir)
		return "", err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fail(err)
		}
	}
	// --no-sync: a throwaway cluster need not be flushed to disk at creation.
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}
	return dir, nil
}

// runServer starts postgres on the cluster in dir, with the given settings
// ("name=value", passed as -c) added, and waits until it accepts
// connections. On failure the server is stopped; dir is kept.
func runServer(bin string, cred *syscall.Credential, dir string, port int, settings []string) (*server, error) {
	data := filepath.Join(dir, "data")
	logPath := filepath.Join(dir, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor

	args := []string{"-D", data, "-p", strconv.Itoa(port),
		"-k", dir, // the Unix socket lives with the data, not in a shared /var/run
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=200"}
	for _, s := range settings {
		args = append(args, "-c", s)
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile // *os.File: no copying goroutines
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: cred,
		// If the test binary dies without Stop, the server shuts down.
		Pdeathsig: syscall.SIGINT,
	}
	srv := &server{dir: dir, cmd: cmd, exited: make(chan struct{}),
		url: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)}

	// The parent-death signal fires when the OS thread that started the
	// child exits, not the process. Go may end a thread whose goroutine
	// locked it and exited; so start and wait on the child from a goroutine
	// that keeps its own thread locked for the server's lifetime.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			close(srv.exited)
			return
		}
		started <- nil
		_ = cmd.Wait() // how it ended is in the log
		close(srv.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	if err := srv.waitReady(logPath); err != nil {
		_ = srv.halt()
		return nil, err
	}
	return srv, nil
}

// waitReady polls until the server accepts connections. Polling is the only
// way to learn that from outside; the child's exit ends the wait early.
func (s *server) waitReady(logPath string) error {
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, s.url)
		if err == nil {
			conn.Close(ctx)
			cancel()
			return nil
		}
		cancel()
		select {
		case <-s.exited:
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("postgres exited during startup:\n%s", log)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("postgres not ready after 60s (%v):\n%s", err, log)
		}
	}
}

func (s *server) stop() error {
	return errors.Join(s.halt(), os.RemoveAll(s.dir))
}

// halt stops the server and keeps its data.
func (s *server) halt() error {
	// SIGINT is Postgres' "fast" shutdown: disconnect clients, checkpoint, exit.
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
	}
	select {
	case <-s.exited:
		return nil
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return errors.New("postgres did not shut down in 30s; killed")
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// credential returns who the server runs as: nil (ourselves) unless we are
// root, which initdb and postgres refuse; then the "postgres" user.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("%w: running as root, and initdb refuses root, but there is no postgres user to run it as (%v)", errUnavailable, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// binGlobs are where distributions put versioned server binaries.
var binGlobs = []string{
	"/usr/lib/postgresql/*/bin",          // Debian, Ubuntu
	"/usr/pgsql-*/bin",                   // PGDG RPMs
	"/usr/local/pgsql/bin",               // source builds
	"/opt/homebrew/opt/postgresql@*/bin", // Homebrew, Apple silicon
	"/usr/local/opt/postgresql@*/bin",    // Homebrew, Intel
	"/Applications/Postgres.app/Contents/Versions/*/bin",
}

var versionRe = regexp.MustCompile(`\d+`)

// findBinDir returns a directory with initdb and postgres: PATH first, then
// the newest version under binGlobs.
func findBinDir() (string, error) {
	has := func(dir string) bool {
		for _, name := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if p, err := exec.LookPath("initdb"); err == nil && has(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	var dirs []string
	for _, g := range binGlobs {
		m, _ := filepath.Glob(g)
		dirs = append(dirs, m...)
	}
	version := func(dir string) int {
		n, _ := strconv.Atoi(versionRe.FindString(dir))
		return n
	}
	sort.SliceStable(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w: %s is not set and no initdb/postgres binaries are on PATH or in %s",
		errUnavailable, EnvURL, strings.Join(binGlobs, ", "))
}
