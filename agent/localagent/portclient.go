package localagent

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/internal/portproxy"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// PortClient is the host's side of the port routes (PortPath, ListenPath,
// AcceptPath) of one agent.
type PortClient struct {
	Socket string // the agent's unix socket
	Token  string // the sandbox's access token; secret
}

// upgradeTimeout bounds an upgrade whose ctx has no deadline.
const upgradeTimeout = 30 * time.Second

// Dial connects to port inside the sandbox. The connection is a
// *net.UnixConn (or a portproxy.Prefixed around one), so that joining it
// to a TCP connection splices. Nothing listening is Unavailable.
func (c PortClient) Dial(ctx context.Context, port int) (net.Conn, error) {
	conn, br, err := c.upgrade(ctx, PortPath, url.Values{"port": {fmt.Sprint(port)}})
	if err != nil {
		return nil, err
	}
	return withBuffered(conn, br), nil
}

// Accept takes the connection id that a Listen announced.
func (c PortClient) Accept(ctx context.Context, id string) (net.Conn, error) {
	conn, br, err := c.upgrade(ctx, AcceptPath, url.Values{"id": {id}})
	if err != nil {
		return nil, err
	}
	return withBuffered(conn, br), nil
}

// Listen makes the agent listen on port inside the sandbox until the
// returned listener is closed.
func (c PortClient) Listen(ctx context.Context, port int) (*AgentListener, error) {
	conn, br, err := c.upgrade(ctx, ListenPath, url.Values{"port": {fmt.Sprint(port)}})
	if err != nil {
		return nil, err
	}
	return &AgentListener{conn: conn, br: br}, nil
}

// AgentListener announces the connections the agent accepted.
type AgentListener struct {
	conn net.Conn
	br   *bufio.Reader
}

// Next returns the ID of the next connection, for Accept; it fails once
// the listener is closed (by Close, or because the agent ended).
func (l *AgentListener) Next() (string, error) {
	line, err := l.br.ReadString('\n')
	if err != nil {
		return "", errdefs.Errorf(errdefs.Unavailable, "the agent's listener ended: %w", err)
	}
	id := strings.TrimSpace(line)
	if id == "" || len(id) > 64 {
		return "", errdefs.Errorf(errdefs.Unavailable, "the agent announced a malformed connection")
	}
	return id, nil
}

// Close stops the listener in the sandbox.
func (l *AgentListener) Close() error { return l.conn.Close() }

func withBuffered(conn net.Conn, br *bufio.Reader) net.Conn {
	if n := br.Buffered(); n > 0 {
		pre, _ := br.Peek(n)
		return &portproxy.Prefixed{Conn: conn, Prefix: append([]byte(nil), pre...)}
	}
	return conn
}

// upgrade makes one upgraded connection to the agent.
func (c PortClient) upgrade(ctx context.Context, path string, q url.Values) (net.Conn, *bufio.Reader, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Socket)
	if err != nil {
		return nil, nil, errdefs.Errorf(errdefs.Unavailable, "connect to the sandbox's agent: %w", err)
	}
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(upgradeTimeout)
	}
	_ = conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (net.Conn, *bufio.Reader, error) {
		stop()
		conn.Close()
		if ctx.Err() != nil {
			return nil, nil, context.Cause(ctx)
		}
		return nil, nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s?%s HTTP/1.1\r\nHost: agent\r\nConnection: Upgrade\r\nUpgrade: %s\r\n", path, q.Encode(), UpgradeProto)
	if c.Token != "" {
		fmt.Fprintf(&b, "%s: %s\r\n", envd.AccessTokenHeader, c.Token)
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return fail(errdefs.Errorf(errdefs.Unavailable, "agent port call: %w", err))
	}
	br := bufio.NewReaderSize(conn, 1024)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		return fail(errdefs.Errorf(errdefs.Unavailable, "agent port call: %w", err))
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		msg, _ := io.ReadAll(io.LimitReader(res.Body, maxErrMsg))
		res.Body.Close()
		class, ok := classNamed(res.Header.Get(errClassHeader))
		if !ok {
			return fail(errdefs.Errorf(errdefs.NotSupported, "the sandbox's agent has no port routes (%s)", res.Status))
		}
		return fail(errdefs.Errorf(class, "%s", strings.TrimSpace(string(msg))))
	}
	if !stop() {
		conn.Close()
		return nil, nil, context.Cause(ctx)
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, br, nil
}
