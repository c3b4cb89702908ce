package nettest

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// DNS is a scripted DNS server on loopback UDP, for code that resolves
// names through a *net.Resolver: each name answers its steps in turn, one
// step for each query of a type (A or AAAA), and the last step again once
// they run out; any other name is NXDOMAIN. A name whose answers change
// between queries is how DNS rebinding looks to the resolver.
type DNS struct {
	addr  string
	steps map[string][][]netip.Addr // by fully qualified, lowercase name

	mu   sync.Mutex
	seen map[string]int // "name type" -> queries answered
}

// ServeDNS starts a DNS server answering steps until the test ends.
func ServeDNS(t testing.TB, steps map[string][][]netip.Addr) *DNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	d := &DNS{addr: pc.LocalAddr().String(), steps: map[string][][]netip.Addr{}, seen: map[string]int{}}
	for name, s := range steps {
		d.steps[strings.ToLower(strings.TrimSuffix(name, "."))+"."] = s
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if out, ok := d.answer(buf[:n]); ok {
				_, _ = pc.WriteTo(out, from)
			}
		}
	}()
	return d
}

// Resolver resolves through this server only (not /etc/hosts' names
// either, which it does not know).
func (d *DNS) Resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var nd net.Dialer
		return nd.DialContext(ctx, "udp", d.addr)
	}}
}

// Queries returns how many A queries name got.
func (d *DNS) Queries(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.seen[strings.ToLower(strings.TrimSuffix(name, "."))+". A"]
}

func (d *DNS) answer(q []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil {
		return nil, false
	}
	question, err := p.Question()
	if err != nil {
		return nil, false
	}
	name := strings.ToLower(question.Name.String())
	steps, known := d.steps[name]
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	_ = b.StartQuestions()
	_ = b.Question(question)
	_ = b.StartAnswers()
	if known && (question.Type == dnsmessage.TypeA || question.Type == dnsmessage.TypeAAAA) {
		for _, a := range d.step(name, question.Type, steps) {
			rr := dnsmessage.ResourceHeader{Name: question.Name, Class: dnsmessage.ClassINET, TTL: 0}
			switch {
			case question.Type == dnsmessage.TypeA && a.Is4():
				_ = b.AResource(rr, dnsmessage.AResource{A: a.As4()})
			case question.Type == dnsmessage.TypeAAAA && a.Is6():
				_ = b.AAAAResource(rr, dnsmessage.AAAAResource{AAAA: a.As16()})
			}
		}
	}
	out, err := b.Finish()
	return out, err == nil
}

// step returns the answer of this query of name and type, counting it.
func (d *DNS) step(name string, typ dnsmessage.Type, steps [][]netip.Addr) []netip.Addr {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := name + " " + strings.TrimPrefix(typ.String(), "Type")
	i := min(d.seen[key], len(steps)-1)
	d.seen[key]++
	if i < 0 {
		return nil
	}
	return steps[i]
}
