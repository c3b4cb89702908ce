package modaltest

import (
	"net"
	"regexp"
	"strings"

	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// hostname is a DNS name, with the wildcard prefix "*." Modal allows.
var hostname = regexp.MustCompile(`^(\*\.)?([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)*[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$`)

// checkNetworkAccess refuses an outbound policy Modal would: allowlist
// entries that are not CIDRs or domain names, and entries outside
// allowlist mode. The fake records the policy (SandboxState.Definition)
// but enforces none of it: its commands share the host's network.
func checkNetworkAccess(na *pb.NetworkAccess) error {
	if na == nil {
		return nil
	}
	cidrs, domains := na.GetAllowedCidrs(), na.GetAllowedDomains()
	switch na.GetNetworkAccessType() {
	case pb.NetworkAccess_ALLOWLIST:
	case pb.NetworkAccess_UNSPECIFIED, pb.NetworkAccess_OPEN, pb.NetworkAccess_BLOCKED:
		if len(cidrs)+len(domains) > 0 {
			return status.Error(codes.InvalidArgument, "allowed CIDRs and domains need the allowlist network access type")
		}
		return nil
	default:
		return status.Errorf(codes.InvalidArgument, "unknown network access type %d", na.GetNetworkAccessType())
	}
	for _, c := range cidrs {
		if _, _, err := net.ParseCIDR(c); err != nil {
			return status.Errorf(codes.InvalidArgument, "invalid CIDR in the outbound allowlist: %s", short(c))
		}
	}
	for _, d := range domains {
		if len(d) > 253 || !hostname.MatchString(strings.TrimSuffix(d, ".")) {
			return status.Errorf(codes.InvalidArgument, "invalid domain in the outbound allowlist: %s", short(d))
		}
	}
	return nil
}
