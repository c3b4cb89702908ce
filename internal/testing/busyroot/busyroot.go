package busyroot

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Root is what Lay writes. Only Busybox's part needs root.
type Root struct {
	// Busybox is a static busybox binary copied in as /bin/busybox, with
	// Applets and the /dev nodes. Empty lays the directories and Files
	// only: file calls work there, commands do not.
	Busybox string
	// Applets get a symlink to busybox in /bin each; nil means every
	// applet `busybox --list` names.
	Applets []string
	// Dirs are made (mode 0755) besides bin, dev and tmp (mode 1777).
	Dirs []string
	// Files maps a slash path under the root to its content (mode 0644).
	Files map[string]string
	// DeviceFiles lays empty regular files in place of the /dev nodes,
	// for a caller without root that bind-mounts the host's devices over
	// them in a user namespace (fakeengine's confinement without root).
	DeviceFiles bool
}

// Devices are the character devices (major 1) made in /dev, mode 0666:
// the ones shell scripts take for granted.
var Devices = []struct {
	Name  string
	Minor uint32
}{{"null", 3}, {"zero", 5}, {"random", 8}, {"urandom", 9}}

// Lay writes r into dir. It keeps what is already there, so a caller may
// have made some of it. A busybox that cannot be read or listed is
// InvalidArgument; anything else that fails is Unavailable.
func (r Root) Lay(dir string) error {
	for _, d := range append([]string{"bin", "dev", "tmp"}, r.Dirs...) {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(d)), 0o755); err != nil {
			return errdefs.Classify(errdefs.Unavailable, err)
		}
	}
	// MkdirAll honours the umask and leaves an existing /tmp's mode; the
	// sticky bit is os.ModeSticky (a bare 0o1777 would drop it).
	if err := os.Chmod(filepath.Join(dir, "tmp"), os.ModeSticky|0o777); err != nil {
		return errdefs.Classify(errdefs.Unavailable, err)
	}
	for name, body := range r.Files {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), []byte(body), 0o644); err != nil {
			return errdefs.Classify(errdefs.Unavailable, err)
		}
	}
	if r.Busybox == "" {
		return nil
	}
	applets := r.Applets
	if applets == nil {
		var err error
		if applets, err = List(r.Busybox); err != nil {
			return err
		}
	}
	// A copy, not a hard link: a chrooted root process writing to
	// /bin/busybox must not change the host's.
	if err := copyFile(r.Busybox, filepath.Join(dir, "bin", "busybox")); err != nil {
		return err
	}
	for _, a := range applets {
		if a == "busybox" || a == "" || strings.Contains(a, "/") {
			continue
		}
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", a)); err != nil && !os.IsExist(err) {
			return errdefs.Classify(errdefs.Unavailable, err)
		}
	}
	for _, d := range Devices {
		p := filepath.Join(dir, "dev", d.Name)
		if r.DeviceFiles {
			if err := os.WriteFile(p, nil, 0o666); err != nil {
				return errdefs.Classify(errdefs.Unavailable, err)
			}
			continue
		}
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(1, d.Minor))); err != nil && !os.IsExist(err) {
			return errdefs.Errorf(errdefs.Unavailable, "mknod /dev/%s (needs root): %w", d.Name, err)
		}
		// mknod honours the umask; the devices are for everyone.
		if err := os.Chmod(p, 0o666); err != nil {
			return errdefs.Classify(errdefs.Unavailable, err)
		}
	}
	return nil
}

var lists = struct {
	sync.Mutex
	m map[string]listed
}{m: map[string]listed{}}

type listed struct {
	names []string
	err   error
}

// List returns the applets `bb --list` names, running it once per binary
// per process.
func List(bb string) ([]string, error) {
	lists.Lock()
	defer lists.Unlock()
	if l, ok := lists.m[bb]; ok {
		return l.names, l.err
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bb, "--list")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var l listed
	if err != nil {
		l.err = errdefs.Errorf(errdefs.InvalidArgument, "%s --list: %w: %s", bb, err, bytes.TrimSpace(stderr.Bytes()))
	} else {
		l.names = strings.Fields(string(out))
	}
	lists.m[bb] = l
	return l.names, l.err
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return errdefs.Errorf(errdefs.InvalidArgument, "busybox %s: %w", src, err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return errdefs.Classify(errdefs.Unavailable, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return errdefs.Errorf(errdefs.Unavailable, "copying busybox %s: %w", src, err)
	}
	return errdefs.Classify(errdefs.Unavailable, out.Close())
}
