package hud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// clientMaxFrame bounds a reply the client reads.
const clientMaxFrame = 16 << 20

// Client is a control-channel client, numbering requests 1, 2, 3... per
// connection and checking each reply's id, as HUD's HudClient does. Calls
// are serialized; a failed transport closes the client.
type Client struct {
	addr string
	c    net.Conn
	f    *framer

	mu     sync.Mutex // one call at a time, like HudClient's call lock
	next   int
	closed bool

	// Manifest is the last hello's reply.
	Manifest *Manifest

	hbStop chan struct{}
	hbDone chan struct{}
}

// Dial connects to a control channel at addr (host:port or tcp://host:port)
// without sending anything.
func Dial(ctx context.Context, addr string) (*Client, error) {
	addr = trimScheme(addr)
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &Client{addr: addr, c: c, f: newFramer(c, clientMaxFrame, 0)}, nil
}

func trimScheme(addr string) string {
	if len(addr) > 6 && addr[:6] == "tcp://" {
		return addr[6:]
	}
	return addr
}

// DialReady connects and completes hello, retrying every interval until
// the environment answers or ctx ends: a refused connect, or one accepted
// and then dropped before the reply (a proxied port with nothing behind it
// yet), means not ready, as in HUD's _connect_ready. An error reply is a
// real failure and is returned at once.
func DialReady(ctx context.Context, addr string, interval time.Duration) (*Client, error) {
	if interval <= 0 {
		interval = 500 * time.Millisecond
	}
	for {
		c, err := Dial(ctx, addr)
		if err == nil {
			if _, err = c.Hello(ctx, ""); err == nil {
				return c, nil
			}
			c.Close()
			var rpc *Error
			if errors.As(err, &rpc) {
				return nil, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("hud: %s not ready: %w (last: %v)", addr, ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}

// Addr is the control channel's address.
func (c *Client) Addr() string { return c.addr }

// Call sends method with params and decodes the reply's result into
// result (which may be nil). An error reply is an *Error.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return net.ErrClosed
	}
	c.next++
	id := c.next
	if params == nil {
		params = map[string]any{}
	}
	err := c.roundTrip(ctx, id, method, params, result)
	var rpc *Error
	if err != nil && !errors.As(err, &rpc) {
		c.closeLocked()
	}
	return err
}

func (c *Client) roundTrip(ctx context.Context, id int, method string, params, result any) error {
	dl, _ := ctx.Deadline()
	_ = c.c.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(time.Now()) })
	defer stop()
	req := struct {
		JSONRPC string `json:"jsonrpc"`
		ID      int    `json:"id"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", id, method, params}
	if err := c.f.write(&req); err != nil {
		return ctxErr(ctx, err)
	}
	line, err := c.f.read(0, 0)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("hud: env closed connection during %q: %w", method, err)
		}
		return ctxErr(ctx, err)
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return fmt.Errorf("hud: %q: bad reply: %w", method, err)
	}
	if string(resp.ID) != strconv.Itoa(id) {
		return fmt.Errorf("hud: %q: reply id %s did not match request %d", method, resp.ID, id)
	}
	if resp.Error != nil {
		return resp.Error
	}
	if len(resp.Result) == 0 || resp.Result[0] != '{' {
		return fmt.Errorf("hud: %q: result was not an object", method)
	}
	if result == nil {
		return nil
	}
	return json.Unmarshal(resp.Result, result)
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

// Hello sends hello; a non-empty sessionID resumes that parked session.
func (c *Client) Hello(ctx context.Context, sessionID string) (*Manifest, error) {
	params := map[string]any{}
	if sessionID != "" {
		params["session_id"] = sessionID
	}
	var m Manifest
	if err := c.Call(ctx, MethodHello, params, &m); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.Manifest = &m
	c.mu.Unlock()
	return &m, nil
}

// ListTasks is tasks.list.
func (c *Client) ListTasks(ctx context.Context) ([]TaskEntry, error) {
	var r struct {
		Tasks []TaskEntry `json:"tasks"`
	}
	err := c.Call(ctx, MethodTasksList, nil, &r)
	return r.Tasks, err
}

// Start is tasks.start; the reply holds the prompt.
func (c *Client) Start(ctx context.Context, id string, args map[string]any) (map[string]any, error) {
	if args == nil {
		args = map[string]any{}
	}
	var r map[string]any
	err := c.Call(ctx, MethodTasksStart, map[string]any{"id": id, "args": args}, &r)
	return r, err
}

// Grade is tasks.grade with payload (HUD sends {"answer": ...}).
func (c *Client) Grade(ctx context.Context, payload map[string]any) (*Grade, error) {
	var g Grade
	if err := c.Call(ctx, MethodTasksGrade, payload, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// Cancel is tasks.cancel.
func (c *Client) Cancel(ctx context.Context) error { return c.Call(ctx, MethodCancel, nil, nil) }

// Bye is bye: the server ends the session and hangs up.
func (c *Client) Bye(ctx context.Context) error { return c.Call(ctx, MethodBye, nil, nil) }

// Binding returns the manifest's capability whose name, protocol or
// protocol family is ref.
func (c *Client) Binding(ref string) (Binding, error) {
	c.mu.Lock()
	m := c.Manifest
	c.mu.Unlock()
	if m == nil {
		return Binding{}, errors.New("hud: call Hello before Binding")
	}
	var found []Binding
	for _, b := range m.Bindings {
		fam := b.Protocol
		if i := indexByte(fam, '/'); i >= 0 {
			fam = fam[:i]
		}
		if ref == b.Name || ref == b.Protocol || ref == fam {
			found = append(found, b)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return Binding{}, fmt.Errorf("hud: no capability %q", ref)
	}
	return Binding{}, fmt.Errorf("hud: ambiguous capability %q", ref)
}

func indexByte(s string, b byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == b {
			return i
		}
	}
	return -1
}

// Heartbeat re-sends hello with the session's id every interval, as HUD's
// connect() does, until Close. A failed heartbeat closes the client.
func (c *Client) Heartbeat(interval time.Duration) {
	c.mu.Lock()
	if c.hbStop != nil || c.closed {
		c.mu.Unlock()
		return
	}
	c.hbStop, c.hbDone = make(chan struct{}), make(chan struct{})
	stop, done := c.hbStop, c.hbDone
	c.mu.Unlock()
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			c.mu.Lock()
			id := ""
			if c.Manifest != nil {
				id = c.Manifest.SessionID
			}
			c.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := c.Hello(ctx, id)
			cancel()
			if err != nil {
				// Call already closed the client on a transport error; an
				// error reply only ends the heartbeat, as in HUD.
				return
			}
		}
	}()
}

// Close hangs up without bye: the server parks a task in progress.
func (c *Client) Close() error {
	c.mu.Lock()
	stop, done := c.hbStop, c.hbDone
	c.hbStop = nil
	err := c.closeLocked()
	c.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	return err
}

func (c *Client) closeLocked() error {
	if c.closed {
		return nil
	}
	c.closed = true
	return c.c.Close()
}

// DialTunnel opens a tunnel to capability on the control channel at addr:
// a new connection whose first frame is tunnel.open (id 1, as HUD's client
// sends it). After the reply the connection carries the capability's raw
// bytes.
func DialTunnel(ctx context.Context, addr, capability string) (net.Conn, error) {
	c, err := Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	err = c.roundTrip(ctx, 1, MethodTunnelOpen, map[string]any{"capability": capability}, nil)
	if err != nil {
		c.c.Close()
		return nil, err
	}
	return c.f.rest(), nil
}
