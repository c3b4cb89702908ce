package fakeprovider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/types"
)

var (
	_ driver.Endpointer = (*sandbox)(nil)
	_ driver.PortDialer = (*sandbox)(nil)
)

// Endpoint is the port on the host's loopback address: the fake's
// commands share the host's network.
func (s *sandbox) Endpoint(_ context.Context, port types.Port) (types.Endpoint, error) {
	if _, _, err := s.openRoot(); err != nil {
		return types.Endpoint{}, err
	}
	scheme := "http://"
	if port.Protocol == types.PortTCP {
		scheme = "tcp://"
	}
	return types.Endpoint{URL: scheme + net.JoinHostPort("127.0.0.1", strconv.Itoa(port.Number)), Protocol: port.Protocol}, nil
}

// DialPort connects to the port on the host's loopback address.
func (s *sandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if _, _, err := s.openRoot(); err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if errors.Is(err, syscall.ECONNREFUSED) {
		return nil, types.Errorf(types.Unavailable, "nothing listens on port %d", port)
	}
	if err != nil {
		return nil, types.Classify(types.Unavailable, fmt.Errorf("dial port %d: %w", port, err))
	}
	return c, nil
}
