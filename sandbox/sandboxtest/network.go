package sandboxtest

import (
	"testing"

	"github.com/berth-sh/berth/sandbox"
)

var networkCases = []testCase{
	{name: "allowlist", run: testAllowlist},
	{name: "allowlist-invalid-entries", run: testAllowlistInvalid},
}

// allowed is an allowlist of each kind of entry: a CIDR, a bare address
// (documentation ranges, RFC 5737) and a host name. The name is localhost
// (RFC 2606), which resolves on a machine without DNS too: a provider that
// enforces by address (Kubernetes NetworkPolicy) resolves names at create.
var allowed = []string{"198.51.100.0/24", "192.0.2.1", "localhost"}

// testAllowlist: with the allowlist network mode in Capabilities, a
// sandbox whose egress is limited to an allowlist of CIDRs, addresses and
// domains is made and runs commands; without it, such a Spec is refused
// as NotSupported before anything is made. (What the allowlist lets
// through is the provider's own test's job: the suite has no outside
// address to reach.)
func testAllowlist(t *testing.T, h Harness) {
	p := open(t, h)
	net := sandbox.Network{Mode: sandbox.NetworkAllowlist, Allow: allowed}
	if !p.Capabilities().Supports(sandbox.NetworkAllowlist) {
		spec := h.Spec()
		spec.Network = net
		_, err := p.Create(testContext(t), spec)
		wantClass(t, "create with an allowlist without the capability", err, sandbox.NotSupported)
		return
	}
	sb := create(t, h, p, func(s *sandbox.Spec) { s.Network = net })
	ctx := testContext(t)
	if res := run(t, ctx, sb, sandbox.Command{Args: sh("printf allowlisted")}); string(res.Stdout) != "allowlisted" {
		t.Fatalf("a command in an allowlisted sandbox: %q (exit %d)", res.Stdout, res.ExitCode)
	}
}

// testAllowlistInvalid: entries that are neither a CIDR, an address nor a
// host name are InvalidArgument, and no sandbox is left.
func testAllowlistInvalid(t *testing.T, h Harness) {
	p := open(t, h)
	if !p.Capabilities().Supports(sandbox.NetworkAllowlist) {
		t.Skip("the provider has no allowlist network mode")
	}
	for _, bad := range []string{"10.0.0.0/33", "exa mple.com", "a,b"} {
		spec := h.Spec()
		spec.Labels = map[string]string{suiteLabel: "1", "berth-suite-case": "allowlist-invalid"}
		spec.Network = sandbox.Network{Mode: sandbox.NetworkAllowlist, Allow: []string{bad}}
		sb, err := p.Create(testContext(t), spec)
		if err == nil {
			_ = sb.Delete(testContext(t))
			_ = sb.Close()
		}
		wantClass(t, "create with allowlist entry "+bad, err, sandbox.InvalidArgument)
	}
}
