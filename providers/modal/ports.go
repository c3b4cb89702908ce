package modal

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	sdk "github.com/modal-labs/modal-client/go"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

var _ driver.Endpointer = (*sandbox)(nil)

// tunnelsTimeout bounds the wait for a sandbox's tunnels to be ready.
const tunnelsTimeout = 50 * time.Second

// openPorts maps a Spec's ports onto Modal's create parameters: HTTP on an
// encrypted port (TLS ends at Modal's edge; WebSocket works), TCP on an
// unencrypted one (raw bytes).
func openPorts(params *sdk.SandboxCreateParams, ports []driver.Port) {
	for _, p := range ports {
		if p.Protocol == driver.PortTCP {
			params.UnencryptedPorts = append(params.UnencryptedPorts, p.Number)
		} else {
			params.EncryptedPorts = append(params.EncryptedPorts, p.Number)
		}
	}
}

// tunnels caches a handle's tunnels (the SDK's own cache is not safe for
// concurrent calls).
type tunnels struct {
	mu sync.Mutex
	m  map[int]*sdk.Tunnel
}

// Endpoint is the port's tunnel: its https:// URL for an encrypted (HTTP)
// port, tcp://host:port of its unencrypted socket for a TCP one. Modal
// opens tunnels at create for the ports the Spec declared, and no others.
func (s *sandbox) Endpoint(ctx context.Context, port driver.Port) (driver.Endpoint, error) {
	s.tun.mu.Lock()
	defer s.tun.mu.Unlock()
	if s.tun.m == nil {
		m, err := s.sb.Tunnels(ctx, tunnelsTimeout, nil)
		if err != nil {
			return driver.Endpoint{}, classify(err)
		}
		s.tun.m = m
	}
	t, ok := s.tun.m[port.Number]
	if !ok {
		return driver.Endpoint{}, errdefs.Errorf(errdefs.InvalidArgument, "modal: port %d has no tunnel: Modal opens tunnels at create, for the ports in Spec.Ports only", port.Number)
	}
	host, p, err := t.TCPSocket()
	switch {
	case port.Protocol == driver.PortTCP && err != nil:
		return driver.Endpoint{}, errdefs.Errorf(errdefs.InvalidArgument, "modal: port %d was declared http (an encrypted tunnel), not tcp", port.Number)
	case port.Protocol == driver.PortTCP:
		return driver.Endpoint{URL: "tcp://" + net.JoinHostPort(host, strconv.Itoa(p)), Protocol: port.Protocol}, nil
	case err == nil:
		return driver.Endpoint{}, errdefs.Errorf(errdefs.InvalidArgument, "modal: port %d was declared tcp (an unencrypted tunnel), not http", port.Number)
	}
	return driver.Endpoint{URL: t.URL(), Protocol: port.Protocol}, nil
}
