package sandbox

import (
	"encoding/binary"
	"runtime"

	"golang.org/x/sys/unix"
)

// deniedSyscalls are refused (EPERM) in bwrap sandboxes, as the container
// engines' default seccomp profiles refuse them in the docker backend. None
// is needed to run a program; each is kernel attack surface or a way to
// reach beyond the sandbox: namespaces and mounts (escapes), keyrings,
// BPF, perf, userfaultfd and io_uring (frequent sources of kernel
// exploits), modules, kexec, reboot, swap, ptrace and cross-process memory
// access, file handles (the classic open_by_handle_at container escape).
var deniedSyscalls = []uint32{
	unix.SYS_ACCT, unix.SYS_ADD_KEY, unix.SYS_BPF, unix.SYS_CHROOT,
	unix.SYS_DELETE_MODULE, unix.SYS_FANOTIFY_INIT, unix.SYS_FINIT_MODULE,
	unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSOPEN, unix.SYS_FSPICK,
	unix.SYS_INIT_MODULE, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_IO_URING_SETUP, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_KEXEC_LOAD,
	unix.SYS_KEYCTL, unix.SYS_MOUNT, unix.SYS_MOUNT_SETATTR, unix.SYS_MOVE_MOUNT,
	unix.SYS_NAME_TO_HANDLE_AT, unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_OPEN_TREE,
	unix.SYS_PERF_EVENT_OPEN, unix.SYS_PIVOT_ROOT, unix.SYS_PROCESS_VM_READV,
	unix.SYS_PROCESS_VM_WRITEV, unix.SYS_PTRACE, unix.SYS_QUOTACTL,
	unix.SYS_REBOOT, unix.SYS_REQUEST_KEY, unix.SYS_SETNS, unix.SYS_SWAPOFF,
	unix.SYS_SWAPON, unix.SYS_SYSLOG, unix.SYS_UMOUNT2, unix.SYS_UNSHARE,
	unix.SYS_USERFAULTFD, unix.SYS_VHANGUP,
}

// auditArch is the AUDIT_ARCH_* value of the architecture agentd is built
// for; the filter only knows this architecture's syscall numbers.
var auditArch = map[string]uint32{
	"amd64": unix.AUDIT_ARCH_X86_64,
	"arm64": unix.AUDIT_ARCH_AARCH64,
}

// Classic BPF opcodes and seccomp return values used by the filter.
const (
	bpfLdWAbs  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeqK    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJgeK    = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfRetK    = unix.BPF_RET | unix.BPF_K
	offNr      = 0 // offsetof(struct seccomp_data, nr)
	offArch    = 4 // offsetof(struct seccomp_data, arch)
	x32Bit     = 0x40000000
	retAllow   = unix.SECCOMP_RET_ALLOW
	retKill    = unix.SECCOMP_RET_KILL_PROCESS
	retDenyErr = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
)

// seccompFilter returns the bwrap sandbox's seccomp program (an array of
// struct sock_filter, as bwrap reads it from a descriptor), or nil on an
// architecture it has no syscall table for. A syscall of another ABI (i386
// via int 0x80, x32 on amd64) kills the process: a denylist only holds for
// the numbers it was written for.
func seccompFilter() []byte {
	arch, ok := auditArch[runtime.GOARCH]
	if !ok {
		return nil
	}
	type insn struct {
		code   uint16
		jt, jf uint8
		k      uint32
	}
	prog := []insn{
		{bpfLdWAbs, 0, 0, offArch},
		{bpfJeqK, 1, 0, arch},
		{bpfRetK, 0, 0, retKill},
		{bpfLdWAbs, 0, 0, offNr},
	}
	if runtime.GOARCH == "amd64" {
		prog = append(prog, insn{bpfJgeK, 0, 1, x32Bit}, insn{bpfRetK, 0, 0, retKill})
	}
	// One comparison per denied number, each jumping to the EPERM return
	// that follows the ALLOW after the last comparison.
	n := len(deniedSyscalls)
	for i, nr := range deniedSyscalls {
		prog = append(prog, insn{bpfJeqK, uint8(n - i), 0, nr})
	}
	prog = append(prog, insn{bpfRetK, 0, 0, retAllow}, insn{bpfRetK, 0, 0, retDenyErr})

	out := make([]byte, 0, 8*len(prog))
	for _, in := range prog {
		out = binary.NativeEndian.AppendUint16(out, in.code)
		out = append(out, in.jt, in.jf)
		out = binary.NativeEndian.AppendUint32(out, in.k)
	}
	return out
}
