package driver

import (
	"github.com/berth-sh/berth/sandbox/errdefs"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// PullPolicy guards the pulls of an image a remote client named (berth
// serve sets it; a nil policy, as the operator's own runs have, leaves
// pulls as they are). A provider that pulls on this host (local) refuses
// every connection of such a pull, redirects included, to an address that
// is not public: loopback, private, link-local (cloud metadata such as
// 169.254.169.254 and fd00:ec2::254), shared (100.64.0.0/10, which holds
// 100.100.100.200), unspecified, multicast and the other special-purpose
// ranges, in any IPv6 form. The check is made on the address each
// connection dials, so a name that answers one address at one moment and
// another later (DNS rebinding) gains nothing. A failure reads as its class
// and the reference only; what the registry answered goes to the
// operator's log. Providers that pull on their own side (e2b, daytona,
// modal, and k8s, whose kubelet pulls) ignore it.
type PullPolicy struct {
	// Allow are the registries the operator trusts, "host" (any port) or
	// "host:port": connections to them skip the address check, and they
	// may be reached over plain HTTP. A redirect from one to another host
	// is checked as any connection is.
	Allow []string
}

// Validate reports an Allow entry that is not host or host:port.
func (p *PullPolicy) Validate() error {
	if p == nil {
		return nil
	}
	for _, a := range p.Allow {
		if _, _, err := parseRegistry(a); err != nil {
			return err
		}
	}
	return nil
}

// Allows reports whether a connection to host and port (a URL's or a
// dial's; port is never empty) goes to a registry of Allow.
func (p *PullPolicy) Allows(host, port string) bool {
	if p == nil {
		return false
	}
	host = canonicalHost(host)
	for _, a := range p.Allow {
		h, pt, err := parseRegistry(a)
		if err == nil && h == host && (pt == "" || pt == port) {
			return true
		}
	}
	return false
}

// Clone returns a copy that shares nothing with p.
func (p *PullPolicy) Clone() *PullPolicy {
	if p == nil {
		return nil
	}
	return &PullPolicy{Allow: append([]string(nil), p.Allow...)}
}

// parseRegistry splits "host", "host:port", "[v6]" or "[v6]:port" into a
// canonical host and its port ("" for any).
func parseRegistry(s string) (host, port string, err error) {
	bad := func(why string) (string, string, error) {
		return "", "", errdefs.Errorf(errdefs.InvalidArgument, "registry %q: %s; want HOST or HOST:PORT", s, why)
	}
	if s == "" || strings.ContainsAny(s, "/@?# \t") {
		return bad("not a host")
	}
	host = s
	if h, pt, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.Atoi(pt)
		if err != nil || n < 1 || n > 65535 {
			return bad("the port is not 1-65535")
		}
		host, port = h, strconv.Itoa(n)
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	} else if _, perr := netip.ParseAddr(s); perr != nil && strings.Contains(s, ":") {
		return bad("the port is missing or the address is not valid")
	}
	if host == "" {
		return bad("the host is empty")
	}
	return canonicalHost(host), port, nil
}

// canonicalHost lowercases a name and writes an address one way
// ("::ffff:7f00:1" and "127.0.0.1" stay apart: they are dialled apart).
func canonicalHost(h string) string {
	h = strings.ToLower(strings.TrimSuffix(strings.Trim(h, "[]"), "."))
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip.String()
	}
	return h
}
