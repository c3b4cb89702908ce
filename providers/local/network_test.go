package local_test

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"

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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("host-loopback-reached\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	pub := create(t, p, sandbox.Spec{Network: sandbox.Network{Mode: sandbox.NetworkPublic}})
	if got := sh(t, pub, "ls /sys/class/net | tr '\\n' ' '"); strings.TrimSpace(got) != "lo tap0" {
		t.Errorf("network public has interfaces %q, want lo tap0", got)
	}
	res, err := pub.Run(testCtx(t), sandbox.Command{Args: []string{"sh", "-c", fmt.Sprintf("nc -w 2 10.0.2.2 %d </dev/null", port)}})
	if err != nil || strings.Contains(string(res.Stdout), "host-loopback-reached") || res.ExitCode == 127 {
		t.Errorf("reached the host's loopback from a public sandbox: exit %d %q %v", res.ExitCode, res.Stdout, err)
	}
}
