package envd

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/envd/envdproto"
)

// AccessTokenHeader carries the per-sandbox access token.
const AccessTokenHeader = "X-Access-Token"

// Server serves the envd protocol over a Backend. It is an http.Handler;
// Close ends the processes it started.
type Server struct {
	b     Backend
	opts  Options
	mux   *http.ServeMux
	procs *procTable

	// ctx is the lifetime of the processes and watches started here: they
	// outlive the request that started them, as in envd, and end at Close.
	ctx       context.Context
	cancel    context.CancelFunc
	closeOnce sync.Once
}

var _ http.Handler = (*Server)(nil)

// NewServer serves the protocol over this host (see ServerOptions).
//
// Processes are started and waited for by internal/hostproc, through Go's
// os.Process and its pidfd, so a PID 1 that reaps only zombies no pidfd
// refers to, as package pid1 does, never steals their exit status.
func NewServer(opts ServerOptions) (*Server, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	var b Backend = newHost(opts)
	if opts.Blocking != nil {
		b = gated{b: b, sem: opts.Blocking}
	}
	return New(b, Options{
		AccessToken:     opts.AccessToken,
		MaxMessageBytes: opts.MaxMessageBytes,
		MaxUploadBytes:  opts.MaxUploadBytes,
		MaxListEntries:  opts.MaxListEntries,
	})
}

// New validates opts and builds the handler over b: the process.Process and
// filesystem.Filesystem Connect services, /files and /health.
func New(b Backend, opts Options) (*Server, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{b: b, opts: opts, mux: http.NewServeMux(), procs: newProcTable(), ctx: ctx, cancel: cancel}
	ho := []connect.HandlerOption{
		connect.WithCodec(envdproto.Codec{}),
		connect.WithReadMaxBytes(int(opts.MaxMessageBytes)),
		connect.WithCompressMinBytes(1024),
		connect.WithInterceptors(tokenInterceptor{s}),
	}
	h := s.mux.Handle
	h(envdproto.ProcedureStart, connect.NewServerStreamHandler(envdproto.ProcedureStart, s.handleStart, ho...))
	h(envdproto.ProcedureConnect, connect.NewServerStreamHandler(envdproto.ProcedureConnect, s.handleConnect, ho...))
	h(envdproto.ProcedureWatchDir, connect.NewServerStreamHandler(envdproto.ProcedureWatchDir, s.handleWatchDir, ho...))
	h(envdproto.ProcedureList, connect.NewUnaryHandler(envdproto.ProcedureList, s.handleList, ho...))
	h(envdproto.ProcedureSendInput, connect.NewUnaryHandler(envdproto.ProcedureSendInput, s.handleSendInput, ho...))
	h(envdproto.ProcedureSendSignal, connect.NewUnaryHandler(envdproto.ProcedureSendSignal, s.handleSendSignal, ho...))
	h(envdproto.ProcedureCloseStdin, connect.NewUnaryHandler(envdproto.ProcedureCloseStdin, s.handleCloseStdin, ho...))
	h(envdproto.ProcedureUpdate, connect.NewUnaryHandler(envdproto.ProcedureUpdate, s.handleUpdate, ho...))
	h(envdproto.ProcedureStat, connect.NewUnaryHandler(envdproto.ProcedureStat, s.handleStat, ho...))
	h(envdproto.ProcedureListDir, connect.NewUnaryHandler(envdproto.ProcedureListDir, s.handleListDir, ho...))
	h(envdproto.ProcedureMakeDir, connect.NewUnaryHandler(envdproto.ProcedureMakeDir, s.handleMakeDir, ho...))
	h(envdproto.ProcedureMove, connect.NewUnaryHandler(envdproto.ProcedureMove, s.handleMove, ho...))
	h(envdproto.ProcedureRemove, connect.NewUnaryHandler(envdproto.ProcedureRemove, s.handleRemove, ho...))
	s.mux.HandleFunc("/files", s.serveFiles)
	s.mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	// envd's own error shape for anything else, so that clients can read it.
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		WriteHTTPError(w, http.StatusNotFound, "no envd route %s %s", r.Method, r.URL.Path)
	})
	return s, nil
}

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close refuses new processes, ends the running ones (the backend decides
// how: the host kills them, the sandbox API ends their streams) and waits
// up to 5 s for their end events to go out. It does not close listeners;
// call it after the http.Server has stopped taking calls.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.procs.close()
		s.cancel()
		done := make(chan struct{})
		go func() { s.procs.wg.Wait(); close(done) }()
		t := time.NewTimer(5 * time.Second)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
	})
	return nil
}

func (s *Server) tokenOK(h http.Header) bool {
	if s.opts.AccessToken == "" {
		return true
	}
	got := h.Get(AccessTokenHeader)
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.AccessToken)) == 1
}

var errToken = errors.New("missing or invalid access token")

// tokenInterceptor refuses RPCs without the access token, with a Connect
// error so that clients see the unauthenticated code.
type tokenInterceptor struct{ s *Server }

func (t tokenInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if !t.s.tokenOK(req.Header()) {
			return nil, connect.NewError(connect.CodeUnauthenticated, errToken)
		}
		return next(ctx, req)
	}
}

func (t tokenInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (t tokenInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if !t.s.tokenOK(conn.RequestHeader()) {
			return connect.NewError(connect.CodeUnauthenticated, errToken)
		}
		return next(ctx, conn)
	}
}
