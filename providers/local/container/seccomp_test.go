package container

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// callCase is one raw system call made in a container (testinit syscall),
// with what the host's kernel answers to it outside any filter and what
// the filter must answer instead ("ok" or "errno=N").
type callCase struct {
	name   string
	nr     uintptr
	args   []string
	kernel string   // the host's answer: a case the host answers otherwise proves nothing here
	filter []string // the answers accepted in the container
}

func errnoIs(es ...unix.Errno) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = fmt.Sprintf("errno=%d", int(e))
	}
	return out
}

func kernelErrno(e unix.Errno) string { return errnoIs(e)[0] }

// refused is what a call SeccompDefault does not let through answers:
// EPERM when it names the call and the runtime's libseccomp knows the
// name, ENOSYS, the default, when it does not.
var refused = errnoIs(unix.EPERM, unix.ENOSYS)

// seccompCases need no privilege and change nothing, on the host or in a
// container: each fails in the kernel on a bad argument, or asks about a
// pid no process has. The arguments with junk above 32 bits are pids and
// families the kernel truncates to a 32-bit int.
var seccompCases = []callCase{
	// New calls, unknown to libseccomp 2.5.4: refused by number.
	{"open_tree_attr", unix.SYS_OPEN_TREE_ATTR, []string{"-1", "0", "0x80000000"}, kernelErrno(unix.EINVAL), refused},
	{"lsm_get_self_attr", unix.SYS_LSM_GET_SELF_ATTR, []string{"0", "0", "0", "0"}, kernelErrno(unix.EINVAL), refused},
	{"lsm_set_self_attr", unix.SYS_LSM_SET_SELF_ATTR, []string{"0", "0", "0", "0"}, kernelErrno(unix.EINVAL), refused},
	{"lsm_list_modules", unix.SYS_LSM_LIST_MODULES, []string{"0", "0", "1"}, kernelErrno(unix.EINVAL), refused},
	{"listns", unix.SYS_LISTNS, []string{"0", "0", "0", "1"}, kernelErrno(unix.EINVAL), refused},
	// Not named: the default, whatever libseccomp knows.
	{"clone3", unix.SYS_CLONE3, []string{"0", "0"}, kernelErrno(unix.EINVAL), errnoIs(unix.ENOSYS)},
	// Named refusals.
	{"mount", unix.SYS_MOUNT, nil, kernelErrno(unix.EFAULT), errnoIs(unix.EPERM)},
	{"clock_adjtime", unix.SYS_CLOCK_ADJTIME, []string{"0", "0"}, kernelErrno(unix.EFAULT), errnoIs(unix.EPERM)},
	{"name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT, []string{"-1", "0", "0", "0", "0x80000000"}, kernelErrno(unix.EINVAL), errnoIs(unix.EPERM)},
	// By argument: clone with CLONE_NEWUSER (CLONE_THREAD without
	// CLONE_SIGHAND makes the kernel refuse it before it does anything).
	{"clone NEWUSER", unix.SYS_CLONE, []string{"0x10010000"}, kernelErrno(unix.EINVAL), errnoIs(unix.EPERM)},
	{"clone", unix.SYS_CLONE, []string{"0x10000"}, kernelErrno(unix.EINVAL), errnoIs(unix.EINVAL)},
	// ptrace and process_vm_* aimed at pid 1, and only there (PEEKDATA
	// of a process one does not trace is ESRCH; flags 1 is EINVAL).
	{"ptrace 1", unix.SYS_PTRACE, []string{"2", "1"}, kernelErrno(unix.ESRCH), errnoIs(unix.EPERM)},
	{"ptrace 1+2^32", unix.SYS_PTRACE, []string{"2", "0x100000001"}, kernelErrno(unix.ESRCH), errnoIs(unix.EPERM)},
	{"ptrace 0", unix.SYS_PTRACE, []string{"2", "0"}, kernelErrno(unix.ESRCH), errnoIs(unix.ESRCH)},
	{"ptrace 3", unix.SYS_PTRACE, []string{"2", "3"}, kernelErrno(unix.ESRCH), errnoIs(unix.ESRCH)},
	{"ptrace 2^31+1", unix.SYS_PTRACE, []string{"2", "0x80000001"}, kernelErrno(unix.ESRCH), errnoIs(unix.ESRCH)},
	{"process_vm_readv 1", unix.SYS_PROCESS_VM_READV, []string{"1", "0", "0", "0", "0", "1"}, kernelErrno(unix.EINVAL), errnoIs(unix.EPERM)},
	{"process_vm_writev 1+2^32", unix.SYS_PROCESS_VM_WRITEV, []string{"0x100000001", "0", "0", "0", "0", "1"}, kernelErrno(unix.EINVAL), errnoIs(unix.EPERM)},
	{"process_vm_readv 0x7ffffffe", unix.SYS_PROCESS_VM_READV, []string{"0x7ffffffe", "0", "0", "0", "0", "1"}, kernelErrno(unix.EINVAL), errnoIs(unix.EINVAL)},
	// socket by family: AF_UNIX with junk above 32 bits is a family from
	// afMax up to the filter, AF_UNIX to the kernel.
	{"socket AF_UNIX+2^32", unix.SYS_SOCKET, []string{"0x100000001", "1", "0"}, "ok", errnoIs(unix.EAFNOSUPPORT)},
	{"socket AF_VSOCK", unix.SYS_SOCKET, []string{"40", "1", "0"}, "ok", errnoIs(unix.EAFNOSUPPORT)},
	{"socket AF_UNIX", unix.SYS_SOCKET, []string{"1", "1", "0"}, "ok", []string{"ok"}},
	{"getpid", unix.SYS_GETPID, nil, "ok", []string{"ok"}},
}

// probeCall runs testinit's syscall verb, in the container when ct is
// not nil, on the host otherwise.
func probeCall(t *testing.T, r Runtime, ct *Container, c callCase) string {
	t.Helper()
	argv := append([]string{"syscall", fmt.Sprint(c.nr)}, c.args...)
	if ct == nil {
		out, err := exec.Command(testInit(t), argv...).CombinedOutput()
		if err != nil {
			t.Fatalf("testinit %v on the host: %v %s", argv, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	out, code := execIn(t, r, ct, append([]string{"/probe"}, argv...)...)
	if code != 0 {
		t.Fatalf("testinit %v: exit %d %s", argv, code, out)
	}
	return strings.TrimSpace(out)
}

// SeccompDefault is an allow list that refuses by number: system calls
// newer than the runtime's libseccomp (which cannot name them) are
// refused, not let through, under runc and crun, and the calls filtered by
// argument are filtered exactly: pid 1 and only pid 1 in the low 32 bits,
// socket families whatever the high bits say. Each call is made raw from a
// container; a call the host's kernel answers otherwise than the case
// expects (an older kernel without it) proves nothing and is skipped.
//
// On 5553f78 (a deny list, whose names runc and crun skip when their
// libseccomp does not know them: 2.5.4 on Debian 12) open_tree_attr and
// the three lsm_* calls reached the kernel (EINVAL) in a container.
func TestSeccompByNumber(t *testing.T) {
	needRoot(t)
	var proved []callCase
	for _, c := range seccompCases {
		if got := probeCall(t, Runtime{}, nil, c); got != c.kernel {
			t.Logf("%s: the host's kernel answers %s, not %s: skipped", c.name, got, c.kernel)
			continue
		}
		proved = append(proved, c)
	}
	eachRuntime(t, []string{"runc", "crun"}, func(t *testing.T, r Runtime) {
		c := testConfig(t)
		c.Mounts = []Mount{{Source: testInit(t), Target: "/probe", ReadOnly: true}}
		ct := create(t, r, c)
		for _, c := range proved {
			if got := probeCall(t, r, ct, c); !slices.Contains(c.filter, got) {
				t.Errorf("%s in a container: %s, want one of %v (the kernel answers %s)", c.name, got, c.filter, c.kernel)
			}
		}
	})
}
