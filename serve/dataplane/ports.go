package dataplane

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/internal/httpserve"
	"github.com/berth-sh/berth/sandbox"
)

// PortOptions configure NewPorts.
type PortOptions struct {
	// SandboxID names the sandbox in error answers (the client's ID).
	SandboxID string
	// Logger receives, at debug level, what the reverse proxy reports; nil
	// discards it.
	Logger *slog.Logger
}

// Ports proxies HTTP to any port of one sandbox: plain requests,
// WebSocket upgrades and long streams (every chunk goes out as it comes).
// Over a sandbox that carries connections itself (sandbox.DialPort, the
// local provider's agent) each connection to the port is dialled through
// it, and kept alive for the next request; over any other, the requests
// go to the sandbox's Endpoint, with its headers, and a fresh endpoint is
// fetched before the last one expires.
type Ports struct {
	sb   *sandbox.Sandbox
	opts PortOptions
	dial bool // DialPort works

	mu     sync.Mutex
	closed bool
	byPort map[int]*portProxy
}

// NewPorts returns the port proxy of sb. The caller keeps ownership of sb.
func NewPorts(sb *sandbox.Sandbox, caps sandbox.Capabilities, opts PortOptions) *Ports {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Ports{sb: sb, opts: opts, dial: caps.DialPort, byPort: map[int]*portProxy{}}
}

// Close ends the idle connections to the sandbox's ports.
func (p *Ports) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, pp := range p.byPort {
		pp.tr.CloseIdleConnections()
	}
	p.byPort = nil
	return nil
}

// portProxy is the reverse proxy of one port.
type portProxy struct {
	p    *Ports
	port int
	tr   *http.Transport
	rp   *httputil.ReverseProxy

	mu sync.Mutex
	ep *sandbox.Endpoint // Endpoint mode: the current endpoint
}

// endpointMargin is how long before its expiry an endpoint is replaced.
const endpointMargin = 30 * time.Second

// ServePort forwards r to port. The caller has checked that the client
// may reach the sandbox's ports.
func (p *Ports) ServePort(w http.ResponseWriter, r *http.Request, port int) {
	pp, err := p.proxy(port)
	if err != nil {
		p.writeError(w, port, err)
		return
	}
	if !p.dial {
		ep, err := pp.endpoint(r.Context())
		if err != nil {
			p.writeError(w, port, err)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), endpointKey{}, ep))
	}
	// As for envd: the sandbox may answer before the request body is
	// read to the end.
	_ = http.NewResponseController(w).EnableFullDuplex()
	pp.rp.ServeHTTP(w, r)
}

func (p *Ports) proxy(port int) (*portProxy, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, sandbox.Errorf(sandbox.NotFound, "the sandbox is gone")
	}
	if pp := p.byPort[port]; pp != nil {
		return pp, nil
	}
	pp := &portProxy{p: p, port: port}
	pp.tr = httpserve.Transport()
	pp.tr.MaxIdleConnsPerHost = 32
	pp.tr.DisableCompression = true // the client's Accept-Encoding goes as it came
	pp.tr.Proxy = nil
	target := &url.URL{Scheme: "http", Host: "sandbox:" + strconv.Itoa(port)}
	if p.dial {
		pp.tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return p.sb.DialPort(ctx, port)
		}
	}
	pp.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			for _, h := range []string{e2bapi.TrafficAccessTokenHeader, e2bapi.SandboxIDHeader, e2bapi.SandboxPortHeader, e2bapi.APIKeyHeader} {
				pr.Out.Header.Del(h)
			}
			if ep, ok := pr.In.Context().Value(endpointKey{}).(sandbox.Endpoint); ok {
				base, _ := url.Parse(ep.URL) // checked by endpoint
				pr.SetURL(base)
				pr.Out.Host = base.Host
				ep.SetHeaders(pr.Out.Header)
				return
			}
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host // the server in the sandbox sees the name the client used
		},
		Transport:     pp.tr,
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(p.opts.Logger.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.writeError(w, port, err)
		},
	}
	p.byPort[port] = pp
	return pp, nil
}

// endpointKey carries, in Endpoint mode, the endpoint a request goes to.
type endpointKey struct{}

func (pp *portProxy) endpoint(ctx context.Context) (sandbox.Endpoint, error) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.ep != nil && (pp.ep.Expires.IsZero() || time.Until(pp.ep.Expires) > endpointMargin) {
		return *pp.ep, nil
	}
	ep, err := pp.p.sb.Endpoint(ctx, sandbox.Port{Number: pp.port, Protocol: sandbox.PortHTTP})
	if err != nil {
		return sandbox.Endpoint{}, err
	}
	if u, perr := url.Parse(ep.URL); perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return sandbox.Endpoint{}, sandbox.Errorf(sandbox.Unavailable, "the sandbox's endpoint %q is not an http(s) URL", ep.URL)
	}
	pp.ep = &ep
	return ep, nil
}

// portError is the answer for a port that could not be reached, in the
// shape of E2B's edge ("The sandbox is running but port is not open",
// 502), with berth's reason.
type portError struct {
	SandboxID string `json:"sandboxId"`
	Message   string `json:"message"`
	Port      int    `json:"port"`
	Code      int    `json:"code"`
	Reason    string `json:"reason,omitempty"`
}

func (p *Ports) writeError(w http.ResponseWriter, port int, err error) {
	// Only berth's own errors are quoted: a transport's error to an
	// endpoint names its URL, which may carry a token (a signed preview
	// URL's host).
	reason := "the port did not answer"
	var be *sandbox.Error
	if errors.As(err, &be) {
		reason = be.Error()
	}
	msg := "The sandbox is running but port is not open"
	if sandbox.ClassOf(err) == sandbox.NotFound {
		msg = "The sandbox was not found"
	}
	p.opts.Logger.Debug("port unreachable", "port", port, "error", reason)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadGateway)
	_ = json.NewEncoder(w).Encode(portError{SandboxID: p.opts.SandboxID, Message: msg, Port: port, Code: http.StatusBadGateway, Reason: reason})
}
