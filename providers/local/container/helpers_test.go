package container

import (
	"context"
	"debug/elf"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testing/testbin"
)

// The test fixture: a busybox rootfs (Debian's busybox-static with applet
// symlinks) and the testinit program, both built once per test binary in
// one temp dir that TestMain removes.
var (
	fixtureDir string

	rootfsOnce sync.Once
	rootfsPath string
	rootfsErr  error

	initOnce sync.Once
	initBin  string
	initErr  error
)

func TestMain(m *testing.M) {
	var err error
	fixtureDir, err = os.MkdirTemp("", "berth-container-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if os.Geteuid() == 0 {
		// Container inits are orphaned when `runc run --detach` exits;
		// this host's PID 1 may not reap them.
		if err := SetSubreaper(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(fixtureDir)
	os.Exit(code)
}

// needRoot skips tests that need root, the runtime binary and busybox.
func needRoot(t testing.TB) {
	t.Helper()
	testbin.NeedLocal(t)
	if _, err := busyboxPath(); err != nil {
		t.Skip("needs a static busybox: apt-get install busybox-static")
	}
}

// busyboxPath finds a statically linked busybox (the rootfs has no libc).
func busyboxPath() (string, error) {
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		if static(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("no static busybox")
}

// static reports whether p is an ELF executable without an interpreter.
func static(p string) bool {
	f, err := elf.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

// busyboxRootfs returns a lower dir holding busybox and its applets.
func busyboxRootfs(t testing.TB) string {
	t.Helper()
	rootfsOnce.Do(func() { rootfsPath, rootfsErr = buildRootfs(filepath.Join(fixtureDir, "busybox")) })
	if rootfsErr != nil {
		t.Fatal(rootfsErr)
	}
	return rootfsPath
}

func buildRootfs(dir string) (string, error) {
	bb, err := busyboxPath()
	if err != nil {
		return "", err
	}
	for _, d := range []string{"bin", "etc", "proc", "sys", "dev", "tmp", "root", "mnt"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return "", err
		}
	}
	if err := os.Chmod(filepath.Join(dir, "tmp"), 0o1777); err != nil {
		return "", err
	}
	b, err := os.ReadFile(bb)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "bin/busybox"), b, 0o755); err != nil {
		return "", err
	}
	out, err := exec.Command(bb, "--list").Output()
	if err != nil {
		return "", err
	}
	for _, a := range strings.Fields(string(out)) {
		if a == "busybox" {
			continue
		}
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", a)); err != nil {
			return "", err
		}
	}
	files := map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
		"etc/group":  "root:x:0:\nnobody:x:65534:\n",
	}
	for name, s := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// testInit builds providers/local/container/internal/testinit without cgo, once.
func testInit(t testing.TB) string {
	t.Helper()
	initOnce.Do(func() {
		initBin = filepath.Join(fixtureDir, "testinit")
		cmd := exec.Command("go", "build", "-o", initBin, "./internal/testinit")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			initErr = fmt.Errorf("build testinit: %v: %s", err, out)
		}
	})
	if initErr != nil {
		t.Fatal(initErr)
	}
	return initBin
}

var idSeq struct {
	sync.Mutex
	n int
}

// testRuntime keeps the runtime's state and cgroups apart from anything
// else on the host, and removes its cgroup parent at the end.
func testRuntime(t testing.TB) Runtime {
	t.Helper()
	parent := fmt.Sprintf("berth-test-%d", os.Getpid())
	r := Runtime{Root: filepath.Join(fixtureDir, "runc"), CgroupParent: parent}
	t.Cleanup(func() { removeCgroupParent(parent) })
	return r
}

// removeCgroupParent removes the test's (empty) cgroup parent from every
// hierarchy it was made in: under this process's own cgroups, where runc
// puts a relative cgroupsPath, and at each hierarchy's root, where crun
// puts it.
func removeCgroupParent(parent string) {
	own, err := cgroupPaths(os.Getpid(), "")
	if err != nil {
		return
	}
	for _, p := range own {
		os.Remove(filepath.Join(p, parent))
	}
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/" + parent)
	for _, p := range append(roots, "/sys/fs/cgroup/"+parent) {
		os.Remove(p)
	}
}

// testConfig is a container running busybox sleep as init.
func testConfig(t testing.TB) Config {
	t.Helper()
	idSeq.Lock()
	idSeq.n++
	id := fmt.Sprintf("t%d-%d", os.Getpid(), idSeq.n)
	idSeq.Unlock()
	return Config{
		ID:        id,
		LowerDirs: []string{busyboxRootfs(t)},
		Dir:       filepath.Join(t.TempDir(), "c"),
		Init:      []string{"/bin/sleep", "3600"},
	}
}

// agentConfig runs testinit as init behind a host-side listener; it returns
// the socket path to dial.
func agentConfig(t testing.TB) (Config, string) {
	t.Helper()
	c := testConfig(t)
	sock := filepath.Join(t.TempDir(), "agent.sock")
	f, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	c.Init = []string{"/.berth/agent"}
	c.InitBinary = testInit(t)
	c.ExtraFiles = []*os.File{f}
	return c, sock
}

// agentGet does a GET on the agent behind sock.
func agentGet(t testing.TB, sock, path string) string {
	t.Helper()
	body, err := agentGetErr(sock, path)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// agentGetErr is agentGet for goroutines other than the test's.
func agentGetErr(sock, path string) (string, error) {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent"+path, nil)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", path, resp.Status, b)
	}
	return string(b), nil
}

// create creates c and registers a Delete that must succeed.
func create(t testing.TB, r Runtime, c Config) *Container {
	t.Helper()
	ct, err := r.Create(context.Background(), c)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		if err := ct.Delete(context.Background()); err != nil {
			t.Errorf("cleanup delete: %v", err)
		}
	})
	return ct
}

// execIn runs argv in the container with `runc exec` and returns its
// combined output and exit code.
func execIn(t testing.TB, r Runtime, ct *Container, argv ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := r.command(ctx, ct.bin, append([]string{"exec", ct.ID()}, argv...)...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("runc exec %v: %v: %s", argv, err, out)
	}
	return string(out), 0
}

// deleteGone deletes ct, which must succeed and leave nothing (assertGone).
func deleteGone(t testing.TB, r Runtime, ct *Container) {
	t.Helper()
	if err := ct.Delete(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertGone(t, r, ct)
}

// assertGone checks that nothing of ct is left on the host: no mount under
// its dir, no cgroup dir, no process, no runtime state, no dir.
func assertGone(t testing.TB, r Runtime, ct *Container) {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if strings.Contains(line, ct.Dir()) {
			t.Errorf("mount left: %s", line)
		}
	}
	if len(ct.cgroups) == 0 {
		t.Errorf("container had no cgroups recorded")
	}
	for h, p := range ct.cgroups {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("cgroup %s left: %s (%v)", h, p, err)
		}
	}
	if st, err := procStartTime(ct.Pid()); err == nil && st == ct.start {
		t.Errorf("init %d still exists (zombie or alive)", ct.Pid())
	}
	if r.stateExists(ct.ID()) {
		t.Errorf("runtime state of %s left", ct.ID())
	}
	if _, err := os.Stat(ct.Dir()); !os.IsNotExist(err) {
		t.Errorf("dir %s left (%v)", ct.Dir(), err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func atoi(t testing.TB, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func assertNoDir(t testing.TB, dir string) {
	t.Helper()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s exists after a failed create (%v)", dir, err)
	}
}

// deadlineIn returns the time ms milliseconds from now, for TESTINIT_DEADLINE.
func deadlineIn(ms int) string {
	return time.Now().Add(time.Duration(ms) * time.Millisecond).Format(time.RFC3339Nano)
}

var runtimeProbes sync.Map // binary name -> probe

type probe struct {
	bin string // what Runtime.Binary is to be
	err error  // nil: works here
}

// eachRuntime runs f in a subtest per OCI runtime among names that starts
// a container here, with its own Runtime; one that is missing or does
// not work on this host is skipped with the reason.
func eachRuntime(t *testing.T, names []string, f func(t *testing.T, r Runtime)) {
	t.Helper()
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			r, err := workingRuntime(t, name)
			if err != nil {
				t.Skip(err)
			}
			f(t, r)
		})
	}
}

// workingRuntime returns testRuntime running bin, or why bin cannot start
// a container here (probed once per test binary).
func workingRuntime(t testing.TB, bin string) (Runtime, error) {
	t.Helper()
	r := testRuntime(t)
	v, ok := runtimeProbes.Load(bin)
	if !ok {
		pr := probe{bin: bin}
		pr.err = startOne(t, r, bin)
		if pr.err != nil && bin == "crun" && strings.Contains(pr.err.Error(), "hybrid mode") {
			// crun 1.8 refuses a cgroup v1 host whose cgroup2 mount
			// has a controller (hybrid mode, as this project's CI
			// VMs): run it in a mount namespace of its own without
			// that mount, where the host is plain v1 to it. What the
			// tests check (filters, mounts, namespaces) does not
			// depend on the cgroup mode.
			if wrapper, err := crunWithoutCgroup2(); err == nil {
				pr = probe{bin: wrapper, err: startOne(t, r, wrapper)}
			}
		}
		if pr.err != nil {
			pr.err = fmt.Errorf("%s does not work here: %w", bin, pr.err)
		}
		v, _ = runtimeProbes.LoadOrStore(bin, pr)
	}
	pr := v.(probe)
	if pr.err != nil {
		return Runtime{}, pr.err
	}
	r.Binary = pr.bin
	return r, nil
}

// startOne creates and deletes a container with the runtime bin.
func startOne(t testing.TB, r Runtime, bin string) error {
	t.Helper()
	if _, err := exec.LookPath(bin); err != nil {
		return err
	}
	r.Binary = bin
	ct, err := r.Create(context.Background(), testConfig(t))
	if err != nil {
		return err
	}
	if err := ct.Delete(context.Background()); err != nil {
		t.Fatal(err)
	}
	return nil
}

// crunWithoutCgroup2 writes a program named crun that runs the host's
// crun in a private mount namespace with /sys/fs/cgroup/unified unmounted.
func crunWithoutCgroup2() (string, error) {
	crun, err := exec.LookPath("crun")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(fixtureDir, "crun-v1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	p := filepath.Join(dir, "crun")
	script := "#!/bin/sh\nexec unshare --mount --propagation private sh -c 'umount /sys/fs/cgroup/unified && exec \"$0\" \"$@\"' " + crun + ` "$@"` + "\n"
	return p, os.WriteFile(p, []byte(script), 0o755)
}
