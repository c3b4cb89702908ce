package local_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/berth-sh/berth/internal/testing/testimage"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/providers/local/image"
	"github.com/berth-sh/berth/sandbox"
)

// Bad input gets a clear error (its class, and a message naming what was
// wrong and, where it helps, what to do) and leaves nothing behind: every
// test here compares the state dir, mounts, cgroups and processes before
// and after.

// stateSnapshot is what a refused call must leave as it found it.
type stateSnapshot map[string][]string

func snapshotState(t *testing.T) stateSnapshot {
	t.Helper()
	names := func(dir string) []string {
		ents, err := os.ReadDir(dir)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	s := stateSnapshot{
		"state dir":     names(stateDir),
		"sandbox dirs":  names(filepath.Join(stateDir, "sandboxes")),
		"runtime state": names(filepath.Join(stateDir, "runc")),
		"layers":        names(filepath.Join(stateDir, "layers")),
		"mounts":        mountsUnder(stateDir),
		"processes":     procsUnderParent(),
	}
	for _, d := range cgroupDirs(cgroupParent) {
		s["cgroups"] = append(s["cgroups"], names(d)...)
	}
	st, err := image.Open(stateDir, image.Options{})
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := st.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range imgs {
		s["images"] = append(s["images"], img.Ref)
	}
	for k := range s {
		slices.Sort(s[k])
	}
	return s
}

func (before stateSnapshot) assertSame(t *testing.T) {
	t.Helper()
	after := snapshotState(t)
	for k, b := range before {
		if a := after[k]; !slices.Equal(a, b) {
			t.Errorf("%s changed: before %v, after %v", k, b, a)
		}
	}
	for k, a := range after {
		if _, ok := before[k]; !ok && len(a) > 0 {
			t.Errorf("%s appeared: %v", k, a)
		}
	}
}

// procsUnderParent lists the host processes in the tests' cgroup parent.
func procsUnderParent() []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err == nil && bytes.Contains(b, []byte("/"+cgroupParent+"/")) {
			out = append(out, e.Name())
		}
	}
	return out
}

// Create refuses bad Specs and bad images with their class and a message
// naming the problem, before or while making anything, and whatever it
// made is gone when it returns.
func TestBadInputCreate(t *testing.T) {
	p := openProvider(t)
	// The default image and the base layers are in the store before the
	// snapshot, so the only thing a case could add is its own.
	if err := p.PrepareImage(testCtx(t), sandbox.Spec{Image: local.DefaultImage}); err != nil {
		t.Fatal(err)
	}
	victim := victimDir(t)
	rel, err := filepath.Rel("/", victim)
	if err != nil {
		t.Fatal(err)
	}
	type E = testimage.Entry
	escape := func(entries ...E) v1.Image {
		return testimage.Image(t, v1.Config{Cmd: []string{"sh"}}, testimage.Layer(t, entries...))
	}
	up := strings.Repeat("../", 24) + rel
	host := testimage.Serve(t, map[string]v1.Image{
		"evil/dotdot:1":    escape(E{Name: "ok", Body: "x"}, E{Name: up + "/pwned", Body: "x"}),
		"evil/absolute:1":  escape(E{Name: victim + "/pwned", Body: "x"}),
		"evil/symlink:1":   escape(E{Name: "lnk", Type: tar.TypeSymlink, Link: victim}, E{Name: "lnk/pwned", Body: "x"}),
		"evil/hardlink:1":  escape(E{Name: "hl", Type: tar.TypeLink, Link: up + "/keep"}),
		"evil/mkdir-via:1": escape(E{Name: "lnk", Type: tar.TypeSymlink, Link: up}, E{Name: "lnk/sub/"}),
	})
	for _, tt := range []struct {
		name    string
		spec    sandbox.Spec
		classes []sandbox.Class
		say     []string
	}{
		{"unknown image in a registry", sandbox.Spec{Image: host + "/no/such:1"},
			[]sandbox.Class{sandbox.NotFound}, []string{host + "/no/such:1"}},
		{"unknown registry", sandbox.Spec{Image: "berth-no-such-registry.invalid/x:1"},
			// A resolver that never answers makes it DeadlineExceeded.
			[]sandbox.Class{sandbox.NotFound, sandbox.Unavailable, sandbox.DeadlineExceeded}, []string{"berth-no-such-registry.invalid/x:1"}},
		{"malformed reference", sandbox.Spec{Image: "Not A Reference!"},
			[]sandbox.Class{sandbox.InvalidArgument}, []string{`"Not A Reference!"`}},
		{"layer entry with ..", sandbox.Spec{Image: host + "/evil/dotdot:1"},
			[]sandbox.Class{sandbox.InvalidArgument}, []string{up + "/pwned"}},
		{"layer entry absolute", sandbox.Spec{Image: host + "/evil/absolute:1"},
			[]sandbox.Class{sandbox.InvalidArgument}, []string{victim + "/pwned"}},
		{"layer entry through a symlink", sandbox.Spec{Image: host + "/evil/symlink:1"},
			[]sandbox.Class{sandbox.InvalidArgument}, []string{"lnk/pwned"}},
		{"layer hardlink outside", sandbox.Spec{Image: host + "/evil/hardlink:1"},
			[]sandbox.Class{sandbox.InvalidArgument}, []string{`"hl"`}},
		{"layer dir through a symlink", sandbox.Spec{Image: host + "/evil/mkdir-via:1"},
			[]sandbox.Class{sandbox.InvalidArgument}, []string{"lnk/sub"}},
		{"more memory than the host", sandbox.Spec{Image: local.DefaultImage, Resources: sandbox.Resources{MemoryMB: 1 << 30}},
			[]sandbox.Class{sandbox.InvalidArgument}, []string{"memory 1073741824 MB asked, this host has"}},
		{"less memory than the agent", sandbox.Spec{Image: local.DefaultImage, Resources: sandbox.Resources{MemoryMB: 4}},
			[]sandbox.Class{sandbox.InvalidArgument}, []string{"below the"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := snapshotState(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			sb, err := p.Create(ctx, tt.spec)
			if err == nil {
				sb.Delete(context.Background())
				sb.Close()
				t.Fatal("create succeeded")
			}
			t.Logf("%v", err)
			if !slices.Contains(tt.classes, sandbox.ClassOf(err)) {
				t.Errorf("create: %v: class %v, want one of %v", err, sandbox.ClassOf(err), tt.classes)
			}
			for _, s := range tt.say {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("create: %v\ndoes not say %q", err, s)
				}
			}
			before.assertSame(t)
			assertVictimUntouched(t, victim)
		})
	}
}

// berthCLI runs the berth binary on the tests' state dir, with the agent
// the tests mount,, with env added, and returns its exit code and stderr.
func berthCLI(t *testing.T, cmd *exec.Cmd) (int, string) {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = append(cmd.Env, local.EnvStateDir+"="+stateDir, local.EnvAgentBinary+"="+agentBin)
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stderr.String()
	}
	t.Fatalf("run %v: %v", cmd.Args, err)
	return 0, ""
}

// `berth image import` refuses a corrupt or hostile tarball with a message
// naming the file and what is wrong with it, and stores nothing.
func TestBadInputImportCorrupt(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noise := make([]byte, 64<<10)
	rand.Read(noise)
	busybox, err := os.ReadFile(testimage.BusyboxTar(t))
	if err != nil {
		t.Fatal(err)
	}
	victim := victimDir(t)
	// A docker-save archive whose layer blob is gone.
	saved := testimage.DockerTar(t, map[string]v1.Image{"test.local/saved:1": testimage.Busybox(t)})
	noLayer := write("no-layer.tar", dropTarEntries(t, saved, func(name string) bool {
		return strings.HasSuffix(name, ".tar.gz") || strings.HasPrefix(name, "sha256:") && !strings.HasSuffix(name, ".json")
	}))
	for _, tt := range []struct {
		name, file string
		say        []string
	}{
		{"random bytes", write("noise.tar", noise), []string{"not a readable tar archive"}},
		{"empty", write("empty.tar", nil), []string{"empty archive"}},
		{"gzip header then garbage", write("bad.tar.gz", append([]byte{0x1f, 0x8b, 0x08, 0}, noise[:512]...)), []string{"not a readable tar archive"}},
		{"truncated rootfs", write("truncated.tar", busybox[:len(busybox)*3/5]), []string{"truncated.tar"}},
		{"docker-save without its layer", noLayer, []string{"no-layer.tar"}},
		{"rootfs escaping with ..", testimage.WriteTar(t, testimage.Entry{Name: "../../../../../../../../" + strings.TrimPrefix(victim, "/") + "/pwned", Body: "x"}), []string{"pwned"}},
		{"rootfs writing through a symlink", testimage.WriteTar(t,
			testimage.Entry{Name: "lnk", Type: tar.TypeSymlink, Link: victim},
			testimage.Entry{Name: "lnk/pwned", Body: "x"}), []string{"lnk/pwned"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := snapshotState(t)
			code, stderr := berthCLI(t, exec.Command(berthBin, "image", "import", "test.local/bad:1", tt.file))
			t.Logf("exit %d: %s", code, stderr)
			if code != 2 {
				t.Errorf("exit %d, want 2 (bad input); stderr:\n%s", code, stderr)
			}
			for _, s := range append([]string{"berth: import " + tt.file + ": "}, tt.say...) {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr %q does not say %q", stderr, s)
				}
			}
			if n := strings.Count(strings.TrimSpace(stderr), "\n"); n > 0 {
				t.Errorf("stderr is %d lines, want one:\n%s", n+1, stderr)
			}
			before.assertSame(t)
			assertVictimUntouched(t, victim)
		})
	}
}

// dropTarEntries copies the tar at p without the entries drop selects.
func dropTarEntries(t *testing.T, p string, drop func(string) bool) []byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	tr, tw := tar.NewReader(f), tar.NewWriter(&out)
	dropped := 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if drop(hdr.Name) {
			dropped++
			continue
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			t.Fatal(err)
		}
	}
	if dropped == 0 {
		t.Fatalf("no entry of %s dropped", p)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// Without the OCI runtime on PATH, the CLI says which package installs it
// and makes nothing.
func TestBadInputRuncMissing(t *testing.T) {
	needRoot(t)
	before := snapshotState(t)
	cmd := exec.Command(berthBin, "sandboxes", "create", "--image", local.DefaultImage)
	cmd.Env = []string{"PATH=" + t.TempDir(), "HOME=/root"}
	code, stderr := berthCLI(t, cmd)
	t.Logf("exit %d: %s", code, stderr)
	if code == 0 {
		t.Fatalf("create without runc succeeded; stderr:\n%s", stderr)
	}
	for _, s := range []string{`the local provider needs the OCI runtime "runc"`, "install it with: apt-get install runc"} {
		if !strings.Contains(stderr, s) {
			t.Errorf("stderr %q does not say %q", stderr, s)
		}
	}
	before.assertSame(t)
}

// Run as an unprivileged user, the CLI says the local provider needs root
// and makes nothing.
func TestBadInputNotRoot(t *testing.T) {
	needRoot(t)
	// nobody must be able to run the binary: a copy in a world-readable dir.
	dir, err := os.MkdirTemp("", "berth-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "berth")
	if err := copyFile(berthBin, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	before := snapshotState(t)
	for _, args := range [][]string{
		{"sandboxes", "create", "--image", local.DefaultImage},
		{"sandboxes", "ls"},
		{"exec", "sb-0123456789abcdef", "--", "true"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/nonexistent"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		code, stderr := berthCLI(t, cmd)
		t.Logf("%v: exit %d: %s", args, code, stderr)
		if code == 0 {
			t.Errorf("%v as nobody succeeded", args)
		}
		if want := "the local provider needs root (runc, overlayfs, cgroups); run as root"; !strings.Contains(stderr, want) {
			t.Errorf("%v as nobody: exit %d, stderr %q; want it to say %q", args, code, stderr, want)
		}
	}
	before.assertSame(t)
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
