package container

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/berth-sh/berth/sandbox/types"
)

func TestNetworkPublicSlirp(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("slirp4netns"); err != nil {
		t.Skip("needs slirp4netns: apt-get install slirp4netns")
	}
	r := testRuntime(t)
	c := testConfig(t)
	c.Network = NetworkPublic
	ct := create(t, r, c)
	out, _ := execIn(t, r, ct, "ls", "/sys/class/net")
	if strings.Join(strings.Fields(out), " ") != "lo tap0" {
		t.Fatalf("interfaces %q, want lo and tap0", out)
	}
	out, _ = execIn(t, r, ct, "ip", "route")
	if !strings.Contains(out, "default via 10.0.2.2") {
		t.Fatalf("no default route through slirp: %q", out)
	}
	if out, _ := execIn(t, r, ct, "cat", "/etc/resolv.conf"); !strings.Contains(out, "nameserver 10.0.2.3") {
		t.Fatalf("resolv.conf %q", out)
	}
	// Host loopback stays closed: 10.0.2.2 would be the host's 127.0.0.1.
	port := hostListener(t, "host-loopback-reached")
	out, code := execIn(t, r, ct, "sh", "-c", fmt.Sprintf("nc -w 2 10.0.2.2 %d </dev/null", port))
	if strings.Contains(out, "host-loopback-reached") || code == 127 {
		t.Fatalf("reached the host's loopback through slirp: exit %d %q", code, out)
	}

	slirpPid := ct.slirp.cmd.Process.Pid
	if err := ct.Delete(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertGone(t, r, ct)
	if _, err := procStartTime(slirpPid); err == nil {
		t.Errorf("slirp4netns %d left running", slirpPid)
	}
}

func TestNetworkPublicWithoutSlirp(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	r.Slirp = "/nonexistent/slirp4netns"
	c := testConfig(t)
	c.Network = NetworkPublic
	_, err := r.Create(context.Background(), c)
	if types.ClassOf(err) != types.NotSupported || !strings.Contains(err.Error(), "apt-get install slirp4netns") {
		t.Fatalf("err = %v, want NotSupported with an install hint", err)
	}
	assertNoDir(t, c.Dir)
}
