package container

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// The filter rule by rule, in a network namespace of the test's own whose
// tap0 is routed like slirp4netns's: a packet the filter
// lets through leaves by tap0 (its transmit counter grows by one), a refused
// one does not and its send fails. Each case is one packet, so no case
// waits on a timeout.
func TestEgressFilterRules(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip: apt-get install iproute2")
	}
	ns := fmt.Sprintf("berth-egress-%d", os.Getpid())
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", ns, err, out)
		}
	})
	fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	host := []netip.Addr{
		netip.MustParseAddr("192.0.2.77"),
		netip.MustParseAddr("192.0.2.77"),   // on two interfaces
		netip.MustParseAddr("169.254.10.1"), // in blockedNets already
		netip.MustParseAddr("2001:db8:77::1"),
	}
	// Filter first, as startSlirp does: tap0 is never up unfiltered.
	if err := installEgress(fd, host); err != nil {
		t.Fatal(err)
	}
	ip("link", "set", "lo", "up")
	// tap0 is one end of a veth pair whose other end goes nowhere; fixed
	// neighbours let packets out with no ARP or neighbour discovery.
	ip("link", "add", "tap0", "type", "veth", "peer", "name", "tap0p")
	ip("addr", "add", "10.0.2.100/24", "dev", "tap0")
	ip("-6", "addr", "add", "2001:db8:1::100/64", "dev", "tap0", "nodad")
	ip("link", "set", "tap0p", "up")
	ip("link", "set", "tap0", "up")
	ip("route", "add", "default", "via", "10.0.2.2")
	ip("-6", "route", "add", "default", "via", "2001:db8:1::2")
	for _, a := range []string{"10.0.2.2", "10.0.2.3", "10.0.2.42", "2001:db8:1::2"} {
		ip("neigh", "add", a, "lladdr", "02:00:00:00:00:02", "dev", "tap0", "nud", "permanent")
	}

	cases := []struct {
		proto string // udp or tcp
		to    string
		out   bool // leaves by tap0
		errno error
	}{
		{"udp", "198.51.100.7:53", true, nil},    // the internet
		{"udp", "10.0.2.3:53", true, nil},        // slirp's DNS forwarder
		{"tcp", "10.0.2.3:53", true, nil},        // DNS over TCP
		{"tcp", "198.51.100.7:443", true, nil},   // the internet, TCP
		{"udp", "[2001:db8:5::7]:53", true, nil}, // the internet, IPv6
		{"udp", "127.0.0.1:9", false, nil},       // the container's loopback
		{"udp", "10.0.2.100:9", false, nil},      // the container's own address
		{"udp", "192.0.2.77:9", false, unix.EPERM},
		{"tcp", "192.0.2.77:22", false, nil},
		{"udp", "[2001:db8:77::1]:9", false, unix.EPERM},
		{"udp", "10.0.2.2:53", false, unix.EPERM}, // slirp's host: the host's loopback
		{"tcp", "10.0.2.2:22", false, nil},
		{"udp", "10.0.2.3:9", false, unix.EPERM}, // the forwarder on another port
		{"tcp", "10.0.2.3:22", false, nil},
		{"udp", "10.0.2.42:9", false, unix.EPERM}, // another alias of the host
		{"udp", "169.254.169.254:80", false, unix.EPERM},
		{"tcp", "169.254.169.254:80", false, nil},
		{"udp", "224.0.0.251:5353", false, unix.EPERM},
		{"udp", "255.255.255.255:67", false, unix.EPERM},
		{"udp", "0.1.2.3:9", false, unix.EPERM},
		{"udp", "[fe80::1%tap0]:9", false, unix.EPERM},
		{"udp", "[ff02::1%tap0]:9", false, unix.EPERM},
	}
	inNetns(t, fd, func() {
		for _, c := range cases {
			to := netip.MustParseAddrPort(c.to)
			before := txPackets(t)
			var err error
			if c.proto == "udp" {
				err = sendUDP(to)
			} else {
				err = startTCP(to)
			}
			if got := txPackets(t) - before; got != map[bool]int{true: 1, false: 0}[c.out] {
				t.Errorf("%s to %s: %d packets left by tap0, want out=%v", c.proto, c.to, got, c.out)
			}
			if c.errno != nil && !errors.Is(err, c.errno) || c.errno == nil && err != nil {
				t.Errorf("%s to %s: %v, want %v", c.proto, c.to, err, c.errno)
			}
		}
		// A refused connect fails at once, refused, rather than retry.
		if err := connectTCP(netip.MustParseAddrPort("192.0.2.77:22")); !errors.Is(err, unix.ECONNREFUSED) {
			t.Errorf("connect to the host's address: %v, want ECONNREFUSED", err)
		}
	})
}

// The filter is never loaded into the host's own network namespace.
func TestEgressFilterRefusesHostNamespace(t *testing.T) {
	needRoot(t)
	err := filterEgress(os.Getpid())
	if err == nil || !strings.Contains(err.Error(), "shares the host's network namespace") {
		t.Fatalf("filterEgress(own pid) = %v, want a refusal", err)
	}
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListTableOfFamily(egressTable, nftables.TableFamilyINet); err == nil {
		t.Fatalf("table %s exists in the host's namespace", egressTable)
	}
}

// inNetns runs fn on a thread in the network namespace fd. The thread is
// never unlocked: it ends with its goroutine rather than run others there.
func inNetns(t *testing.T, fd int, fn func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			done <- err
			return
		}
		fn()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatalf("setns: %v", err)
	}
}

// txPackets reads tap0's transmit counter in the calling thread's network
// namespace.
func txPackets(t *testing.T) int {
	b, err := os.ReadFile("/proc/thread-self/net/dev")
	if err != nil {
		t.Errorf("read net/dev: %v", err)
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, counters, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) != "tap0" {
			continue
		}
		f := strings.Fields(counters)
		if len(f) < 10 {
			break
		}
		n, err := strconv.Atoi(f[9]) // receive has 8 fields; then transmit bytes, packets
		if err != nil {
			break
		}
		return n
	}
	t.Errorf("no tap0 counters in %s", b)
	return -1
}

// sockaddr is to as a socket address, with its zone as the interface.
func sockaddr(to netip.AddrPort) (int, unix.Sockaddr) {
	if to.Addr().Is4() {
		return unix.AF_INET, &unix.SockaddrInet4{Port: int(to.Port()), Addr: to.Addr().As4()}
	}
	sa := &unix.SockaddrInet6{Port: int(to.Port()), Addr: to.Addr().As16()}
	if z := to.Addr().Zone(); z != "" {
		// net's netlink socket is made on this thread, in its namespace.
		if ifi, err := net.InterfaceByName(z); err == nil {
			sa.ZoneId = uint32(ifi.Index)
		}
	}
	return unix.AF_INET6, sa
}

// sendUDP sends one datagram (broadcast allowed), the send's error as is.
func sendUDP(to netip.AddrPort) error {
	fam, sa := sockaddr(to)
	s, err := unix.Socket(fam, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	if err := unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_BROADCAST, 1); err != nil {
		return err
	}
	return unix.Sendto(s, []byte("x"), 0, sa)
}

// startTCP sends one SYN: a non-blocking connect, closed before any answer
// could matter. EINPROGRESS is no error.
func startTCP(to netip.AddrPort) error {
	fam, sa := sockaddr(to)
	s, err := unix.Socket(fam, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	if err := unix.Connect(s, sa); err != nil && err != unix.EINPROGRESS {
		return err
	}
	return nil
}

// connectTCP is a blocking connect, bounded so that a filter that dropped
// rather than refused fails the test instead of hanging it.
func connectTCP(to netip.AddrPort) error {
	fam, sa := sockaddr(to)
	s, err := unix.Socket(fam, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	tv := unix.NsecToTimeval((10 * time.Second).Nanoseconds())
	if err := unix.SetsockoptTimeval(s, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		return err
	}
	return unix.Connect(s, sa)
}
