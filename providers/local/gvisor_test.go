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
// commands see gVisor's kernel, not the host's; and what runsc cannot do
// (network public, image builds) is refused as NotSupported up front.
func TestGVisor(t *testing.T) {
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
	p := sandbox.NewProvider("local", d)
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
