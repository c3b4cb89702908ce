package image

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/berth-sh/berth/internal/testing/nettest"
	"github.com/berth-sh/berth/internal/testing/testimage"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// dialRecorder is the store's dialer in the guard's tests: it records
// every address the store asks it for and connects to loopback only, the
// one place a test may reach; anything else fails as an unreachable
// network would, so that no packet leaves the machine even when a guard
// is missing. A name is resolved through resolver, as a plain dialer
// would (that is what reaches it from an unguarded pull).
type dialRecorder struct {
	resolver *net.Resolver
	mu       sync.Mutex
	addrs    []string
}

func (d *dialRecorder) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, addr)
	d.mu.Unlock()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		ips, lerr := d.resolver.LookupNetIP(ctx, "ip4", host)
		if lerr != nil || len(ips) == 0 {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		ip = ips[0]
	}
	if !ip.Unmap().IsLoopback() {
		return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("test dialer: not connecting off this machine")}
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
}

func (d *dialRecorder) seen() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.addrs)
}

// recordedStore is a store whose connections go through a dialRecorder,
// names resolved by dns (nil: the system's).
func recordedStore(t *testing.T, dns *nettest.DNS, opts Options) (*Store, *dialRecorder) {
	t.Helper()
	rec := &dialRecorder{resolver: net.DefaultResolver}
	if dns != nil {
		rec.resolver = dns.Resolver()
		opts.Resolver = dns.Resolver()
	}
	opts.Transport = &http.Transport{DialContext: rec.dial}
	s, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, rec
}

// wantRefused checks a guarded pull's refusal: InvalidArgument, and a
// message that names the reference and nothing more (no address a name
// resolved to, nothing a server answered).
func wantRefused(t *testing.T, ref string, err error) {
	t.Helper()
	var pe *PullError
	want := "pull " + ref + ": refused: the registry's address is not public (loopback, private, link-local or metadata) and this server does not allow that registry"
	if !errors.As(err, &pe) || errdefs.ClassOf(err) != errdefs.InvalidArgument || err.Error() != want {
		t.Fatalf("pull %s: got %v (%T, class %v); want %q", ref, err, err, errdefs.ClassOf(err), want)
	}
}

// TestCheckAddr: the address check refuses every non-public form,
// IPv4-mapped and NAT64 forms of internal IPv4 addresses included, and
// passes public ones (an IPv4-mapped public address is its IPv4 address).
func TestCheckAddr(t *testing.T) {
	refused := []string{
		"127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1", "0.0.0.0", "::", "0.1.2.3",
		"10.0.0.1", "172.16.5.4", "192.168.1.1", "::ffff:10.0.0.1", "fc00::1", "fd12:3456::1",
		"169.254.169.254", "::ffff:169.254.169.254", "fd00:ec2::254", "fe80::1", "fe80::1%eth0",
		"100.64.0.1", "100.100.100.200", "100.127.255.255", "224.0.0.1", "239.1.2.3", "ff02::1",
		"255.255.255.255", "240.0.0.1", "192.0.0.192", "198.18.0.1", "64:ff9b::a9fe:a9fe",
		"64:ff9b::7f00:1", "2002:7f00:1::", "2001::1", "::127.0.0.1", "2001:db8::1",
	}
	for _, s := range refused {
		if err := checkAddr(netip.MustParseAddr(s)); err == nil {
			t.Errorf("%s passes the check", s)
		}
	}
	for _, s := range []string{"8.8.8.8", "1.1.1.1", "::ffff:8.8.8.8", "2606:4700:4700::1111", "100.128.0.1", "172.32.0.1"} {
		if err := checkAddr(netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s is refused: %v", s, err)
		}
	}
	if checkAddr(netip.Addr{}) == nil {
		t.Error("the zero address passes the check")
	}
}

// TestAttackPullInternalAddresses: a client's pull (PullOptions.Policy)
// that names a registry at an internal address, directly, in an IPv6 form
// or through a name that resolves there, is refused before its dialer is
// asked for any connection. On 5553f78 (Pull, no guard) the dialer was
// asked for every one of them: 10.0.0.1:5000, 169.254.169.254:443,
// [fd00:ec2::254]:443, 100.100.100.200:443, 0.0.0.0:PORT and the rest
// (the recorder connected none of those, a real dialer would have), and
// 127.0.0.1:PORT reached the loopback service twice (HTTPS, then plain
// HTTP), whose body, the marker, came back in the error.
func TestAttackPullInternalAddresses(t *testing.T) {
	svc := testimage.ServeInternal(t, "INTERNAL-SECRET-4b1d")
	_, port, _ := net.SplitHostPort(svc.Addr)
	dns := nettest.ServeDNS(t, map[string][][]netip.Addr{
		"metadata.test": {{netip.MustParseAddr("169.254.169.254")}},
		"mixed.test":    {{netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("10.1.2.3")}},
		"ula.test":      {{netip.MustParseAddr("fd00:ec2::254")}},
	})
	s, rec := recordedStore(t, dns, Options{})
	refs := []string{
		"10.0.0.1:5000/x:1", "172.16.0.1/x:1", "192.168.1.1/x:1", "169.254.169.254/latest:1",
		"[fd00:ec2::254]/x:1", "100.100.100.200/x:1", "100.64.0.1/x:1", "[::ffff:169.254.169.254]/x:1",
		"[::ffff:a00:1]/x:1", "[64:ff9b::a9fe:a9fe]/x:1", "224.0.0.1/x:1", "[ff02::1]/x:1",
		"0.0.0.0:" + port + "/x:1", "[::]:" + port + "/x:1", "127.0.0.1:" + port + "/x:1",
		"metadata.test/x:1", "mixed.test/x:1", "ula.test/x:1",
	}
	for _, ref := range refs {
		_, err := s.PullWith(context.Background(), ref, PullOptions{Policy: &driver.PullPolicy{}})
		wantRefused(t, ref, err)
	}
	if got := rec.seen(); len(got) != 0 {
		t.Errorf("the guard let the dialer be asked for %v", got)
	}
	if n := svc.Accepts(); n != 0 {
		t.Errorf("the loopback service accepted %d connections", n)
	}
}

// TestAttackPullDNSRebinding: a name that answers a public address to the
// first lookup and loopback to every later one gains nothing: each
// connection dials the address its own lookup checked (the dialer is
// handed 8.8.8.8, never the name, so it cannot look it up again), and the
// later lookups' loopback is refused. On 5553f78 the dialer was handed
// the name: its second lookup answered 127.0.0.1, the pull connected to
// the loopback service, and the service's body came back in the error.
func TestAttackPullDNSRebinding(t *testing.T) {
	svc := testimage.ServeInternal(t, "INTERNAL-SECRET-9e2c")
	_, port, _ := net.SplitHostPort(svc.Addr)
	dns := nettest.ServeDNS(t, map[string][][]netip.Addr{
		"rebind.test": {{netip.MustParseAddr("8.8.8.8")}, {netip.MustParseAddr("127.0.0.1")}},
	})
	// Plain HTTP allowed by the operator, so that a pull reaching the
	// service would read its body: the guard must hold anyway.
	reg := "rebind.test:" + port
	s, rec := recordedStore(t, dns, Options{InsecureRegistries: []string{reg}})
	for range 2 {
		_, err := s.PullWith(context.Background(), reg+"/x:1", PullOptions{Policy: &driver.PullPolicy{}})
		if err == nil || strings.Contains(err.Error(), svc.Marker) {
			t.Fatalf("pull: %v", err)
		}
	}
	if got, want := rec.seen(), []string{"8.8.8.8:" + port}; !slices.Equal(got, want) {
		t.Errorf("the dialer was asked for %v; want only %v (the checked address of the first lookup)", got, want)
	}
	if dns.Queries("rebind.test") < 2 {
		t.Errorf("rebind.test was looked up %d times; the test needs the later answer asked for", dns.Queries("rebind.test"))
	}
	if n := svc.Accepts(); n != 0 {
		t.Errorf("the loopback service accepted %d connections", n)
	}
}

// TestAttackPullRedirect: a registry the operator allows that redirects
// its blobs to an internal address gets the manifest through, and the
// redirect refused: plain HTTP to a registry it does not allow, and an
// HTTPS dial to loopback. On 5553f78 (no guard; loopback may use plain
// HTTP) the config blob's redirect reached the service both ways, and over
// plain HTTP its body, the marker, came back in the error. The detail
// kept for the log has the redirect's signed query redacted.
func TestAttackPullRedirect(t *testing.T) {
	img := testimage.Image(t, v1.Config{}, testimage.Layer(t, testimage.Entry{Name: "f", Body: "x"}))
	for _, scheme := range []string{"http", "https"} {
		t.Run(scheme, func(t *testing.T) {
			svc := testimage.ServeInternal(t, "INTERNAL-SECRET-77aa")
			reg := testimage.ServeRedirecting(t, map[string]v1.Image{"x:1": img}, scheme+"://"+svc.Addr)
			s := newStore(t)
			_, err := s.PullWith(context.Background(), reg+"/x:1", PullOptions{Policy: &driver.PullPolicy{Allow: []string{reg}}})
			var pe *PullError
			if !errors.As(err, &pe) || strings.Contains(err.Error(), svc.Marker) || strings.Contains(err.Error(), svc.Addr) {
				t.Fatalf("pull: %v", err)
			}
			if n := svc.Accepts(); n != 0 {
				t.Errorf("the redirect reached the service: %d connections", n)
			}
			if strings.Contains(pe.Detail.Error(), testimage.RedirectSignature) {
				t.Errorf("the detail shows the redirect's signed query: %v", pe.Detail)
			}
		})
	}
}

// TestGuardedPullAllowedRegistry: a registry in Allow is pulled from
// although it is on loopback, over plain HTTP, by host:port or by host
// alone; the same registry not in Allow, or allowed on another port, is
// refused; and an allowed registry's error body stays out of the client's
// error (it is in Detail) while the operator's own pull still shows it.
func TestGuardedPullAllowedRegistry(t *testing.T) {
	reg := testimage.Serve(t, map[string]v1.Image{"busybox:1": testimage.Busybox(t)})
	host, _, _ := net.SplitHostPort(reg)
	for _, allow := range [][]string{{reg}, {host}, {"other.example", reg}} {
		s := newStore(t)
		img, err := s.PullWith(context.Background(), reg+"/busybox:1", PullOptions{Policy: &driver.PullPolicy{Allow: allow}})
		if err != nil {
			t.Fatalf("allow %v: %v", allow, err)
		}
		checkBusybox(t, img)
	}
	for _, allow := range [][]string{nil, {host + ":1"}, {"localhost"}} {
		_, err := newStore(t).PullWith(context.Background(), reg+"/busybox:1", PullOptions{Policy: &driver.PullPolicy{Allow: allow}})
		wantRefused(t, reg+"/busybox:1", err)
	}
	if _, err := newStore(t).PullWith(context.Background(), reg+"/busybox:1", PullOptions{Policy: &driver.PullPolicy{Allow: []string{"a/b"}}}); errdefs.ClassOf(err) != errdefs.InvalidArgument {
		t.Errorf("a bad Allow entry: %v", err)
	}

	svc := testimage.ServeInternal(t, "REGISTRY-BODY-5f3e")
	_, err := newStore(t).PullWith(context.Background(), svc.Addr+"/x:1", PullOptions{Policy: &driver.PullPolicy{Allow: []string{svc.Addr}}})
	var pe *PullError
	if !errors.As(err, &pe) || errdefs.ClassOf(err) != errdefs.Unauthenticated || strings.Contains(err.Error(), svc.Marker) {
		t.Fatalf("allowed registry answering 403: %v", err)
	}
	if !strings.Contains(pe.Detail.Error(), svc.Marker) {
		t.Errorf("Detail %q lacks what the registry said", pe.Detail)
	}
	if _, err := newStore(t).Pull(context.Background(), svc.Addr+"/x:1"); err == nil || !strings.Contains(err.Error(), svc.Marker) {
		t.Errorf("the operator's pull: %v; want the registry's answer in it, as before", err)
	}
}

// TestGuardedPullNeedsHTTPTransport: a store whose transport is not an
// *http.Transport cannot guard dials, so a guarded pull is refused
// instead of going out unguarded.
func TestGuardedPullNeedsHTTPTransport(t *testing.T) {
	base := &countingTransport{}
	s, err := Open(t.TempDir(), Options{Transport: base})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.PullWith(context.Background(), "example.com/x:1", PullOptions{Policy: &driver.PullPolicy{}})
	wantClass(t, err, errdefs.NotSupported, "*http.Transport")
	if base.n != 0 {
		t.Errorf("%d requests went out", base.n)
	}
}
