package container

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/testing/nettest"
	"github.com/berth-sh/berth/sandbox/errdefs"
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
	port := nettest.Listen(t, "127.0.0.1", "host-loopback-reached")
	out, code := execIn(t, r, ct, "sh", "-c", fmt.Sprintf("nc -w 2 10.0.2.2 %d </dev/null", port))
	if strings.Contains(out, "host-loopback-reached") || code == 127 {
		t.Fatalf("reached the host's loopback through slirp: exit %d %q", code, out)
	}

	slirpPid := ct.slirp.cmd.Process.Pid
	deleteGone(t, r, ct)
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
	if errdefs.ClassOf(err) != errdefs.NotSupported || !strings.Contains(err.Error(), "apt-get install slirp4netns") {
		t.Fatalf("err = %v, want NotSupported with an install hint", err)
	}
	assertNoDir(t, c.Dir)
}

// The attack: slirp4netns connect()s from the host's network namespace, so
// a public container that dials one of the host's own non-loopback
// addresses reaches the host's services on it, and one that dials a
// link-local address reaches what the host reaches there (a cloud's
// metadata service at 169.254.169.254). nettest.Far stands in for both: the
// host side of its veth is an address of the host that exists only for
// this test, and the host routes a link-local address to the far side.
// The far side's own address is the control: a machine beyond the host,
// which a public container must still reach.
func TestNetworkPublicHostAddressesUnreachable(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("slirp4netns"); err != nil {
		t.Skip("needs slirp4netns: apt-get install slirp4netns")
	}
	far := nettest.NewFar(t, 7)
	farPort := far.Listen(t, "far-reached")
	hostPort := nettest.Listen(t, far.Host, "host-reached")
	// The host's other non-loopback addresses (eth0's and the like), each
	// with a listener of its own.
	others := map[string]int{}
	for _, a := range nettest.HostIPv4(t) {
		if a != far.Host {
			others[a] = nettest.Listen(t, a, "host-reached")
		}
	}

	r := testRuntime(t)
	c := testConfig(t)
	c.Network = NetworkPublic
	ct := create(t, r, c)
	dial := func(addr string, port int) string {
		out, _ := execIn(t, r, ct, "sh", "-c", fmt.Sprintf("nc -w 2 %s %d </dev/null 2>&1", addr, port))
		return out
	}
	if out := dial(far.Peer, farPort); !strings.Contains(out, "far-reached") {
		t.Fatalf("an address beyond the host is not reached through slirp: %q", out)
	}
	if out := dial(far.Host, hostPort); strings.Contains(out, "host-reached") {
		t.Errorf("reached the host's own address %s: %q", far.Host, out)
	}
	if out := dial(far.Link, farPort); strings.Contains(out, "far-reached") {
		t.Errorf("reached link-local %s through the host: %q", far.Link, out)
	}
	for a, port := range others {
		if out := dial(a, port); strings.Contains(out, "host-reached") {
			t.Errorf("reached the host's own address %s: %q", a, out)
		}
	}
}
