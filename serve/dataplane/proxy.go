package dataplane

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/sandbox"
)

// ProxyOptions configure NewProxy.
type ProxyOptions struct {
	// MaxUploadBytes bounds one POST /files body; 0 means 1 GiB.
	MaxUploadBytes int64
	// OnExec, when set, is called once per process Start forwarded.
	OnExec func()
	// Logger receives, at debug level, what the reverse proxy reports
	// (a stream its client or the sandbox ended early); nil discards it.
	// Without it they would go to the standard logger.
	Logger *slog.Logger
}

// Proxy forwards envd calls to a sandbox's own envd server.
type Proxy struct {
	rp   *httputil.ReverseProxy
	opts ProxyOptions
}

var _ http.Handler = (*Proxy)(nil)

// NewProxy returns a handler that forwards every call to ep as it is,
// streaming responses frame by frame. The client's X-Access-Token (already
// checked by the caller) is replaced by ep's own token, so that the
// sandbox's secret never leaves the server.
func NewProxy(ep sandbox.EnvdEndpoint, opts ProxyOptions) (*Proxy, error) {
	if opts.MaxUploadBytes <= 0 {
		opts.MaxUploadBytes = 1 << 30
	}
	base, err := url.Parse(ep.BaseURL)
	if err != nil || base.Scheme == "" || base.Host == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "envd endpoint %q is not an absolute URL", ep.BaseURL)
	}
	tr := ep.Transport
	if tr == nil {
		tr = http.DefaultTransport
	}
	token := ep.AccessToken
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	rp := &httputil.ReverseProxy{
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(base)
			pr.Out.Host = base.Host
			pr.Out.Header.Del("X-Access-Token")
			pr.Out.Header.Del("E2b-Sandbox-Id")
			pr.Out.Header.Del("E2b-Sandbox-Port")
			pr.Out.Header.Del("X-Api-Key")
			if token != "" {
				pr.Out.Header.Set("X-Access-Token", token)
			}
		},
		Transport:     tr,
		FlushInterval: -1, // every Connect frame goes out as it comes
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				envd.WriteHTTPError(w, http.StatusRequestEntityTooLarge, "body is over the %d-byte limit", mbe.Limit)
				return
			}
			envd.WriteHTTPError(w, http.StatusBadGateway, "the sandbox's envd did not answer: %v", err)
		},
	}
	return &Proxy{rp: rp, opts: opts}, nil
}

// ServeHTTP forwards one call. /files paths with ".." are refused here, and
// upload bodies are bounded, before anything reaches the sandbox.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/files" {
		if raw := r.URL.Query().Get("path"); raw != "" {
			if _, err := ResolvePath(raw, "/"); err != nil {
				envd.WriteHTTPError(w, http.StatusBadRequest, "%v", err)
				return
			}
		}
		if r.Method == http.MethodPost {
			if r.ContentLength > p.opts.MaxUploadBytes {
				envd.WriteHTTPError(w, http.StatusRequestEntityTooLarge, "body of %d bytes is over the %d-byte limit", r.ContentLength, p.opts.MaxUploadBytes)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, p.opts.MaxUploadBytes)
		}
	}
	// The sandbox may answer before the transport has finished reading the
	// request body (it reads once more after the last byte, to check for
	// extra ones). By default the server discards and closes an unread
	// body when the response starts; that read would then fail, and the
	// transport would drop the connection mid-stream. Full duplex leaves
	// the body to the transport. (HTTP/2 does not need it.)
	_ = http.NewResponseController(w).EnableFullDuplex()
	if p.opts.OnExec != nil && strings.HasSuffix(r.URL.Path, "/process.Process/Start") {
		p.opts.OnExec()
	}
	p.rp.ServeHTTP(w, r)
}
