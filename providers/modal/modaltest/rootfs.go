package modaltest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/berth-sh/berth/internal/testing/busyroot"
	"github.com/berth-sh/berth/providers/local/image/seed"
)

// Busybox finds a static busybox for Options.Busybox, or says why chroot
// mode cannot run here (it also needs root).
func Busybox() (string, error) {
	if os.Geteuid() != 0 {
		return "", errors.New("modaltest runs commands chrooted only as root")
	}
	p, err := exec.LookPath("busybox")
	if err != nil {
		return "", errors.New("modaltest's chroot mode needs a static busybox (apt-get install busybox-static)")
	}
	static, err := seed.IsStatic(p)
	if err != nil {
		return "", fmt.Errorf("modaltest: %s: %w", p, err)
	}
	if !static {
		return "", fmt.Errorf("modaltest's chroot mode needs a static busybox (apt-get install busybox-static); %s is dynamic", p)
	}
	return p, nil
}

// installBusybox puts busybox in root/bin with a link per applet, so that a
// chrooted shell finds sh, cat, tar... on the default PATH, and the /dev
// nodes shell scripts take for granted.
func installBusybox(root, bb string) error {
	return busyroot.Root{Busybox: bb}.Lay(root)
}
