package local_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

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
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip: apt-get install iproute2")
	}
	// Far side 10.213.8.2 and 169.254.213.8, host side 10.213.8.1; the
	// container package's test of the same uses 10.213.7.0/30.
	ns := fmt.Sprintf("berth-far-%d-8", os.Getpid())
	hostIf := fmt.Sprintf("bf8-%d", os.Getpid()%1000000)
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", ns)
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", hostIf).Run() // takes its peer along
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", ns, err, out)
		}
	})
	ip("link", "add", hostIf, "type", "veth", "peer", "name", "far0", "netns", ns)
	ip("addr", "add", "10.213.8.1/30", "dev", hostIf)
	ip("link", "set", hostIf, "up")
	ip("route", "add", "169.254.213.8/32", "dev", hostIf)
	ip("-n", ns, "addr", "add", "10.213.8.2/30", "dev", "far0")
	ip("-n", ns, "addr", "add", "169.254.213.8/32", "dev", "far0")
	ip("-n", ns, "link", "set", "far0", "up")

	farPort := serveMarker(t, listenInNetns(t, ns), "far-reached")
	targets := map[string]int{} // the host's addresses, each with a listener
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			ln, err := net.Listen("tcp", net.JoinHostPort(n.IP.String(), "0"))
			if err != nil {
				t.Fatal(err)
			}
			targets[n.IP.String()] = serveMarker(t, ln, "host-reached")
		}
	}
	if _, ok := targets["10.213.8.1"]; !ok {
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
	if out := dial("10.213.8.2", farPort); !strings.Contains(out, "far-reached") {
		t.Fatalf("an address beyond the host is not reached: %q", out)
	}
	if out := dial("169.254.213.8", farPort); strings.Contains(out, "far-reached") {
		t.Errorf("reached link-local 169.254.213.8 through the host: %q", out)
	}
	for a, port := range targets {
		if out := dial(a, port); strings.Contains(out, "host-reached") {
			t.Errorf("reached the host's address %s: %q", a, out)
		}
	}
}

// listenInNetns listens on a TCP port of every address in the network
// namespace ns (by its ip netns name).
func listenInNetns(t *testing.T, ns string) net.Listener {
	t.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// The thread enters the namespace and is never unlocked: it ends
		// with this goroutine rather than run others in the wrong one.
		runtime.LockOSThread()
		fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			ch <- result{err: err}
			return
		}
		ln, err := net.Listen("tcp4", ":0")
		ch <- result{ln, err}
	}()
	res := <-ch
	if res.err != nil {
		t.Fatalf("listen in %s: %v", ns, res.err)
	}
	return res.ln
}

// serveMarker greets every connection to ln with marker until the test
// ends, and returns ln's port.
func serveMarker(t *testing.T, ln net.Listener, marker string) int {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(marker + "\n"))
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}
