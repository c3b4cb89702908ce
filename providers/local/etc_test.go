package local_test

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/berth-sh/berth/sandbox"
)

// etcFiles are the files berth writes for each sandbox and mounts over
// the image's.
var etcFiles = []string{"/etc/hosts", "/etc/hostname", "/etc/resolv.conf"}

// hostBytes is what the files under dir hold on the file system dir is
// on, as du -x counts it: a mount under dir (the sandbox's root, its own
// disk) is another file system and is not counted.
func hostBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var top syscall.Stat_t
	if err := syscall.Lstat(dir, &top); err != nil {
		t.Fatal(err)
	}
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		if st.Dev != top.Dev {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		n += st.Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The files berth writes into a sandbox's /etc (hosts, hostname,
// resolv.conf) are bind mounts, writable as in Docker; they live on the
// sandbox's own disk, so appending to them past the disk limit gets
// ENOSPC and the host's disk holds no more for the sandbox than the limit.
//
// On 5553f78 they were files on the state directory's file system: in a
// sandbox of StorageMB 32 each append below succeeded, 96 MiB to each
// file, and the sandbox's directory on the host grew by 288 MiB, nine
// times its limit, without bound.
func TestAttackFillDiskThroughEtc(t *testing.T) {
	p := openProvider(t)
	sb := create(t, p, sandbox.Spec{Resources: sandbox.Resources{StorageMB: attackDiskMB}})
	dir := filepath.Join(stateDir, "sandboxes", sb.ID())
	before := hostBytes(t, dir)
	const per = 3 * attackDiskMB
	for _, f := range etcFiles {
		res := attempt(t, sb, "sh", "-c", fmt.Sprintf("dd if=/dev/zero bs=1M count=%d 2>&1 >> %s", per, f))
		if res.ExitCode == 0 || !strings.Contains(string(res.Stdout), "No space left on device") {
			t.Errorf("%d MiB appended to %s under a %d MiB disk limit: exit %d %s", per, f, attackDiskMB, res.ExitCode, res.Stdout)
		}
	}
	if grew := hostBytes(t, dir) - before; grew > attackDiskMB<<20 {
		t.Errorf("the sandbox's directory on the host grew by %d MiB under a %d MiB disk limit", grew>>20, attackDiskMB)
	}
	// The files are still the sandbox's to read and truncate, and the
	// space comes back as on any disk.
	sh(t, sb, "for f in "+strings.Join(etcFiles, " ")+"; do : > $f; done; head -c 1m /dev/zero > /after")
}

// A task can still edit what berth wrote into /etc, on cold and pooled
// sandboxes (TestAttacksPooled), with and without a disk limit: add a
// host line and a resolver line and read them back, and see the hostname.
func TestEtcEditable(t *testing.T) {
	p := openProvider(t)
	for _, spec := range []sandbox.Spec{{}, {Resources: sandbox.Resources{StorageMB: attackDiskMB}}} {
		t.Run(fmt.Sprintf("storage=%d", spec.Resources.StorageMB), func(t *testing.T) {
			sb := create(t, p, spec)
			got := sh(t, sb, `echo '10.11.12.13 db.test db' >> /etc/hosts && grep db.test /etc/hosts && `+
				`echo 'nameserver 10.0.0.53' >> /etc/resolv.conf && tail -n 1 /etc/resolv.conf && `+
				`grep -c localhost /etc/hosts && cat /etc/hostname`)
			lines := strings.Split(got, "\n")
			if len(lines) != 4 || lines[0] != "10.11.12.13 db.test db" || lines[1] != "nameserver 10.0.0.53" || lines[2] == "0" || lines[3] == "" {
				t.Fatalf("after the edits: %q; want the host line, the resolver line, localhost kept and a hostname", got)
			}
			if h := sh(t, sb, "hostname"); h != lines[3] {
				t.Errorf("/etc/hostname says %q, hostname %q", lines[3], h)
			}
			// The edit is the sandbox's own: a fresh sandbox has none of it.
			other := create(t, p, spec)
			if out := sh(t, other, "cat /etc/hosts /etc/resolv.conf"); strings.Contains(out, "db.test") || strings.Contains(out, "10.0.0.53") {
				t.Errorf("another sandbox sees the edits: %q", out)
			}
		})
	}
}
