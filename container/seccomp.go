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
	// falls back to clone, whose flags can be checked; socket families with
	// EAFNOSUPPORT, so programs fall back as on a kernel without them).
	// With capabilities already dropped, the list's job is to close the
	// unprivileged kernel attack surface: new user namespaces, keyrings,
	// bpf, perf, io_uring, userfaultfd, the new mount API, the socket
	// families Docker refuses (vsock crosses network namespaces), and any
	// reach into the sandbox's init (ptrace, process_vm_*, pidfd_getfd).
	// Only the native architecture is allowed: a 32-bit syscall (int 0x80)
	// cannot slip past the list. It costs runc nothing measurable to
	// install. SECURITY.md compares it with Docker's, line by line
	// (TestSeccompComparedWithDocker keeps the table true).
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
	// another process's fds (the agent's; see denyProfile)
	"pidfd_getfd",
	// keyrings, bpf, perf, io_uring, userfaultfd
	"add_key", "request_key", "keyctl", "bpf", "perf_event_open",
	"io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd",
	// raw hardware and file handles
	"iopl", "ioperm", "open_by_handle_at", "name_to_handle_at",
	// NUMA policy of other processes, old and obscure interfaces
	"move_pages", "migrate_pages", "mbind", "set_mempolicy", "get_mempolicy",
	"lookup_dcookie", "sysfs", "_sysctl", "uselib", "ustat", "vhangup", "syslog",
	"fanotify_init", "kcmp",
	// newer than this list's first review, refused as Docker's profile
	// refuses them (see SECURITY.md's comparison): the namespace lister,
	// LSM attributes, the mount API's open_tree_attr, advice to another
	// process's memory, NUMA policy, rseq slice yield, uprobe trampolines
	"listns", "lsm_get_self_attr", "lsm_set_self_attr", "lsm_list_modules", "open_tree_attr",
	"process_madvise", "set_mempolicy_home_node", "rseq_slice_yield", "uprobe",
}

const (
	errnoEPERM        = 1
	errnoENOSYS       = 38
	errnoEAFNOSUPPORT = 97
	cloneNewUser      = 0x10000000 // CLONE_NEWUSER
)

// deniedSocketFamilies are the socket families Docker's default profile
// (moby/profiles v0.3.0) does not allow, by number: AF_ALG (38, the
// kernel's crypto API, a large attack surface nothing in a sandbox needs)
// and AF_VSOCK (40: vsock is not confined by network namespaces, so a
// sandbox with network none could reach the host's, or other VMs',
// vsock listeners), and the families removed from the kernel or never
// implemented that older kernels still carry: AX25 3, IPX 4, APPLETALK 5,
// NETROM 6, ROSE 11, DECnet 12, ECONET 19, ATMSVC 20, IRDA 23, WANPIPE 25,
// ISDN 34, CAIF 37. Families from AF_MAX (46) up are refused as well (a
// future family is unreviewed attack surface).
var deniedSocketFamilies = []uint64{3, 4, 5, 6, 11, 12, 19, 20, 23, 25, 34, 37, 38, 40}

// afMax is one past the highest socket family this list was reviewed for.
const afMax = 46

// initPid is the sandbox's init: the agent, which holds the sandbox's
// socket to the host and its deadline.
const initPid = 1

// pidIs matches a pid_t argument equal to pid in its low 32 bits (the
// kernel truncates a long to pid_t: a pid with junk in the high bits is the
// same pid).
func pidIs(index uint, pid uint64) []specs.LinuxSeccompArg {
	return []specs.LinuxSeccompArg{{Index: index, Value: 0xffffffff, ValueTwo: pid, Op: specs.OpMaskedEqual}}
}

var denyProfile = sync.OnceValue(func() *specs.LinuxSeccomp {
	eperm := ptr(uint(errnoEPERM))
	rules := []specs.LinuxSyscall{
		{Names: deniedSyscalls, Action: specs.ActErrno, ErrnoRet: eperm},
		{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: ptr(uint(errnoENOSYS))},
		{Names: []string{"clone"}, Action: specs.ActErrno, ErrnoRet: eperm,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: cloneNewUser, ValueTwo: cloneNewUser, Op: specs.OpMaskedEqual}}},
		// Nothing reaches into the agent: the agent is non-dumpable
		// too (package sandboxinit), this is the second lock.
		{Names: []string{"ptrace"}, Action: specs.ActErrno, ErrnoRet: eperm, Args: pidIs(1, initPid)},
		{Names: []string{"process_vm_readv", "process_vm_writev"}, Action: specs.ActErrno, ErrnoRet: eperm, Args: pidIs(0, initPid)},
		// A pidfd does not say whose it is to a filter, and the agent
		// opens one on itself (reap.PidfdsWork): pidfd_getfd, which
		// takes another process's fd, is refused whoever it aims at.
		// socket(domain): one rule per family (runc ORs the comparisons
		// of one rule on one argument, so each family is its own rule).
		// Any value with bits above 32 set is >= afMax, so the junk-bits
		// variants of the families below are refused by that rule.
		{Names: []string{"socket"}, Action: specs.ActErrno, ErrnoRet: ptr(uint(errnoEAFNOSUPPORT)),
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: afMax, Op: specs.OpGreaterEqual}}},
	}
	for _, f := range deniedSocketFamilies {
		rules = append(rules, specs.LinuxSyscall{Names: []string{"socket"}, Action: specs.ActErrno, ErrnoRet: ptr(uint(errnoEAFNOSUPPORT)),
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: f, Op: specs.OpEqualTo}}})
	}
	return &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: rules}
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
