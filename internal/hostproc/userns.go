package hostproc

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// How a process is confined to Spec.Root.
//
// As root, by chroot(2) (SysProcAttr.Chroot). Without root the result is
// the same through a user namespace of the process's own, where the
// caller's uid is mapped to 0, with a mount namespace of its own: a
// static busybox outside the root (Spec.Busybox) bind-mounts the host's
// /dev/null, zero, random and urandom over the empty files laid in the
// root's /dev (busyroot's DeviceFiles), chroots into the root, changes to
// the working directory and executes the program. Unprivileged user
// namespaces are all it needs (Debian enables them), so runners' and
// servers' tests run this way as any user. The program's own exec is then
// busybox's, which Start's ETXTBSY retry does not see.

// usernsScript runs as busybox sh: $1 the host's busybox, $2 the root, $3
// the working directory inside it, then the program and its arguments.
const usernsScript = `b=$1 r=$2 d=$3; shift 3
for n in null zero random urandom; do "$b" mount --bind "/dev/$n" "$r/dev/$n" || exit 125; done
exec "$b" chroot "$r" /bin/busybox sh -c 'cd -- "$0" && exec "$@"' "$d" "$@"`

// privileged reports whether chroot works as it is; a variable so that a
// test as root can take the user-namespace way too.
var privileged = func() bool { return os.Geteuid() == 0 }

// confine returns the program, arguments, working directory and
// attributes that start s: chrooted, in a user namespace, or as they are.
func (s *Spec) confine() (path string, args []string, dir string, sys *syscall.SysProcAttr, err error) {
	sys = &syscall.SysProcAttr{Setpgid: true, Credential: s.Credential}
	if s.Root == "" {
		return s.Path, s.Args, s.Dir, sys, nil
	}
	dir = s.Dir
	if dir == "" {
		dir = "/"
	}
	if privileged() {
		sys.Chroot = s.Root
		return s.Path, s.Args, dir, sys, nil
	}
	if s.Busybox == "" {
		return "", nil, "", nil, fmt.Errorf("confining %s to %s needs root or Spec.Busybox", s.Args[0], s.Root)
	}
	if s.Credential != nil {
		return "", nil, "", nil, fmt.Errorf("switching users in %s needs root", s.Root)
	}
	args = append([]string{"busybox", "sh", "-c", usernsScript, "berth-hostproc", s.Busybox, s.Root, dir, s.Path}, s.Args[1:]...)
	sys.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS
	sys.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
	sys.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
	return s.Busybox, args, s.Root, sys, nil
}

var usernsCheck = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

// ConfineMissing says why Spec.Root cannot confine a process here with
// busybox as Spec.Busybox, or "" when it can: as root always; without
// root when this kernel lets a user make a user namespace and mount in
// it. Tests skip with the reason.
func ConfineMissing(busybox string) string {
	if privileged() {
		return ""
	}
	usernsCheck.Lock()
	defer usernsCheck.Unlock()
	if why, ok := usernsCheck.m[busybox]; ok {
		return why
	}
	cmd := exec.Command(busybox, "sh", "-c", `b=$1; "$b" mount --bind /dev/null /dev/null && "$b" chroot / "$b" true`, "check", busybox)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	why := ""
	if out, err := cmd.CombinedOutput(); err != nil {
		why = fmt.Sprintf("confining a process to a tree needs root or unprivileged user namespaces: %v: %s", err, out)
	}
	usernsCheck.m[busybox] = why
	return why
}
