package k8s

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/berth-sh/berth/agent/podagent"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// privateRanges are what NetworkPublic never reaches: the cluster, the
// node, link-local (cloud metadata) and the private ranges.
var privateRanges = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10", "127.0.0.0/8"}

// netPolicies makes one NetworkPolicy per distinct network setting, selected
// by the pods' labelNetwork label, never one per sandbox. Each is created at
// most once per process (an AlreadyExists from another is success).
type netPolicies struct {
	p    *Provider
	mu   sync.Mutex
	made map[string]bool
}

// ensure returns the labelNetwork value for n, creating its policy once.
func (n *netPolicies) ensure(ctx context.Context, nw driver.Network) (string, error) {
	np, err := policyFor(nw)
	if err != nil {
		return "", err
	}
	sel := np.Labels[labelNetwork]
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.made[sel] {
		return sel, nil
	}
	_, err = n.p.cs.NetworkingV1().NetworkPolicies(n.p.opts.Namespace).Create(ctx, np, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", n.p.classifyNS(err, "create network policy")
	}
	if n.made == nil {
		n.made = map[string]bool{}
	}
	n.made[sel] = true
	return sel, nil
}

// policyFor builds the policy of a network setting. Ingress: only the
// agent's port (the kubelet's port-forward does not pass through it).
// Egress: none; public: DNS and everything but private ranges; allowlist:
// DNS and the listed CIDRs (host names are resolved once, here: a
// NetworkPolicy holds addresses, not names).
func policyFor(nw driver.Network) (*networkingv1.NetworkPolicy, error) {
	var egress []networkingv1.NetworkPolicyEgressRule
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	dns := intstr.FromInt32(53)
	dnsRule := networkingv1.NetworkPolicyEgressRule{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &dns}, {Protocol: &tcp, Port: &dns}}}
	var key []string
	switch nw.Mode {
	case driver.NetworkNone, "":
		key = []string{"none"}
	case driver.NetworkPublic:
		key = []string{"public"}
		egress = []networkingv1.NetworkPolicyEgressRule{dnsRule, {To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: privateRanges}}}}}
	case driver.NetworkAllowlist:
		cidrs, err := allowCIDRs(nw.Allow)
		if err != nil {
			return nil, err
		}
		key = append([]string{"allow"}, cidrs...)
		var peers []networkingv1.NetworkPolicyPeer
		for _, c := range cidrs {
			peers = append(peers, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: c}})
		}
		egress = []networkingv1.NetworkPolicyEgressRule{dnsRule, {To: peers}}
	default:
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "k8s: network mode %q", nw.Mode)
	}
	sum := sha256.Sum256([]byte(strings.Join(key, "\x00")))
	sel := key[0] + "-" + hex.EncodeToString(sum[:6])
	agentPort := intstr.FromInt32(podagent.Port)
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "berth-net-" + sel, Labels: map[string]string{labelNetwork: sel}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelManaged: "true", labelNetwork: sel}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &agentPort}}}},
			Egress:      egress,
		},
	}, nil
}

// allowCIDRs turns allowlist entries into sorted CIDRs.
func allowCIDRs(allow []string) ([]string, error) {
	var out []string
	for _, a := range allow {
		switch {
		case strings.Contains(a, "/"):
			_, n, err := net.ParseCIDR(a)
			if err != nil {
				return nil, errdefs.Errorf(errdefs.InvalidArgument, "k8s: allowlist entry %q: %w", a, err)
			}
			out = append(out, n.String())
		case net.ParseIP(a) != nil:
			ip := net.ParseIP(a)
			if ip.To4() != nil {
				out = append(out, ip.String()+"/32")
			} else {
				out = append(out, ip.String()+"/128")
			}
		default:
			ips, err := net.LookupIP(a)
			if err != nil {
				return nil, errdefs.Errorf(errdefs.InvalidArgument, "k8s: allowlist host %q does not resolve here: %w", a, err)
			}
			for _, ip := range ips {
				if ip.To4() != nil {
					out = append(out, ip.String()+"/32")
				} else {
					out = append(out, ip.String()+"/128")
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
