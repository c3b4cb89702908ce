package openenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/berth-sh/berth/sandbox/retry"
)

// ClientOptions configure a Client. The zero value is OpenEnv's EnvClient
// defaults without capacity retries.
type ClientOptions struct {
	// Header is sent with the WebSocket handshake (Authorization).
	Header http.Header
	// HTTPClient dials; nil means http.DefaultClient.
	HTTPClient *http.Client
	// ConnectTimeout bounds the handshake; default 10 s.
	ConnectTimeout time.Duration
	// MessageTimeout bounds the wait for each answer; default 60 s (Miles
	// raises it to 1200 s: an evaluate runs the task's whole verifier).
	MessageTimeout time.Duration
	// MaxMessageBytes bounds an answer; default 100 MiB.
	MaxMessageBytes int64
	// CapacityWait is how long the first message of a session is retried
	// while the server is full: it answered CAPACITY_REACHED, or closed the
	// connection normally before answering. Zero: no retries. Miles waits
	// 1800 s.
	CapacityWait time.Duration
	// CapacityBackoff is the first pause between retries and the cap of
	// the pauses, which double and are jittered by half (retry.Backoff);
	// default 1 s and 5 s.
	CapacityBackoff [2]time.Duration
}

// Client is one OpenEnv session at a time over /ws. It connects on first
// use; after Close, or a connection lost, the next call opens a new
// session (whose environment the caller must reset). Its methods are safe
// for concurrent use but run one at a time.
type Client struct {
	wsURL string
	opts  ClientOptions

	mu       sync.Mutex
	conn     *websocket.Conn
	answered bool // the connection has answered a message: no longer a fresh session
}

// NewClient makes a client of the server at baseURL (http, https, ws or
// wss; "/ws" is appended, as OpenEnv's client does).
func NewClient(baseURL string, opts ClientOptions) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("openenv: base URL: %w", err)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	case "ws", "wss":
	default:
		return nil, fmt.Errorf("openenv: base URL %q: scheme must be http, https, ws or wss", u.Redacted())
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/ws"
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 10 * time.Second
	}
	if opts.MessageTimeout <= 0 {
		opts.MessageTimeout = time.Minute
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = 100 << 20
	}
	if opts.CapacityBackoff[1] <= 0 {
		opts.CapacityBackoff = [2]time.Duration{time.Second, 5 * time.Second}
	}
	return &Client{wsURL: u.String(), opts: opts}, nil
}

// ServerError is an error frame.
type ServerError struct {
	Code    Code
	Message string
	// Data is the whole error data (active_sessions, errors, ...).
	Data map[string]json.RawMessage
}

func (e *ServerError) Error() string {
	return fmt.Sprintf("Server error: %s (code: %s)", e.Message, e.Code)
}

// Connect opens the session if it is not open.
func (c *Client) Connect(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connect(ctx)
}

func (c *Client) connect(ctx context.Context) error {
	if c.conn != nil {
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, c.opts.ConnectTimeout)
	defer cancel()
	conn, _, err := websocket.Dial(dctx, c.wsURL, &websocket.DialOptions{HTTPHeader: c.opts.Header, HTTPClient: c.opts.HTTPClient})
	if err != nil {
		return fmt.Errorf("openenv: connecting to %s: %w", c.wsURL, err)
	}
	conn.SetReadLimit(c.opts.MaxMessageBytes)
	c.conn, c.answered = conn, false
	return nil
}

func (c *Client) drop() {
	if c.conn != nil {
		_ = c.conn.CloseNow()
		c.conn = nil
	}
}

// Reset starts an episode with args (task_id, seed, episode_id, ...).
func (c *Client) Reset(ctx context.Context, args map[string]any) (*Result, error) {
	if args == nil {
		args = map[string]any{}
	}
	return c.result(ctx, map[string]any{"type": TypeReset, "data": args})
}

// Step sends one action (a struct or map marshalled as the action's JSON).
func (c *Client) Step(ctx context.Context, action any) (*Result, error) {
	return c.result(ctx, map[string]any{"type": TypeStep, "data": action})
}

// State decodes the environment's state into v.
func (c *Client) State(ctx context.Context, v any) error {
	f, err := c.roundTrip(ctx, map[string]any{"type": TypeState})
	if err != nil {
		return err
	}
	if f.Type != TypeState {
		return fmt.Errorf("openenv: answer to state is a %q frame", f.Type)
	}
	return json.Unmarshal(f.Data, v)
}

func (c *Client) result(ctx context.Context, msg any) (*Result, error) {
	f, err := c.roundTrip(ctx, msg)
	if err != nil {
		return nil, err
	}
	if f.Type != TypeObservation {
		return nil, fmt.Errorf("openenv: answer is a %q frame, not an observation", f.Type)
	}
	var r Result
	if err := json.Unmarshal(f.Data, &r); err != nil {
		return nil, fmt.Errorf("openenv: observation frame: %w", err)
	}
	return &r, nil
}

// roundTrip sends msg and returns the answer, retrying a fresh session's
// first message while the server is at capacity.
func (c *Client) roundTrip(ctx context.Context, msg any) (*Frame, error) {
	b, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Only a fresh session's first message is retried, and only while
	// the server is at capacity: any other answer is the session's.
	fresh := false
	p := retry.Policy{
		Budget: c.opts.CapacityWait, Base: c.opts.CapacityBackoff[0], Max: c.opts.CapacityBackoff[1],
		Retryable: func(err error) bool { return fresh && atCapacity(err) },
	}
	return retry.Value(ctx, p, func(ctx context.Context) (*Frame, error) {
		fresh = c.conn == nil || !c.answered
		return c.once(ctx, b)
	})
}

// atCapacity: the server said so, or closed a new session normally before
// answering (OpenEnv servers that are full may just close).
func atCapacity(err error) bool {
	var se *ServerError
	if errors.As(err, &se) {
		return se.Code == CapacityReached
	}
	return websocket.CloseStatus(err) == websocket.StatusNormalClosure
}

func (c *Client) once(ctx context.Context, msg []byte) (*Frame, error) {
	if err := c.connect(ctx); err != nil {
		return nil, err
	}
	conn := c.conn
	if err := conn.Write(ctx, websocket.MessageText, msg); err != nil {
		c.drop()
		return nil, fmt.Errorf("openenv: sending: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, c.opts.MessageTimeout)
	defer cancel()
	_, b, err := conn.Read(rctx)
	if err != nil {
		c.drop()
		if rctx.Err() != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("openenv: no answer within %v: %w", c.opts.MessageTimeout, context.DeadlineExceeded)
		}
		return nil, fmt.Errorf("openenv: receiving: %w", err)
	}
	var f Frame
	if err := json.Unmarshal(b, &f); err != nil {
		c.drop()
		return nil, fmt.Errorf("openenv: answer is not a frame: %w", err)
	}
	if f.Type == TypeError {
		var data map[string]json.RawMessage
		_ = json.Unmarshal(f.Data, &data)
		se := &ServerError{Data: data}
		_ = json.Unmarshal(data["code"], &se.Code)
		_ = json.Unmarshal(data["message"], &se.Message)
		if se.Code == CapacityReached || se.Code == FactoryError || se.Code == SessionError {
			// The server closes these sessions.
			c.drop()
		} else {
			c.answered = true
		}
		return nil, se
	}
	c.answered = true
	return &f, nil
}

// Close ends the session: a close message, then the server's own close,
// which OpenEnv servers (and berth's) send once the session's environment
// is closed; so when Close returns, the environment's resources are gone
// (or the message timeout passed). Closing a client that is not connected
// does nothing.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return nil
	}
	conn := c.conn
	c.conn = nil
	defer conn.CloseNow()
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.MessageTimeout)
	defer cancel()
	if err := conn.Write(ctx, websocket.MessageText, []byte(`{"type":"close"}`)); err != nil {
		return nil // already gone
	}
	for {
		if _, _, err := conn.Read(ctx); err != nil {
			if s := websocket.CloseStatus(err); s == websocket.StatusNormalClosure || s == websocket.StatusGoingAway {
				return nil
			}
			if ctx.Err() != nil {
				return fmt.Errorf("openenv: the server did not close the session within %v", c.opts.MessageTimeout)
			}
			return nil
		}
	}
}
