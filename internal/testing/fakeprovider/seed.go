package fakeprovider

import (
	"fmt"
	"os"

	"github.com/berth-sh/berth/internal/hostproc"
	"github.com/berth-sh/berth/internal/testing/busyroot"
)

// applets are the busybox commands a chrooted fake sandbox offers: what
// task scripts, the conformance suite and the OpenEnv golden push (base64,
// gzip) use.
var applets = []string{
	"sh", "ash", "cat", "echo", "printf", "mkdir", "chmod", "chown", "ls", "rm", "rmdir", "cp", "mv",
	"ln", "touch", "sleep", "head", "tail", "dd", "tar", "env", "pwd", "wc", "kill", "grep", "sed",
	"test", "[", "true", "false", "id", "uname", "date", "tr", "cut", "sort", "yes", "seq", "find",
	"stat", "readlink", "basename", "dirname", "mktemp", "xargs", "awk", "diff", "cmp", "tee", "md5sum",
	"sha256sum", "hostname", "ps", "which", "timeout", "base64", "gzip",
}

// seedRoot lays a minimal root in dir: /bin/busybox and its applets,
// /tmp, /dev nodes (empty files without root, for the host's devices to
// be bind-mounted over in a user namespace), /root and an /etc/passwd
// with root and nobody.
func seedRoot(dir, busybox string) error {
	err := busyroot.Root{
		Busybox:     busybox,
		Applets:     applets,
		Dirs:        []string{"etc", "root"},
		Files:       map[string]string{"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n"},
		DeviceFiles: !privileged(),
	}.Lay(dir)
	if err != nil {
		return fmt.Errorf("fake sandbox: %w", err) // classed by Lay
	}
	return nil
}

// privileged reports whether chroot and mknod work as they are: as root.
// Without root, the chroot mode runs each command in a user namespace of
// its own (internal/hostproc).
func privileged() bool { return os.Geteuid() == 0 }

// ChrootMissing says why Options.Busybox cannot confine commands here, or
// "" when it can (internal/hostproc's ConfineMissing). Tests skip with the
// reason.
func ChrootMissing(busybox string) string { return hostproc.ConfineMissing(busybox) }
