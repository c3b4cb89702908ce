package local_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth/internal/testbin"
	"github.com/berth-sh/berth/providers/local"
)

// The package's tests share one state directory (so that images are seeded
// and unpacked once) and one cgroup parent of their own, which TestMain
// checks is empty at the end, with no mount left under the state dir.
var (
	stateDir     string
	agentBin     string
	cgroupParent string
	skipReason   string
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	switch {
	case os.Geteuid() != 0:
		skipReason = "needs root: the local provider runs containers (namespaces, overlayfs, cgroups)"
	default:
		if _, err := exec.LookPath("runc"); err != nil {
			skipReason = "needs runc: apt-get install runc"
			break
		}
		var err error
		if agentBin, err = testbin.Berth(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer testbin.Cleanup()
		// Short: the agent's socket path lives under it (108-byte limit).
		if stateDir, err = os.MkdirTemp("", "berth-local-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(stateDir)
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		cgroupParent = "berth-test-" + hex.EncodeToString(b)
	}
	code := m.Run()
	if stateDir != "" {
		if left := leftovers(); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "leftovers after the tests:\n  %s\n", strings.Join(left, "\n  "))
			code = 1
			removeAll() // never walk into a live sandbox's rootfs
		}
		removeCgroupParent()
	}
	if err := goleak.Find(goleak.IgnoreTopFunction("github.com/berth-sh/berth/internal/reap.Loop")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	return code
}

// needRoot skips a test that runs sandboxes when TestMain found it cannot.
func needRoot(t testing.TB) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}

func options() local.Options {
	return local.Options{StateDir: stateDir, AgentBinary: agentBin, CgroupParent: cgroupParent}
}

// newDriver opens a fresh driver value on the shared state dir.
func newDriver(t testing.TB) *local.Provider {
	t.Helper()
	needRoot(t)
	p, err := local.New(options())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// leftovers lists what the tests left: sandbox directories, mounts under
// the state dir, and cgroups under the tests' cgroup parent.
func leftovers() []string {
	var out []string
	ents, _ := os.ReadDir(filepath.Join(stateDir, "sandboxes"))
	for _, e := range ents {
		out = append(out, "sandbox dir "+e.Name())
	}
	out = append(out, mountsUnder(stateDir)...)
	for _, d := range cgroupDirs(cgroupParent) {
		kids, _ := os.ReadDir(d)
		for _, k := range kids {
			if k.IsDir() {
				out = append(out, "cgroup "+filepath.Join(d, k.Name()))
			}
		}
	}
	return out
}

// mountsUnder returns the mount points in /proc/self/mountinfo under dir.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return []string{"read mountinfo: " + err.Error()}
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 4 && (fs[4] == dir || strings.HasPrefix(fs[4], dir+"/")) {
			out = append(out, "mount "+fs[4])
		}
	}
	return out
}

// cgroupDirs finds the directories named name in the cgroup file systems.
func cgroupDirs(name string) []string {
	var out []string
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if d.Name() == name {
			out = append(out, p)
			return fs.SkipDir
		}
		if strings.Count(p, "/") > 10 {
			return fs.SkipDir
		}
		return nil
	})
	return out
}

// removeAll deletes every sandbox in the state dir, live or ended.
func removeAll() {
	p, err := local.New(options())
	if err != nil {
		return
	}
	ctx := context.Background()
	infos, _ := p.List(ctx, nil)
	for _, in := range infos {
		_ = p.Delete(ctx, in.ID)
	}
	_, _ = p.Reap(ctx)
}

func removeCgroupParent() {
	for _, d := range cgroupDirs(cgroupParent) {
		os.Remove(d)
	}
}
