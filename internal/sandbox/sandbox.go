// Package sandbox runs model-written code in one isolated sandbox per chat
// (docs/tools.md). It implements chat.Sandboxes with two backends:
//
//   - docker: a long-lived container per chat behind any Docker Engine API
//     (Docker, or Podman's Docker-compatible service), one exec per program.
//   - bwrap: bubblewrap namespaces on the agentd host, for hosts without a
//     container engine; one short-lived sandbox per program around a
//     persistent per-chat work dir.
//
// Code from a model is hostile input, so both backends give the same
// guarantees: no network, no host files except the chat's own work dir, an
// empty environment, a non-root user, memory/process limits, a per-execution
// timeout and capped output. A chat whose spec names hosts reaches them
// through agentd's egress proxy and nothing else (egress.go). Nothing in this package ever runs a program on
// the host outside a sandbox: when no backend works, Open fails with
// ErrNoSandbox and the server rejects specs that need code execution.
//
// The Docker client is used only here (STYLE rule 1).
package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/internal/chat"
)

// Backend names, as accepted by Config.Backend and reported by
// Manager.Backend.
const (
	BackendAuto   = "auto"
	BackendDocker = "docker"
	BackendBwrap  = "bwrap"
	BackendNone   = "none"
)

// Defaults for zero Config fields. They are exported so cmd/agentd can show
// them in its flag help.
const (
	// DefaultImage is the tag deploy/sandbox builds (Dockerfile or
	// build-rootfs.sh).
	DefaultImage = "agentd-sandbox:latest"
	// DefaultDockerHost is Podman's rootful socket, the engine CI and
	// deploy/sandbox set up; ResolveDockerHost picks between DOCKER_HOST,
	// it and Docker's socket.
	DefaultDockerHost = "unix:///run/podman/podman.sock"
	// DefaultMemoryMB and DefaultCPUs apply when neither the spec nor the
	// server configuration sets a limit.
	DefaultMemoryMB = 512
	DefaultCPUs     = 1.0
	// DefaultDiskMB is the size of a chat's work dir.
	DefaultDiskMB = 256
	// DefaultPidsLimit bounds the processes (and threads) of one sandbox;
	// it is what stops a fork bomb.
	DefaultPidsLimit = 128
	// DefaultOutputLimit caps the output kept from one program (1 MiB).
	DefaultOutputLimit = 1 << 20
	// DefaultTimeout applies to an ExecRequest without a Timeout (AutoGen's
	// default for code executors is 60 s).
	DefaultTimeout = 60 * time.Second
	// DefaultBwrapUID is the host uid (and gid) bwrap sandboxes run as when
	// agentd runs as root: a uid that owns nothing else, from the range
	// Debian reserves and never allocates (65000–65533), so an escape lands
	// as a nobody that can write nowhere, and root's exemption from
	// RLIMIT_NPROC does not disable the process limit.
	DefaultBwrapUID = 65000
	// DefaultOwner labels the containers of a deployment.
	DefaultOwner = "agentd"
)

// ResolveDockerHost returns the engine address to use when the operator
// named none: dockerHostEnv (the DOCKER_HOST variable, which cmd/agentd
// reads) when set, else Podman's rootful socket when it exists, else
// Docker's socket.
func ResolveDockerHost(dockerHostEnv string) string {
	if dockerHostEnv != "" {
		return dockerHostEnv
	}
	if _, err := os.Stat(strings.TrimPrefix(DefaultDockerHost, "unix://")); err == nil {
		return DefaultDockerHost
	}
	return "unix:///var/run/docker.sock"
}

// sandboxUID is the uid and gid programs run as inside every sandbox: the
// image's "sandbox" user, never root. It is fixed (not taken from the
// image's USER) so a custom image cannot turn the sandbox into root.
const sandboxUID = 1000

// TimeoutExitCode and TimeoutMarker are what a program that ran out of time
// reports, as AutoGen's code executors do.
const (
	TimeoutExitCode = 124
	TimeoutMarker   = "\nTimeout"
)

// ErrNoSandbox means no sandbox backend is available (or the backend is
// "none"). Specs that need code execution must then be rejected: agentd never
// falls back to running code on the host.
var ErrNoSandbox = errors.New("no code execution sandbox available")

// Config configures Open. Zero fields take the defaults above.
type Config struct {
	// Backend is "auto" (default: docker if the engine answers and has the
	// image, else bwrap if it is installed and works), "docker", "bwrap" or
	// "none".
	Backend string
	// DockerHost is the engine's address (unix:///…, tcp://…). The package
	// reads no environment: cmd/agentd resolves DOCKER_HOST and the
	// well-known sockets.
	DockerHost string
	// Image is the sandbox image (default agentd-sandbox:latest). It must
	// provide /bin/sh, coreutils (head, timeout), python3 and a /work
	// directory; deploy/sandbox builds one.
	Image string
	// WorkRoot is the host directory that holds one work dir per chat for
	// the bwrap backend (the docker backend keeps work dirs in engine
	// volumes). Required for bwrap; auto skips bwrap without it. When
	// agentd runs as root, the sandbox uid (BwrapUID) must be able to
	// search WorkRoot's parent directories (o+x): bwrap resolves the work
	// dir's path as that uid.
	WorkRoot string
	// DefaultMemoryMB, DefaultCPUs apply when an ExecRequest's limits are
	// zero.
	DefaultMemoryMB int
	DefaultCPUs     float64
	// DefaultDiskMB bounds a chat's work dir when its ExecRequest sets no
	// disk limit (docker: a tmpfs of that size; bwrap: the same when
	// agentd runs as root).
	DefaultDiskMB int
	// DefaultTimeout applies when an ExecRequest's Timeout is zero.
	DefaultTimeout time.Duration
	// PidsLimit is the most processes/threads one sandbox may have.
	PidsLimit int
	// OutputLimit is the most bytes of output kept per program; more is
	// read and dropped, and the output ends with a marker.
	OutputLimit int
	// Owner labels containers (agentd.owner) so that Reap only ever removes
	// this deployment's sandboxes. Replicas that share an engine should
	// share the Owner, so a chat taken over by another replica reuses its
	// container.
	Owner string
	// BwrapUID is the host uid and gid bwrap sandboxes run as when agentd
	// runs as root (default 65000). Ignored when agentd is not root: the
	// sandbox then runs as agentd's own uid, still inside a user namespace.
	BwrapUID int
	// Egress serves the network of programs whose ExecRequest names hosts
	// (sandbox.network.allow); nil: no sandbox gets a network, and such a
	// request fails.
	Egress Egress
	// EgressDir is the host directory of the per-run sockets that connect
	// sandboxes to Egress, one subdirectory per chat (default: .egress in
	// WorkRoot). agentd creates it searchable but not listable (0711). As
	// with WorkRoot, the bwrap sandbox uid must be able to search its
	// parent directories; with the docker backend it must be a path the
	// engine can bind-mount, that is on the engine's host.
	EgressDir string
	// Logger receives create/remove/reap lines and failures.
	Logger *slog.Logger
	// Registerer receives the sandbox metrics; nil registers none.
	Registerer prometheus.Registerer
	// TracerProvider traces each execution; nil: no spans.
	TracerProvider trace.TracerProvider
}

// withDefaults fills zero fields.
func (c Config) withDefaults() Config {
	c.Backend = cmp.Or(c.Backend, BackendAuto)
	c.DockerHost = cmp.Or(c.DockerHost, DefaultDockerHost)
	c.Image = cmp.Or(c.Image, DefaultImage)
	if c.DefaultMemoryMB <= 0 {
		c.DefaultMemoryMB = DefaultMemoryMB
	}
	if c.DefaultCPUs <= 0 {
		c.DefaultCPUs = DefaultCPUs
	}
	if c.DefaultDiskMB <= 0 {
		c.DefaultDiskMB = DefaultDiskMB
	}
	if c.DefaultTimeout <= 0 {
		c.DefaultTimeout = DefaultTimeout
	}
	if c.PidsLimit <= 0 {
		c.PidsLimit = DefaultPidsLimit
	}
	if c.OutputLimit <= 0 {
		c.OutputLimit = DefaultOutputLimit
	}
	c.Owner = cmp.Or(c.Owner, DefaultOwner)
	if c.EgressDir == "" && c.WorkRoot != "" {
		// Beside the work dirs, whose parents the bwrap sandbox uid can
		// already search; a dot name is no chat id, so Reap passes it by.
		c.EgressDir = filepath.Join(c.WorkRoot, ".egress")
	}
	if c.EgressDir != "" {
		if abs, err := filepath.Abs(c.EgressDir); err == nil {
			c.EgressDir = abs // a bind mount's source must be absolute
		}
	}
	if c.BwrapUID <= 0 {
		c.BwrapUID = DefaultBwrapUID
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem with c at once (STYLE rule 9); zero fields
// are valid (they take defaults).
func (c Config) Validate() error {
	var errs []error
	switch c.Backend {
	case "", BackendAuto, BackendDocker, BackendBwrap, BackendNone:
	default:
		errs = append(errs, fmt.Errorf("sandbox backend %q: want auto, docker, bwrap or none", c.Backend))
	}
	if c.Backend == BackendBwrap && c.WorkRoot == "" {
		errs = append(errs, errors.New("sandbox backend bwrap needs a work root directory"))
	}
	if c.DefaultMemoryMB < 0 || (c.DefaultMemoryMB > 0 && c.DefaultMemoryMB < minMemoryMB) {
		errs = append(errs, fmt.Errorf("sandbox memory %d MB: want at least %d", c.DefaultMemoryMB, minMemoryMB))
	}
	if c.DefaultCPUs < 0 {
		errs = append(errs, fmt.Errorf("sandbox cpus %g: must not be negative", c.DefaultCPUs))
	}
	if c.DefaultTimeout < 0 {
		errs = append(errs, fmt.Errorf("sandbox timeout %s: must not be negative", c.DefaultTimeout))
	}
	if c.PidsLimit < 0 || (c.PidsLimit > 0 && c.PidsLimit < minPids) {
		errs = append(errs, fmt.Errorf("sandbox pids limit %d: want at least %d", c.PidsLimit, minPids))
	}
	if c.OutputLimit < 0 {
		errs = append(errs, fmt.Errorf("sandbox output limit %d: must not be negative", c.OutputLimit))
	}
	if c.Egress != nil && c.EgressDir == "" && c.WorkRoot == "" {
		errs = append(errs, errors.New("sandbox egress needs a directory for its sockets (or a work root to hold it)"))
	}
	if c.BwrapUID < 0 {
		errs = append(errs, fmt.Errorf("sandbox bwrap uid %d: must not be negative (zero means the default)", c.BwrapUID))
	}
	return errors.Join(errs...)
}

const (
	minMemoryMB = 16
	minPids     = 8
)

// Manager is a chat.Sandboxes that also cleans up after crashes.
type Manager interface {
	chat.Sandboxes
	// Reap removes the sandboxes (containers, volumes, work dirs) of this
	// Owner whose chat keep rejects: leftovers of chats that ended while
	// agentd was down or crashed. cmd/agentd calls it at start and
	// periodically with keep = "the chat exists and is not terminal".
	Reap(ctx context.Context, keep func(chatID string) bool) (removed int, err error)
	// Close releases the manager's own resources (the engine connection).
	// It leaves sandboxes in place: a restarted agentd reuses them and Reap
	// removes the ones no longer needed. Safe to call twice.
	Close() error
}

// Open returns the Manager for cfg.Backend. With "auto" it picks docker when
// the engine answers and has the image, else bwrap when it is installed and
// a probe sandbox runs, else it fails with ErrNoSandbox and a message saying
// how to enable one. An explicit backend that does not work is an error
// (wrapping ErrNoSandbox). "none" always returns ErrNoSandbox.
func Open(ctx context.Context, cfg Config) (Manager, error) {
	m, err := openBackend(ctx, cfg)
	if err != nil || cfg.TracerProvider == nil {
		return m, err
	}
	return &tracedManager{Manager: m, tracer: cfg.TracerProvider.Tracer(tracerName)}, nil
}

func openBackend(ctx context.Context, cfg Config) (Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	switch cfg.Backend {
	case BackendNone:
		return nil, fmt.Errorf("%w: code execution is disabled (sandbox backend \"none\"); %s", ErrNoSandbox, howToEnable)
	case BackendDocker:
		m, err := openDocker(ctx, cfg, met)
		if err != nil {
			return nil, fmt.Errorf("%w: docker: %v", ErrNoSandbox, err)
		}
		return m, nil
	case BackendBwrap:
		m, err := openBwrap(ctx, cfg, met)
		if err != nil {
			return nil, fmt.Errorf("%w: bwrap: %v", ErrNoSandbox, err)
		}
		return m, nil
	}
	dm, derr := openDocker(ctx, cfg, met)
	if derr == nil {
		cfg.Logger.Info("sandbox backend selected", "backend", BackendDocker, "host", cfg.DockerHost, "image", cfg.Image)
		return dm, nil
	}
	cfg.Logger.Info("sandbox backend unavailable", "backend", BackendDocker, "err", derr)
	if cfg.WorkRoot == "" {
		return nil, fmt.Errorf("%w: docker: %v; bwrap: no work root configured; %s", ErrNoSandbox, derr, howToEnable)
	}
	bm, berr := openBwrap(ctx, cfg, met)
	if berr == nil {
		cfg.Logger.Info("sandbox backend selected", "backend", BackendBwrap, "work_root", cfg.WorkRoot)
		return bm, nil
	}
	cfg.Logger.Info("sandbox backend unavailable", "backend", BackendBwrap, "err", berr)
	return nil, fmt.Errorf("%w: docker: %v; bwrap: %v; %s", ErrNoSandbox, derr, berr, howToEnable)
}

const howToEnable = "to enable code execution, run a Docker-API engine (Docker, or `podman system service`) " +
	"with the sandbox image (deploy/sandbox: docker build, or build-rootfs.sh without a registry), " +
	"or install bubblewrap (apt-get install bubblewrap)"

// chatIDPattern is what a chat id may look like here. It becomes part of a
// container name and a host path, so it is checked, never escaped: no
// slashes, no dot-dot, nothing an engine or a filesystem would interpret.
var chatIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

func checkChatID(id string) error {
	if !chatIDPattern.MatchString(id) {
		return fmt.Errorf("sandbox: invalid chat id %q", id)
	}
	return nil
}

// interpreter maps a canonical language to the program that runs a code
// file. Only these run: an unknown language is the caller's bug, reported
// as an error rather than guessed at.
func interpreter(language string) (string, error) {
	switch strings.ToLower(language) {
	case "python":
		return "python3", nil
	case "sh":
		return "sh", nil
	case "bash":
		return "bash", nil
	}
	return "", fmt.Errorf("sandbox: unsupported language %q (want python or sh)", language)
}

// limits are one execution's effective settings.
type limits struct {
	memoryMB int
	diskMB   int
	cpus     float64
	timeout  time.Duration
	// allowHosts: the program reaches these through the egress proxy;
	// empty: no network.
	allowHosts []string
}

func (c *Config) limitsFor(req *chat.ExecRequest) limits {
	l := limits{memoryMB: req.Limits.MemoryMB, cpus: req.Limits.CPUs, diskMB: req.Limits.DiskMB, timeout: req.Timeout,
		allowHosts: req.Limits.AllowHosts}
	if l.diskMB <= 0 {
		l.diskMB = c.DefaultDiskMB
	}
	if l.memoryMB <= 0 {
		l.memoryMB = c.DefaultMemoryMB
	}
	l.memoryMB = max(l.memoryMB, minMemoryMB)
	if l.cpus <= 0 {
		l.cpus = c.DefaultCPUs
	}
	if l.timeout <= 0 {
		l.timeout = c.DefaultTimeout
	}
	return l
}

// sandboxEnv is the whole environment of a sandboxed program: nothing of
// agentd's own (API keys, database URLs) ever reaches it. PYTHONPATH makes
// modules written to the work dir importable, as when AutoGen runs a code
// file from its work dir; PYTHONUNBUFFERED keeps print output and a
// traceback in the order they happened.
var sandboxEnv = []string{
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"HOME=/work",
	"LANG=C.UTF-8",
	"PYTHONPATH=/work",
	"PYTHONUNBUFFERED=1",
}

// finish turns what a run produced into the result, AutoGen style.
func finish(out *cappedBuffer, exitCode int, timedOut bool) *chat.ExecResult {
	res := &chat.ExecResult{ExitCode: exitCode, Output: out.String(), Truncated: out.Truncated()}
	if timedOut {
		res.ExitCode = TimeoutExitCode
		res.TimedOut = true
		res.Output += TimeoutMarker
	}
	return res
}

// outcome classifies a result for the executions metric.
func outcome(res *chat.ExecResult) string {
	switch {
	case res.TimedOut:
		return outcomeTimeout
	case res.ExitCode == 0:
		return outcomeOK
	case res.ExitCode > 128 && res.ExitCode <= 128+64:
		// 128+signal: killed by the kernel (out of memory) or a signal.
		return outcomeKilled
	default:
		return outcomeError
	}
}
