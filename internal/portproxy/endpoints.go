package portproxy

import (
	"context"
	"net"
	"sync"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Endpoints are one sandbox handle's loopback listeners, one per port and
// protocol for the handle's life, each carrying its connections through
// the handle's own channel to the port. The zero value is ready; Close
// ends them all.
type Endpoints struct {
	mu     sync.Mutex
	closed bool
	lns    map[driver.Port]*Listener
}

// Endpoint returns port's listener as an Endpoint (made on first use, with
// dial connecting to the port): an http:// or tcp:// URL on 127.0.0.1,
// Local.
func (e *Endpoints) Endpoint(port driver.Port, dial func(ctx context.Context, port int) (net.Conn, error)) (driver.Endpoint, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return driver.Endpoint{}, errdefs.Errorf(errdefs.InvalidArgument, "sandbox handle is closed")
	}
	ln := e.lns[port]
	if ln == nil {
		var err error
		ln, err = Listen(func(ctx context.Context) (net.Conn, error) { return dial(ctx, port.Number) }, port.Protocol)
		if err != nil {
			return driver.Endpoint{}, err
		}
		if e.lns == nil {
			e.lns = map[driver.Port]*Listener{}
		}
		e.lns[port] = ln
	}
	scheme := "http://"
	if port.Protocol == driver.PortTCP {
		scheme = "tcp://"
	}
	return driver.Endpoint{URL: scheme + ln.Addr(), Protocol: port.Protocol, Local: true}, nil
}

// Close closes every listener and refuses new ones.
func (e *Endpoints) Close() {
	e.mu.Lock()
	e.closed = true
	lns := e.lns
	e.lns = nil
	e.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
}
