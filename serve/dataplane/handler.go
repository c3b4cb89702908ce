package dataplane

import (
	"context"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/envd/envdproto"
	"github.com/berth-sh/berth/sandbox"
)

// Options configure New.
type Options struct {
	// HomeDir is the working directory of commands that name none and the
	// base of relative paths, as the default user's home is in envd; it is
	// used only when it exists in the sandbox. "" means "/root".
	HomeDir string
	// MaxUploadBytes bounds one POST /files body (after decompression); 0
	// means 1 GiB. More is refused with 413.
	MaxUploadBytes int64
	// MaxMessageBytes bounds one Connect request message; 0 means 8 MiB.
	MaxMessageBytes int
	// MaxListEntries bounds one ListDir answer; 0 means 10,000.
	MaxListEntries int
	// OnExec, when set, is called once per process started (for metrics).
	OnExec func()
}

func (o *Options) fill() {
	if o.HomeDir == "" {
		o.HomeDir = "/root"
	}
	if o.MaxUploadBytes <= 0 {
		o.MaxUploadBytes = 1 << 30
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 8 << 20
	}
	if o.MaxListEntries <= 0 {
		o.MaxListEntries = 10_000
	}
}

// Handler serves envd for one sandbox through the sandbox.Sandbox API. It
// is an http.Handler; Close ends the streams of its processes.
type Handler struct {
	sb    *sandbox.Sandbox
	opts  Options
	mux   *http.ServeMux
	procs *procTable

	// ctx is the lifetime of processes started here: they outlive the
	// request that started them, as in envd.
	ctx    context.Context
	cancel context.CancelFunc

	homeOnce sync.Once
	homeOK   bool
}

var _ http.Handler = (*Handler)(nil)

// New returns the data plane of sb. The caller keeps ownership of sb.
func New(sb *sandbox.Sandbox, opts Options) *Handler {
	opts.fill()
	ctx, cancel := context.WithCancel(context.Background())
	h := &Handler{sb: sb, opts: opts, mux: http.NewServeMux(), procs: newProcTable(), ctx: ctx, cancel: cancel}
	ho := []connect.HandlerOption{
		connect.WithCodec(envdproto.Codec{}),
		connect.WithReadMaxBytes(opts.MaxMessageBytes),
		connect.WithCompressMinBytes(1024),
	}
	h.mux.Handle(envdproto.ProcedureStart, connect.NewServerStreamHandler(envdproto.ProcedureStart, h.handleStart, ho...))
	h.mux.Handle(envdproto.ProcedureConnect, connect.NewServerStreamHandler(envdproto.ProcedureConnect, h.handleConnect, ho...))
	h.mux.Handle(envdproto.ProcedureList, connect.NewUnaryHandler(envdproto.ProcedureList, h.handleList, ho...))
	h.mux.Handle(envdproto.ProcedureSendInput, connect.NewUnaryHandler(envdproto.ProcedureSendInput, h.handleSendInput, ho...))
	h.mux.Handle(envdproto.ProcedureSendSignal, connect.NewUnaryHandler(envdproto.ProcedureSendSignal, h.handleSendSignal, ho...))
	h.mux.Handle(envdproto.ProcedureCloseStdin, connect.NewUnaryHandler(envdproto.ProcedureCloseStdin, h.handleCloseStdin, ho...))
	h.mux.Handle(envdproto.ProcedureUpdate, connect.NewUnaryHandler(envdproto.ProcedureUpdate, h.handleUpdate, ho...))
	h.mux.Handle(envdproto.ProcedureStat, connect.NewUnaryHandler(envdproto.ProcedureStat, h.handleStat, ho...))
	h.mux.Handle(envdproto.ProcedureListDir, connect.NewUnaryHandler(envdproto.ProcedureListDir, h.handleListDir, ho...))
	h.mux.Handle(envdproto.ProcedureMakeDir, connect.NewUnaryHandler(envdproto.ProcedureMakeDir, h.handleMakeDir, ho...))
	h.mux.Handle(envdproto.ProcedureMove, connect.NewUnaryHandler(envdproto.ProcedureMove, h.handleMove, ho...))
	h.mux.Handle(envdproto.ProcedureRemove, connect.NewUnaryHandler(envdproto.ProcedureRemove, h.handleRemove, ho...))
	h.mux.Handle(envdproto.ProcedureWatchDir, connect.NewServerStreamHandler(envdproto.ProcedureWatchDir, h.handleWatchDir, ho...))
	h.mux.HandleFunc("/files", h.serveFiles)
	h.mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		WriteHTTPError(w, http.StatusNotFound, "no envd route %s %s", r.Method, r.URL.Path)
	})
	return h
}

// ServeHTTP routes one envd call.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Close ends the streams of every process started here (with an end event
// saying why) and waits up to 5 s for them. It does not kill the processes:
// deleting the sandbox does that.
func (h *Handler) Close() error {
	h.procs.all()
	h.cancel()
	done := make(chan struct{})
	go func() { h.procs.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	return nil
}

// home reports whether HomeDir exists in the sandbox (checked once).
func (h *Handler) home() (string, bool) {
	h.homeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
		defer cancel()
		fi, err := h.sb.Stat(ctx, h.opts.HomeDir)
		h.homeOK = err == nil && fi.Type == sandbox.FileDir
	})
	return h.opts.HomeDir, h.homeOK
}
