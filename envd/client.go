package envd

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/envd/envdproto"
	"github.com/berth-sh/berth/internal/httpserve"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// ClientOption configures NewClient.
type ClientOption func(*clientOptions) error

type clientOptions struct {
	token     string
	user      string
	keepalive time.Duration
}

// WithAccessToken sends the sandbox's access token on every call.
func WithAccessToken(token string) ClientOption {
	return func(o *clientOptions) error {
		if strings.ContainsAny(token, "\r\n") {
			return fmt.Errorf("access token contains a line break")
		}
		o.token = token
		return nil
	}
}

// WithUser makes calls act as this user unless a Command names another.
func WithUser(name string) ClientOption {
	return func(o *clientOptions) error {
		if strings.ContainsAny(name, ":\r\n") {
			return fmt.Errorf("user name %q is invalid", name)
		}
		o.user = name
		return nil
	}
}

// WithKeepalive asks the server for keepalive events every d on process
// streams, and treats a stream silent for three times d as a lost
// connection (Unavailable). Zero turns both off; the default is 30 s.
func WithKeepalive(d time.Duration) ClientOption {
	return func(o *clientOptions) error {
		if d < 0 {
			return fmt.Errorf("keepalive %v is negative", d)
		}
		if d > 0 && d < time.Second {
			return fmt.Errorf("keepalive %v is under the protocol's resolution of one second", d)
		}
		o.keepalive = d
		return nil
	}
}

// Client calls one envd server. It is safe for concurrent use; create one
// per server and reuse it (it holds no connections of its own: those belong
// to the http.Client).
type Client struct {
	base string
	hc   *http.Client
	opts clientOptions

	start      *connect.Client[envdproto.StartRequest, envdproto.StartResponse]
	connect    *connect.Client[envdproto.ConnectRequest, envdproto.ConnectResponse]
	list       *connect.Client[envdproto.ListRequest, envdproto.ListResponse]
	sendInput  *connect.Client[envdproto.SendInputRequest, envdproto.SendInputResponse]
	sendSignal *connect.Client[envdproto.SendSignalRequest, envdproto.SendSignalResponse]
	closeStdin *connect.Client[envdproto.CloseStdinRequest, envdproto.CloseStdinResponse]
	stat       *connect.Client[envdproto.StatRequest, envdproto.StatResponse]
	listDir    *connect.Client[envdproto.ListDirRequest, envdproto.ListDirResponse]
	makeDir    *connect.Client[envdproto.MakeDirRequest, envdproto.MakeDirResponse]
	move       *connect.Client[envdproto.MoveRequest, envdproto.MoveResponse]
	remove     *connect.Client[envdproto.RemoveRequest, envdproto.RemoveResponse]

	// ctx outlives the calls that start processes: a Process reads its
	// stream under it, so Close can end every stream.
	ctx     context.Context
	cancel  context.CancelFunc
	streams sync.WaitGroup
}

// NewClient returns a client for the envd server at baseURL (e.g.
// "https://49983-<id>.e2b.app", or UnixBaseURL with UnixHTTPClient). A nil
// httpClient means http.DefaultClient.
func NewClient(baseURL string, httpClient *http.Client, opts ...ClientOption) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "envd: base URL %q is not an http(s) URL", baseURL)
	}
	o := clientOptions{keepalive: 30 * time.Second}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "envd: %w", err)
		}
	}
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	c := &Client{base: strings.TrimRight(baseURL, "/"), hc: httpClient, opts: o}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	co := []connect.ClientOption{
		connect.WithCodec(envdproto.Codec{}),
		// Output is already compact and often local: gzip costs more than it saves.
		connect.WithAcceptCompression("gzip", nil, nil),
	}
	c.start = connect.NewClient[envdproto.StartRequest, envdproto.StartResponse](httpClient, c.base+envdproto.ProcedureStart, co...)
	c.connect = connect.NewClient[envdproto.ConnectRequest, envdproto.ConnectResponse](httpClient, c.base+envdproto.ProcedureConnect, co...)
	c.list = connect.NewClient[envdproto.ListRequest, envdproto.ListResponse](httpClient, c.base+envdproto.ProcedureList, co...)
	c.sendInput = connect.NewClient[envdproto.SendInputRequest, envdproto.SendInputResponse](httpClient, c.base+envdproto.ProcedureSendInput, co...)
	c.sendSignal = connect.NewClient[envdproto.SendSignalRequest, envdproto.SendSignalResponse](httpClient, c.base+envdproto.ProcedureSendSignal, co...)
	c.closeStdin = connect.NewClient[envdproto.CloseStdinRequest, envdproto.CloseStdinResponse](httpClient, c.base+envdproto.ProcedureCloseStdin, co...)
	c.stat = connect.NewClient[envdproto.StatRequest, envdproto.StatResponse](httpClient, c.base+envdproto.ProcedureStat, co...)
	c.listDir = connect.NewClient[envdproto.ListDirRequest, envdproto.ListDirResponse](httpClient, c.base+envdproto.ProcedureListDir, co...)
	c.makeDir = connect.NewClient[envdproto.MakeDirRequest, envdproto.MakeDirResponse](httpClient, c.base+envdproto.ProcedureMakeDir, co...)
	c.move = connect.NewClient[envdproto.MoveRequest, envdproto.MoveResponse](httpClient, c.base+envdproto.ProcedureMove, co...)
	c.remove = connect.NewClient[envdproto.RemoveRequest, envdproto.RemoveResponse](httpClient, c.base+envdproto.ProcedureRemove, co...)
	return c, nil
}

// Close ends the streams of every Process this client started (their Wait
// returns Unavailable) and waits for their goroutines. It leaves the
// processes running and does not close the http.Client's connections.
func (c *Client) Close() error {
	c.cancel()
	c.streams.Wait()
	return nil
}

// request wraps msg with the headers every call carries.
func request[T any](c *Client, msg *T, user string) *connect.Request[T] {
	r := connect.NewRequest(msg)
	if c.opts.token != "" {
		r.Header().Set(AccessTokenHeader, c.opts.token)
	}
	if user == "" {
		user = c.opts.user
	}
	if user != "" {
		r.Header().Set("Authorization", basicUser(user))
	}
	return r
}

// UnixBaseURL is the base URL to use with UnixHTTPClient; its host is ignored.
const UnixBaseURL = "http://envd"

// UnixHTTPClient returns an http.Client whose every connection goes to the
// unix socket at socketPath, keeping enough idle connections for concurrent
// execs to reuse them.
func UnixHTTPClient(socketPath string) *http.Client {
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", socketPath)
		},
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     httpserve.ClientIdleTimeout,
		DisableCompression:  true,
	}}
}
