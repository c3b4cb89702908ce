package container

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

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

// The attack: slirp4netns connect()s from the host's network namespace, so
// a public container that dials one of the host's own non-loopback
// addresses reaches the host's services on it, and one that dials a
// link-local address reaches what the host reaches there (a cloud's
// metadata service at 169.254.169.254). farNet stands in for both: the
// host side of its veth is an address of the host that exists only for
// this test, and the host routes a link-local address to the far side.
// The far side's own address is the control: a machine beyond the host,
// which a public container must still reach.
func TestNetworkPublicHostAddressesUnreachable(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("slirp4netns"); err != nil {
		t.Skip("needs slirp4netns: apt-get install slirp4netns")
	}
	far := newFarNet(t, 7)
	farPort := far.listen(t, "far-reached")
	hostPort := listenMarker(t, far.host, "host-reached")
	// The host's other non-loopback addresses (eth0's and the like), each
	// with a listener of its own.
	others := map[string]int{}
	for _, a := range hostIPv4(t) {
		if a != far.host {
			others[a] = listenMarker(t, a, "host-reached")
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
	if out := dial(far.peer, farPort); !strings.Contains(out, "far-reached") {
		t.Fatalf("an address beyond the host is not reached through slirp: %q", out)
	}
	if out := dial(far.host, hostPort); strings.Contains(out, "host-reached") {
		t.Errorf("reached the host's own address %s: %q", far.host, out)
	}
	if out := dial(far.link, farPort); strings.Contains(out, "far-reached") {
		t.Errorf("reached link-local %s through the host: %q", far.link, out)
	}
	for a, port := range others {
		if out := dial(a, port); strings.Contains(out, "host-reached") {
			t.Errorf("reached the host's own address %s: %q", a, out)
		}
	}
}

// farNet is a network namespace made for one test, joined to the host by a
// veth pair: host is the address of the host's side, peer the far side's,
// and link a link-local address the host routes to the far side.
type farNet struct {
	ns               string
	host, peer, link string
}

// newFarNet makes farNet number n (1-254; one per concurrent test) and
// removes it when the test ends.
func newFarNet(t *testing.T, n int) *farNet {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip: apt-get install iproute2")
	}
	f := &farNet{
		ns:   fmt.Sprintf("berth-far-%d-%d", os.Getpid(), n),
		host: fmt.Sprintf("10.213.%d.1", n),
		peer: fmt.Sprintf("10.213.%d.2", n),
		link: fmt.Sprintf("169.254.213.%d", n),
	}
	hostIf := fmt.Sprintf("bf%d-%d", n, os.Getpid()%1000000)
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", f.ns)
	t.Cleanup(func() {
		// Deleting the host side deletes its peer; the namespace goes
		// once the listeners in it are closed (cleanups run in reverse).
		exec.Command("ip", "link", "del", hostIf).Run()
		if out, err := exec.Command("ip", "netns", "del", f.ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", f.ns, err, out)
		}
	})
	ip("link", "add", hostIf, "type", "veth", "peer", "name", "far0", "netns", f.ns)
	ip("addr", "add", f.host+"/30", "dev", hostIf)
	ip("link", "set", hostIf, "up")
	ip("route", "add", f.link+"/32", "dev", hostIf)
	ip("-n", f.ns, "addr", "add", f.peer+"/30", "dev", "far0")
	ip("-n", f.ns, "addr", "add", f.link+"/32", "dev", "far0")
	ip("-n", f.ns, "link", "set", "far0", "up")
	return f
}

// listen serves marker on every address of the far side, on one port.
func (f *farNet) listen(t *testing.T, marker string) int {
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
		fd, err := unix.Open("/run/netns/"+f.ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
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
		t.Fatalf("listen in %s: %v", f.ns, res.err)
	}
	return serveMarker(t, res.ln, marker)
}

// listenMarker serves marker on the host at addr.
func listenMarker(t *testing.T, addr, marker string) int {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	return serveMarker(t, ln, marker)
}

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

// hostIPv4 lists the host's IPv4 addresses other than loopback.
func hostIPv4(t *testing.T) []string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			out = append(out, n.IP.String())
		}
	}
	return out
}
