package local

import (
	"context"
	"io"
	"net"
	"sync"
	"time"

	"github.com/berth-sh/berth/agent/localagent"
	"github.com/berth-sh/berth/internal/portproxy"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

var (
	_ driver.Endpointer = (*sandboxHandle)(nil)
	_ driver.PortDialer = (*sandboxHandle)(nil)
	_ driver.Forwarder  = (*sandboxHandle)(nil)
)

// forwardDialTimeout bounds the host's connect to a forwarded address.
const forwardDialTimeout = 10 * time.Second

// ports is what a handle keeps open for Endpoint and Forward; Close of
// the handle closes it all.
type ports struct {
	endpoints portproxy.Endpoints

	mu       sync.Mutex
	closed   bool
	forwards map[*forwarding]struct{}
}

func (h *sandboxHandle) agentPorts() localagent.PortClient {
	return localagent.PortClient{Socket: h.socket, Token: h.token}
}

// DialPort connects to the port through the agent's socket: the agent
// makes the connection inside the sandbox's network namespace.
func (h *sandboxHandle) DialPort(ctx context.Context, port int) (net.Conn, error) {
	c, err := h.agentPorts().Dial(ctx, port)
	return c, h.gone(err)
}

// Endpoint is a listener on 127.0.0.1 of this process, one per port and
// protocol for the handle's life, that carries each connection over the
// agent's socket (DialPort). Nothing opens inside the sandbox.
func (h *sandboxHandle) Endpoint(ctx context.Context, port driver.Port) (driver.Endpoint, error) {
	if _, err := h.p.readMeta(h.id); err != nil {
		return driver.Endpoint{}, err
	}
	return h.ports.endpoints.Endpoint(port, h.DialPort)
}

// Forward has the agent listen on the port inside the sandbox and, for
// each connection it accepts there, dials hostAddr from the host and
// joins the two over the agent's socket.
func (h *sandboxHandle) Forward(ctx context.Context, port int, hostAddr string) (io.Closer, error) {
	al, err := h.agentPorts().Listen(ctx, port)
	if err != nil {
		return nil, h.gone(err)
	}
	f := &forwarding{h: h, al: al, addr: hostAddr, conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	h.ports.mu.Lock()
	if h.ports.closed {
		h.ports.mu.Unlock()
		al.Close()
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "sandbox handle is closed")
	}
	if h.ports.forwards == nil {
		h.ports.forwards = map[*forwarding]struct{}{}
	}
	h.ports.forwards[f] = struct{}{}
	h.ports.mu.Unlock()
	go f.serve()
	return f, nil
}

// closePorts closes the handle's endpoints and forwardings.
func (h *sandboxHandle) closePorts() {
	h.ports.endpoints.Close()
	h.ports.mu.Lock()
	h.ports.closed = true
	fws := h.ports.forwards
	h.ports.forwards = nil
	h.ports.mu.Unlock()
	for f := range fws {
		f.Close()
	}
}

// forwarding is one Forward: the agent's listener and the connections
// carried for it.
type forwarding struct {
	h    *sandboxHandle
	al   *localagent.AgentListener
	addr string
	done chan struct{}
	wg   sync.WaitGroup
	// ctx ends the dials in flight when the forwarding closes.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	once   sync.Once
}

func (f *forwarding) serve() {
	defer close(f.done)
	for {
		id, err := f.al.Next()
		if err != nil {
			return
		}
		f.wg.Go(func() { f.carry(id) })
	}
}

// carry dials the host address for one connection accepted in the
// sandbox and joins the two. When the address does not answer, the
// connection is taken and closed at once, so the sandbox's client sees
// the end instead of waiting.
func (f *forwarding) carry(id string) {
	ctx, cancel := context.WithTimeout(f.ctx, forwardDialTimeout)
	defer cancel()
	var d net.Dialer
	host, herr := d.DialContext(ctx, "tcp", f.addr)
	in, err := f.h.agentPorts().Accept(ctx, id)
	if err != nil || herr != nil {
		if host != nil {
			host.Close()
		}
		if in != nil {
			in.Close()
		}
		return
	}
	if !f.track(in, host) {
		return
	}
	_ = portproxy.Join(in, host)
	f.untrack(in, host)
}

func (f *forwarding) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *forwarding) untrack(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		delete(f.conns, c)
	}
}

// Close stops the listener in the sandbox and ends the connections.
func (f *forwarding) Close() error {
	f.once.Do(func() {
		f.cancel()
		f.al.Close()
		f.mu.Lock()
		f.closed = true
		for c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		<-f.done
		f.wg.Wait()
		f.h.ports.mu.Lock()
		delete(f.h.ports.forwards, f)
		f.h.ports.mu.Unlock()
	})
	return nil
}
