package container

import (
	"fmt"
	"slices"
	"sync"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Seccomp selects the seccomp filter of every container.
type Seccomp string

// Seccomp profiles.
const (
	// SeccompDefault is berth's allow list (allowedSyscalls): a call it
	// does not name fails with ENOSYS, as on a kernel without it, so libc
	// falls back (clone3 to clone, whose flags can be checked). Being an
	// allow list, it refuses by number whatever it does not name: a call
	// newer than the runtime's libseccomp, whose name that libseccomp
	// cannot resolve, is refused, not skipped, on every architecture.
	// deniedSyscalls fail with EPERM instead; socket families refused get
	// EAFNOSUPPORT, so programs fall back as on a kernel without them.
	// With capabilities already dropped, what it leaves out closes the
	// unprivileged kernel attack surface: new user namespaces, keyrings,
	// bpf, perf, io_uring, userfaultfd, the new mount API, the socket
	// families Docker refuses (vsock crosses network namespaces), and any
	// reach into the sandbox's init (ptrace, process_vm_*, pidfd_getfd).
	// Only the native architecture is allowed: a 32-bit syscall (int 0x80)
	// cannot slip past the list. The runtime compiles it at every start:
	// about 8 ms of CPU per create for runc 1.1 and 5 ms for crun 1.8
	// more than a deny list. SECURITY.md compares it with Docker's, line
	// by line (TestSeccompComparedWithDocker keeps the table true).
	SeccompDefault Seccomp = ""
	// SeccompDocker is Docker's default allow list (moby/profiles), with
	// the 32-bit tables of the host's architecture besides the native
	// one: about 17 ms of CPU per create more than SeccompDefault.
	SeccompDocker Seccomp = "docker"
	// SeccompNone installs no filter (for runtimes without seccomp).
	SeccompNone Seccomp = "none"
)

const (
	errnoEPERM        = 1
	errnoENOSYS       = 38
	errnoEAFNOSUPPORT = 97
	cloneNewUser      = 0x10000000 // CLONE_NEWUSER
)

// initPid is the sandbox's init: the agent, which holds the sandbox's
// socket to the host and its deadline.
const initPid = 1

// pidIs matches a pid_t argument equal to pid in its low 32 bits (the
// kernel truncates a long to pid_t: a pid with junk in the high bits is the
// same pid).
func pidIs(index uint, pid uint64) []specs.LinuxSeccompArg {
	return []specs.LinuxSeccompArg{{Index: index, Value: 0xffffffff, ValueTwo: pid, Op: specs.OpMaskedEqual}}
}

// argMasked is one rule: names with argument index masked equal to want.
func argMasked(names []string, act specs.LinuxSeccompAction, errno *uint, index uint, mask, want uint64) specs.LinuxSyscall {
	return specs.LinuxSyscall{Names: names, Action: act, ErrnoRet: errno,
		Args: []specs.LinuxSeccompArg{{Index: index, Value: mask, ValueTwo: want, Op: specs.OpMaskedEqual}}}
}

// notInitRules allow names unless the pid_t argument at index is initPid,
// which gets EPERM. A runtime ORs the rules of one call (and runc even the
// comparisons of one argument), and seccomp has no masked "not equal", so
// "the low 32 bits are not 1" is spelled out as the rules "bit 0 clear"
// and "bit k set" for k from 1 to 31.
func notInitRules(names []string, index uint) []specs.LinuxSyscall {
	rules := []specs.LinuxSyscall{
		argMasked(names, specs.ActAllow, nil, index, 1, 0),
		{Names: names, Action: specs.ActErrno, ErrnoRet: ptr(uint(errnoEPERM)), Args: pidIs(index, initPid)},
	}
	for k := 1; k < 32; k++ {
		rules = append(rules, argMasked(names, specs.ActAllow, nil, index, 1<<k, 1<<k))
	}
	return rules
}

// socketRules allow socket(domain) for every family below afMax but
// deniedSocketFamilies, and refuse those and everything from afMax up
// (any value with bits above 32 set included, which the kernel would
// truncate to a small family) with EAFNOSUPPORT. Each family is its own
// rule: a runtime ORs the rules of one call.
func socketRules() []specs.LinuxSyscall {
	socket := []string{"socket"}
	nosupport := ptr(uint(errnoEAFNOSUPPORT))
	rules := []specs.LinuxSyscall{{Names: socket, Action: specs.ActErrno, ErrnoRet: nosupport,
		Args: []specs.LinuxSeccompArg{{Index: 0, Value: afMax, Op: specs.OpGreaterEqual}}}}
	for f := uint64(0); f < afMax; f++ {
		r := specs.LinuxSyscall{Names: socket, Action: specs.ActAllow,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: f, Op: specs.OpEqualTo}}}
		if slices.Contains(deniedSocketFamilies, f) {
			r.Action, r.ErrnoRet = specs.ActErrno, nosupport
		}
		rules = append(rules, r)
	}
	return rules
}

var allowProfile = sync.OnceValue(func() *specs.LinuxSeccomp {
	rules := []specs.LinuxSyscall{
		{Names: allowedSyscalls, Action: specs.ActAllow},
		{Names: deniedSyscalls, Action: specs.ActErrno, ErrnoRet: ptr(uint(errnoEPERM))},
		argMasked([]string{"clone"}, specs.ActAllow, nil, 0, cloneNewUser, 0),
		argMasked([]string{"clone"}, specs.ActErrno, ptr(uint(errnoEPERM)), 0, cloneNewUser, cloneNewUser),
	}
	// Nothing reaches into the agent: the agent is non-dumpable too
	// (package pid1), this is the second lock.
	rules = append(rules, notInitRules([]string{"ptrace"}, 1)...)
	rules = append(rules, notInitRules([]string{"process_vm_readv", "process_vm_writev"}, 0)...)
	rules = append(rules, socketRules()...)
	return &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, DefaultErrnoRet: ptr(uint(errnoENOSYS)), Syscalls: rules}
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
		return allowProfile(), nil
	case SeccompDocker:
		return dockerProfile()
	case SeccompNone:
		return nil, nil
	default:
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "seccomp profile %q: want \"\", docker or none", string(s))
	}
}
