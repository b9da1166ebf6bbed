package sandbox

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/agentd/agentd/internal/chat"
)

// Labels on every container and volume this package creates. Reap finds
// leftovers by them, and only ever touches its own Owner's.
const (
	labelSandbox = "agentd.sandbox"
	labelChat    = "agentd.chat"
	labelOwner   = "agentd.owner"
)

const (
	// pingTimeout bounds Open's probe of the engine, so that "auto" on a
	// host without an engine decides quickly.
	pingTimeout = 3 * time.Second
	// killGrace is how long past its timeout an exec may take before agentd
	// kills it from outside; normally the timeout(1) inside the container
	// has killed it by then.
	killGrace = 2 * time.Second
	// drainAfterKill bounds the wait for the output stream to end after a
	// kill; then the connection is closed regardless.
	drainAfterKill = 3 * time.Second
	// tmpSize is the size of the container's /tmp (a tmpfs, so it counts
	// against the memory limit too).
	tmpSize = "64m"
	shmSize = 64 << 20
)

// containerInit is PID 1 of a sandbox container. A shell loop rather than
// `sleep infinity` because PID 1 must reap orphans: zombies of programs
// that double-forked would otherwise pile up against the pids limit. The
// TERM trap makes a stop immediate.
const containerInit = `trap 'exit 0' TERM INT; while :; do sleep 86400 & wait; done`

// execWrapper runs one program in the container:
//
//	sh -c execWrapper agentd <code file> <code bytes> <timeout> <interpreter>
//
// The exec's stdin carries the code followed by the program's own stdin.
// head(1) reads exactly the code's bytes into a file on the /tmp tmpfs (not
// the work dir, which belongs to the chat), and cat(1) the rest into a
// second file that becomes the program's stdin. One round trip per program,
// code of any size (argv is capped at 128 KiB per argument), and stdin is
// consumed at once: an engine whose exec stdin backs up (a program that
// never reads it) may reset the whole connection (Podman 4 with conmon 2.1
// does), losing the output and the exit code. The program's stderr joins
// its stdout so the output is interleaved as written; the wrapper's own
// messages (the shell's "Killed") are not part of it.
//
// timeout(1) runs the program in a new process group and, at the deadline,
// SIGKILLs the whole group, so children die with it even if agentd is gone
// by then. The group's id goes to a pid file so that agentd can kill it
// early (cancellation) or as a fallback. When the program ends on its own,
// what it left running in its group is killed too: the container outlives
// the program, and a process left behind (a fork bomb whose parent
// returned) would hold the chat's pids and the exec's output open.
const execWrapper = `f=$1 n=$2 t=$3
shift 3
umask 077
head -c "$n" > "$f" || exit 125
cat > "$f.in" || exit 125
timeout -s KILL "$t" "$@" "$f" < "$f.in" 2>&1 &
p=$!
echo $p > "$f.pid"
exec 2>/dev/null
wait $p
rc=$?
kill -9 -$p
rm -f "$f" "$f.in" "$f.pid"
exit $rc`

// killGroup kills the process group recorded by execWrapper.
// (dash's kill takes no "--"; a negative pid after the signal is a group.)
const killGroup = `p=$(cat "$1.pid" 2>/dev/null) && { kill -9 -"$p" || kill -9 "$p"; } 2>/dev/null; exit 0`

// dockerManager is the docker backend: one long-lived container per chat.
type dockerManager struct {
	cfg  Config
	cli  *client.Client
	met  *metrics
	log  *slog.Logger
	slug string // short hash of the owner, part of container names
	// podman: the engine is Podman, whose tmpfs options differ.
	podman atomic.Bool

	mu    sync.Mutex
	boxes map[string]*dockerBox

	closeOnce sync.Once
	closeErr  error
}

// dockerBox is one chat's container. Its mutex serialises creation, so two
// concurrent first executions of a chat (parallel tool calls) create one
// container.
type dockerBox struct {
	mu sync.Mutex
	id string
}

func openDocker(ctx context.Context, cfg Config, met *metrics) (*dockerManager, error) {
	cli, err := client.NewClientWithOpts(client.WithHost(cfg.DockerHost), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("engine client for %s: %w", cfg.DockerHost, err)
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if _, err := cli.Ping(pctx); err != nil {
		cli.Close()
		return nil, fmt.Errorf("no engine answers at %s: %v", cfg.DockerHost, err)
	}
	if _, err := cli.ImageInspect(pctx, cfg.Image); err != nil {
		cli.Close()
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("the engine at %s has no image %s: build it with deploy/sandbox/build-rootfs.sh "+
				"(no registry needed) or `docker build -t %s deploy/sandbox`", cfg.DockerHost, cfg.Image, cfg.Image)
		}
		return nil, fmt.Errorf("inspect image %s at %s: %v", cfg.Image, cfg.DockerHost, err)
	}
	sum := sha256.Sum256([]byte(cfg.Owner))
	d := &dockerManager{
		cfg:   cfg,
		cli:   cli,
		met:   met,
		log:   cfg.Logger.With("backend", BackendDocker),
		slug:  hex.EncodeToString(sum[:4]),
		boxes: make(map[string]*dockerBox),
	}
	vctx, vcancel := context.WithTimeout(ctx, 30*time.Second)
	defer vcancel()
	if v, err := cli.ServerVersion(vctx); err == nil {
		isPodman := strings.Contains(strings.ToLower(v.Platform.Name), "podman")
		for _, c := range v.Components {
			isPodman = isPodman || strings.Contains(strings.ToLower(c.Name), "podman")
		}
		d.podman.Store(isPodman)
	}
	if list, err := d.list(pctx, ""); err == nil {
		met.alive.WithLabelValues(BackendDocker).Add(float64(len(list)))
	}
	// An engine that answers is not enough: its runtime may refuse the
	// sandbox's settings (crun cannot set rlimits on some hosts), and
	// then every code chat would fail. Start one sandbox and run a
	// program in it before taking this backend.
	if err := d.probe(ctx); err != nil {
		cli.Close()
		return nil, err
	}
	return d, nil
}

// probe runs `true` in a sandbox of its own and removes it. Its chat id
// starts with "probe-": should agentd die meanwhile, Reap removes it.
func (d *dockerManager) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	id := "probe-" + randomHex(6)
	defer func() { _ = d.Release(context.WithoutCancel(ctx), id) }()
	res, err := d.exec(ctx, &chat.ExecRequest{ChatID: id, Language: "sh", Code: "true", Timeout: probeTimeout})
	if err != nil {
		return fmt.Errorf("probe sandbox at %s: %w", d.cfg.DockerHost, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("probe sandbox at %s failed (exit %d): %s", d.cfg.DockerHost, res.ExitCode, strings.TrimSpace(res.Output))
	}
	return nil
}

// Backend implements chat.Sandboxes.
func (d *dockerManager) Backend() string { return BackendDocker }

// Close implements Manager: it closes the engine connection and leaves the
// containers for a restarted agentd (or Reap).
func (d *dockerManager) Close() error {
	d.closeOnce.Do(func() { d.closeErr = d.cli.Close() })
	return d.closeErr
}

// name is the container and volume name of a chat's sandbox: unique per
// owner and chat, so a second creator (another replica) gets a conflict
// instead of a second container.
func (d *dockerManager) name(chatID string) string {
	return "agentd-" + d.slug + "-" + chatID
}

func (d *dockerManager) labels(chatID string) map[string]string {
	return map[string]string{labelSandbox: "1", labelChat: chatID, labelOwner: d.cfg.Owner}
}

func (d *dockerManager) filters(chatID string) filters.Args {
	f := filters.NewArgs(
		filters.Arg("label", labelSandbox+"=1"),
		filters.Arg("label", labelOwner+"="+d.cfg.Owner),
	)
	if chatID != "" {
		f.Add("label", labelChat+"="+chatID)
	}
	return f
}

// list returns this owner's sandbox containers (of one chat, or all).
func (d *dockerManager) list(ctx context.Context, chatID string) ([]container.Summary, error) {
	all, err := d.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: d.filters(chatID)})
	if err != nil {
		return nil, err
	}
	var mine []container.Summary
	for _, c := range all {
		if d.owns(c.Labels, chatID) {
			mine = append(mine, c)
		}
	}
	return mine, nil
}

// volumes returns this owner's work volumes.
func (d *dockerManager) volumes(ctx context.Context) ([]*volume.Volume, error) {
	resp, err := d.cli.VolumeList(ctx, volume.ListOptions{Filters: d.filters("")})
	if err != nil {
		return nil, err
	}
	var mine []*volume.Volume
	for _, v := range resp.Volumes {
		if v != nil && d.owns(v.Labels, "") {
			mine = append(mine, v)
		}
	}
	return mine, nil
}

// owns reports whether labels mark a sandbox of this owner (and chat, if
// given). The engine's label filters are only a first cut: engines differ
// in how they combine several of them (Podman 4 ORs them for volumes), and
// removing another deployment's sandbox is not a risk to take on that.
func (d *dockerManager) owns(labels map[string]string, chatID string) bool {
	return labels[labelSandbox] == "1" && labels[labelOwner] == d.cfg.Owner &&
		(chatID == "" || labels[labelChat] == chatID)
}

func (d *dockerManager) box(chatID string) *dockerBox {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.boxes[chatID]
	if b == nil {
		b = &dockerBox{}
		d.boxes[chatID] = b
	}
	return b
}

// Exec implements chat.Sandboxes.
func (d *dockerManager) Exec(ctx context.Context, req *chat.ExecRequest) (*chat.ExecResult, error) {
	start := time.Now()
	res, err := d.exec(ctx, req)
	d.met.observe(BackendDocker, req.Language, res, err, time.Since(start))
	if err != nil {
		d.log.Warn("sandbox exec failed", "chat_id", req.ChatID, "language", req.Language, "err", err)
	}
	return res, err
}

func (d *dockerManager) exec(ctx context.Context, req *chat.ExecRequest) (*chat.ExecResult, error) {
	if err := checkChatID(req.ChatID); err != nil {
		return nil, err
	}
	interp, err := interpreter(req.Language)
	if err != nil {
		return nil, err
	}
	lim := d.cfg.limitsFor(req)
	b := d.box(req.ChatID)
	for attempt := 0; ; attempt++ {
		id, err := d.ensure(ctx, b, req.ChatID, lim)
		if err != nil {
			return nil, err
		}
		res, err := d.run(ctx, id, interp, req, lim)
		if err != nil && attempt == 0 && ctx.Err() == nil && d.gone(ctx, id) {
			// The container died or was removed under us (engine restart,
			// an operator's prune): forget it and create a fresh one. The
			// work dir's files are lost with it, which the next program
			// will notice; that beats failing the chat.
			d.log.Warn("sandbox container gone, recreating", "chat_id", req.ChatID, "container", shortID(id), "err", err)
			b.mu.Lock()
			if b.id == id {
				b.id = ""
			}
			b.mu.Unlock()
			continue
		}
		return res, err
	}
}

// gone reports whether a container no longer exists or is not running.
func (d *dockerManager) gone(ctx context.Context, id string) bool {
	info, err := d.cli.ContainerInspect(ctx, id)
	if err != nil {
		return cerrdefs.IsNotFound(err)
	}
	return info.State == nil || !info.State.Running
}

// ensure returns the chat's running container, reusing one that exists
// (also one left by an earlier agentd process) or creating it.
func (d *dockerManager) ensure(ctx context.Context, b *dockerBox, chatID string, lim limits) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.id != "" {
		return b.id, nil
	}
	id, err := d.findOrCreate(ctx, chatID, lim)
	if err != nil {
		return "", err
	}
	b.id = id
	return id, nil
}

func (d *dockerManager) findOrCreate(ctx context.Context, chatID string, lim limits) (string, error) {
	found, err := d.list(ctx, chatID)
	if err != nil {
		return "", fmt.Errorf("list sandbox containers of chat %s: %w", chatID, err)
	}
	if len(found) > 0 {
		c := found[0]
		if c.State != "running" {
			if err := d.cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
				return "", fmt.Errorf("start sandbox container of chat %s: %w", chatID, err)
			}
		}
		d.log.Info("sandbox reused", "chat_id", chatID, "container", shortID(c.ID))
		return c.ID, nil
	}
	return d.create(ctx, chatID, lim)
}

// create makes the chat's work volume and container and starts it. Every
// isolation setting is here; each one is deliberate:
func (d *dockerManager) create(ctx context.Context, chatID string, lim limits) (string, error) {
	name := d.name(chatID)
	labels := d.labels(chatID)
	// The work dir is a tmpfs of disk_mb owned by the sandbox user: it
	// lives as long as the container (the chat), is never shared with
	// another chat, and its pages are charged to the container's memory
	// cgroup, so a program can fill neither the host's disk nor, beyond
	// its limits, its memory through it. Podman refuses uid= on a tmpfs
	// and chowns it to the container's user with U; Docker takes uid=.
	owner := fmt.Sprintf("uid=%d,gid=%d", sandboxUID, sandboxUID)
	if d.podman.Load() {
		owner = "U"
	}
	workTmpfs := fmt.Sprintf("rw,nosuid,nodev,size=%dm,mode=0700,%s", lim.diskMB, owner)

	var mounts []mount.Mount
	if len(lim.allowHosts) > 0 {
		// The chat's egress dir, read-only: the forwarder and one socket
		// per run (egress.go). The network stays "none".
		dir, err := d.cfg.prepareEgress(chatID)
		if err != nil {
			return "", fmt.Errorf("sandbox of chat %s: %w", chatID, err)
		}
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: dir, Target: egressMount, ReadOnly: true})
	}

	memory := int64(lim.memoryMB) << 20
	pids := int64(d.cfg.PidsLimit)
	cfg := &container.Config{
		Image: d.cfg.Image,
		Cmd:   []string{"/bin/sh", "-c", containerInit},
		// Fixed, numeric and non-root whatever the image says.
		User:       fmt.Sprintf("%d:%d", sandboxUID, sandboxUID),
		WorkingDir: "/work",
		// Only what a program needs; nothing of agentd's environment.
		Env:             sandboxEnv,
		Hostname:        "sandbox",
		Labels:          labels,
		NetworkDisabled: true,
	}
	host := &container.HostConfig{
		// No network at all: not the host's, not a bridge, not loopback
		// to agentd.
		NetworkMode: "none",
		// Nothing but /work (and a small /tmp) is writable, so nothing a
		// program leaves outside the work dir survives it.
		ReadonlyRootfs: true,
		Tmpfs:          map[string]string{"/tmp": "rw,nosuid,nodev,size=" + tmpSize, "/work": workTmpfs},
		Mounts:         mounts,
		// /dev/shm as small as /tmp; it counts against memory too.
		ShmSize: shmSize,
		// No capabilities and no setuid escalation: the sandbox user stays
		// an ordinary user even if the image has setuid binaries.
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges"},
		Resources: container.Resources{
			// Memory equals memory+swap: no swap, so exceeding the limit
			// is an OOM kill rather than a slow crawl.
			Memory:     memory,
			MemorySwap: memory,
			NanoCPUs:   int64(lim.cpus * 1e9),
			// Stops fork bombs: the kernel refuses fork beyond it.
			PidsLimit: &pids,
		},
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
	}
	created, err := d.cli.ContainerCreate(ctx, cfg, host, nil, nil, name)
	if err != nil && !d.podman.Load() && strings.Contains(err.Error(), `unknown mount option "uid=`) {
		// Podman, though its version did not say so.
		d.podman.Store(true)
		host.Tmpfs["/work"] = strings.Replace(workTmpfs, owner, "U", 1)
		created, err = d.cli.ContainerCreate(ctx, cfg, host, nil, nil, name)
	}
	if err != nil {
		// Another replica may have created it just now: use that one.
		if found, lerr := d.list(ctx, chatID); lerr == nil && len(found) > 0 {
			return found[0].ID, nil
		}
		return "", fmt.Errorf("create sandbox container of chat %s: %w", chatID, err)
	}
	if err := d.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		// Not counted as alive yet, so not d.remove.
		rctx := context.WithoutCancel(ctx)
		_ = d.cli.ContainerRemove(rctx, created.ID, container.RemoveOptions{Force: true})
		_ = d.cli.VolumeRemove(rctx, name, true)
		return "", fmt.Errorf("start sandbox container of chat %s: %w", chatID, err)
	}
	d.met.alive.WithLabelValues(BackendDocker).Inc()
	d.log.Info("sandbox created", "chat_id", chatID, "container", shortID(created.ID),
		"memory_mb", lim.memoryMB, "cpus", lim.cpus, "pids", pids, "disk_mb", lim.diskMB)
	return created.ID, nil
}

// run executes one program in container id.
func (d *dockerManager) run(ctx context.Context, id, interp string, req *chat.ExecRequest, lim limits) (*chat.ExecResult, error) {
	file := "/tmp/agentd-" + randomHex(8) + codeExt(interp)
	cmd := []string{"/bin/sh", "-c", execWrapper, "agentd", file, strconv.Itoa(len(req.Code)), seconds(lim.timeout)}
	if len(lim.allowHosts) > 0 {
		// The container was made with the chat's egress dir (create).
		prefix, stop, err := d.cfg.startEgress(req.ChatID, lim.allowHosts)
		if err != nil {
			return nil, fmt.Errorf("sandbox of chat %s: %w", req.ChatID, err)
		}
		defer stop()
		cmd = append(cmd, prefix...)
	}
	cmd = append(cmd, interp)
	created, err := d.cli.ContainerExecCreate(ctx, id, container.ExecOptions{
		User:         fmt.Sprintf("%d:%d", sandboxUID, sandboxUID),
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		WorkingDir:   "/work",
		Env:          sandboxEnv,
		Cmd:          cmd,
	})
	if err != nil {
		return nil, fmt.Errorf("create exec in sandbox of chat %s: %w", req.ChatID, err)
	}
	start := time.Now()
	hj, err := d.cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("start exec in sandbox of chat %s: %w", req.ChatID, err)
	}

	// Feed code and stdin while the output is read: a program may write
	// before it reads, and neither side may block the other.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := hj.Conn.Write([]byte(req.Code)); err != nil {
			return
		}
		if len(req.Stdin) > 0 {
			if _, err := hj.Conn.Write(req.Stdin); err != nil {
				return
			}
		}
		_ = hj.CloseWrite()
	}()
	out := newCappedBuffer(d.cfg.OutputLimit)
	readDone := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := stdcopy.StdCopy(out, out, hj.Reader)
		readDone <- err
	}()
	// Closing the connection ends both goroutines; wait for them so none
	// outlives the call.
	defer wg.Wait()
	defer hj.Close()

	timer := time.NewTimer(lim.timeout + killGrace)
	defer timer.Stop()
	timedOut := false
	select {
	case err = <-readDone:
	case <-timer.C:
		// timeout(1) in the container should have ended it; kill the
		// group from outside and stop waiting for the stream.
		timedOut = true
		d.kill(ctx, id, file)
		err = d.waitRead(readDone, hj.Close)
	case <-ctx.Done():
		d.kill(context.WithoutCancel(ctx), id, file)
		hj.Close()
		<-readDone
		return nil, fmt.Errorf("exec in sandbox of chat %s: %w", req.ChatID, ctx.Err())
	}
	elapsed := time.Since(start)
	if err != nil && !timedOut {
		return nil, fmt.Errorf("read output of exec in sandbox of chat %s: %w", req.ChatID, err)
	}
	code, err := d.exitCode(ctx, created.ID)
	if err != nil && !timedOut {
		return nil, fmt.Errorf("exit code of exec in sandbox of chat %s: %w", req.ChatID, err)
	}
	// timeout(1) kills itself with the group, so a timed-out program shows
	// as SIGKILL (137); an out-of-memory kill does too, but not after the
	// deadline.
	if code == 128+9 && elapsed >= lim.timeout {
		timedOut = true
	}
	return finish(out, code, timedOut), nil
}

// waitRead waits a bounded time for the output stream to end after a kill.
func (d *dockerManager) waitRead(readDone <-chan error, closeConn func()) error {
	t := time.NewTimer(drainAfterKill)
	defer t.Stop()
	select {
	case err := <-readDone:
		return err
	case <-t.C:
		// A process that left the group (setsid) still holds the output
		// open; it dies with the container at the chat's end.
		closeConn()
		return <-readDone
	}
}

// kill SIGKILLs the process group of the program writing code file.
func (d *dockerManager) kill(ctx context.Context, id, file string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, _, err := d.simpleExec(ctx, id, []string{"/bin/sh", "-c", killGroup, "agentd", file}); err != nil {
		d.log.Warn("sandbox kill failed", "container", shortID(id), "err", err)
	}
}

// simpleExec runs a short helper command in container id and returns its
// exit code and output.
func (d *dockerManager) simpleExec(ctx context.Context, id string, cmd []string) (int, string, error) {
	created, err := d.cli.ContainerExecCreate(ctx, id, container.ExecOptions{
		User:         fmt.Sprintf("%d:%d", sandboxUID, sandboxUID),
		AttachStdout: true,
		AttachStderr: true,
		Env:          sandboxEnv,
		Cmd:          cmd,
	})
	if err != nil {
		return 0, "", err
	}
	hj, err := d.cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return 0, "", err
	}
	defer hj.Close()
	out := newCappedBuffer(64 << 10)
	if _, err := stdcopy.StdCopy(out, out, hj.Reader); err != nil {
		return 0, "", err
	}
	code, err := d.exitCode(ctx, created.ID)
	return code, out.String(), err
}

// exitCode waits for an exec whose output has ended to be reported as
// exited: engines (Podman in particular) may close the stream a moment
// before they record the exit code.
func (d *dockerManager) exitCode(ctx context.Context, execID string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	wait := time.Millisecond
	for {
		info, err := d.cli.ContainerExecInspect(ctx, execID)
		if err != nil {
			return -1, err
		}
		if !info.Running {
			return info.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("exec %s still running after its output ended", shortID(execID))
		case <-time.After(wait):
		}
		wait = min(wait*2, 50*time.Millisecond)
	}
}

// Release implements chat.Sandboxes: it force-removes the chat's container
// and its work volume.
func (d *dockerManager) Release(ctx context.Context, chatID string) error {
	if err := checkChatID(chatID); err != nil {
		return err
	}
	d.mu.Lock()
	b := d.boxes[chatID]
	delete(d.boxes, chatID)
	d.mu.Unlock()
	if b != nil {
		// Wait out a creation in progress, so it is removed too.
		b.mu.Lock()
		defer b.mu.Unlock()
		b.id = ""
	}
	_, err := d.remove(ctx, chatID)
	return errors.Join(err, d.cfg.releaseEgress(chatID))
}

// remove deletes a chat's containers and volume; removed reports whether
// there was anything to delete.
func (d *dockerManager) remove(ctx context.Context, chatID string) (removed bool, err error) {
	found, err := d.list(ctx, chatID)
	if err != nil {
		return false, fmt.Errorf("list sandbox of chat %s: %w", chatID, err)
	}
	var errs []error
	for _, c := range found {
		err := d.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove sandbox container %s of chat %s: %w", shortID(c.ID), chatID, err))
			continue
		}
		removed = true
		d.met.alive.WithLabelValues(BackendDocker).Dec()
		d.log.Info("sandbox removed", "chat_id", chatID, "container", shortID(c.ID))
	}
	err = d.cli.VolumeRemove(ctx, d.name(chatID), true)
	switch {
	case err == nil:
		removed = true
	case !cerrdefs.IsNotFound(err):
		errs = append(errs, fmt.Errorf("remove work volume of chat %s: %w", chatID, err))
	}
	return removed, errors.Join(errs...)
}

// Reap implements Manager.
func (d *dockerManager) Reap(ctx context.Context, keep func(chatID string) bool) (int, error) {
	chats := map[string]bool{}
	found, err := d.list(ctx, "")
	if err != nil {
		return 0, fmt.Errorf("reap: list sandbox containers: %w", err)
	}
	for _, c := range found {
		chats[c.Labels[labelChat]] = true
	}
	vols, err := d.volumes(ctx)
	if err != nil {
		return 0, fmt.Errorf("reap: list sandbox volumes: %w", err)
	}
	for _, v := range vols {
		chats[v.Labels[labelChat]] = true
	}
	removed := 0
	var errs []error
	for chatID := range chats {
		if checkChatID(chatID) != nil || keep(chatID) {
			continue
		}
		d.mu.Lock()
		delete(d.boxes, chatID)
		d.mu.Unlock()
		ok, err := d.remove(ctx, chatID)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			removed++
			d.log.Info("sandbox reaped", "chat_id", chatID)
		}
	}
	errs = append(errs, d.cfg.reapEgress(keep))
	if err := errors.Join(errs...); err != nil {
		d.log.Warn("sandbox reap incomplete", "removed", removed, "err", err)
		return removed, err
	}
	return removed, nil
}

// codeExt names code files so tracebacks and error messages read well.
func codeExt(interp string) string {
	if interp == "python3" {
		return ".py"
	}
	return ".sh"
}

// seconds formats d for timeout(1), which takes fractional seconds.
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
