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

// Server serves the envd protocol. It is an http.Handler; Close kills the
// processes it started.
type Server struct {
	opts      ServerOptions
	mux       *http.ServeMux
	procs     *procTable
	users     *users
	closeOnce sync.Once
}

var _ http.Handler = (*Server)(nil)

// NewServer validates opts and builds the handler: the process.Process and
// filesystem.Filesystem Connect services, /files and /health.
//
// Processes are waited for with os/exec (through Go's pidfd), so a PID 1
// that reaps only zombies no pidfd refers to, as package agent does, never
// steals their exit status.
func NewServer(opts ServerOptions) (*Server, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), procs: newProcTable(), users: newUsers()}
	ho := []connect.HandlerOption{
		connect.WithCodec(envdproto.Codec{}),
		connect.WithReadMaxBytes(int(opts.MaxMessageBytes)),
		connect.WithCompressMinBytes(1024),
		connect.WithInterceptors(tokenInterceptor{s}),
	}
	handle := func(path string, h http.Handler) { s.mux.Handle(path, h) }
	handle(envdproto.ProcedureStart, connect.NewServerStreamHandler(envdproto.ProcedureStart, s.handleStart, ho...))
	handle(envdproto.ProcedureConnect, connect.NewServerStreamHandler(envdproto.ProcedureConnect, s.handleConnect, ho...))
	handle(envdproto.ProcedureList, connect.NewUnaryHandler(envdproto.ProcedureList, s.handleList, ho...))
	handle(envdproto.ProcedureSendInput, connect.NewUnaryHandler(envdproto.ProcedureSendInput, s.handleSendInput, ho...))
	handle(envdproto.ProcedureSendSignal, connect.NewUnaryHandler(envdproto.ProcedureSendSignal, s.handleSendSignal, ho...))
	handle(envdproto.ProcedureCloseStdin, connect.NewUnaryHandler(envdproto.ProcedureCloseStdin, s.handleCloseStdin, ho...))
	handle(envdproto.ProcedureUpdate, connect.NewUnaryHandler(envdproto.ProcedureUpdate, s.handleUpdate, ho...))
	handle(envdproto.ProcedureStat, connect.NewUnaryHandler(envdproto.ProcedureStat, s.handleStat, ho...))
	handle(envdproto.ProcedureListDir, connect.NewUnaryHandler(envdproto.ProcedureListDir, s.handleListDir, ho...))
	handle(envdproto.ProcedureMakeDir, connect.NewUnaryHandler(envdproto.ProcedureMakeDir, s.handleMakeDir, ho...))
	handle(envdproto.ProcedureMove, connect.NewUnaryHandler(envdproto.ProcedureMove, s.handleMove, ho...))
	handle(envdproto.ProcedureRemove, connect.NewUnaryHandler(envdproto.ProcedureRemove, s.handleRemove, ho...))
	handle(envdproto.ProcedureWatchDir, connect.NewServerStreamHandler(envdproto.ProcedureWatchDir, s.handleWatchDir, ho...))
	s.mux.HandleFunc("/files", s.serveFiles)
	s.mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	return s, nil
}

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close kills every running process (SIGKILL to its group) and waits up to
// 5 s for their end events to go out. It does not close
// listeners; call it after the http.Server has stopped taking calls.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.procs.closeAll(5 * time.Second)
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
