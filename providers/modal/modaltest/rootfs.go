package modaltest

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
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
	f, err := elf.Open(p)
	if err != nil {
		return "", fmt.Errorf("modaltest: %s: %w", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return "", fmt.Errorf("modaltest's chroot mode needs a static busybox (apt-get install busybox-static); %s is dynamic", p)
		}
	}
	return p, nil
}

var applets struct {
	once  sync.Once
	names []string
	err   error
}

// appletNames lists busybox's applets once per process.
func appletNames(bb string) ([]string, error) {
	applets.once.Do(func() {
		out, err := exec.Command(bb, "--list").Output()
		if err != nil {
			applets.err = fmt.Errorf("busybox --list: %w", err)
			return
		}
		applets.names = strings.Fields(string(out))
	})
	return applets.names, applets.err
}

// installBusybox puts busybox in root/bin with a link per applet, so that a
// chrooted shell finds sh, cat, tar... on the default PATH.
func installBusybox(root, bb string) error {
	names, err := appletNames(bb)
	if err != nil {
		return err
	}
	bin := filepath.Join(root, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	dst := filepath.Join(bin, "busybox")
	if err := os.Link(bb, dst); err != nil {
		if err := copyFile(bb, dst); err != nil {
			return err
		}
	}
	for _, a := range names {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		if err := os.Symlink("busybox", filepath.Join(bin, a)); err != nil && !os.IsExist(err) {
			return err
		}
	}
	return makeDevices(root)
}

// makeDevices makes the character devices shell scripts take for granted.
func makeDevices(root string) error {
	dev := filepath.Join(root, "dev")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		return err
	}
	for name, minor := range map[string]uint32{"null": 3, "zero": 5, "random": 8, "urandom": 9} {
		p := filepath.Join(dev, name)
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(1, minor))); err != nil && !os.IsExist(err) {
			return fmt.Errorf("mknod %s: %w", p, err)
		}
		// mknod honours the umask; the devices are for everyone.
		if err := os.Chmod(p, 0o666); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
