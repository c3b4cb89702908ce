package fakeprovider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/berth-sh/berth/internal/testing/fakeengine"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

var (
	_ driver.Endpointer = (*sandbox)(nil)
	_ driver.PortDialer = (*sandbox)(nil)
)

// Endpoint is the port on the host's loopback address: the fake's
// commands share the host's network.
func (s *sandbox) Endpoint(_ context.Context, port driver.Port) (driver.Endpoint, error) {
	if err := s.live(); err != nil {
		return driver.Endpoint{}, err
	}
	scheme := "http://"
	if port.Protocol == driver.PortTCP {
		scheme = "tcp://"
	}
	return driver.Endpoint{URL: scheme + fakeengine.Loopback(port.Number), Protocol: port.Protocol}, nil
}

// DialPort connects to the port on the host's loopback address.
func (s *sandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", fakeengine.Loopback(port))
	if errors.Is(err, syscall.ECONNREFUSED) {
		return nil, errdefs.Errorf(errdefs.Unavailable, "nothing listens on port %d", port)
	}
	if err != nil {
		return nil, errdefs.Classify(errdefs.Unavailable, fmt.Errorf("dial port %d: %w", port, err))
	}
	return c, nil
}
