package daytonatest

import (
	"github.com/berth-sh/berth/internal/testing/busyroot"
	"github.com/berth-sh/berth/internal/testing/fakeengine"
)

// Available reports why commands cannot run here (an empty string means
// they can): they run confined to a busybox userland, which needs a static
// busybox on the host, and root or unprivileged user namespaces.
func Available() string {
	if _, err := fakeengine.Busybox(); err != nil {
		return "daytonatest: " + err.Error()
	}
	return ""
}

// layout is a sandbox's file system: busybox and its applets in /bin,
// /tmp, /root, /home/daytona, a few /etc files and /dev nodes. Without
// busybox it is the directories only (files work, commands do not).
func layout() *busyroot.Root {
	r := &busyroot.Root{
		Dirs: []string{"root", "home/daytona", "etc", "usr/bin"},
		Files: map[string]string{
			"etc/passwd":   "root:x:0:0:root:/root:/bin/sh\ndaytona:x:1000:1000::/home/daytona:/bin/sh\n",
			"etc/group":    "root:x:0:\ndaytona:x:1000:\n",
			"etc/hostname": "daytona-sandbox\n",
		},
	}
	r.Busybox, _ = fakeengine.Busybox()
	return r
}
