package image

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"code.dny.dev/ssrf"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// A guarded pull (PullOptions.Policy) is one a remote client aimed: each
// of its connections is checked where it is dialled, and its failures say
// nothing the registry said.

// addrGuard knows the special-purpose ranges (IANA's registries: loopback,
// private, link-local, shared, documentation, multicast, reserved, and in
// IPv6 everything outside global unicast, NAT64 and 6to4 included). Ports
// are the policy's business, not its.
var addrGuard = ssrf.New(ssrf.WithAnyPort(), ssrf.WithAnyNetwork())

// checkAddr says why a guarded pull may not dial ip, or nil when it is
// public. An IPv4-mapped IPv6 address reaches its IPv4 address, so it is
// judged as that; a zone does not change where an address goes.
func checkAddr(ip netip.Addr) error {
	if !ip.IsValid() {
		return errors.New("no address")
	}
	return addrGuard.SafeAddr(ip.Unmap().WithZone(""))
}

// refusedError is a connection a guarded pull did not make.
type refusedError struct {
	host string     // as the request named it
	addr netip.Addr // what it resolved to
	why  error
}

func (e *refusedError) Error() string {
	if e.host == e.addr.String() {
		return fmt.Sprintf("connection to %s refused: %v", e.host, e.why)
	}
	return fmt.Sprintf("connection to %s (%s) refused: %v", e.host, e.addr, e.why)
}

// dialGuard dials a guarded pull's connections. A registry the policy
// allows is dialled as named. Any other name is resolved once, every
// address it has is checked, and the checked addresses are dialled, never
// the name again: an answer that changes between a check and a connect
// (DNS rebinding) has no second lookup to change.
type dialGuard struct {
	policy   *driver.PullPolicy
	resolver *net.Resolver
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (g *dialGuard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if g.policy.Allows(host, port) {
		return g.dial(ctx, network, addr)
	}
	ips, err := g.lookup(ctx, network, host)
	if err != nil {
		return nil, err
	}
	for _, ip := range ips { // one bad address refuses the name: no public registry has one
		if err := checkAddr(ip); err != nil {
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "%w", &refusedError{host: host, addr: ip, why: err})
		}
	}
	var errs []error
	for _, ip := range ips {
		c, err := g.dial(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func (g *dialGuard) lookup(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	family := "ip"
	switch network {
	case "tcp4":
		family = "ip4"
	case "tcp6":
		family = "ip6"
	}
	ips, err := g.resolver.LookupNetIP(ctx, family, host)
	if err == nil && len(ips) == 0 {
		err = &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	return ips, err
}

// guardedTransport is the store's transport for one guarded pull: the
// base's settings, but direct (a proxy would make the connections the
// guard has to see), every dial through a dialGuard, and plain HTTP only
// to the policy's registries and the store's InsecureRegistries. The
// caller closes its idle connections when the pull ends.
func (s *Store) guardedTransport(p *driver.PullPolicy) (*http.Transport, http.RoundTripper, error) {
	base, ok := s.base.(*http.Transport)
	if !ok {
		return nil, nil, errdefs.Errorf(errdefs.NotSupported, "a client's pull needs the store's transport to be an *http.Transport, to guard its dials; it is %T", s.base)
	}
	t := base.Clone()
	dial := t.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	//lint:ignore SA1019 the deprecated dial hooks are cleared: set, they would dial past the guard
	t.Proxy, t.Dial, t.DialTLS, t.DialTLSContext = nil, nil, nil, nil
	t.DialContext = (&dialGuard{policy: p, resolver: s.resolver, dial: dial}).DialContext
	return t, &httpGuard{base: t, allowed: func(host string) bool {
		return s.insecure[host] || p.Allows(hostPort(host, "80"))
	}, rule: "a client's pull may use it only to the registries the policy allows and Options.InsecureRegistries"}, nil
}

// hostPort splits a URL's host, which may lack its port.
func hostPort(hostport, defaultPort string) (string, string) {
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return h, p
	}
	return hostport, defaultPort
}

// PullError is a guarded pull's failure as the client that aimed it may
// read it: the reference and what kind of failure, never what the
// registry answered (the body of whatever service the client aimed the
// pull at) nor the addresses a name resolved to. Detail holds all of
// that, for the operator's log; errors.Is and As reach the class and
// Detail.
type PullError struct {
	Ref    string
	Class  errdefs.Class
	Detail error
	why    string
}

func (e *PullError) Error() string { return "pull " + e.Ref + ": " + e.why }

func (e *PullError) Unwrap() []error {
	if s := e.Class.Sentinel(); s != nil {
		return []error{s, e.Detail}
	}
	return []error{e.Detail}
}

// clientError turns a guarded pull's error into a PullError.
func clientError(ref string, err error) error {
	pe := &PullError{Ref: ref, Class: errdefs.ClassOf(err), Detail: err}
	var re *refusedError
	switch {
	case errors.As(err, &re):
		pe.why = "refused: the registry's address is not public (loopback, private, link-local or metadata) and this server does not allow that registry"
	case errors.Is(err, context.Canceled):
		pe.why = "canceled"
	default:
		pe.why = classWhy[pe.Class]
	}
	return pe
}

var classWhy = map[errdefs.Class]string{
	errdefs.Unknown:           "failed",
	errdefs.NotFound:          "the registry has no such image",
	errdefs.Unauthenticated:   "the registry refused access (this server holds no credentials for it)",
	errdefs.ResourceExhausted: "the registry is limiting requests; try again later",
	errdefs.Unavailable:       "the registry could not be reached, or failed",
	errdefs.DeadlineExceeded:  "timed out",
	errdefs.NotSupported:      "refused: plain HTTP is allowed only to registries this server allows",
	errdefs.InvalidArgument:   "the image is not valid",
	errdefs.AlreadyExists:     "failed",
}
