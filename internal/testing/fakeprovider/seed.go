package fakeprovider

import (
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

// layout is the root of a chrooted fake sandbox: /bin/busybox and its
// applets, /tmp, /dev nodes, /root and an /etc/passwd with root and
// nobody; nil (an empty root) without busybox.
func layout(busybox string) *busyroot.Root {
	if busybox == "" {
		return nil
	}
	return &busyroot.Root{
		Busybox: busybox,
		Applets: applets,
		Dirs:    []string{"etc", "root"},
		Files:   map[string]string{"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n"},
	}
}
