package local_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
)

// runscMissing says why gVisor's runsc cannot run containers here, or "".
// It runs a minimal container (the attacker's no-op) the way berth does.
func runscMissing(t testing.TB) string {
	t.Helper()
	if skipReason != "" {
		return skipReason
	}
	bin, err := exec.LookPath("runsc")
	if err != nil {
		return "needs gVisor's runsc: apt-get install runsc"
	}
	dir := t.TempDir()
	rootfs := filepath.Join(dir, "rootfs")
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(attackerBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "attacker"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := exec.Command(bin, "spec", "--bundle", dir, "--", "/attacker", "socket", "1")
	if out, err := spec.CombinedOutput(); err != nil {
		return "runsc spec: " + strings.TrimSpace(string(out))
	}
	cfg, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(strings.Replace(string(cfg), `"terminal": true`, `"terminal": false`, 1)), 0o644)
	run := exec.Command(bin, "--root", filepath.Join(dir, "state"), "--network=none", "run", "--bundle", dir, "berth-runsc-probe")
	if out, err := run.CombinedOutput(); err != nil || !strings.Contains(string(out), "ALLOWED") {
		return "runsc cannot run a container on this host: " + strings.TrimSpace(string(out))
	}
	return ""
}

// Under gVisor (Options.Runtime "runsc") a sandbox is created, runs
// commands, moves files and trees, and is deleted as under runc; its
// commands see gVisor's kernel, not the host's; its ports are reached both
// ways; and what runsc cannot do
// (network public, image builds) is refused as NotSupported up front.
func TestGVisor(t *testing.T) {
	p := openGVisor(t)
	sb := create(t, p, sandbox.Spec{Env: map[string]string{"GREETING": "hi"}})
	if got := sh(t, sb, "echo $GREETING; dmesg 2>/dev/null | head -1"); !strings.HasPrefix(got, "hi\n") || !strings.Contains(got, "gVisor") {
		t.Errorf("a command under runsc: %q, want the Spec's env and gVisor's kernel log", got)
	}
	if err := sb.WriteFile(testCtx(t), "/tmp/f", []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := sb.ReadFile(testCtx(t), "/tmp/f"); err != nil || string(b) != "data" {
		t.Errorf("read back %q, %v", b, err)
	}
	// The agent's socket is in the sandbox's view under runsc: reaching
	// it gets a process nothing without the token, the deadline least.
	withAttacker(t, sb)
	res := attempt(t, sb, "/tmp/attacker", "deadline", "/.berth/run/agent.sock")
	if got := allowed(res.Stdout); len(got) > 0 || !strings.Contains(string(res.Stdout), "deadline: refused") {
		t.Errorf("a sandbox process moved the agent's deadline under runsc: %s %s", res.Stdout, res.Stderr)
	}
	// The disk limit holds under runsc too: its writes reach the host's
	// overlay through the gofer, and so the disk under it.
	disk := create(t, p, sandbox.Spec{Resources: sandbox.Resources{StorageMB: attackDiskMB}})
	res = attempt(t, disk, "sh", "-c", fmt.Sprintf("dd if=/dev/zero of=/fill bs=1M count=%d", 2*attackDiskMB))
	if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "No space left on device") {
		t.Errorf("%d MB written under a %d MB limit under runsc: exit %d %s", 2*attackDiskMB, attackDiskMB, res.ExitCode, res.Stderr)
	}
	// And through the /etc files (TestAttackFillDiskThroughEtc).
	res = attempt(t, disk, "sh", "-c", fmt.Sprintf("dd if=/dev/zero bs=1M count=%d 2>&1 >> /etc/hosts", 2*attackDiskMB))
	if res.ExitCode == 0 || !strings.Contains(string(res.Stdout), "No space left on device") {
		t.Errorf("%d MB appended to /etc/hosts under a %d MB limit under runsc: exit %d %s", 2*attackDiskMB, attackDiskMB, res.ExitCode, res.Stdout)
	}
	// Ports both ways: the agent's routes work in gVisor's netstack.
	sh(t, sb, "mkdir -p /tmp/www && echo served > /tmp/www/index.html && httpd -p 8000 -h /tmp/www")
	ep, err := sb.Endpoint(testCtx(t), sandbox.Port{Number: 8000})
	if err != nil {
		t.Fatal(err)
	}
	if body, status := httpGet(t, ep.Join("/")); status != 200 || body != "served\n" {
		t.Errorf("an endpoint under runsc: %d %q", status, body)
	}
	f, err := sb.Forward(testCtx(t), 30000, hostHTTP(t, "from the host"))
	if err != nil {
		t.Fatal(err)
	}
	if got := sh(t, sb, "wget -q -O - http://127.0.0.1:30000/"); got != "from the host" {
		t.Errorf("a forward under runsc: %q", got)
	}
	f.Close()
	_, err = p.Create(testCtx(t), sandbox.Spec{Image: local.DefaultImage, Network: sandbox.Network{Mode: sandbox.NetworkPublic}})
	if sandbox.ClassOf(err) != sandbox.NotSupported {
		t.Errorf("network public under runsc: %v, want NotSupported", err)
	}
	ctxDir := writeContext(t, map[string]string{"Dockerfile": "FROM berth.local/busybox:latest\nRUN touch /x\n"})
	err = p.PrepareImage(testCtx(t), sandbox.Spec{Build: &sandbox.Build{ContextDir: ctxDir}})
	if sandbox.ClassOf(err) != sandbox.NotSupported {
		t.Errorf("a build under runsc: %v, want NotSupported", err)
	}
}

// openGVisor opens a provider running runsc, or skips.
func openGVisor(t *testing.T) *sandbox.Provider {
	t.Helper()
	if why := runscMissing(t); why != "" {
		t.Skip(why)
	}
	o := options()
	o.Runtime = "runsc"
	o.Pool = local.Pool{Size: 2} // turned off: runsc has no pool
	d, err := local.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return sandbox.NewProvider("local", d)
}

// Under runsc the agent's run directory (its config and socket, mounted
// at /.berth/run, writable: the agent makes its socket there) is a small
// tmpfs of its own: a sandbox process filling it gets ENOSPC, and the
// state directory's disk holds nothing of it.
//
// On 5553f78 it was a directory of the state directory's file system: in
// a sandbox of StorageMB 32, 100 MiB written there landed on the host's
// disk, past the limit and without bound.
func TestAttackFillRunDirGVisor(t *testing.T) {
	p := openGVisor(t)
	sb := create(t, p, sandbox.Spec{Resources: sandbox.Resources{StorageMB: attackDiskMB}})
	dir := filepath.Join(stateDir, "sandboxes", sb.ID())
	before := hostBytes(t, dir)
	res := attempt(t, sb, "sh", "-c", "dd if=/dev/zero of=/.berth/run/fill bs=1M count=100 2>&1")
	if res.ExitCode == 0 || !strings.Contains(string(res.Stdout), "No space left on device") {
		t.Errorf("100 MiB written into the agent's run directory: exit %d %s", res.ExitCode, res.Stdout)
	}
	if grew := hostBytes(t, dir) - before; grew > 1<<20 {
		t.Errorf("the sandbox's directory on the host grew by %d KiB", grew>>10)
	}
	// The agent still answers, through the socket in the full directory.
	if got := sh(t, sb, "rm /.berth/run/fill && echo alive"); got != "alive" {
		t.Errorf("after filling the run directory: %q", got)
	}
	if err := p.Delete(testCtx(t), sb.ID()); err != nil {
		t.Fatal(err)
	}
	assertNoLeftovers(t, sb.ID())
}
