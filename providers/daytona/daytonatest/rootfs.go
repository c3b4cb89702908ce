package daytonatest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"

	"github.com/berth-sh/berth/internal/testing/busyroot"
	"github.com/berth-sh/berth/providers/local/image/seed"
)

// Available reports why commands cannot run here (an empty string means
// they can): they run chrooted, which needs root, into a busybox userland,
// which needs a static busybox on the host.
func Available() string {
	if os.Geteuid() != 0 {
		return "daytonatest runs commands chrooted, which needs root"
	}
	if _, err := busybox(); err != nil {
		return err.Error()
	}
	return ""
}

var (
	bbOnce sync.Once
	bbPath string
	bbErr  error
)

// busybox finds a static busybox.
func busybox() (string, error) {
	bbOnce.Do(func() {
		p, err := exec.LookPath("busybox")
		if err != nil {
			bbErr = errors.New("daytonatest needs a static busybox (apt-get install busybox-static)")
			return
		}
		static, err := seed.IsStatic(p)
		if err != nil {
			bbErr = fmt.Errorf("daytonatest: %s: %w", p, err)
			return
		}
		if !static {
			bbErr = errors.New("daytonatest needs a static busybox (apt-get install busybox-static); " + p + " is dynamic")
			return
		}
		bbPath = p
	})
	return bbPath, bbErr
}

// makeRoot lays out a sandbox's file system: busybox and its applets in
// /bin, /tmp, /root, /home/daytona, a few /etc files and /dev nodes. Without
// root or busybox it makes the directories only (files work, commands do
// not).
func makeRoot(root string) error {
	r := busyroot.Root{
		Dirs: []string{"root", "home/daytona", "etc", "usr/bin"},
		Files: map[string]string{
			"etc/passwd":   "root:x:0:0:root:/root:/bin/sh\ndaytona:x:1000:1000::/home/daytona:/bin/sh\n",
			"etc/group":    "root:x:0:\ndaytona:x:1000:\n",
			"etc/hostname": "daytona-sandbox\n",
		},
	}
	if Available() == "" {
		r.Busybox, _ = busybox()
	}
	return r.Lay(root)
}
