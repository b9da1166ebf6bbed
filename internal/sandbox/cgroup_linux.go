package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupRoot is where the kernel's cgroup filesystems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cpuPeriod is the CFS period (µs) of a sandbox's CPU quota.
const cpuPeriod = 100000

// cgroups gives every bwrap sandbox a control group of its own, so that
// its limits cover everything it does: memory (processes, every tmpfs page
// it writes, page cache it dirties) with no swap, processes and threads,
// and CPU bandwidth. rlimits cannot: they are per process and know nothing
// of tmpfs.
//
// Both cgroup versions are supported. v2 (one unified hierarchy) puts the
// sandbox into its cgroup as bwrap is cloned (CLONE_INTO_CGROUP). v1 (one
// hierarchy per controller) has no such flag; there, the OS thread that
// starts bwrap moves itself into the sandbox's cgroups first, so bwrap is
// born inside them, and moves back afterwards. (The Go runtime creates new
// threads from a template thread while one is locked, so no runtime thread
// inherits a sandbox's cgroup.) Either way nothing the sandbox runs is ever
// outside its limits, not even for an instant.
//
// The sandboxes' cgroups are children of agentd's own, so that whatever
// bounds agentd (a systemd unit, a container) bounds its sandboxes too.
type cgroups struct {
	v2 string // the parent of the sandboxes' cgroups on v2; "" on v1
	// v1 is the parent per controller: memory, pids, cpu and, when
	// mounted separately, cpuacct (CPU usage).
	v1    map[string]string
	memsw bool // v1 accounts swap: memory.memsw.limit_in_bytes
}

// v2Enable hands the controllers a sandbox is limited by down to the
// children of a v2 cgroup.
const v2Enable = "+memory +pids +cpu"

// v1Controllers are the v1 hierarchies a sandbox joins; cpuacct is
// optional (it only measures).
var v1Controllers = []string{"memory", "pids", "cpu", "cpuacct"}

// openCgroups finds the hierarchy and makes the parent of the sandboxes'
// cgroups, named after the owner. It fails when agentd cannot manage
// cgroups (not root, no delegation, a controller missing); bwrap then falls
// back to rlimits and says so.
func openCgroups(owner string) (*cgroups, error) {
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	name := "agentd-sandboxes-" + owner
	var st unix.Statfs_t
	if err := unix.Statfs(cgroupRoot, &st); err != nil {
		return nil, fmt.Errorf("no cgroup filesystem at %s: %w", cgroupRoot, err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return openCgroupsV2(filepath.Join(cgroupRoot, own[""]), name)
	}
	cg := &cgroups{v1: map[string]string{}}
	for _, c := range v1Controllers {
		mount := filepath.Join(cgroupRoot, c)
		if _, err := os.Stat(filepath.Join(mount, "tasks")); err != nil {
			if c == "cpuacct" {
				continue
			}
			return nil, fmt.Errorf("cgroup v1 controller %s is not mounted at %s", c, mount)
		}
		if c == "cpuacct" && sameDir(mount, filepath.Join(cgroupRoot, "cpu")) {
			continue
		}
		dir := filepath.Join(mount, own[c], name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		cg.v1[c] = dir
	}
	_, err = os.Stat(filepath.Join(cg.v1["memory"], "memory.memsw.limit_in_bytes"))
	cg.memsw = err == nil
	return cg, nil
}

// openCgroupsV2 prepares dir (agentd's own cgroup) for children with the
// memory, pids and cpu controllers. v2 allows no processes in a cgroup
// whose controllers are handed down, so agentd moves itself into a leaf
// "agentd" beside the sandboxes' parent, as a systemd unit with
// Delegate=yes would.
func openCgroupsV2(dir, name string) (*cgroups, error) {
	avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("cgroup v2: %w", err)
	}
	for _, c := range []string{"memory", "pids", "cpu"} {
		if !slicesContains(strings.Fields(string(avail)), c) {
			return nil, fmt.Errorf("cgroup v2: controller %s is not available in %s (delegate it to agentd)", c, dir)
		}
	}
	enable := []byte(v2Enable)
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), enable, 0); err != nil {
		// Processes live in dir: move agentd into a leaf and retry.
		leaf := filepath.Join(dir, "agentd")
		if err := os.MkdirAll(leaf, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup v2: %w", err)
		}
		if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			return nil, fmt.Errorf("cgroup v2: move agentd into %s: %w", leaf, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), enable, 0); err != nil {
			return nil, fmt.Errorf("cgroup v2: enable controllers in %s: %w", dir, err)
		}
	}
	cg := &cgroups{v2: filepath.Join(dir, name)}
	if err := cg.remake(); err != nil {
		return nil, fmt.Errorf("cgroup v2: the sandboxes' parent: %w", err)
	}
	return cg, nil
}

// ownCgroups maps each v1 controller (and "" for v2) to agentd's cgroup path.
func ownCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	own := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			own[c] = parts[2]
		}
	}
	return own, nil
}

// sameDir reports whether a and b are one directory (cpu and cpuacct are
// often one mount, linked under both names).
func sameDir(a, b string) bool {
	ra, errA := filepath.EvalSymlinks(a)
	rb, errB := filepath.EvalSymlinks(b)
	return errA == nil && errB == nil && ra == rb
}

func slicesContains(s []string, v string) bool {
	for _, e := range s {
		if e == v {
			return true
		}
	}
	return false
}

// cgroup is one sandbox's control group.
type cgroup struct {
	cg   *cgroups
	dirs map[string]string // controller ("" on v2) → directory
}

// create makes a cgroup with the limits: memory (and memory+swap, so
// nothing is pushed to swap), pids, CPU bandwidth.
func (cg *cgroups) create(name string, memoryBytes int64, pids int, cpus float64) (*cgroup, error) {
	c := &cgroup{cg: cg, dirs: map[string]string{}}
	// At least 1 ms per period, the kernel's minimum.
	quota := strconv.Itoa(max(int(cpus*cpuPeriod), 1000))
	mem := strconv.FormatInt(memoryBytes, 10)
	var files [][3]string // controller, file, value
	if cg.v2 != "" {
		c.dirs[""] = filepath.Join(cg.v2, name)
		files = [][3]string{
			{"", "memory.max", mem},
			{"", "memory.swap.max", "0"},
			{"", "pids.max", strconv.Itoa(pids)},
			{"", "cpu.max", quota + " " + strconv.Itoa(cpuPeriod)},
		}
	} else {
		for ctrl, parent := range cg.v1 {
			c.dirs[ctrl] = filepath.Join(parent, name)
		}
		files = [][3]string{
			{"memory", "memory.limit_in_bytes", mem},
			{"pids", "pids.max", strconv.Itoa(pids)},
			{"cpu", "cpu.cfs_period_us", strconv.Itoa(cpuPeriod)},
			{"cpu", "cpu.cfs_quota_us", quota},
		}
		if cg.memsw {
			files = append(files, [3]string{"memory", "memory.memsw.limit_in_bytes", mem})
		} else {
			files = append(files, [3]string{"memory", "memory.swappiness", "0"})
		}
	}
	// The parents are shared by every sandbox manager of the owner on the
	// host, in this process or another, and one that closes with no
	// sandbox left removes them (close): a sandbox made just then finds
	// them gone. They are made again, a few times at most.
	for try := 0; ; try++ {
		err := c.mkdirs()
		if err == nil {
			break
		}
		if errors.Is(err, fs.ErrNotExist) && try < 3 {
			if err = cg.remake(); err == nil {
				continue
			}
		}
		c.remove()
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(c.dirs[f[0]], f[1]), []byte(f[2]), 0); err != nil {
			c.remove()
			return nil, fmt.Errorf("set %s: %w", f[1], err)
		}
	}
	return c, nil
}

// start starts cmd inside the cgroup.
func (c *cgroup) start(cmd *exec.Cmd) error {
	if d, ok := c.dirs[""]; ok {
		fd, err := unix.Open(d, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open cgroup: %w", err)
		}
		defer unix.Close(fd)
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = fd
		return cmd.Start()
	}
	// v1: this thread joins the cgroups, forks bwrap, and leaves again.
	runtime.LockOSThread()
	tid := strconv.Itoa(unix.Gettid())
	back, err := threadCgroups(tid)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	moved := []string{}
	restore := func() bool {
		ok := true
		for _, ctrl := range moved {
			if err := os.WriteFile(filepath.Join(back[ctrl], "tasks"), []byte(tid), 0); err != nil {
				ok = false
			}
		}
		return ok
	}
	for ctrl, d := range c.dirs {
		if err := os.WriteFile(filepath.Join(d, "tasks"), []byte(tid), 0); err != nil {
			if restore() {
				runtime.UnlockOSThread()
			}
			return fmt.Errorf("join cgroup %s: %w", d, err)
		}
		moved = append(moved, ctrl)
	}
	err = cmd.Start()
	if restore() {
		runtime.UnlockOSThread()
	}
	// Else the thread stays locked to this goroutine and ends with it:
	// it never runs anything else in the sandbox's cgroups.
	return err
}

// threadCgroups maps each controller to the directory of the thread's
// current cgroup.
func threadCgroups(tid string) (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/task/" + tid + "/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, ctrl := range strings.Split(parts[1], ",") {
			if slicesContains(v1Controllers, ctrl) {
				out[ctrl] = filepath.Join(cgroupRoot, ctrl, parts[2])
			}
		}
	}
	return out, nil
}

// runStats is what a sandbox's cgroup measured.
type runStats struct {
	cpuUsage time.Duration // CPU time used (zero if not measured)
	oomKills int           // processes the kernel killed for memory
	peak     int64         // highest memory use, bytes (v1; v2 ≥ 5.19)
}

// stats reads the cgroup's counters.
func (c *cgroup) stats() runStats {
	var st runStats
	read := func(ctrl, file string) string {
		b, _ := os.ReadFile(filepath.Join(c.dirs[ctrl], file))
		return strings.TrimSpace(string(b))
	}
	if _, ok := c.dirs[""]; ok {
		st.cpuUsage = time.Duration(keyed(read("", "cpu.stat"), "usage_usec")) * time.Microsecond
		st.oomKills = int(keyed(read("", "memory.events"), "oom_kill"))
		st.peak, _ = strconv.ParseInt(read("", "memory.peak"), 10, 64)
		return st
	}
	acct := "cpuacct"
	if _, ok := c.dirs[acct]; !ok {
		acct = "cpu"
	}
	if ns, err := strconv.ParseInt(read(acct, "cpuacct.usage"), 10, 64); err == nil {
		st.cpuUsage = time.Duration(ns)
	}
	st.oomKills = int(keyed(read("memory", "memory.oom_control"), "oom_kill"))
	st.peak, _ = strconv.ParseInt(read("memory", "memory.max_usage_in_bytes"), 10, 64)
	return st
}

// keyed returns the value of key in a "key value" per line file.
func keyed(s, key string) int64 {
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// mkdirs makes the cgroup's directories, those that a try before made
// being left as they are.
func (c *cgroup) mkdirs() error {
	for _, d := range c.dirs {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return nil
}

// remake makes the sandboxes' parent cgroups, with the controllers handed
// down on v2: when they are opened, and again after another manager's close
// removed them.
func (cg *cgroups) remake() error {
	if cg.v2 != "" {
		if err := os.MkdirAll(cg.v2, 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(cg.v2, "cgroup.subtree_control"), []byte(v2Enable), 0)
	}
	for _, d := range cg.v1 {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// remove kills whatever is left in the cgroup and deletes it. Processes
// may take a moment to be gone after bwrap's pid namespace ended
// (seconds, on a loaded host).
func (c *cgroup) remove() {
	deadline := time.Now().Add(30 * time.Second)
	for _, d := range c.dirs {
		for {
			err := os.Remove(d)
			if err == nil || errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
				break
			}
			killAll(d)
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// killAll SIGKILLs every process in cgroup dir.
func killAll(dir string) {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err == nil {
		return
	}
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// close removes the sandboxes' parent cgroups if they are empty.
func (cg *cgroups) close() {
	if cg.v2 != "" {
		_ = os.Remove(cg.v2)
	}
	for _, d := range cg.v1 {
		_ = os.Remove(d)
	}
}
