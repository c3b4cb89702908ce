package modal_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/sandbox"
)

// Spec.Ports become Modal's open ports at create: http ones encrypted,
// tcp ones unencrypted. A handle from Connect finds the same tunnels, and
// asking for a port with the other protocol is InvalidArgument.
func TestPortsAtCreate(t *testing.T) {
	srv := serve(t)
	p := sandbox.NewProvider("modal", openDriver(t, srv, nil))
	defer p.Close()
	ctx := t.Context()
	sb, err := p.Create(ctx, sandbox.Spec{Image: testImage, TTL: time.Minute, Ports: []sandbox.Port{{Number: 8000}, {Number: 8765, Protocol: sandbox.PortTCP}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Delete(ctx)
	defer sb.Close()
	st, _ := srv.Sandbox(sb.ID())
	var got []string
	for _, ps := range st.Definition.GetOpenPorts().GetPorts() {
		got = append(got, strings.Join([]string{strconv.FormatUint(uint64(ps.GetPort()), 10), map[bool]string{true: "unencrypted", false: "encrypted"}[ps.GetUnencrypted()]}, "/"))
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"8000/encrypted", "8765/unencrypted"}) {
		t.Fatalf("open ports sent: %v", got)
	}
	again, err := p.Connect(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	for _, c := range []struct {
		port   sandbox.Port
		prefix string
	}{{sandbox.Port{Number: 8000}, "https://127.0.0.1:"}, {sandbox.Port{Number: 8765, Protocol: sandbox.PortTCP}, "tcp://127.0.0.1:"}} {
		ep, err := again.Endpoint(ctx, c.port)
		if err != nil || !strings.HasPrefix(ep.URL, c.prefix) {
			t.Errorf("endpoint of %v from a connected handle: %v %v", c.port, ep, err)
		}
	}
	for _, bad := range []sandbox.Port{{Number: 8000, Protocol: sandbox.PortTCP}, {Number: 8765}} {
		if _, err := sb.Endpoint(ctx, bad); sandbox.ClassOf(err) != sandbox.InvalidArgument {
			t.Errorf("endpoint of %v, declared with the other protocol: %v, want InvalidArgument", bad, err)
		}
	}
}
