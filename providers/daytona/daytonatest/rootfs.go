package daytonatest

import (
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
	bbOnce    sync.Once
	bbPath    string
	bbApplets []string
	bbErr     error
)

// busybox finds a static busybox and its applets.
func busybox() (string, error) {
	bbOnce.Do(func() {
		p, err := exec.LookPath("busybox")
		if err != nil {
			bbErr = errors.New("daytonatest needs a static busybox (apt-get install busybox-static)")
			return
		}
		out, err := exec.Command(p, "--list").Output()
		if err != nil {
			bbErr = fmt.Errorf("daytonatest: busybox --list: %w", err)
			return
		}
		if ldd, _ := exec.Command("ldd", p).CombinedOutput(); strings.Contains(string(ldd), "=>") {
			bbErr = errors.New("daytonatest needs a static busybox (apt-get install busybox-static); " + p + " is dynamic")
			return
		}
		bbPath, bbApplets = p, strings.Fields(string(out))
	})
	return bbPath, bbErr
}

// makeRoot lays out a sandbox's file system: busybox and its applets in
// /bin, /tmp, /root, /home/daytona, a few /etc files and /dev nodes. Without
// root or busybox it makes the directories only (files work, commands do
// not).
func makeRoot(root string) error {
	for _, d := range []string{"bin", "tmp", "root", "home/daytona", "etc", "dev", "usr/bin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		return err
	}
	files := map[string]string{
		"etc/passwd":   "root:x:0:0:root:/root:/bin/sh\ndaytona:x:1000:1000::/home/daytona:/bin/sh\n",
		"etc/group":    "root:x:0:\ndaytona:x:1000:\n",
		"etc/hostname": "daytona-sandbox\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(data), 0o644); err != nil {
			return err
		}
	}
	if Available() != "" {
		return nil
	}
	bb, _ := busybox()
	dst := filepath.Join(root, "bin", "busybox")
	if err := os.Link(bb, dst); err != nil {
		if err := copyFile(bb, dst); err != nil {
			return err
		}
	}
	for _, a := range bbApplets {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		if err := os.Symlink("busybox", filepath.Join(root, "bin", a)); err != nil && !os.IsExist(err) {
			return err
		}
	}
	for _, n := range []struct {
		name         string
		major, minor uint32
	}{{"null", 1, 3}, {"zero", 1, 5}, {"random", 1, 8}, {"urandom", 1, 9}} {
		p := filepath.Join(root, "dev", n.name)
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(n.major, n.minor))); err != nil {
			return fmt.Errorf("mknod %s: %w", p, err)
		}
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
