package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentd/agentd/internal/chat"
)

const (
	// bwrapTmpSize bounds the sandbox's /tmp tmpfs (bytes).
	bwrapTmpSize = 64 << 20
	// bwrapFileSizeLimit is RLIMIT_FSIZE: the largest file a program may
	// write. The work dir is on the host's disk and bwrap has no quota, so
	// this is the only bound on a single file there.
	bwrapFileSizeLimit = 1 << 30
	// bwrapNoFile is RLIMIT_NOFILE.
	bwrapNoFile = 1024
	// probeTimeout bounds the probe sandbox that Open runs.
	probeTimeout = 10 * time.Second
)

// The fds a bwrap child gets, in this order, from cmd.ExtraFiles.
const (
	fdWork    = 3 // the chat's work dir (O_PATH), bound at /work
	fdCode    = 4 // the program's code, copied to a read-only file
	fdPasswd  = 5 // a passwd naming only the sandbox user
	fdGroup   = 6 // its group
	fdStatus  = 7 // bwrap's JSON status: child started, exit code
	fdSeccomp = 8 // the seccomp filter (when there is one)
)

// etcFiles are the host /etc entries a sandbox may read: what the dynamic
// linker, Debian's alternatives (libblas for numpy), time zones and Python
// need. Everything else in /etc (hostname, passwd, shadow, ssh keys,
// agentd's own configuration) stays invisible.
var etcFiles = []string{
	"/etc/alternatives",
	"/etc/ld.so.cache",
	"/etc/ld.so.conf",
	"/etc/ld.so.conf.d",
	"/etc/localtime",
	"/etc/mime.types",
}

// etcGlobs are /etc entries matched by pattern (Debian's per-version Python
// configuration, e.g. /etc/python3.11/sitecustomize.py).
var etcGlobs = []string{"/etc/python3*"}

// rootDirs are the top-level system dirs. On merged-/usr systems they are
// symlinks into /usr and are recreated as such; otherwise bound read-only.
var rootDirs = []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// bwrapManager is the bwrap backend: a fresh set of namespaces per program
// around the chat's persistent work dir on the host.
type bwrapManager struct {
	cfg     Config
	met     *metrics
	log     *slog.Logger
	bwrap   string
	prlimit string
	// cred is who bwrap runs as: a dedicated unprivileged uid when agentd
	// is root, nil (agentd's own uid) otherwise.
	cred *syscall.Credential
	uid  int // owner of work dirs
	base []string
	// seccomp is the filter program (nil: none on this architecture) and
	// seccompOpt the bwrap option that loads it.
	seccomp    []byte
	seccompOpt string

	// cg gives each sandbox a cgroup with the memory, pids and CPU
	// limits; nil when agentd cannot manage cgroups (only rlimits then).
	cg *cgroups
	// diskQuota: work dirs are size-limited tmpfs mounts (agentd is root).
	diskQuota bool
	// mountMu serialises checking and mounting work dirs, so that the
	// concurrent first programs of one chat mount its tmpfs once, not once
	// each (stacked mounts that bwrap then binds racily).
	mountMu sync.Mutex
	// onStats, when set (tests), receives each run's cgroup figures.
	onStats func(chatID string, st runStats)

	mu   sync.Mutex
	dirs map[string]bool // chats that have a work dir
}

func openBwrap(ctx context.Context, cfg Config, met *metrics) (*bwrapManager, error) {
	if cfg.WorkRoot == "" {
		return nil, errors.New("no work root directory configured")
	}
	bw, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, errors.New("bubblewrap is not installed (apt-get install bubblewrap)")
	}
	help, _ := exec.CommandContext(ctx, bw, "--help").CombinedOutput()
	for _, opt := range []string{"--bind-fd", "--ro-bind-data", "--json-status-fd", "--size"} {
		if !bytes.Contains(help, []byte(opt)) {
			return nil, fmt.Errorf("%s is too old: it lacks %s (bubblewrap 0.8 or later is needed)", bw, opt)
		}
	}
	pl, err := exec.LookPath("prlimit")
	if err == nil {
		pl, err = filepath.EvalSymlinks(pl)
	}
	// prlimit runs inside the sandbox, where only /usr is visible.
	if err != nil || !strings.HasPrefix(pl, "/usr/") {
		return nil, errors.New("prlimit (util-linux) is not installed under /usr")
	}
	root, err := filepath.Abs(cfg.WorkRoot)
	if err != nil {
		return nil, err
	}
	// Others may pass through the work root but not list it; each work dir
	// in it is 0700 and owned by the sandbox uid. bwrap (running as that
	// uid) resolves the work dir's path, so the root and its parents must
	// be searchable by it; the probe below reports it when they are not.
	if err := os.MkdirAll(root, 0o711); err != nil {
		return nil, fmt.Errorf("work root: %w", err)
	}
	if err := os.Chmod(root, 0o711); err != nil {
		return nil, fmt.Errorf("work root: %w", err)
	}
	cfg.WorkRoot = root
	b := &bwrapManager{
		cfg:     cfg,
		met:     met,
		log:     cfg.Logger.With("backend", BackendBwrap),
		bwrap:   bw,
		prlimit: pl,
		uid:     os.Geteuid(),
		dirs:    make(map[string]bool),
	}
	if b.uid == 0 {
		// As root, bwrap would map the sandbox user to host root, and the
		// kernel exempts root from RLIMIT_NPROC: the process limit would
		// not hold and an escape would be root. Run it as a dedicated
		// unprivileged uid instead.
		b.uid = cfg.BwrapUID
		b.cred = &syscall.Credential{Uid: uint32(cfg.BwrapUID), Gid: uint32(cfg.BwrapUID), Groups: []uint32{}}
	}
	if err := cloexecInherited(); err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(cfg.Owner))
	if cg, err := openCgroups(hex.EncodeToString(sum[:4])); err != nil {
		b.log.Warn("bwrap sandboxes get no cgroup: memory_mb and pids are per-process rlimits that tmpfs writes escape, "+
			"and cpus is not enforced; use the docker backend or run agentd as root with cgroups available", "err", err)
	} else {
		b.cg = cg
	}
	b.diskQuota = b.cred != nil
	if !b.diskQuota {
		b.log.Warn("bwrap work dirs are not size-limited (disk_mb needs agentd to run as root to mount a tmpfs); only a per-file size limit applies")
	}
	b.base = b.baseArgs(bytes.Contains(help, []byte("--disable-userns")))
	if b.seccomp = seccompFilter(); b.seccomp != nil {
		switch {
		case bytes.Contains(help, []byte("--add-seccomp-fd")):
			b.seccompOpt = "--add-seccomp-fd"
		case bytes.Contains(help, []byte("--seccomp")):
			b.seccompOpt = "--seccomp"
		default:
			b.seccomp = nil
		}
	}
	if err := b.probe(ctx); err != nil {
		return nil, err
	}
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if e.IsDir() && checkChatID(e.Name()) == nil {
			b.dirs[e.Name()] = true
		}
	}
	met.alive.WithLabelValues(BackendBwrap).Add(float64(len(b.dirs)))
	return b, nil
}

// baseArgs is the part of the bwrap command line that is the same for
// every program: the namespaces and the read-only view of the system.
func (b *bwrapManager) baseArgs(disableUserns bool) []string {
	args := []string{
		// New user, pid, net, ipc, uts and cgroup namespaces: the program
		// sees only its own processes and a network with nothing but an
		// unconfigured loopback.
		"--unshare-all", "--unshare-user",
	}
	if disableUserns {
		// No nested user namespaces: they are kernel attack surface the
		// program has no use for.
		args = append(args, "--disable-userns")
	}
	args = append(args,
		// The sandbox dies with bwrap (which agentd kills at the timeout),
		// and a new session keeps it off agentd's terminal (TIOCSTI).
		"--die-with-parent", "--new-session",
		"--hostname", "sandbox",
		// System files read-only. /usr/local is hidden: it holds the
		// host's own additions (toolchains, tools, sometimes credentials),
		// not the distribution.
		"--ro-bind", "/usr", "/usr",
		"--tmpfs", "/usr/local", "--remount-ro", "/usr/local",
	)
	for _, d := range rootDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&fs.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				args = append(args, "--symlink", target, d)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", d, d)
		}
	}
	args = append(args, "--dir", "/etc")
	for _, f := range etcFiles {
		args = append(args, "--ro-bind-try", f, f)
	}
	for _, g := range etcGlobs {
		matches, _ := filepath.Glob(g)
		for _, m := range matches {
			args = append(args, "--ro-bind-try", m, m)
		}
	}
	args = append(args,
		"--ro-bind-data", strconv.Itoa(fdPasswd), "/etc/passwd",
		"--ro-bind-data", strconv.Itoa(fdGroup), "/etc/group",
		"--proc", "/proc",
		"--dev", "/dev",
		// /dev/shm is a tmpfs of its own, as small as /tmp; both count
		// against the memory limit too (the cgroup charges tmpfs pages).
		"--size", strconv.Itoa(bwrapTmpSize), "--tmpfs", "/dev/shm",
		"--size", strconv.Itoa(bwrapTmpSize), "--tmpfs", "/tmp",
		"--bind-fd", strconv.Itoa(fdWork), "/work",
		"--chdir", "/work",
		// The sandbox's root and /dev are tmpfs that bwrap made: nothing
		// may be written there (only /work, /tmp and /dev/shm).
		"--remount-ro", "/dev",
		"--remount-ro", "/",
		// Nothing of agentd's environment; only what is set here.
		"--clearenv",
	)
	for _, kv := range sandboxEnv {
		k, v, _ := strings.Cut(kv, "=")
		args = append(args, "--setenv", k, v)
	}
	args = append(args,
		"--uid", strconv.Itoa(sandboxUID), "--gid", strconv.Itoa(sandboxUID),
		"--json-status-fd", strconv.Itoa(fdStatus),
	)
	return args
}

// mountsEnd is the index in b.base where the mounts end (the root and /dev
// become read-only there): extra mounts go before it.
func (b *bwrapManager) mountsEnd() int {
	for i := 0; i+1 < len(b.base); i++ {
		if b.base[i] == "--remount-ro" && b.base[i+1] == "/dev" {
			return i
		}
	}
	panic("sandbox: bwrap base arguments without --remount-ro /dev")
}

// probe runs `true` in a sandbox: bwrap being installed is not enough
// (user namespaces may be disabled, /proc may be unmountable).
func (b *bwrapManager) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	dir := filepath.Join(b.cfg.WorkRoot, ".probe-"+randomHex(4))
	if err := b.makeDir(dir); err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	out := newCappedBuffer(4096)
	r, err := b.sandbox(ctx, dir, "sh", "true", nil, limits{memoryMB: DefaultMemoryMB, cpus: DefaultCPUs, timeout: probeTimeout}, nil, out)
	if err != nil {
		return fmt.Errorf("probe sandbox: %w", err)
	}
	if !r.finished || r.exitCode != 0 {
		msg := strings.TrimSpace(out.String())
		if b.cred != nil && strings.Contains(msg, "Permission denied") {
			msg += fmt.Sprintf(" (the sandbox uid %d must be able to reach the work root %s: "+
				"make it and its parent directories searchable, chmod o+x)", b.uid, b.cfg.WorkRoot)
		}
		return fmt.Errorf("probe sandbox failed (exit %d): %s", r.exitCode, msg)
	}
	return nil
}

// Backend implements chat.Sandboxes.
func (b *bwrapManager) Backend() string { return BackendBwrap }

// Close implements Manager; the bwrap backend holds nothing open. The
// parent cgroups of its sandboxes go when empty (a sandbox still running
// keeps them).
func (b *bwrapManager) Close() error {
	if b.cg != nil {
		b.cg.close()
	}
	return nil
}

func (b *bwrapManager) dir(chatID string) string { return filepath.Join(b.cfg.WorkRoot, chatID) }

// makeDir creates a work dir that only the sandbox uid can enter.
func (b *bwrapManager) makeDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create work dir: %w", err)
	}
	if b.cred != nil {
		if err := os.Lchown(dir, b.uid, b.uid); err != nil {
			return fmt.Errorf("chown work dir: %w", err)
		}
	}
	return nil
}

// Exec implements chat.Sandboxes.
func (b *bwrapManager) Exec(ctx context.Context, req *chat.ExecRequest) (*chat.ExecResult, error) {
	start := time.Now()
	res, err := b.exec(ctx, req)
	b.met.observe(BackendBwrap, req.Language, res, err, time.Since(start))
	if err != nil {
		b.log.Warn("sandbox exec failed", "chat_id", req.ChatID, "language", req.Language, "err", err)
	}
	return res, err
}

func (b *bwrapManager) exec(ctx context.Context, req *chat.ExecRequest) (*chat.ExecResult, error) {
	if err := checkChatID(req.ChatID); err != nil {
		return nil, err
	}
	interp, err := interpreter(req.Language)
	if err != nil {
		return nil, err
	}
	dir := b.dir(req.ChatID)
	b.mu.Lock()
	known := b.dirs[req.ChatID]
	b.mu.Unlock()
	if !known {
		if err := b.makeDir(dir); err != nil {
			return nil, fmt.Errorf("sandbox of chat %s: %w", req.ChatID, err)
		}

		b.mu.Lock()
		if !b.dirs[req.ChatID] {
			b.dirs[req.ChatID] = true
			b.met.alive.WithLabelValues(BackendBwrap).Inc()
			b.log.Info("sandbox created", "chat_id", req.ChatID, "dir", dir)
		}
		b.mu.Unlock()
	}
	// Every time, not only at creation: a work dir from before a reboot
	// has lost its mount.
	if err := b.limitDisk(dir, b.cfg.limitsFor(req).diskMB); err != nil {
		return nil, fmt.Errorf("sandbox of chat %s: %w", req.ChatID, err)
	}
	lim := b.cfg.limitsFor(req)
	var rn *runNet
	if len(lim.allowHosts) > 0 {
		prefix, stop, err := b.cfg.startEgress(req.ChatID, lim.allowHosts)
		if err != nil {
			return nil, fmt.Errorf("sandbox of chat %s: %w", req.ChatID, err)
		}
		defer stop()
		rn = &runNet{dir: b.cfg.egressDir(req.ChatID), prefix: prefix}
	}
	out := newCappedBuffer(b.cfg.OutputLimit)
	r, err := b.sandbox(ctx, dir, interp, req.Code, req.Stdin, lim, rn, out)
	if err != nil {
		return nil, fmt.Errorf("sandbox of chat %s: %w", req.ChatID, err)
	}
	if !r.timedOut && !r.finished {
		// bwrap itself failed (its message is in the output): the program
		// never ran, which is not a result.
		return nil, fmt.Errorf("sandbox of chat %s: bwrap failed (exit %d): %s",
			req.ChatID, r.exitCode, strings.TrimSpace(out.String()))
	}
	res := finish(out, r.exitCode, r.timedOut)
	if r.oom {
		res.Output += oomMarker(b.cfg.limitsFor(req).memoryMB)
		if res.ExitCode == 0 {
			res.ExitCode = 128 + 9
		}
	}
	return res, nil
}

// runResult is what one bwrap run did.
type runResult struct {
	finished bool // the program exited on its own (exitCode is its code)
	timedOut bool
	exitCode int
	oom      bool // the kernel killed a process for the memory limit
}

// runNet is a run's way out: the chat's egress dir, bound read-only at
// egressMount, and the forwarder that runs the program.
type runNet struct {
	dir    string
	prefix []string
}

// sandbox runs one program in a new sandbox around work dir dir; with rn,
// behind the egress forwarder (and still in its own network namespace).
func (b *bwrapManager) sandbox(ctx context.Context, dir, interp, code string, stdin []byte, lim limits, rn *runNet, out *cappedBuffer) (runResult, error) {
	// extra become fds 3, 4, … of bwrap; all are closed here once it runs.
	var extra []*os.File
	defer func() {
		for _, f := range extra {
			f.Close()
		}
	}()
	// The work dir is passed as an O_PATH descriptor opened without
	// following symlinks, so what gets mounted is the directory agentd
	// created, whatever happens to its path meanwhile.
	wfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return runResult{}, fmt.Errorf("open work dir: %w", err)
	}
	extra = append(extra, os.NewFile(uintptr(wfd), dir))
	for _, data := range []string{code, passwdFile, groupFile} {
		f, err := dataFile(data)
		if err != nil {
			return runResult{}, err
		}
		extra = append(extra, f)
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return runResult{}, err
	}
	defer statusR.Close()
	extra = append(extra, statusW)
	var seccompArgs []string
	if b.seccomp != nil {
		f, err := dataFile(string(b.seccomp))
		if err != nil {
			return runResult{}, err
		}
		extra = append(extra, f)
		seccompArgs = []string{b.seccompOpt, strconv.Itoa(fdSeccomp)}
	}
	codePath := "/tmp/agentd-code" + codeExt(interp)

	args := append([]string(nil), b.base...)
	var program []string
	if rn != nil {
		// Like the work dir, an O_PATH descriptor: bwrap (as the sandbox
		// uid) need not resolve the path, whose parent is private.
		efd, err := unix.Open(rn.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return runResult{}, fmt.Errorf("open egress dir: %w", err)
		}
		extra = append(extra, os.NewFile(uintptr(efd), rn.dir))
		// Mounted before the root becomes read-only (bwrap makes the
		// mount point).
		at := b.mountsEnd()
		bind := []string{"--ro-bind-fd", strconv.Itoa(2 + len(extra)), egressMount}
		args = append(args[:at:at], append(bind, b.base[at:]...)...)
		program = append(program, rn.prefix...)
	}
	program = append(program, interp, codePath)
	args = append(args, seccompArgs...)
	args = append(args,
		"--ro-bind-data", strconv.Itoa(fdCode), codePath,
		"--",
		// rlimits, set inside the new user namespace so that the process
		// count is of this sandbox's processes only: address space (the
		// memory limit), processes/threads, file size, open files, CPU
		// seconds as a backstop to the timeout, no core dumps.
		b.prlimit,
		"--as="+strconv.FormatInt(int64(lim.memoryMB)<<20, 10),
		"--nproc="+strconv.Itoa(b.cfg.PidsLimit),
		"--fsize="+strconv.Itoa(bwrapFileSizeLimit),
		"--nofile="+strconv.Itoa(bwrapNoFile),
		"--cpu="+strconv.Itoa(cpuSeconds(lim)),
		"--core=0",
		"--",
	)
	args = append(args, program...)

	tctx, cancel := context.WithTimeout(ctx, lim.timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, b.bwrap, args...)
	// bwrap itself gets no environment either.
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.Stdin = bytes.NewReader(stdin)
	// One writer for both: one pipe, output interleaved as written.
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own process group, so the timeout kills bwrap and, through
		// --die-with-parent and the pid namespace, everything inside.
		Setpgid: true,
		// If agentd dies, the sandbox dies with it. (The signal follows
		// the OS thread that started bwrap; Go ends threads only when a
		// goroutine locked to one exits, and a sandbox killed that way is
		// an error for the chat, never an escape.)
		Pdeathsig:  syscall.SIGKILL,
		Credential: b.cred,
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = killGrace
	var cg *cgroup
	if b.cg != nil {
		cg, err = b.cg.create("run-"+randomHex(8), int64(lim.memoryMB)<<20, b.cfg.PidsLimit, lim.cpus)
		if err != nil {
			statusW.Close()
			return runResult{}, fmt.Errorf("sandbox cgroup: %w", err)
		}
		defer cg.remove()
		err = cg.start(cmd)
	} else {
		err = cmd.Start()
	}
	// Only bwrap may hold the status pipe's write end, so that reading it
	// ends when bwrap does.
	statusW.Close()
	if err != nil {
		return runResult{}, fmt.Errorf("start bwrap: %w", err)
	}
	werr := cmd.Wait()
	var r runResult
	if cg != nil {
		st := cg.stats()
		r.oom = st.oomKills > 0
		if b.onStats != nil {
			b.onStats(filepath.Base(dir), st)
		}
	}
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	r.timedOut = errors.Is(tctx.Err(), context.DeadlineExceeded)
	r.finished, r.exitCode = readStatus(statusR)
	if !r.finished {
		r.exitCode = cmd.ProcessState.ExitCode()
		var ee *exec.ExitError
		if werr != nil && !errors.As(werr, &ee) && !r.timedOut {
			return r, werr
		}
	}
	return r, nil
}

// cloexecInherited marks every descriptor above stderr close-on-exec.
// bwrap passes on whatever descriptors it inherits, and Go opens all of its
// own close-on-exec, so the ones without the flag were inherited from
// agentd's parent (a socket, a log pipe, a directory): none of them may
// reach a sandbox. agentd itself keeps using them; only exec'd programs
// lose them, and os/exec still passes ExtraFiles explicitly.
func cloexecInherited() error {
	err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	// Kernels before 5.11: one descriptor at a time.
	entries, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return fmt.Errorf("mark inherited descriptors close-on-exec: %v; %v", err, rerr)
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}

// cpuSeconds is RLIMIT_CPU: the CPU time the program's CPU share could use
// in its timeout, plus a little. bwrap cannot cap the share itself (that
// takes a cgroup), so this bounds the total instead.
func cpuSeconds(lim limits) int {
	return int(math.Ceil(max(lim.cpus, 1)*lim.timeout.Seconds())) + 2
}

// readStatus reads bwrap's --json-status-fd stream: a "child-pid" object
// once the sandbox is set up, an "exit-code" object when the program ended
// on its own (bwrap's own failures end without one).
func readStatus(f *os.File) (finished bool, exitCode int) {
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var st struct {
			ExitCode *int `json:"exit-code"`
		}
		if json.Unmarshal(sc.Bytes(), &st) == nil && st.ExitCode != nil {
			finished, exitCode = true, *st.ExitCode
		}
	}
	return finished, exitCode
}

// The sandbox's /etc/passwd and /etc/group: only the sandbox user, so the
// host's accounts stay unknown and tools that look the user up work.
var (
	passwdFile = fmt.Sprintf("sandbox:x:%d:%d:agentd sandbox:/work:/usr/sbin/nologin\n", sandboxUID, sandboxUID)
	groupFile  = fmt.Sprintf("sandbox:x:%d:\n", sandboxUID)
)

// dataFile returns an anonymous in-memory file holding data, positioned at
// its start, for bwrap to copy from.
func dataFile(data string) (*os.File, error) {
	fd, err := unix.MemfdCreate("agentd-sandbox", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "agentd-sandbox")
	if _, err := f.WriteString(data); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Release implements chat.Sandboxes: it deletes the chat's work dir.
func (b *bwrapManager) Release(ctx context.Context, chatID string) error {
	if err := checkChatID(chatID); err != nil {
		return err
	}
	_, err := b.remove(chatID)
	return errors.Join(err, b.cfg.releaseEgress(chatID))
}

func (b *bwrapManager) remove(chatID string) (bool, error) {
	dir := b.dir(chatID)
	_, statErr := os.Lstat(dir)
	if err := unmountWork(dir); err != nil {
		return false, fmt.Errorf("unmount work dir of chat %s: %w", chatID, err)
	}
	if err := removeAll(dir); err != nil {
		return false, fmt.Errorf("remove work dir of chat %s: %w", chatID, err)
	}
	b.mu.Lock()
	if b.dirs[chatID] {
		delete(b.dirs, chatID)
		b.met.alive.WithLabelValues(BackendBwrap).Dec()
	}
	b.mu.Unlock()
	if statErr != nil {
		return false, nil
	}
	b.log.Info("sandbox removed", "chat_id", chatID, "dir", dir)
	return true, nil
}

// Reap implements Manager.
func (b *bwrapManager) Reap(ctx context.Context, keep func(chatID string) bool) (int, error) {
	entries, err := os.ReadDir(b.cfg.WorkRoot)
	if err != nil {
		return 0, fmt.Errorf("reap: %w", err)
	}
	removed := 0
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".probe-") {
			// A probe dir left by a crash during Open.
			_ = removeAll(filepath.Join(b.cfg.WorkRoot, name))
			continue
		}
		if !e.IsDir() || checkChatID(name) != nil || keep(name) {
			continue
		}
		ok, err := b.remove(name)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			removed++
			b.log.Info("sandbox reaped", "chat_id", name)
		}
	}
	errs = append(errs, b.cfg.reapEgress(keep))
	if err := errors.Join(errs...); err != nil {
		b.log.Warn("sandbox reap incomplete", "removed", removed, "err", err)
		return removed, err
	}
	return removed, nil
}

// removeAll is os.RemoveAll that also gets through directories a program
// made unwritable (chmod 0): when agentd is not root, it needs write and
// search permission on them.
func removeAll(dir string) error {
	err := os.RemoveAll(dir)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// limitDisk makes the work dir a tmpfs of diskMB (when agentd is root and
// it is not one already): what a chat keeps between programs is bounded,
// and its pages count against the memory limit of the program writing
// them. A work dir left by an earlier agentd keeps its mount.
func (b *bwrapManager) limitDisk(dir string, diskMB int) error {
	if !b.diskQuota {
		return nil
	}
	b.mountMu.Lock()
	defer b.mountMu.Unlock()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err == nil && st.Type == unix.TMPFS_MAGIC {
		return nil
	}
	opts := fmt.Sprintf("size=%dm,nr_inodes=%d,mode=0700,uid=%d,gid=%d", diskMB, max(diskMB*64, 4096), b.uid, b.uid)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount work dir (disk_mb %d): %w", diskMB, err)
	}
	return nil
}

// unmountWork unmounts a work dir's tmpfs, if it has one.
func unmountWork(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		return nil
	}
	var parent unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(dir), &parent); err == nil && parent.Type == unix.TMPFS_MAGIC {
		// The work root itself is on tmpfs: only unmount a mount point.
		var a, p unix.Stat_t
		if unix.Stat(dir, &a) != nil || unix.Stat(filepath.Dir(dir), &p) != nil || a.Dev == p.Dev {
			return nil
		}
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return err
	}
	return nil
}

// oomMarker ends the output of a program the kernel killed for memory.
func oomMarker(memoryMB int) string {
	return fmt.Sprintf("\nKilled: the sandbox reached its memory limit (memory_mb %d)", memoryMB)
}
