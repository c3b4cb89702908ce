package allowlist

import (
	"net"
	"regexp"
	"strings"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// hostname is a DNS name, optionally with the wildcard prefix "*." that
// domain allowlists take.
var hostname = regexp.MustCompile(`^(\*\.)?([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)*[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.?$`)

// Split returns the CIDRs (a bare address becomes a /32 or /128) and the
// domain names (lower case) of entries, never nil. An entry that is
// neither is InvalidArgument, named in the error with the provider's
// prefix.
func Split(provider string, entries []string) (cidrs, domains []string, err error) {
	cidrs, domains = []string{}, []string{}
	for _, a := range entries {
		switch {
		case strings.Contains(a, "/"):
			if _, _, err := net.ParseCIDR(a); err != nil {
				return nil, nil, errdefs.Errorf(errdefs.InvalidArgument, "%s: network allowlist entry %q is not a CIDR", provider, a)
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
			return nil, nil, errdefs.Errorf(errdefs.InvalidArgument, "%s: network allowlist entry %q is neither a domain name nor a CIDR", provider, a)
		}
	}
	return cidrs, domains, nil
}
