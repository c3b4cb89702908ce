package sandbox

import (
	"context"
	"io"
	"net"
	"strconv"
	"sync"

	"github.com/berth-sh/berth/sandbox/driver"
)

// Endpoint returns how a client on this side reaches port inside the
// sandbox: a URL, headers to send and an expiry (see Endpoint). The
// protocol defaults to HTTP. A provider that cannot expose the protocol
// answers NotSupported (Capabilities.Ports says which it can); one that
// opens ports only at create (Capabilities.PortsAtCreate) answers
// InvalidArgument for a port the Spec did not declare.
//
// Endpoint does not wait for a server: poll the URL until it answers.
// Where Endpoint.Local is set the URL is a listener of this process and
// works until the handle is closed.
func (s *Sandbox) Endpoint(ctx context.Context, port Port) (Endpoint, error) {
	const op = "endpoint"
	port = port.WithDefaults()
	if err := port.Validate(); err != nil {
		return Endpoint{}, s.wrap(err, op)
	}
	end, err := s.begin(op)
	if err != nil {
		return Endpoint{}, err
	}
	defer end()
	e, ok := s.d.(driver.Endpointer)
	if !ok {
		return Endpoint{}, s.wrap(Errorf(NotSupported, "the %s provider cannot expose a sandbox's ports", s.p.name), op)
	}
	if caps := s.p.d.Capabilities(); !caps.ExposesPorts(port.Protocol) {
		return Endpoint{}, s.wrap(Errorf(NotSupported, "the %s provider exposes %v ports, not %s", s.p.name, caps.Ports, port.Protocol), op)
	}
	ep, err := e.Endpoint(ctx, port)
	if err != nil {
		return Endpoint{}, s.wrap(err, op)
	}
	ep.Protocol = port.Protocol
	return ep, nil
}

// DialPort connects to 127.0.0.1:port inside the sandbox over the
// provider's own channel (Capabilities.DialPort); elsewhere it is
// NotSupported and Endpoint is the way in. Nothing listening there is
// Unavailable.
func (s *Sandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	const op = "dial port"
	if err := (Port{Number: port}).Validate(); err != nil {
		return nil, s.wrap(err, op)
	}
	end, err := s.begin(op)
	if err != nil {
		return nil, err
	}
	defer end()
	d, ok := s.d.(driver.PortDialer)
	if !ok {
		return nil, s.wrap(Errorf(NotSupported, "the %s provider cannot dial a sandbox's ports itself; use Endpoint", s.p.name), op)
	}
	c, err := d.DialPort(ctx, port)
	return c, s.wrap(err, op)
}

// Forward makes hostAddr (host:port, dialled from this host) reachable
// inside the sandbox at 127.0.0.1:port, even on network none, and gives
// the sandbox no other address: an in-sandbox harness reaches the host's
// session server this way. It lasts until the Forwarding or the handle is
// closed. Providers that cannot (Capabilities.Forward) answer
// NotSupported; on a cloud, give the harness an address it can reach
// instead (see the package doc).
func (s *Sandbox) Forward(ctx context.Context, port int, hostAddr string) (*Forwarding, error) {
	const op = "forward"
	if err := (Port{Number: port}).Validate(); err != nil {
		return nil, s.wrap(err, op)
	}
	if _, p, err := net.SplitHostPort(hostAddr); err != nil || p == "" {
		return nil, s.wrap(Errorf(InvalidArgument, "host address %q is not host:port", hostAddr), op)
	} else if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		return nil, s.wrap(Errorf(InvalidArgument, "host address %q has no port in 1-65535", hostAddr), op)
	}
	end, err := s.begin(op)
	if err != nil {
		return nil, err
	}
	defer end()
	f, ok := s.d.(driver.Forwarder)
	if !ok {
		return nil, s.wrap(Errorf(NotSupported, "the %s provider cannot forward a host address into a sandbox; give the sandbox an address it can reach", s.p.name), op)
	}
	c, err := f.Forward(ctx, port, hostAddr)
	if err != nil {
		return nil, s.wrap(err, op)
	}
	s.p.log.Debug("forwarding into sandbox", "provider", s.p.name, "id", s.id, "port", port)
	return &Forwarding{c: c, s: s, port: port}, nil
}

// Forwarding is a host address reachable inside a sandbox (Forward).
type Forwarding struct {
	c    io.Closer
	s    *Sandbox
	port int
	once sync.Once
	err  error
}

// Port is the sandbox's port that leads to the host address.
func (f *Forwarding) Port() int { return f.port }

// Close stops listening in the sandbox and ends the forwarded
// connections. It is idempotent.
func (f *Forwarding) Close() error {
	f.once.Do(func() { f.err = f.s.wrap(f.c.Close(), "forward close") })
	return f.err
}

// checkPorts refuses a Spec whose ports the provider cannot expose.
func checkPorts(spec Spec, caps Capabilities) error {
	for _, p := range spec.Ports {
		if !caps.ExposesPorts(p.Protocol) {
			return Errorf(NotSupported, "port %s: the provider exposes %v ports", p, caps.Ports)
		}
	}
	return nil
}

// Port types, re-exported from package driver.
type (
	Port         = driver.Port
	PortProtocol = driver.PortProtocol
	Endpoint     = driver.Endpoint
)

// Port protocols.
const (
	PortHTTP = driver.PortHTTP
	PortTCP  = driver.PortTCP
)

// ParsePort reads "8000", "8000/http" or "8000/tcp".
var ParsePort = driver.ParsePort
