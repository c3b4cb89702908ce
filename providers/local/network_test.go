package local_test

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/testing/nettest"
	"github.com/berth-sh/berth/sandbox"
)

// Network none is loopback alone; public adds slirp4netns's tap0, through
// which the host's own loopback (10.0.2.2) stays unreachable.
func TestNetworks(t *testing.T) {
	p := openProvider(t)
	none := create(t, p, sandbox.Spec{})
	if got := sh(t, none, "ls /sys/class/net | tr '\\n' ' '"); got != "lo" {
		t.Errorf("network none has interfaces %q, want lo alone", got)
	}
	if _, err := exec.LookPath("slirp4netns"); err != nil {
		t.Skip("network public needs slirp4netns: apt-get install slirp4netns")
	}
	port := nettest.Listen(t, "127.0.0.1", "host-loopback-reached")
	pub := create(t, p, sandbox.Spec{Network: sandbox.Network{Mode: sandbox.NetworkPublic}})
	if got := sh(t, pub, "ls /sys/class/net | tr '\\n' ' '"); strings.TrimSpace(got) != "lo tap0" {
		t.Errorf("network public has interfaces %q, want lo tap0", got)
	}
	res, err := pub.Run(testCtx(t), sandbox.Command{Args: []string{"sh", "-c", fmt.Sprintf("nc -w 2 10.0.2.2 %d </dev/null", port)}})
	if err != nil || strings.Contains(string(res.Stdout), "host-loopback-reached") || res.ExitCode == 127 {
		t.Errorf("reached the host's loopback from a public sandbox: exit %d %q %v", res.ExitCode, res.Stdout, err)
	}
}

// The attack on the host through slirp4netns, which connect()s from the
// host's network namespace: a public sandbox dials an address of the host
// other than loopback (the host side of a veth made for this test, and the
// host's own eth0 and the like), and a link-local address the host routes
// onward, as clouds route 169.254.169.254 to their metadata service. All
// are refused; an address beyond the host (the veth's far side) is the
// control, reached as the internet would be.
func TestNetworkPublicHostUnreachable(t *testing.T) {
	p := openProvider(t)
	if _, err := exec.LookPath("slirp4netns"); err != nil {
		t.Skip("network public needs slirp4netns: apt-get install slirp4netns")
	}
	// Far side 10.213.8.2 and 169.254.213.8, host side 10.213.8.1; the
	// container package's test of the same uses 10.213.7.0/30.
	far := nettest.NewFar(t, 8)
	farPort := far.Listen(t, "far-reached")
	targets := map[string]int{} // the host's addresses, each with a listener
	for _, a := range nettest.HostIPv4(t) {
		targets[a] = nettest.Listen(t, a, "host-reached")
	}
	if _, ok := targets[far.Host]; !ok {
		t.Fatalf("the veth's host address is not among the host's: %v", targets)
	}

	pub := create(t, p, sandbox.Spec{Network: sandbox.Network{Mode: sandbox.NetworkPublic}})
	dial := func(addr string, port int) string {
		res, err := pub.Run(testCtx(t), sandbox.Command{Args: []string{"sh", "-c", fmt.Sprintf("nc -w 2 %s %d </dev/null 2>&1", addr, port)}})
		if err != nil {
			t.Fatalf("run nc: %v", err)
		}
		return string(res.Stdout)
	}
	if out := dial(far.Peer, farPort); !strings.Contains(out, "far-reached") {
		t.Fatalf("an address beyond the host is not reached: %q", out)
	}
	if out := dial(far.Link, farPort); strings.Contains(out, "far-reached") {
		t.Errorf("reached link-local %s through the host: %q", far.Link, out)
	}
	for a, port := range targets {
		if out := dial(a, port); strings.Contains(out, "host-reached") {
			t.Errorf("reached the host's address %s: %q", a, out)
		}
	}
}
