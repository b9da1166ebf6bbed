package sandbox

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
)

// Egress serves the network of sandboxes that may reach hosts
// (sandbox.network.allow): internal/egress's Proxy implements it.
type Egress interface {
	// Serve serves one program of chatID on l with the chat's allow-list,
	// until the Closer is called (which closes l and cuts its
	// connections).
	Serve(chatID string, allow []string, l net.Listener) (io.Closer, error)
	// Forget drops what is kept about a chat that ended.
	Forget(chatID string)
}

// The egress plumbing inside a sandbox: the chat's egress dir, read-only at
// egressMount, holds the forwarder and one socket per running program.
//
// Why a unix socket and a forwarder: the sandbox keeps its own empty network
// namespace (docker: network "none"; bwrap: --unshare-net), so no address
// of the host or the internet is routable from it, and a program that
// ignores the proxy variables has nowhere to go. The only way out is a
// socket file that agentd binds into that one sandbox; a socket per program
// run means the way out closes when the run ends, also for anything the
// program left running. The forwarder (forward.py, run by the sandbox's own
// python3) listens on the sandbox's loopback, where ordinary clients expect
// an HTTP proxy, and copies bytes to the socket: every decision is taken by
// the proxy on agentd's side.
const (
	egressMount   = "/run/agentd"
	forwarderName = "forward.py"
	// The socket and the chat's dir are open to all: the sandbox user must
	// reach them, and bwrap (running as that user) resolves the dir's
	// path, so its parents must be searchable. The root is not listable,
	// so a chat's dir is found only by its id. A host user who finds one
	// gains nothing: the proxy reaches only what the chat may reach, which
	// that user reaches without it.
	egressSockMode  = 0o666
	egressDirMode   = 0o755
	egressRootMode  = 0o711
	maxUnixPathLen  = 107
	errNoEgressText = "the chat asks for network hosts, but this server gives sandboxes no network (no egress proxy configured)"
)

//go:embed forward.py
var forwarder []byte

// egressDir is the host dir of a chat's egress sockets.
func (c *Config) egressDir(chatID string) string { return filepath.Join(c.EgressDir, chatID) }

// prepareEgress makes the chat's egress dir (its parent private to agentd)
// with the forwarder in it.
func (c *Config) prepareEgress(chatID string) (string, error) {
	if c.Egress == nil || c.EgressDir == "" {
		return "", errors.New(errNoEgressText)
	}
	if err := os.MkdirAll(c.EgressDir, egressRootMode); err != nil {
		return "", fmt.Errorf("egress dir: %w", err)
	}
	if err := os.Chmod(c.EgressDir, egressRootMode); err != nil {
		return "", fmt.Errorf("egress dir: %w", err)
	}
	dir := c.egressDir(chatID)
	if err := os.Mkdir(dir, egressDirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("egress dir: %w", err)
	}
	if err := os.Chmod(dir, egressDirMode); err != nil {
		return "", fmt.Errorf("egress dir: %w", err)
	}
	fw := filepath.Join(dir, forwarderName)
	if old, err := os.ReadFile(fw); err != nil || !bytes.Equal(old, forwarder) {
		// A file of its own for each writer: runs of one chat start at
		// once (a team's tools called in parallel), and one's rename took
		// the other's shared temporary file away.
		if err := writeFileAtomic(fw, forwarder, 0o644); err != nil {
			return "", fmt.Errorf("egress forwarder: %w", err)
		}
	}
	return dir, nil
}

// writeFileAtomic replaces path with data through a temporary file of its
// own in the same directory.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.new")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// startEgress opens this run's socket in the chat's egress dir and serves
// the proxy on it. prefix runs a program behind the forwarder; stop ends
// the run's network.
func (c *Config) startEgress(chatID string, allow []string) (prefix []string, stop func(), err error) {
	dir, err := c.prepareEgress(chatID)
	if err != nil {
		return nil, nil, err
	}
	name := "run-" + randomHex(8) + ".sock"
	path := filepath.Join(dir, name)
	l, err := listenUnix(dir, name)
	if err != nil {
		return nil, nil, fmt.Errorf("egress socket: %w", err)
	}
	if err := os.Chmod(path, egressSockMode); err != nil {
		l.Close()
		return nil, nil, fmt.Errorf("egress socket: %w", err)
	}
	closer, err := c.Egress.Serve(chatID, allow, l)
	if err != nil {
		l.Close()
		return nil, nil, fmt.Errorf("egress proxy: %w", err)
	}
	stop = func() {
		closer.Close()
		os.Remove(path)
	}
	prefix = []string{"python3", "-I", "-S", egressMount + "/" + forwarderName, egressMount + "/" + name, "--"}
	return prefix, stop, nil
}

// listenUnix listens on the unix socket name in dir. A socket's path is
// limited to 107 bytes, which a data dir and a chat id can exceed: then it
// is bound through /proc/self/fd (Linux), which names the directory by an
// open descriptor instead.
func listenUnix(dir, name string) (net.Listener, error) {
	path := filepath.Join(dir, name)
	if len(path) <= maxUnixPathLen {
		return net.Listen("unix", path)
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	l, err := net.Listen("unix", fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), name))
	if err != nil {
		return nil, fmt.Errorf("%s is longer than %d bytes, and binding it through /proc failed: %w", path, maxUnixPathLen, err)
	}
	// Its name is only valid while d is open: the caller removes the path.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	return l, nil
}

// releaseEgress removes a chat's egress dir and what the proxy keeps.
func (c *Config) releaseEgress(chatID string) error {
	if c.EgressDir == "" {
		return nil
	}
	if c.Egress != nil {
		c.Egress.Forget(chatID)
	}
	if err := os.RemoveAll(c.egressDir(chatID)); err != nil {
		return fmt.Errorf("remove egress dir of chat %s: %w", chatID, err)
	}
	return nil
}

// reapEgress removes the egress dirs of chats keep rejects.
func (c *Config) reapEgress(keep func(chatID string) bool) error {
	if c.EgressDir == "" {
		return nil
	}
	entries, err := os.ReadDir(c.EgressDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("reap egress dirs: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || checkChatID(e.Name()) != nil || keep(e.Name()) {
			continue
		}
		errs = append(errs, c.releaseEgress(e.Name()))
	}
	return errors.Join(errs...)
}
