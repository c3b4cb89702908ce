package modal

import (
	"net"
	"regexp"
	"strings"

	"github.com/berth-sh/berth/sandbox/types"
)

// hostname is a DNS name, with the wildcard prefix "*." that Modal's
// domain allowlist takes.
var hostname = regexp.MustCompile(`^(\*\.)?([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)*[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$`)

// allowlists splits a Spec's allowlist into Modal's two: CIDRs (a bare
// address becomes a /32 or /128) and domain names. Both are always sent,
// empty or not: a non-nil list is what puts Modal in allowlist mode, and
// an empty one allows nothing of its kind.
func allowlists(allow []string) (cidrs, domains []string, err error) {
	cidrs, domains = []string{}, []string{}
	for _, a := range allow {
		switch {
		case strings.Contains(a, "/"):
			if _, _, err := net.ParseCIDR(a); err != nil {
				return nil, nil, types.Errorf(types.InvalidArgument, "network allowlist entry %q is not a CIDR", a)
			}
			cidrs = append(cidrs, a)
		case net.ParseIP(a) != nil:
			bits := "/32"
			if strings.Contains(a, ":") {
				bits = "/128"
			}
			cidrs = append(cidrs, a+bits)
		case len(a) <= 253 && hostname.MatchString(a):
			domains = append(domains, strings.ToLower(a))
		default:
			return nil, nil, types.Errorf(types.InvalidArgument, "network allowlist entry %q is neither a domain name nor a CIDR", a)
		}
	}
	return cidrs, domains, nil
}
