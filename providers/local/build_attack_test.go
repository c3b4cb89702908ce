package local_test

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-sh/berth/sandbox"
)

// fifoTar is an archive of n FIFOs f00000... of mode 0777.
func fifoTar(t *testing.T, n int) string {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for i := range n {
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("f%05d", i), Typeflag: tar.TypeFifo, Mode: 0o777, ModTime: time.Unix(1e9, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A RUN leaves a process behind that waits for each FIFO an ADD makes and
// at once puts a symlink to a host file in its place, so that the host's
// next call on that name (its chmod) would land on the host file. The
// process must be dead before the ADD (each RUN's processes end with it,
// as each RUN's container does in Docker), so the image holds every FIFO
// and no link; and the host file keeps its mode whatever the race did
// (imagebuild's TestTreeRacedNames wins the race every time).
//
// Checked against main at 6f9918d: the process lived on through the ADD;
// in one run it won a race and the builder's chmod made the host file
// 0777, in another it was late to every chmod but left 8688 of the 10000
// FIFOs replaced by links to the host file (the race is a matter of
// microseconds: TestTreeRacedNames wins it every time). Passes after.
func TestAttackBuildSwapsNames(t *testing.T) {
	p, _ := buildProvider(t)
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("host file"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(attackerBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	const n = 10000
	dir := writeContext(t, map[string]string{
		"Dockerfile": fmt.Sprintf(`FROM berth.local/busybox:latest
COPY --chmod=755 attacker /attacker
RUN mkdir /dst && (/attacker race /dst %d %s </dev/null >/dev/null 2>&1 &) && sleep 0.2
ADD fifos.tar /dst/
RUN ls /dst | wc -l > /count
`, n, victim),
		"attacker":  string(b),
		"fifos.tar": fifoTar(t, n),
	})
	buildStore(t) // removes the image at the end
	spec := sandbox.Spec{Build: &sandbox.Build{ContextDir: dir}}
	if err := p.PrepareImage(testCtx(t), spec); err != nil {
		t.Logf("build: %v", err)
	}
	fi, err := os.Stat(victim)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("the host file's mode is %v after the build, was 0600: the builder followed a link the sandbox planted", fi.Mode())
	}
	// The build itself is whole: every FIFO is there, none replaced.
	sb := createBuilt(t, p, spec)
	if got := sh(t, sb, "cat /count; find /dst -type p | wc -l; find /dst -type l ! -name .swap | wc -l"); got != fmt.Sprintf("%d\n%d\n0", n, n) {
		t.Errorf("the built image's /dst: %q, want %d FIFOs and no link", got, n)
	}
}
