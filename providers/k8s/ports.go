package k8s

import (
	"context"
	"net"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

var (
	_ driver.Endpointer = (*sandboxHandle)(nil)
	_ driver.PortDialer = (*sandboxHandle)(nil)
)

// DialPort connects to 127.0.0.1:port inside the pod over the sandbox's
// own channel: a stream pair of its port-forward session (the kubelet
// makes the connection in the pod's network namespace, whatever its
// NetworkPolicy), or the pod IP where the provider runs in the cluster.
// No Service is made.
func (h *sandboxHandle) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if why := h.gone.Load(); why != nil {
		return nil, errdefs.Errorf(errdefs.NotFound, "k8s: sandbox %s is gone: %s", h.id, *why)
	}
	c, err := h.fwd.dialPort(ctx, port)
	return c, h.wrap(err)
}

// Endpoint is a listener on 127.0.0.1 of this process, one per port and
// protocol for the handle's life, that carries each connection through
// DialPort, as kubectl port-forward does.
func (h *sandboxHandle) Endpoint(ctx context.Context, port driver.Port) (driver.Endpoint, error) {
	if why := h.gone.Load(); why != nil {
		return driver.Endpoint{}, errdefs.Errorf(errdefs.NotFound, "k8s: sandbox %s is gone: %s", h.id, *why)
	}
	return h.ports.Endpoint(port, h.DialPort)
}

// closePorts closes the handle's endpoints.
func (h *sandboxHandle) closePorts() { h.ports.Close() }
