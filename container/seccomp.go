package container

import (
	"fmt"
	"sync"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-sh/berth/sandbox/types"
)

// Seccomp selects the seccomp filter of every container.
type Seccomp string

// Seccomp profiles.
const (
	// SeccompDefault is berth's deny list: everything is allowed except the
	// syscalls below, which fail with EPERM (clone3 with ENOSYS, so libc
	// falls back to clone, whose flags can be checked). With capabilities
	// already dropped, the list's job is to close the unprivileged kernel
	// attack surface: new user namespaces, keyrings, bpf, perf, io_uring,
	// userfaultfd, the new mount API. Only the native architecture is
	// allowed: a 32-bit syscall (int 0x80) cannot slip past the list. It
	// costs runc nothing measurable to install.
	SeccompDefault Seccomp = ""
	// SeccompDocker is Docker's default allow list (moby/profiles). runc 1.1
	// compiles it at every start: about 20 ms more per create here.
	SeccompDocker Seccomp = "docker"
	// SeccompNone installs no filter (for runtimes without seccomp).
	SeccompNone Seccomp = "none"
)

// deniedSyscalls fail with EPERM under SeccompDefault. Names unknown to the
// runtime's libseccomp are skipped by it.
var deniedSyscalls = []string{
	// namespaces and mounts (capabilities stop most; user namespaces need none)
	"unshare", "setns", "mount", "umount2", "pivot_root", "move_mount", "open_tree",
	"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	// kernel modules, kexec, reboot, swap, accounting, quotas
	"init_module", "finit_module", "delete_module", "create_module", "query_module",
	"get_kernel_syms", "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff",
	"acct", "quotactl", "quotactl_fd", "nfsservctl",
	// clocks
	"settimeofday", "clock_settime", "clock_adjtime",
	// keyrings, bpf, perf, io_uring, userfaultfd
	"add_key", "request_key", "keyctl", "bpf", "perf_event_open",
	"io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd",
	// raw hardware and file handles
	"iopl", "ioperm", "open_by_handle_at", "name_to_handle_at",
	// NUMA policy of other processes, old and obscure interfaces
	"move_pages", "migrate_pages", "mbind", "set_mempolicy", "get_mempolicy",
	"lookup_dcookie", "sysfs", "_sysctl", "uselib", "ustat", "vhangup", "syslog",
	"fanotify_init", "kcmp",
}

const (
	errnoEPERM   = 1
	errnoENOSYS  = 38
	cloneNewUser = 0x10000000 // CLONE_NEWUSER
)

var denyProfile = sync.OnceValue(func() *specs.LinuxSeccomp {
	return &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Syscalls: []specs.LinuxSyscall{
			{Names: deniedSyscalls, Action: specs.ActErrno, ErrnoRet: ptr(uint(errnoEPERM))},
			{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: ptr(uint(errnoENOSYS))},
			{Names: []string{"clone"}, Action: specs.ActErrno, ErrnoRet: ptr(uint(errnoEPERM)),
				Args: []specs.LinuxSeccompArg{{Index: 0, Value: cloneNewUser, ValueTwo: cloneNewUser, Op: specs.OpMaskedEqual}}},
		},
	}
})

// dockerProfile is Docker's default profile for the capability set of
// every container, built once (it is large and the same every time).
var dockerProfile = sync.OnceValues(func() (*specs.LinuxSeccomp, error) {
	s := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{
		Bounding: defaultCaps, Effective: defaultCaps, Permitted: defaultCaps,
	}}}
	p, err := seccomp.GetDefaultProfile(s)
	if err != nil {
		return nil, fmt.Errorf("build seccomp profile: %w", err)
	}
	return p, nil
})

// profile returns the filter for s; nil means none.
func (s Seccomp) profile() (*specs.LinuxSeccomp, error) {
	switch s {
	case SeccompDefault:
		return denyProfile(), nil
	case SeccompDocker:
		return dockerProfile()
	case SeccompNone:
		return nil, nil
	default:
		return nil, types.Errorf(types.InvalidArgument, "seccomp profile %q: want \"\", docker or none", string(s))
	}
}
