package container

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// The egress filter keeps a public container off the host. slirp4netns
// connect()s from the host's network namespace on the container's behalf,
// so without it a container reaches every service the host offers on its
// own non-loopback addresses, and whatever the host reaches on link-local
// addresses (a cloud's metadata service at 169.254.169.254);
// --disable-host-loopback covers 127.0.0.0/8 alone.
//
// Where: in the container's network namespace, installed from the host
// before slirp4netns attaches, so no packet leaves tap0 unfiltered. The
// namespace belongs to the host's user namespace and the container has no
// CAP_NET_ADMIN there, so it can neither list nor remove the rules.
//
// How: nftables on the output and forward hooks, rather than prohibit
// routes. Since Linux 5.7 an unprivileged process may SO_BINDTODEVICE (and
// always IP_UNICAST_IF), and a route lookup with an output interface set
// that ends in an error falls back to "on link", past any prohibit route
// (`ip route get ADDR oif tap0` shows it).
// The output hook sees every packet after routing, whatever the socket
// asked for; without CAP_NET_RAW the container has no packet sockets to go
// around it. Refused packets are answered at once where a drop would leave
// connect() retrying for minutes: TCP with a reset (ECONNREFUSED; an ICMP
// error reaches a connecting socket while connect() holds it, so it fails
// only at the first retransmit, a second later), the rest with ICMP
// "administratively prohibited" (a UDP send fails with EPERM).
//
// Limits: the host's addresses are read once, when the container is made;
// an address the host gains later is not in the filter.

// egressTable is the nftables table (family inet) in the container's
// network namespace.
const egressTable = "berth_egress"

// slirpNet is slirp4netns's own network. It is all the host: 10.0.2.2 is
// the host's loopback and any other address but the container's own is an
// alias of it, except slirpDNS, which forwards to the host's resolver.
var slirpNet = netip.MustParsePrefix("10.0.2.0/24")

// blockedNets are reached through the host, or are the host, whatever its
// addresses: "this network" (the host's connect() reads 0.0.0.0 as itself),
// link-local (metadata services), and multicast and broadcast (slirp would
// send them from the host, to the host's own listeners too). IPv6 has no
// route out of the container (slirp4netns runs without --enable-ipv6); its
// link-local and multicast are blocked for the day it has one, which would
// need neighbour discovery let through.
var blockedNets = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	slirpNet,
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("255.255.255.255/32"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("ff00::/8"),
}

// filterEgress installs the egress filter in the network namespace of the
// process pid, blocking the host's current addresses.
func filterEgress(pid int) error {
	host, err := hostAddrs()
	if err != nil {
		return fmt.Errorf("egress filter: %w", err)
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return fmt.Errorf("egress filter: %w", err)
	}
	defer ns.Close()
	// Never the host's own: the rules would cut the host off its services.
	nsInfo, err := ns.Stat()
	if err != nil {
		return fmt.Errorf("egress filter: %w", err)
	}
	selfInfo, err := os.Stat("/proc/self/ns/net")
	if err != nil {
		return fmt.Errorf("egress filter: %w", err)
	}
	if os.SameFile(nsInfo, selfInfo) {
		return fmt.Errorf("egress filter: process %d shares the host's network namespace", pid)
	}
	return installEgress(int(ns.Fd()), host)
}

// hostAddrs lists the addresses of the host's interfaces, loopback apart:
// in the container, 127.0.0.1 and ::1 are its own.
func hostAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("host addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if ok && !ip.Unmap().IsLoopback() {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}

// installEgress loads the filter into the network namespace nsFd, with
// host as the host's addresses, in one transaction: all of it or nothing.
func installEgress(nsFd int, host []netip.Addr) error {
	c, err := nftables.New(nftables.WithNetNSFd(nsFd))
	if err != nil {
		return nftError(err)
	}
	tbl := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: egressTable})
	// IDs set here: the library would number sets from a global counter,
	// unguarded against Creates on other goroutines. They name a set
	// within this one transaction only.
	host4 := &nftables.Set{Table: tbl, ID: 1, Name: "host4", KeyType: nftables.TypeIPAddr, Constant: true}
	host6 := &nftables.Set{Table: tbl, ID: 2, Name: "host6", KeyType: nftables.TypeIP6Addr, Constant: true}
	var elems4, elems6 []nftables.SetElement
	seen := map[netip.Addr]bool{}
	for _, a := range host {
		if seen[a] || covered(a) {
			continue
		}
		seen[a] = true
		if a.Is4() {
			elems4 = append(elems4, nftables.SetElement{Key: a.AsSlice()})
		} else {
			elems6 = append(elems6, nftables.SetElement{Key: a.AsSlice()})
		}
	}
	if err := c.AddSet(host4, elems4); err != nil {
		return nftError(err)
	}
	if err := c.AddSet(host6, elems6); err != nil {
		return nftError(err)
	}

	dns := netip.PrefixFrom(netip.MustParseAddr(slirpDNS), 32)
	rules := [][]expr.Any{
		// The container's traffic to itself (its loopback and its own
		// addresses) never leaves it.
		concat(oifIs("lo"), accept()),
		// DNS to slirp's forwarder, on port 53 alone: on any other port
		// slirp would connect to the host's resolver's address, which may
		// be the host itself.
		concat(daddrIs(dns), l4protoIs(unix.IPPROTO_UDP), dportIs(53), accept()),
		concat(daddrIs(dns), l4protoIs(unix.IPPROTO_TCP), dportIs(53), accept()),
		concat(daddrInSet(host4, false), reject()),
		concat(daddrInSet(host6, true), reject()),
	}
	for _, p := range blockedNets {
		rules = append(rules, concat(daddrIs(p), reject()))
	}
	refuse := c.AddChain(&nftables.Chain{Name: "refuse", Table: tbl})
	c.AddRule(&nftables.Rule{Table: tbl, Chain: refuse, Exprs: concat(l4protoIs(unix.IPPROTO_TCP),
		[]expr.Any{&expr.Reject{Type: unix.NFT_REJECT_TCP_RST}})})
	c.AddRule(&nftables.Rule{Table: tbl, Chain: refuse, Exprs: []expr.Any{
		&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED}}})
	policy := nftables.ChainPolicyAccept
	for _, hook := range []struct {
		name string
		hook *nftables.ChainHook
	}{{"output", nftables.ChainHookOutput}, {"forward", nftables.ChainHookForward}} {
		ch := c.AddChain(&nftables.Chain{
			Name: hook.name, Table: tbl, Type: nftables.ChainTypeFilter,
			Hooknum: hook.hook, Priority: nftables.ChainPriorityFilter, Policy: &policy,
		})
		for _, r := range rules {
			c.AddRule(&nftables.Rule{Table: tbl, Chain: ch, Exprs: r})
		}
	}
	if err := c.Flush(); err != nil {
		return nftError(err)
	}
	return nil
}

// nftError classes a kernel without nf_tables (or its inet family, or
// reject) as NotSupported: public networking is refused rather than run
// unfiltered.
func nftError(err error) error {
	if errors.Is(err, syscall.EPROTONOSUPPORT) || errors.Is(err, syscall.EAFNOSUPPORT) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EOPNOTSUPP) {
		return errdefs.Errorf(errdefs.NotSupported, "network public needs nf_tables in the kernel (CONFIG_NF_TABLES, CONFIG_NF_TABLES_INET, CONFIG_NFT_REJECT_INET) to keep the sandbox off the host: %w", err)
	}
	return fmt.Errorf("egress filter: %w", err)
}

// covered reports whether a is in one of blockedNets already.
func covered(a netip.Addr) bool {
	for _, p := range blockedNets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func concat(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// oifIs matches packets leaving through the interface named name.
func oifIs(name string) []expr.Any {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b},
	}
}

// nfproto matches IPv4 or IPv6 packets, so that loading an address from the
// network header reads the right offsets.
func nfproto(v6 bool) []expr.Any {
	p := byte(unix.NFPROTO_IPV4)
	if v6 {
		p = unix.NFPROTO_IPV6
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}},
	}
}

// loadDaddr loads the destination address into register 1.
func loadDaddr(v6 bool) []expr.Any {
	off, n := uint32(16), uint32(4)
	if v6 {
		off, n = 24, 16
	}
	return append(nfproto(v6), &expr.Payload{
		DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n,
	})
}

// daddrIs matches packets to an address in p.
func daddrIs(p netip.Prefix) []expr.Any {
	p = p.Masked()
	v6 := p.Addr().Is6()
	out := loadDaddr(v6)
	n := p.Addr().BitLen() / 8
	if p.Bits() < p.Addr().BitLen() {
		mask := net.CIDRMask(p.Bits(), p.Addr().BitLen())
		out = append(out, &expr.Bitwise{
			SourceRegister: 1, DestRegister: 1, Len: uint32(n),
			Mask: mask, Xor: make([]byte, n),
		})
	}
	return append(out, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Addr().AsSlice()})
}

// daddrInSet matches packets to an address in s.
func daddrInSet(s *nftables.Set, v6 bool) []expr.Any {
	return append(loadDaddr(v6), &expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID})
}

func l4protoIs(proto byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
	}
}

// dportIs matches a TCP or UDP destination port (both at offset 2).
func dportIs(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{byte(port >> 8), byte(port)}},
	}
}

func accept() []expr.Any { return []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}} }

// reject sends the packet to the refuse chain, which answers and drops it.
func reject() []expr.Any {
	return []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: "refuse"}}
}
