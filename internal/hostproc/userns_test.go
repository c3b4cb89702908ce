package hostproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/berth-sh/berth/internal/syncbuf"
	"github.com/berth-sh/berth/internal/testing/busyroot"
)

// The copies disagreed on confinement: the fake entered its root by
// chroot as root and through a user namespace without, daytonatest and
// modaltest by chroot only (so root only). Root now means the same either
// way: the process sees the tree as /, works in Dir inside it, has working
// /dev nodes and sees nothing of the host's tree.
func TestRootConfinesBothWays(t *testing.T) {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox not installed (apt-get install busybox-static)")
	}
	asRoot := privileged()
	root := t.TempDir()
	err = busyroot.Root{Busybox: bb, Applets: []string{"sh", "cat", "pwd", "wc", "test"}, Dirs: []string{"work"},
		Files: map[string]string{"marker": "inside\n"}, DeviceFiles: !asRoot}.Lay(root)
	if err != nil {
		t.Fatal(err)
	}
	hostOnly := filepath.Join(t.TempDir(), "host-only")
	writeFile(t, hostOnly, "", 0o644)
	script := `pwd; cat /marker; echo x > /dev/null; wc -c < /dev/null; if test -e "$0"; then echo sees the host; fi`
	for _, mode := range []struct {
		name   string
		userns bool
	}{{"chroot", false}, {"user namespace", true}} {
		t.Run(mode.name, func(t *testing.T) {
			switch {
			case !mode.userns && !asRoot:
				t.Skip("chroot needs root")
			case mode.userns && asRoot:
				privileged = func() bool { return false }
				defer func() { privileged = func() bool { return os.Geteuid() == 0 } }()
			}
			if why := ConfineMissing(bb); why != "" {
				t.Skip(why)
			}
			var out, errs syncbuf.Buffer
			p, err := Start(ctxT(t), Spec{Path: "/bin/sh", Args: []string{"sh", "-c", script, hostOnly}, Env: Environ(nil),
				Dir: "/work", Root: root, Busybox: bb, Stdout: &out, Stderr: &errs})
			if err != nil {
				t.Fatal(err)
			}
			if ex := p.Wait(); ex.Code != 0 || out.String() != "/work\ninside\n0\n" {
				t.Errorf("exit %+v, output %q (stderr %q); want the tree as /", ex, out.String(), errs.String())
			}
		})
	}
}
