package local_test

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testing/nettest"
	"github.com/berth-sh/berth/internal/testing/testimage"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
)

// Isolation tests: each one is an attack run from inside a sandbox made
// through the sandbox API, and asserts that the attack fails and that the
// host (and the other sandboxes) are as they were. The container package
// checks the same mechanisms on bare containers; these check what a
// sandbox of the local provider actually gets.

// attempt runs argv in sb and returns the result, whatever the exit code.
func attempt(t *testing.T, sb *sandbox.Sandbox, argv ...string) sandbox.Result {
	t.Helper()
	res, err := sb.Run(testCtx(t), sandbox.Command{Args: argv})
	if err != nil {
		t.Fatalf("run %q: %v", argv, err)
	}
	return res
}

// secret returns a random marker that appears nowhere by chance.
func secret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "berth-secret-" + hex.EncodeToString(b)
}

// sandboxCgroupFile reads a file of the sandbox's cgroup from the host,
// from whichever hierarchy has it (v1: pids, memory; v2: unified).
func sandboxCgroupFile(t testing.TB, id, file string) (string, bool) {
	t.Helper()
	for _, d := range cgroupDirs(id) {
		if b, err := os.ReadFile(filepath.Join(d, file)); err == nil {
			return strings.TrimSpace(string(b)), true
		}
	}
	return "", false
}

// The attacks again, on sandboxes from the pool: those start on a blank
// root and get the image's when a Create takes them (container.SwitchRoot),
// and must end up exactly as closed as a sandbox started cold.
func TestAttacksPooled(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"SeeHostProcesses", TestAttackSeeHostProcesses},
		{"ReachHostNetwork", TestAttackReachHostNetwork},
		{"WriteOutsideThroughSymlinks", TestAttackWriteOutsideThroughSymlinks},
		{"ForkBomb", TestAttackForkBomb},
		{"MemoryHog", TestAttackMemoryHog},
		{"FillShmKeepsAgent", TestAttackFillShmKeepsAgent},
		{"PrivilegedCalls", TestAttackPrivilegedCalls},
		{"SeeOtherSandbox", TestAttackSeeOtherSandbox},
		{"SignalInit", TestAttackSignalInit},
		{"PID1", TestAttackPID1},
		{"SocketFamilies", TestAttackSocketFamilies},
		{"NewSyscalls", TestAttackNewSyscalls},
		{"InitEnv", TestAttackInitEnv},
		{"BuildSwapsNames", TestAttackBuildSwapsNames},
		{"HostSideSetID", TestAttackHostSideSetID},
		{"FillDisk", TestAttackFillDisk},
		{"FillDiskThroughEtc", TestAttackFillDiskThroughEtc},
		{"EtcEditable", TestEtcEditable},
		{"ForwardReachesOnlyItsAddress", TestAttackForwardReachesOnlyItsAddress},
		{"EndpointOtherSandbox", TestAttackEndpointOtherSandbox},
		{"EndpointListensOnLoopbackOnly", TestEndpointListensOnLoopbackOnly},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pooledTests.Store(t, poolWarmSpecs[tc.name])
			defer pooledTests.Delete(t)
			tc.f(t)
		})
	}
}

// A sandbox sees its own processes only: ps lists the agent and the
// command, never a host process started with a marker in its argv, and
// killing the host process's pid from inside does not reach it.
func TestAttackSeeHostProcesses(t *testing.T) {
	p := openProvider(t)
	mark := secret(t)
	host := exec.Command("sh", "-c", "sleep 600 # "+mark)
	host.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // sh forks sleep: kill both
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-host.Process.Pid, syscall.SIGKILL); host.Wait() })
	sb := create(t, p, sandbox.Spec{})

	ps := attempt(t, sb, "ps", "-o", "pid,args")
	if ps.ExitCode != 0 {
		t.Fatalf("ps: exit %d %s", ps.ExitCode, ps.Stderr)
	}
	if strings.Contains(string(ps.Stdout), mark) || strings.Contains(string(ps.Stdout), "local.test") {
		t.Errorf("ps inside lists host processes:\n%s", ps.Stdout)
	}
	// The agent (pid 1) and ps itself, nothing else.
	lines := strings.Split(strings.TrimSpace(string(ps.Stdout)), "\n")[1:]
	if len(lines) > 2 || !strings.HasPrefix(strings.TrimSpace(lines[0]), "1 ") {
		t.Errorf("ps inside lists %d processes, want the agent as pid 1 and ps:\n%s", len(lines), ps.Stdout)
	}
	if out := sh(t, sb, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"); strings.Contains(out, mark) {
		t.Errorf("/proc inside shows a host process: %q", out)
	}
	hostPid := strconv.Itoa(host.Process.Pid)
	attempt(t, sb, "kill", "-9", hostPid)
	attempt(t, sb, "sh", "-c", "kill -9 -1") // every process the sandbox may signal
	if err := host.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the host process %s died from a kill inside the sandbox: %v", hostPid, err)
	}
	if got := sh(t, sb, "echo alive"); got != "alive" {
		t.Errorf("sandbox after kill -9 -1: %q", got)
	}
}

// Without network, nothing outside the sandbox answers: not a listener on
// the host's loopback, not one on the host's other addresses, not the
// internet. With network public, the host's loopback stays unreachable by
// every address a sandbox could try.
func TestAttackReachHostNetwork(t *testing.T) {
	p := openProvider(t)
	const reply = "host-reached"
	loopPort := nettest.Listen(t, "127.0.0.1", reply)
	anyPort := nettest.Listen(t, "0.0.0.0", reply)
	// The control: the listeners answer on the host.
	for _, addr := range []string{"127.0.0.1:" + strconv.Itoa(loopPort), "127.0.0.1:" + strconv.Itoa(anyPort)} {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatalf("control: the host listener %s does not answer the host: %v", addr, err)
		}
		c.Close()
	}
	nc := func(sb *sandbox.Sandbox, host string, port int) {
		t.Helper()
		res := attempt(t, sb, "nc", "-w", "2", host, strconv.Itoa(port))
		if res.ExitCode == 0 || res.ExitCode == 127 || strings.Contains(string(res.Stdout), reply) {
			t.Errorf("nc %s %d from the sandbox: exit %d, stdout %q, stderr %q; want a failed connection", host, port, res.ExitCode, res.Stdout, res.Stderr)
		}
	}

	t.Run("none", func(t *testing.T) {
		sb := create(t, p, sandbox.Spec{})
		nc(sb, "127.0.0.1", loopPort)
		nc(sb, "127.0.0.1", anyPort)
		for _, a := range nettest.HostIPv4(t) {
			nc(sb, a, anyPort)
		}
		nc(sb, "10.0.2.2", loopPort) // slirp's host address means nothing here
		nc(sb, "1.1.1.1", 53)        // the internet
		if out := sh(t, sb, "ip route 2>&1; ip -o addr | grep -v ' lo ' || true"); out != "" {
			t.Errorf("a sandbox without network has routes or addresses besides loopback:\n%s", out)
		}
	})
	t.Run("public", func(t *testing.T) {
		if _, err := exec.LookPath("slirp4netns"); err != nil {
			t.Skip("network public needs slirp4netns: apt-get install slirp4netns")
		}
		sb := create(t, p, sandbox.Spec{Network: sandbox.Network{Mode: sandbox.NetworkPublic}})
		if out := sh(t, sb, "ip route"); !strings.Contains(out, "default") {
			t.Fatalf("a public sandbox has no default route, so this test proves nothing:\n%s", out)
		}
		nc(sb, "10.0.2.2", loopPort) // slirp's alias of the host
		nc(sb, "10.0.2.2", anyPort)
		nc(sb, "127.0.0.1", loopPort) // its own loopback, not the host's
		nc(sb, "127.0.0.1", anyPort)
	})
}

// plant makes the symlinks an attacker leaves for the host's tree calls:
// one to an absolute host path, one climbing out with .., one to /.
func plant(t *testing.T, sb *sandbox.Sandbox, dir, hostPath string) {
	t.Helper()
	sh(t, sb, fmt.Sprintf("mkdir -p %[1]s && echo data > %[1]s/data.txt && ln -s %[2]s %[1]s/abs && ln -s ../../../../../../../.. %[1]s/up && ln -s / %[1]s/root && ln -s %[2]s/keep %[1]s/keeplink", dir, hostPath))
}

// victimDir is a host directory an attacker aims at, holding one file.
func victimDir(t *testing.T) string {
	t.Helper()
	v := t.TempDir()
	if err := os.WriteFile(filepath.Join(v, "keep"), []byte("host file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return v
}

func assertVictimUntouched(t *testing.T, v string) {
	t.Helper()
	ents, err := os.ReadDir(v)
	if err != nil || len(ents) != 1 || ents[0].Name() != "keep" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("the host dir %s now holds %v (%v); want keep alone", v, names, err)
	}
	if b, _ := os.ReadFile(filepath.Join(v, "keep")); string(b) != "host file\n" {
		t.Errorf("the host file %s/keep changed: %q", v, b)
	}
}

// dirNames lists a host directory's entries.
func dirNames(t *testing.T, d string) []string {
	t.Helper()
	ents, err := os.ReadDir(d)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// Symlinks planted in the sandbox steer no tree call outside it: a
// download through them writes only under the host target (escaping links
// are refused), an upload or a file write through them lands in the
// sandbox's own file system, and the host files they name are unchanged.
func TestAttackWriteOutsideThroughSymlinks(t *testing.T) {
	p := openProvider(t)
	sb := create(t, p, sandbox.Spec{})
	victim := victimDir(t)
	plant(t, sb, "/tmp/out", victim)

	t.Run("download", func(t *testing.T) {
		parent := t.TempDir()
		target := filepath.Join(parent, "dl")
		err := sb.DownloadDir(testCtx(t), "/tmp/out", target)
		if sandbox.ClassOf(err) != sandbox.InvalidArgument {
			t.Errorf("download of a tree with escaping symlinks: %v, want InvalidArgument", err)
		}
		if got := dirNames(t, parent); len(got) != 1 || got[0] != "dl" {
			t.Errorf("the download wrote beside its target: %v", got)
		}
		for _, n := range dirNames(t, target) {
			fi, err := os.Lstat(filepath.Join(target, n))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode()&os.ModeSymlink != 0 {
				l, _ := os.Readlink(filepath.Join(target, n))
				t.Errorf("the download made the host symlink %s -> %s", n, l)
			}
		}
		assertVictimUntouched(t, victim)
		// Each link alone: a download of the link itself.
		for _, l := range []string{"abs", "up", "root", "keeplink"} {
			dst := filepath.Join(t.TempDir(), "one")
			err := sb.DownloadDir(testCtx(t), "/tmp/out/"+l, dst)
			if err == nil {
				for _, n := range dirNames(t, dst) {
					if fi, _ := os.Lstat(filepath.Join(dst, n)); fi.Mode()&os.ModeSymlink != 0 {
						t.Errorf("download of /tmp/out/%s made a host symlink %s", l, n)
					}
				}
			}
			assertVictimUntouched(t, victim)
		}
	})

	t.Run("upload", func(t *testing.T) {
		src := t.TempDir()
		os.WriteFile(filepath.Join(src, "pwned"), []byte("from the host\n"), 0o644)
		os.WriteFile(filepath.Join(src, "keep"), []byte("overwritten\n"), 0o644)
		for _, dir := range []string{"/tmp/out/abs", "/tmp/out/up" + victim, "/tmp/out/root" + victim} {
			if err := sb.UploadDir(testCtx(t), src, dir); err != nil {
				t.Logf("upload into %s: %v", dir, err)
			}
			assertVictimUntouched(t, victim)
		}
		// The uploads followed the links inside the sandbox: to the
		// sandbox's own path of the same name.
		if got := sh(t, sb, "cat "+victim+"/pwned"); got != "from the host" {
			t.Errorf("the upload is not in the sandbox's own %s: %q", victim, got)
		}
		for _, f := range []string{"/tmp/out/abs/pwned2", "/tmp/out/keeplink", "/tmp/out/up" + victim + "/pwned3"} {
			if err := sb.WriteFile(testCtx(t), f, []byte("x"), 0o644); err != nil {
				t.Logf("write %s: %v", f, err)
			}
			assertVictimUntouched(t, victim)
		}
	})

	t.Run("upload-crafted-tar", func(t *testing.T) {
		rel, _ := filepath.Rel("/", victim)
		type E = testimage.Entry
		for name, tarball := range map[string][]byte{
			"dotdot":           testimage.TarBytes(t, E{Name: strings.Repeat("../", 12) + rel + "/pwned", Body: "x"}),
			"absolute":         testimage.TarBytes(t, E{Name: victim + "/pwned", Body: "x"}),
			"through-symlink":  testimage.TarBytes(t, E{Name: "l", Type: tar.TypeSymlink, Link: victim}, E{Name: "l/pwned", Body: "x"}),
			"through-planted":  testimage.TarBytes(t, E{Name: "abs/pwned", Body: "x"}),
			"hardlink-outside": testimage.TarBytes(t, E{Name: "hl", Type: tar.TypeLink, Link: victim + "/keep"}),
		} {
			dir := "/tmp/out"
			err := sb.Upload(testCtx(t), dir, bytes.NewReader(tarball))
			if name != "through-planted" && sandbox.ClassOf(err) != sandbox.InvalidArgument {
				t.Errorf("%s: upload: %v, want InvalidArgument", name, err)
			}
			assertVictimUntouched(t, victim)
		}
	})

	t.Run("agent-binary", func(t *testing.T) {
		before := fileSum(t, agentBin)
		for _, script := range []string{
			"echo pwned >> /.berth/berth",
			"cp /bin/busybox /.berth/berth",
			"rm -f /.berth/berth",
			"mount -o remount,rw /.berth/berth",
			"echo pwned > /proc/1/exe",
			"cp /bin/busybox /proc/1/root/.berth/berth",
		} {
			if res := attempt(t, sb, "sh", "-c", script); res.ExitCode == 0 {
				t.Errorf("%q inside the sandbox succeeded", script)
			}
		}
		if fileSum(t, agentBin) != before {
			t.Fatal("a sandbox changed the host's agent binary")
		}
		if got := sh(t, sb, "echo alive"); got != "alive" {
			t.Errorf("sandbox after the attempts: %q", got)
		}
	})
}

func fileSum(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// A fork bomb fills the sandbox's pids limit and no more. While the pids
// are held the host still forks, an exec is refused as ResourceExhausted
// and the agent still answers file calls; afterwards the sandbox runs
// commands again. A recursive bomb burns out at the limit the same way.
func TestAttackForkBomb(t *testing.T) {
	p := openProvider(t)
	sb := create(t, p, sandbox.Spec{})
	id := sb.ID()
	logAgentOnFailure(t, id)
	if max, ok := sandboxCgroupFile(t, id, "pids.max"); !ok || max != strconv.Itoa(local.DefaultPids) {
		t.Fatalf("pids.max = %q (found %v), want %d", max, ok, local.DefaultPids)
	}
	// The agent's own tasks (its threads), to come back to.
	idle, _ := sandboxCgroupFile(t, id, "pids.current")
	idleTasks, err := strconv.Atoi(idle)
	if err != nil {
		t.Fatalf("pids.current %q: %v", idle, err)
	}
	// Hold: twice the limit in sleeping processes.
	hold := fmt.Sprintf("i=0; while [ $i -lt %d ]; do sleep 600 & i=$((i+1)); done >/dev/null 2>&1", 2*local.DefaultPids)
	if _, err = sb.Run(testCtx(t), sandbox.Command{Args: []string{"sh", "-c", hold}}); err != nil {
		t.Fatalf("starting the sleepers: %v", err)
	}
	waitPidsFailed(t, id, 1)
	for i := 0; i < 10; i++ {
		cur, _ := sandboxCgroupFile(t, id, "pids.current")
		if n, err := strconv.Atoi(cur); err != nil || n > local.DefaultPids {
			t.Fatalf("pids.current %q over the limit %d", cur, local.DefaultPids)
		}
	}
	if out, err := exec.Command("sh", "-c", "echo host forks").Output(); err != nil || string(out) != "host forks\n" {
		t.Fatalf("the host cannot fork during the bomb: %q %v", out, err)
	}
	// The sleepers' shell died at its failed fork, so a pid or two may be
	// free again: an exec either runs or is refused with its class.
	if _, err := sb.Run(testCtx(t), sandbox.Command{Args: []string{"true"}}); err != nil && sandbox.ClassOf(err) != sandbox.ResourceExhausted {
		t.Errorf("exec with the pids taken: %v, want success or ResourceExhausted", err)
	}
	// File calls need no fork: the agent answers them at the limit.
	if err := sb.WriteFile(testCtx(t), "/tmp/during", []byte("ok"), 0o644); err != nil {
		t.Errorf("the agent does not answer file calls during the bomb: %v", err)
	}
	killSandboxProcsButInit(t, id)
	waitPidsBelow(t, id, idleTasks+5)
	if got := sh(t, sb, "cat /tmp/during; echo ' alive'"); got != "ok alive" {
		t.Errorf("sandbox after the sleepers: %q", got)
	}

	// The classic: every process forks two more until a fork fails.
	events := pidsFailed(t, id)
	bomb := "b() { [ -e /tmp/stop ] || { b | b & }; }; b >/dev/null 2>&1"
	if _, err := sb.Run(testCtx(t), sandbox.Command{Args: []string{"sh", "-c", bomb}}); err != nil {
		t.Fatalf("starting the bomb: %v", err)
	}
	waitPidsFailed(t, id, events+1)
	// busybox sh exits when a fork fails, so the bomb burns out; the stop
	// file ends it in a shell that does not.
	if err := sb.WriteFile(testCtx(t), "/tmp/stop", nil, 0o644); err != nil {
		t.Errorf("the agent does not answer after the bomb: %v", err)
	}
	waitPidsBelow(t, id, idleTasks+5)
	if got := sh(t, sb, "echo alive"); got != "alive" {
		t.Errorf("sandbox after the bomb: %q", got)
	}
}

// logAgentOnFailure logs the start of the sandbox's init log (the agent's
// own output) if the test fails, before the sandbox is deleted.
func logAgentOnFailure(t *testing.T, id string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		b, _ := os.ReadFile(filepath.Join(stateDir, "sandboxes", id, "container", "init.log"))
		// A Go crash starts with its reason; the goroutine dump follows.
		if len(b) > 4096 {
			b = b[:4096]
		}
		t.Logf("init log of %s:\n%s", id, b)
	})
}

// pidsFailed is the number of forks the sandbox's pids cgroup refused.
func pidsFailed(t *testing.T, id string) int {
	t.Helper()
	ev, ok := sandboxCgroupFile(t, id, "pids.events")
	if !ok {
		t.Fatalf("no pids.events for %s", id)
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(ev, "max")))
	if err != nil {
		t.Fatalf("pids.events %q: %v", ev, err)
	}
	return n
}

// waitPidsFailed waits until the pids cgroup has refused n forks in all.
func waitPidsFailed(t *testing.T, id string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for pidsFailed(t, id) < n {
		if time.Now().After(deadline) {
			cur, _ := sandboxCgroupFile(t, id, "pids.current")
			t.Fatalf("no fork failed at the pids limit (pids.current %s)", cur)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitPidsBelow waits until the sandbox has fewer than n tasks.
func waitPidsBelow(t *testing.T, id string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		cur, _ := sandboxCgroupFile(t, id, "pids.current")
		if v, err := strconv.Atoi(cur); err == nil && v < n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox still has %s tasks", cur)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killSandboxProcsButInit SIGKILLs, from the host, every process of the
// sandbox except its init (the agent, pid 1 in its namespace).
func killSandboxProcsButInit(t *testing.T, id string) {
	t.Helper()
	for _, pid := range procsIn(id) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
				if f := strings.Fields(v); len(f) > 0 && f[len(f)-1] != "1" {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	}
}

// memAvailable is the host's MemAvailable in bytes.
func memAvailable(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no MemAvailable in /proc/meminfo")
	return 0
}

// A command that allocates without end is killed by the OOM killer at the
// sandbox's memory limit (exit 137); the agent and the host survive it.
func TestAttackMemoryHog(t *testing.T) {
	p := openProvider(t)
	const limitMB = 64
	sb := create(t, p, sandbox.Spec{Resources: sandbox.Resources{MemoryMB: limitMB}})
	before := memAvailable(t)
	// tail keeps the last line of an input without newlines: all of it.
	res := attempt(t, sb, "tail", "-n", "1", "/dev/zero")
	if res.ExitCode != 137 {
		t.Fatalf("memory hog: exit %d (stderr %q), want 137 (SIGKILL by the OOM killer)", res.ExitCode, res.Stderr)
	}
	// The limit killed it, not something else: the cgroup counted an OOM
	// (or two, when a second comes before the first victim's pages are
	// freed).
	oomKilled := regexp.MustCompile(`(?m)^oom_kill [1-9]`)
	if oom, ok := sandboxCgroupFile(t, sb.ID(), "memory.oom_control"); ok {
		if !oomKilled.MatchString(oom) {
			t.Errorf("memory.oom_control = %q, want an oom_kill", oom)
		}
	} else if ev, ok := sandboxCgroupFile(t, sb.ID(), "memory.events"); !ok || !oomKilled.MatchString(ev) {
		t.Errorf("memory.events = %q (found %v), want an oom_kill", ev, ok)
	}
	if got := sh(t, sb, "echo alive"); got != "alive" {
		t.Errorf("the agent after the OOM kill: %q", got)
	}
	// The host lost nothing near the hog's appetite (it would have taken
	// all of it without the limit); other tests may allocate meanwhile.
	if after := memAvailable(t); before-after > 1<<30 {
		t.Errorf("host MemAvailable fell by %d MiB during the hog", (before-after)>>20)
	}
}

// Memory no process holds (a tmpfs file: /dev/shm, as data loaders use it)
// fills the sandbox's limit. The OOM killer takes the largest process by
// its score, and the agent, at ~10 MB the largest, would be it: the
// sandbox would die with its agent. Commands start with the highest score
// (envd's CommandOOMScoreAdj), so the writer is killed and the agent lives
// to remove the file through the file API, which starts no process.
func TestAttackFillShmKeepsAgent(t *testing.T) {
	p := openProvider(t)
	sb := create(t, p, sandbox.Spec{Resources: sandbox.Resources{MemoryMB: 40}})
	res := attempt(t, sb, "sh", "-c", "head -c 60m /dev/zero > /dev/shm/fill")
	if res.ExitCode != 137 {
		t.Fatalf("filling /dev/shm past the limit: exit %d (stderr %q), want 137 (the writer killed)", res.ExitCode, res.Stderr)
	}
	if err := sb.Remove(testCtx(t), "/dev/shm/fill"); err != nil {
		t.Fatalf("the agent after the OOM kill (remove the fill): %v", err)
	}
	if got := sh(t, sb, "cat /proc/self/oom_score_adj; cat /proc/1/oom_score_adj"); got != "1000\n0" {
		t.Errorf("oom_score_adj of a command and of the agent: %q, want 1000 and 0", got)
	}
}

// Privileged calls are refused (capabilities dropped, seccomp, read-only
// /proc/sys and /sys), and none of them changed anything.
func TestAttackPrivilegedCalls(t *testing.T) {
	p := openProvider(t)
	sb := create(t, p, sandbox.Spec{})
	// What a command gets: no dangerous capability, no new privileges, a
	// seccomp filter.
	status := sh(t, sb, "grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status")
	fields := map[string]string{}
	for _, line := range strings.Split(status, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	for _, set := range []string{"CapEff", "CapBnd"} {
		caps, err := strconv.ParseUint(fields[set], 16, 64)
		if err != nil {
			t.Fatalf("%s %q: %v", set, fields[set], err)
		}
		for name, bit := range map[string]uint{
			"CAP_DAC_READ_SEARCH": 2, "CAP_LINUX_IMMUTABLE": 9, "CAP_NET_ADMIN": 12, "CAP_NET_RAW": 13,
			"CAP_SYS_MODULE": 16, "CAP_SYS_RAWIO": 17, "CAP_SYS_PTRACE": 19, "CAP_SYS_ADMIN": 21,
			"CAP_SYS_BOOT": 22, "CAP_SYS_RESOURCE": 24, "CAP_SYS_TIME": 25, "CAP_MKNOD": 27,
			"CAP_SYSLOG": 34, "CAP_BPF": 39,
		} {
			if caps&(1<<bit) != 0 {
				t.Errorf("a command has %s in %s (%s)", name, set, fields[set])
			}
		}
	}
	if fields["NoNewPrivs"] != "1" || fields["Seccomp"] != "2" {
		t.Errorf("NoNewPrivs %q Seccomp %q, want 1 and 2 (filter)", fields["NoNewPrivs"], fields["Seccomp"])
	}

	hostName, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	sbName := sh(t, sb, "hostname")
	panicBefore := sh(t, sb, "cat /proc/sys/kernel/panic")
	for _, attack := range []string{
		"mount -t tmpfs none /mnt",
		"mount --bind / /mnt",
		"mount -t proc proc /mnt",
		"umount /proc",
		"mount -o remount,rw /sys",
		"unshare -U true", // user namespaces: seccomp
		"unshare -m true",
		"unshare -n true",
		"unshare -p -f true",
		"mknod /tmp/sda b 8 0",
		"mknod /tmp/mem c 1 1",
		"hostname evil",
		"sysctl -w kernel.panic=1",
		"sysctl -w net.ipv4.ip_forward=1",
		"echo 1 > /proc/sys/kernel/panic",
		"echo c > /proc/sysrq-trigger",
		"echo x > /sys/kernel/uevent_helper",
		"head -c 1 /proc/kcore | grep -q .",
		"echo dummy > /tmp/m.ko && insmod /tmp/m.ko",
		"rmmod overlay",
		"ip link add dummy0 type dummy",
		"ip link set lo down",
		"date -s 2001-01-01",
		"reboot -f",
		"nsenter -t 1 -m -n true",
		"dd if=/dev/zero of=/tmp/swap bs=1k count=64 2>/dev/null && mkswap /tmp/swap >/dev/null && swapon /tmp/swap",
	} {
		res := attempt(t, sb, "sh", "-c", attack)
		// busybox date reports a refused clock change and exits 0.
		if res.ExitCode == 0 && !bytes.Contains(res.Stderr, []byte("Operation not permitted")) {
			t.Errorf("%q inside the sandbox succeeded: %s", attack, res.Stdout)
		}
		if bytes.Contains(res.Stderr, []byte("not found")) || res.ExitCode == 127 {
			t.Errorf("%q: the applet is missing, so this proves nothing: %s", attack, res.Stderr)
		}
	}
	// Nothing changed, inside or on the host.
	if out := sh(t, sb, "grep ' /mnt ' /proc/mounts || true"); out != "" {
		t.Errorf("something is mounted on /mnt: %s", out)
	}
	if got := sh(t, sb, "hostname"); got != sbName {
		t.Errorf("the sandbox's hostname changed to %q", got)
	}
	if got, _ := os.Hostname(); got != hostName {
		t.Fatalf("the host's hostname changed to %q", got)
	}
	if got := sh(t, sb, "cat /proc/sys/kernel/panic"); got != panicBefore {
		t.Errorf("kernel.panic changed from %s to %s", panicBefore, got)
	}
	if got := sh(t, sb, "ls /tmp/sda /tmp/mem 2>/dev/null || true"); got != "" {
		t.Errorf("device nodes were made: %q", got)
	}
	if got := sh(t, sb, "ip link show lo"); !strings.Contains(got, "UP") {
		t.Errorf("lo was taken down: %q", got)
	}
	if got := sh(t, sb, "date +%Y"); got == "2001" {
		t.Errorf("the sandbox's clock was set back")
	}
	// PID 1 of a pid namespace gets no SIGKILL from inside it, and a
	// broadcast kill skips it.
	attempt(t, sb, "kill", "-9", "1")
	attempt(t, sb, "kill", "-9", "-1")
	if got := sh(t, sb, "echo alive"); got != "alive" {
		t.Errorf("sandbox after the attacks: %q", got)
	}
}

// One sandbox finds nothing of another: not its files (wherever written),
// its processes' argv or environment, its shared memory, or its listening
// sockets.
func TestAttackSeeOtherSandbox(t *testing.T) {
	p := openProvider(t)
	a := create(t, p, sandbox.Spec{})
	b := create(t, p, sandbox.Spec{})
	mark := secret(t)
	sh(t, a, fmt.Sprintf("for d in /root /tmp /dev/shm /var /etc /bin /; do echo %s > $d/secret-file; done", mark))
	// Processes holding the secret in their argv and environment, one of
	// them a listener on the sandbox's loopback that answers with it.
	res, err := a.Run(testCtx(t), sandbox.Command{
		Args: []string{"sh", "-c", "nc -ll -p 4444 -e echo " + mark + " >/dev/null 2>&1 & sleep 300 >/dev/null 2>&1 &"},
		Env:  map[string]string{"SECRET": mark},
	})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("start A's processes: %v %s", err, res.Stderr)
	}
	// Controls: A sees them and its listener answers A.
	// (awk joins the marker's halves itself: a grep for the marker would
	// find its own argv.)
	procScan := `for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ; do tr '\0' '\n' < $f 2>/dev/null | awk -v f=$f 'index($0, ENVIRON["M1"] ENVIRON["M2"]) { print f; exit }'; done`
	halves := map[string]string{"M1": mark[:10], "M2": mark[10:]}
	res, err = a.Run(testCtx(t), sandbox.Command{Args: []string{"sh", "-c", procScan}, Env: halves})
	if err != nil || strings.Count(string(res.Stdout), "/proc/") < 3 {
		// nc's argv and environment, sleep's environment.
		t.Fatalf("control: A's own processes show the secret in %q (%v), want at least 3 files, so this test proves nothing", res.Stdout, err)
	}
	if got := sh(t, a, "for i in 1 2 3 4 5 6 7 8 9 10; do nc -w 1 127.0.0.1 4444 </dev/null && break; sleep 0.2; done"); got != mark {
		t.Fatalf("control: A's listener answered A with %q", got)
	}

	// Every small file on the sandbox's own file systems (the image's busybox
	// links would make a full grep take seconds), the processes, shared
	// memory, the loopback port. The marker is passed in two halves, so
	// that B's own argv and environment do not hold it.
	scan := `find / /dev/shm /dev/mqueue -xdev -type f -size -64k -exec grep -l "$M1$M2" {} + 2>/dev/null; ` +
		// awk joins the halves itself: a grep given "$M1$M2" would carry the
		// whole marker in its own argv, which the cat beside it may read.
		`cat /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | awk 'index($0, ENVIRON["M1"] ENVIRON["M2"])'; ` +
		`ls /dev/shm; nc -w 2 127.0.0.1 4444 </dev/null; true`
	res, err = b.Run(testCtx(t), sandbox.Command{Args: []string{"sh", "-c", scan}, Env: halves})
	if err != nil {
		t.Fatal(err)
	}
	if out := string(res.Stdout); strings.Contains(out, mark) || strings.Contains(out, "secret-file") {
		t.Errorf("B finds A's secret:\n%s", out)
	}
	// The control for the scan: run in A, it finds the files.
	res, err = a.Run(testCtx(t), sandbox.Command{Args: []string{"sh", "-c", scan}, Env: halves})
	if err != nil || strings.Count(string(res.Stdout), "secret-file") < 7 {
		t.Errorf("control: the scan in A finds %q (%v), want its 7 secret files", res.Stdout, err)
	}
}
