package fakeprovider

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// Without root the chroot mode still keeps commands inside the sandbox's
// root: each command starts in a user namespace of its own, where the
// caller's uid is mapped to 0, with a mount namespace of its own; busybox
// (the host's, outside the root) bind-mounts the host's /dev/null, zero,
// random and urandom over the empty files seeded in the root's /dev, then
// chroots into the root, changes to the working directory and executes
// the program. Unprivileged user namespaces are all it needs (Debian
// enables them); runners' and servers' tests run this way as any user.

// usernsScript runs as busybox sh: $1 the host's busybox, $2 the root, $3
// the working directory inside it, then the program and its arguments.
const usernsScript = `b=$1 r=$2 d=$3; shift 3
for n in null zero random urandom; do "$b" mount --bind "/dev/$n" "$r/dev/$n" || exit 125; done
exec "$b" chroot "$r" /bin/busybox sh -c 'cd -- "$0" && exec "$@"' "$d" "$@"`

// usernsCommand makes cmd run prog (a path inside root) with args in the
// chroot through a user namespace, instead of SysProcAttr.Chroot.
func usernsCommand(cmd *exec.Cmd, busybox, root, cwd, prog string, args []string) {
	cmd.Path = busybox
	cmd.Args = append([]string{"busybox", "sh", "-c", usernsScript, "berth-fake", busybox, root, cwd, prog}, args[1:]...)
	cmd.Dir = root
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:                    true,
		Cloneflags:                 syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		GidMappingsEnableSetgroups: false,
	}
}

var chrootCheck = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

// ChrootMissing says why Options.Busybox cannot confine commands here, or
// "" when it can: as root always; without root when this kernel lets a
// user make a user namespace and mount in it. Tests skip with the reason.
func ChrootMissing(busybox string) string {
	if privileged() {
		return ""
	}
	chrootCheck.Lock()
	defer chrootCheck.Unlock()
	if why, ok := chrootCheck.m[busybox]; ok {
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
		why = fmt.Sprintf("the fake provider's chroot mode needs root or unprivileged user namespaces: %v: %s", err, out)
	}
	chrootCheck.m[busybox] = why
	return why
}
