package k8s

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	httpstream "k8s.io/streaming/pkg/httpstream"

	"github.com/berth-sh/berth/agent/podagent"
	"github.com/berth-sh/berth/internal/httpserve"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// podDialer connects to a port of a sandbox's pod: the pod IP, or a
// stream pair of its port-forward session.
type podDialer interface {
	dialPort(ctx context.Context, port int) (net.Conn, error)
	io.Closer
}

// agentTransport returns the HTTP transport that reaches a pod's agent,
// and the pod's dialer under it: straight to the pod IP, or through the
// API server's port-forward. A forwarder already dialling pod (predial) is
// used rather than a new one.
func (p *Provider) agentTransport(pod, podIP string, pre *forwarder) (*http.Transport, podDialer) {
	t := &http.Transport{
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     httpserve.ClientIdleTimeout,
		DisableCompression:  true,
	}
	var d podDialer
	switch {
	case p.opts.Dial == DialPodIP:
		d = podIPDialer(podIP)
	case pre != nil && pre.name == pod:
		d, pre = pre, nil
	default:
		d = &forwarder{p: p, name: pod}
	}
	if pre != nil {
		pre.Close() // dialling a pod the ready claim does not report
	}
	t.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) { return d.dialPort(ctx, podagent.Port) }
	return t, d
}

// podIPDialer dials the pod's IP, for a provider inside the cluster.
type podIPDialer string

func (ip podIPDialer) dialPort(ctx context.Context, port int) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(string(ip), strconv.Itoa(port)))
	if err != nil {
		return nil, errdefs.Errorf(errdefs.Unavailable, "k8s: %w", err)
	}
	return c, nil
}

func (podIPDialer) Close() error { return nil }

// predial starts the port-forward session to pod in the background and
// returns its forwarder (nil when agents are dialled by pod IP). Opening
// the session hands the pod nothing: it only takes the API server's
// upgrade off the path of the first call.
func (p *Provider) predial(ctx context.Context, pod string) *forwarder {
	if p.opts.Dial == DialPodIP {
		return nil
	}
	f := &forwarder{p: p, name: pod}
	go func() { _, _ = f.session(ctx) }()
	return f
}

// forwarder is one port-forward session (one upgraded connection to the
// API server) per sandbox, carrying one stream pair per TCP connection to
// the agent. It reconnects when the session drops.
type forwarder struct {
	p    *Provider
	name string
	ids  atomic.Int64

	mu     sync.Mutex
	conn   httpstream.Connection
	closed bool
}

// session returns the live connection, dialling one if needed: WebSocket
// first (the API server's tunnel, PortForwardWebsockets), SPDY where a
// server or proxy refuses the upgrade.
func (f *forwarder) session(ctx context.Context) (httpstream.Connection, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "k8s: port-forward to %s is closed", f.name)
	}
	if f.conn != nil {
		select {
		case <-f.conn.CloseChan():
			f.conn = nil
		default:
			return f.conn, nil
		}
	}
	cfg := f.p.opts.Config
	u := f.p.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(f.p.opts.Namespace).
		Name(f.name).SubResource("portforward").URL()
	rt, up, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "k8s: port-forward transport: %w", err)
	}
	sd := spdy.NewDialerForStreaming(up, &http.Client{Transport: rt}, http.MethodPost, u)
	wd, err := portforward.NewSPDYOverWebsocketDialerForStreaming(u, cfg)
	if err != nil {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "k8s: port-forward transport: %w", err)
	}
	d := portforward.NewFallbackDialerForStreaming(wd, sd, func(err error) bool {
		// SPDY is for servers and proxies that cannot upgrade to a
		// WebSocket, not a way around RBAC: a refusal stays a refusal.
		if forbidden(err) {
			return false
		}
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	type result struct {
		c   httpstream.Connection
		err error
	}
	res := make(chan result, 1)
	go func() {
		c, _, err := d.Dial(portforward.PortForwardProtocolV1Name)
		res <- result{c, err}
	}()
	select {
	case r := <-res:
		if r.err != nil {
			c := errdefs.Unavailable
			if forbidden(r.err) {
				c = errdefs.Unauthenticated // RBAC: waiting will not help
			}
			return nil, errdefs.Errorf(c, "k8s: port-forward to pod %s: %w", f.name, r.err)
		}
		f.conn = r.c
		return r.c, nil
	case <-ctx.Done():
		go func() {
			if r := <-res; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// forbidden: the API server refused the upgrade for who is asking. The
// upgrade's error is not always an API status, so its text is read too.
func forbidden(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) ||
		strings.Contains(err.Error(), "is forbidden") || strings.Contains(err.Error(), "Unauthorized")
}

// dialPort opens one stream pair to port; the kubelet connects it to
// 127.0.0.1:port in the pod's network namespace. A port nobody listens on
// ends the stream, and the error stream says so (streamConn.Read).
func (f *forwarder) dialPort(ctx context.Context, port int) (net.Conn, error) {
	conn, err := f.session(ctx)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, strconv.Itoa(port))
	h.Set(corev1.PortForwardRequestIDHeader, strconv.FormatInt(f.ids.Add(1), 10))
	errStream, err := conn.CreateStream(h)
	if err != nil {
		conn.Close()
		return nil, errdefs.Errorf(errdefs.Unavailable, "k8s: port-forward to pod %s: error stream: %w", f.name, err)
	}
	errStream.Close() // nothing to send on it
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(h)
	if err != nil {
		conn.RemoveStreams(errStream)
		conn.Close()
		return nil, errdefs.Errorf(errdefs.Unavailable, "k8s: port-forward to pod %s: data stream: %w", f.name, err)
	}
	c := &streamConn{conn: conn, data: data, errStream: errStream, errDone: make(chan struct{}), pod: f.name}
	go func() {
		b, _ := io.ReadAll(io.LimitReader(errStream, 4096))
		c.errMsg = string(b)
		close(c.errDone)
	}()
	return c, nil
}

func (f *forwarder) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	if f.conn != nil {
		f.conn.Close()
		f.conn = nil
	}
	return nil
}

// streamConn is a net.Conn over a port-forward data stream. When the stream
// ends early, the error stream says why (the agent refused, the pod is
// gone), and Read returns that.
type streamConn struct {
	conn      httpstream.Connection
	data      httpstream.Stream
	errStream httpstream.Stream
	errDone   chan struct{}
	errMsg    string
	pod       string
	closeOnce sync.Once
}

func (c *streamConn) Read(b []byte) (int, error) {
	n, err := c.data.Read(b)
	if errors.Is(err, io.EOF) {
		select {
		case <-c.errDone:
			if c.errMsg != "" {
				return n, errdefs.Errorf(errdefs.Unavailable, "k8s: port-forward to pod %s: %s", c.pod, c.errMsg)
			}
		case <-time.After(100 * time.Millisecond):
		}
	}
	return n, err
}

func (c *streamConn) Write(b []byte) (int, error) { return c.data.Write(b) }

// CloseWrite ends this side of the data stream (a FIN frame) and leaves the
// other side open: a client that half-closes a port's connection still
// gets the rest of the answer (portproxy.Join passes half-closes on).
func (c *streamConn) CloseWrite() error { return c.data.Close() }

func (c *streamConn) Close() error {
	c.closeOnce.Do(func() {
		_ = c.data.Close()
		_ = c.data.Reset()
		c.conn.RemoveStreams(c.data, c.errStream)
	})
	return nil
}

func (c *streamConn) LocalAddr() net.Addr                { return pfAddr(c.pod) }
func (c *streamConn) RemoteAddr() net.Addr               { return pfAddr(c.pod) }
func (c *streamConn) SetDeadline(t time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(t time.Time) error { return nil }

type pfAddr string

func (a pfAddr) Network() string { return "portforward" }
func (a pfAddr) String() string  { return fmt.Sprintf("%s:%d", string(a), podagent.Port) }
