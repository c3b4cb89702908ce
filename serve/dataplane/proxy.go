package dataplane

import (
	"compress/gzip"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/envd/envdproto"
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
			// The path is the checked route itself (route), never the
			// client's spelling of it.
			pr.Out.URL.Path = strings.TrimRight(base.Path, "/") + pr.In.URL.Path
			pr.Out.URL.RawPath = ""
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

// routes are the only paths forwarded: envd's own (its Connect procedures,
// /files and /health), exactly as written here. The sandbox's agent serves
// its control endpoints (the deadline) on the same socket, and a key
// holder must not reach them through the proxy by any spelling of a path.
var routes = func() map[string]bool {
	m := map[string]bool{"/files": true, "/health": true}
	for _, p := range []string{
		envdproto.ProcedureStart, envdproto.ProcedureConnect, envdproto.ProcedureList,
		envdproto.ProcedureSendInput, envdproto.ProcedureSendSignal, envdproto.ProcedureCloseStdin,
		envdproto.ProcedureUpdate, envdproto.ProcedureStreamInput,
		envdproto.ProcedureStat, envdproto.ProcedureListDir, envdproto.ProcedureMakeDir,
		envdproto.ProcedureMove, envdproto.ProcedureRemove, envdproto.ProcedureWatchDir,
	} {
		m[p] = true
	}
	return m
}()

// route returns the envd route a request names, or false. The path must
// be one of routes byte for byte as it came on the wire: no percent
// escape (net/url keeps RawPath whenever the client's spelling differs
// from the canonical one), no dot segment, doubled slash or other case,
// which the server behind could read as another path.
func route(r *http.Request) (string, bool) {
	if r.URL.RawPath != "" || !routes[r.URL.Path] {
		return "", false
	}
	return r.URL.Path, true
}

// ServeHTTP forwards one call. Only envd's own routes go through; /files
// paths with ".." are refused here, and upload bodies are bounded in the
// bytes the sandbox will write (a gzip body decompressed), before anything
// reaches the sandbox.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, ok := route(r)
	if !ok {
		envd.WriteHTTPError(w, http.StatusNotFound, "no envd route %s %q", r.Method, r.URL.EscapedPath())
		return
	}
	if rt == "/files" {
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
			if !p.decompressUpload(w, r) {
				return
			}
			defer p.pipeBody(r)()
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

// decompressUpload turns a gzip upload body into the plain bytes, cut at
// MaxUploadBytes of them, so that the limit counts what the sandbox
// writes: a gzip bomb of a few kilobytes would otherwise pass the wire
// limit and unpack to gigabytes in the sandbox. The sandbox's envd then
// gets the plain body. False means an answer was written.
func (p *Proxy) decompressUpload(w http.ResponseWriter, r *http.Request) bool {
	enc := strings.TrimSpace(r.Header.Get("Content-Encoding"))
	if enc == "" || strings.EqualFold(enc, "identity") {
		return true
	}
	if !strings.EqualFold(enc, "gzip") {
		envd.WriteHTTPError(w, http.StatusUnsupportedMediaType, "content encoding %q is not gzip", enc)
		return false
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		envd.WriteHTTPError(w, http.StatusBadRequest, "gzip: %v", err)
		return false
	}
	r.Body = &readCloser{Reader: &overLimit{r: zr, limit: p.opts.MaxUploadBytes, left: p.opts.MaxUploadBytes}, Closer: r.Body}
	r.Header.Del("Content-Encoding")
	r.Header.Del("Content-Length")
	r.ContentLength = -1
	return true
}

// pipeBody hands the transport a pipe fed from the request body by a
// goroutine of this handler, and returns what to call before the handler
// returns: it stops the copy and waits for it. The transport may read and
// close the body it was given after the sandbox has answered, even after
// the handler returned; the server's own body must not be touched then
// (net/http panics on a concurrent read of the connection).
func (p *Proxy) pipeBody(r *http.Request) (wait func()) {
	pr, pw := io.Pipe()
	body := r.Body
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := io.Copy(pw, body)
		pw.CloseWithError(err)
	}()
	r.Body = pr
	return func() {
		pr.CloseWithError(errUploadDone)
		<-done
		_ = body.Close()
	}
}

var errUploadDone = errors.New("the upload's answer has gone out")

// overLimit fails with an *http.MaxBytesError once more than left bytes
// were read, which the proxy's error handler answers 413.
type overLimit struct {
	r           io.Reader
	limit, left int64
}

func (l *overLimit) Read(b []byte) (int, error) {
	if l.left < 0 {
		return 0, &http.MaxBytesError{Limit: l.limit}
	}
	if int64(len(b)) > l.left+1 {
		b = b[:l.left+1]
	}
	n, err := l.r.Read(b)
	l.left -= int64(n)
	if l.left < 0 {
		return 0, &http.MaxBytesError{Limit: l.limit}
	}
	return n, err
}

type readCloser struct {
	io.Reader
	io.Closer
}
