package portproxy

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// One listener per port and protocol for the handle's life, carrying each
// connection through the handle's dial to that port; none after Close.
func TestEndpoints(t *testing.T) {
	var dialled []int
	dial := func(_ context.Context, port int) (net.Conn, error) {
		dialled = append(dialled, port)
		a, b := net.Pipe()
		go func() { _, _ = b.Write([]byte("hello from the port\n")); b.Close() }()
		return a, nil
	}
	var e Endpoints
	tcp := driver.Port{Number: 9000, Protocol: driver.PortTCP}
	ep, err := e.Endpoint(tcp, dial)
	if err != nil {
		t.Fatal(err)
	}
	if !ep.Local || !strings.HasPrefix(ep.URL, "tcp://127.0.0.1:") {
		t.Fatalf("endpoint %+v: want a local tcp:// URL on loopback", ep)
	}
	again, err := e.Endpoint(tcp, dial)
	if err != nil || again.URL != ep.URL {
		t.Fatalf("the same port again: %+v, %v; want %s", again, err, ep.URL)
	}
	other, err := e.Endpoint(driver.Port{Number: 9000, Protocol: driver.PortHTTP}, dial)
	if err != nil || other.URL == ep.URL || !strings.HasPrefix(other.URL, "http://") {
		t.Fatalf("the port as http: %+v, %v; want its own http:// listener", other, err)
	}
	c, err := net.Dial("tcp", strings.TrimPrefix(ep.URL, "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	c.Close()
	if string(b) != "hello from the port\n" || len(dialled) != 1 || dialled[0] != 9000 {
		t.Fatalf("read %q after dials %v", b, dialled)
	}
	e.Close()
	if _, err := net.Dial("tcp", strings.TrimPrefix(ep.URL, "tcp://")); err == nil {
		t.Errorf("%s still accepts after Close", ep.URL)
	}
	if _, err := e.Endpoint(tcp, dial); errdefs.ClassOf(err) != errdefs.InvalidArgument {
		t.Errorf("Endpoint after Close: %v, want InvalidArgument", err)
	}
}
