package container

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/testing/nettest"
)

func TestNetworkNoneHasOnlyLoopback(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	ct := create(t, r, testConfig(t))
	out, code := execIn(t, r, ct, "ls", "/sys/class/net")
	if code != 0 || strings.Fields(out)[0] != "lo" || len(strings.Fields(out)) != 1 {
		t.Fatalf("interfaces %q (exit %d), want lo only", out, code)
	}
	// Loopback is up and usable inside.
	out, code = execIn(t, r, ct, "ip", "addr", "show", "lo")
	if code != 0 || !strings.Contains(out, "127.0.0.1") || !strings.Contains(out, "UP") {
		t.Fatalf("lo not up: %q", out)
	}
	// The host's loopback is not reachable: a host listener on 127.0.0.1
	// is another namespace's address.
	port := nettest.Listen(t, "127.0.0.1", "host-loopback-reached")
	out, code = execIn(t, r, ct, "sh", "-c", fmt.Sprintf("nc -w 2 127.0.0.1 %d </dev/null", port))
	if strings.Contains(out, "host-loopback-reached") || code == 127 {
		t.Fatalf("nc to the host's 127.0.0.1:%d from a sandbox without network: exit %d %q", port, code, out)
	}
}

func TestHostProcessesInvisible(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	ct := create(t, r, testConfig(t))
	out, _ := execIn(t, r, ct, "sh", "-c", "ls -d /proc/[0-9]*")
	pids := strings.Fields(out)
	// init (1), the exec'd shell and ls: nothing of the host.
	if len(pids) > 4 {
		t.Fatalf("sandbox sees %d processes: %v", len(pids), pids)
	}
	host := "/proc/" + strconv.Itoa(os.Getpid())
	if o, code := execIn(t, r, ct, "cat", host+"/cmdline"); code == 0 && strings.Contains(o, "container.test") {
		t.Fatalf("sandbox reads the host test process: %q", o)
	}
}

func TestPrivilegesDropped(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	ct := create(t, r, testConfig(t))
	status, err := os.ReadFile("/proc/" + strconv.Itoa(ct.Pid()) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	capEff, err := strconv.ParseUint(fields["CapEff"], 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	for name, bit := range map[string]uint{
		"CAP_SYS_ADMIN": 21, "CAP_NET_ADMIN": 12, "CAP_SYS_PTRACE": 19, "CAP_SYS_MODULE": 16,
		"CAP_NET_RAW": 13, "CAP_SYS_RAWIO": 17, "CAP_DAC_READ_SEARCH": 2, "CAP_SYS_TIME": 25,
		"CAP_MKNOD": 27, "CAP_BPF": 39,
	} {
		if capEff&(1<<bit) != 0 {
			t.Errorf("init has %s (CapEff %s)", name, fields["CapEff"])
		}
	}
	if fields["NoNewPrivs"] != "1" {
		t.Errorf("NoNewPrivs %q", fields["NoNewPrivs"])
	}
	if fields["Seccomp"] != "2" {
		t.Errorf("Seccomp %q, want 2 (filter)", fields["Seccomp"])
	}

	for _, attack := range [][]string{
		{"mount", "-t", "tmpfs", "none", "/mnt"},
		{"sh", "-c", "echo 1 > /proc/sys/kernel/panic"},
		{"sh", "-c", "echo c > /proc/sysrq-trigger"},
		{"head", "-c", "1", "/proc/kcore"},
		{"mknod", "/tmp/sda", "b", "8", "0"},
		{"sh", "-c", "echo x > /sys/kernel/uevent_helper"},
		{"hostname", "evil"},
	} {
		out, code := execIn(t, r, ct, attack...)
		if code == 0 || code == 127 {
			t.Errorf("%v inside the sandbox: exit %d %q", attack, code, out)
		}
	}
	if o, _ := exec.Command("hostname").Output(); strings.TrimSpace(string(o)) == "evil" {
		t.Fatal("sandbox changed the host's hostname")
	}
}

func TestSandboxesCannotSeeEachOther(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	a := create(t, r, testConfig(t))
	b := create(t, r, testConfig(t))
	if _, code := execIn(t, r, a, "sh", "-c", "echo secret > /root/a.txt"); code != 0 {
		t.Fatal("write in a failed")
	}
	if out, code := execIn(t, r, b, "cat", "/root/a.txt"); code == 0 {
		t.Fatalf("b reads a's file: %q", out)
	}
	// The shared lower dir was not written either.
	if _, err := os.Stat(busyboxRootfs(t) + "/root/a.txt"); !os.IsNotExist(err) {
		t.Fatalf("write went to the shared image layer: %v", err)
	}
}

func TestSeccompBlocksUserNamespaces(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	for _, tc := range []struct {
		profile Seccomp
		allowed bool
	}{
		{SeccompNone, true}, // the control: without a filter it works
		{SeccompDefault, false},
		{SeccompDocker, false},
	} {
		name := string(tc.profile)
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			rt := r
			rt.Seccomp = tc.profile
			ct := create(t, rt, testConfig(t))
			out, code := execIn(t, rt, ct, "unshare", "-U", "true")
			if code == 127 {
				t.Fatalf("no unshare applet: %q", out)
			}
			if (code == 0) != tc.allowed {
				t.Fatalf("unshare -U: exit %d %q, want allowed=%v", code, out, tc.allowed)
			}
			// Ordinary work is unaffected: fork, exec, pipes, files.
			if out, code := execIn(t, rt, ct, "sh", "-c", "echo ok | cat > /tmp/f && cat /tmp/f"); code != 0 || out != "ok\n" {
				t.Fatalf("plain shell work: exit %d %q", code, out)
			}
		})
	}
}
