package nettest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Serve greets every connection to ln with marker and a newline until the
// test ends, so a sandbox that reaches it prints the marker; it returns
// ln's port.
func Serve(t testing.TB, ln net.Listener, marker string) int {
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

// Listen serves marker on a TCP port of the host at addr (an IP, or
// "0.0.0.0" for all) and returns the port.
func Listen(t testing.TB, addr, marker string) int {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	return Serve(t, ln, marker)
}

// HostIPv4 lists the host's IPv4 addresses other than loopback.
func HostIPv4(t testing.TB) []string {
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

// Far is a network namespace made for one test, joined to the host by a
// veth pair: Host is the address of the host's side (an address of the
// host that exists only for the test), Peer the far side's (a machine
// beyond the host), and Link a link-local address the host routes to the
// far side (as clouds route 169.254.169.254 to their metadata service).
type Far struct {
	NS               string
	Host, Peer, Link string
}

// NewFar makes Far number n (1-254, one per concurrent test: its addresses
// are 10.213.n.1/30, 10.213.n.2/30 and 169.254.213.n) and removes it when
// the test ends. It skips without the ip command.
func NewFar(t testing.TB, n int) *Far {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip: apt-get install iproute2")
	}
	f := &Far{
		NS:   fmt.Sprintf("berth-far-%d-%d", os.Getpid(), n),
		Host: fmt.Sprintf("10.213.%d.1", n),
		Peer: fmt.Sprintf("10.213.%d.2", n),
		Link: fmt.Sprintf("169.254.213.%d", n),
	}
	hostIf := fmt.Sprintf("bf%d-%d", n, os.Getpid()%1000000)
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", f.NS)
	t.Cleanup(func() {
		// Deleting the host side deletes its peer; the namespace goes
		// once the listeners in it are closed (cleanups run in reverse).
		exec.Command("ip", "link", "del", hostIf).Run()
		if out, err := exec.Command("ip", "netns", "del", f.NS).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", f.NS, err, out)
		}
	})
	ip("link", "add", hostIf, "type", "veth", "peer", "name", "far0", "netns", f.NS)
	ip("addr", "add", f.Host+"/30", "dev", hostIf)
	ip("link", "set", hostIf, "up")
	ip("route", "add", f.Link+"/32", "dev", hostIf)
	ip("-n", f.NS, "addr", "add", f.Peer+"/30", "dev", "far0")
	ip("-n", f.NS, "addr", "add", f.Link+"/32", "dev", "far0")
	ip("-n", f.NS, "link", "set", "far0", "up")
	return f
}

// Listen serves marker on every address of the far side, on one port.
func (f *Far) Listen(t testing.TB, marker string) int {
	t.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	var listen func()
	listen = func() {
		// The thread enters the namespace and is never unlocked: it ends
		// with this goroutine rather than run others in the wrong one.
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// Never the main thread: Go parks a locked main thread when
			// its goroutine ends instead of ending it, and the process's
			// /proc/self/net (the tests' view of the host's sockets) would
			// show the far namespace for good. Start again on another
			// thread; this one, still locked, is parked when the goroutine
			// ends, in the host's namespace.
			go listen()
			return
		}
		fd, err := unix.Open("/run/netns/"+f.NS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
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
	}
	go listen()
	res := <-ch
	if res.err != nil {
		t.Fatalf("listen in %s: %v", f.NS, res.err)
	}
	return Serve(t, res.ln, marker)
}

// FreePort is a loopback port nothing listens on now, for a server that
// will listen on this host's network (the cloud fakes' sandboxes share it).
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Get returns the body (up to 1 MiB) of a GET of url, and an error naming
// the status when it is not 200.
func Get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return string(b), err
}
