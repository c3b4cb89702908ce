package fakeprovider

import (
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/sandbox/types"
)

// applets are the busybox commands a chrooted fake sandbox offers: what
// task scripts and the conformance suite use.
var applets = []string{
	"sh", "ash", "cat", "echo", "printf", "mkdir", "chmod", "chown", "ls", "rm", "rmdir", "cp", "mv",
	"ln", "touch", "sleep", "head", "tail", "dd", "tar", "env", "pwd", "wc", "kill", "grep", "sed",
	"test", "[", "true", "false", "id", "uname", "date", "tr", "cut", "sort", "yes", "seq", "find",
	"stat", "readlink", "basename", "dirname", "mktemp", "xargs", "awk", "diff", "cmp", "tee", "md5sum",
	"sha256sum", "hostname", "ps", "which", "timeout",
}

// seedRoot lays a minimal root in dir: /bin/busybox and its applets,
// /tmp, /dev/null, /dev/zero, /dev/urandom.
func seedRoot(dir, busybox string) error {
	for _, d := range []string{"bin", "tmp", "dev", "etc", "root"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return types.Classify(types.Unavailable, err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "tmp"), 0o1777); err != nil {
		return types.Classify(types.Unavailable, err)
	}
	if err := copyFile(busybox, filepath.Join(dir, "bin", "busybox")); err != nil {
		return types.Errorf(types.InvalidArgument, "fake sandbox: busybox %s: %w", busybox, err)
	}
	for _, a := range applets {
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", a)); err != nil {
			return types.Classify(types.Unavailable, err)
		}
	}
	for _, n := range []struct {
		name         string
		major, minor uint32
	}{{"null", 1, 3}, {"zero", 1, 5}, {"urandom", 1, 9}} {
		if err := unix.Mknod(filepath.Join(dir, "dev", n.name), unix.S_IFCHR|0o666, int(unix.Mkdev(n.major, n.minor))); err != nil {
			return types.Errorf(types.Unavailable, "fake sandbox: mknod /dev/%s (needs root): %w", n.name, err)
		}
	}
	return os.WriteFile(filepath.Join(dir, "etc", "passwd"), []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n"), 0o644)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
