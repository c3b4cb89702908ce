package core

import (
	"net/http"
	"strconv"
	"time"

	"github.com/berth-sh/berth/envd/envdproto"
)

// recorder keeps the status of a response and passes flushes through:
// envd streams must go out frame by frame.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// envdRoutes are the data-plane paths named in metrics; any other path is
// "other", so that a client cannot grow the label space.
var envdRoutes = map[string]bool{
	"/files": true, "/health": true,
	envdproto.ProcedureStart: true, envdproto.ProcedureConnect: true, envdproto.ProcedureList: true,
	envdproto.ProcedureSendInput: true, envdproto.ProcedureSendSignal: true, envdproto.ProcedureCloseStdin: true,
	envdproto.ProcedureUpdate: true, envdproto.ProcedureStreamInput: true,
	envdproto.ProcedureStat: true, envdproto.ProcedureListDir: true, envdproto.ProcedureMakeDir: true,
	envdproto.ProcedureMove: true, envdproto.ProcedureRemove: true, envdproto.ProcedureWatchDir: true,
}

// EnvdRoute names a data-plane call in metrics: its path, if envd's.
func EnvdRoute(r *http.Request) string {
	if envdRoutes[r.URL.Path] {
		return r.URL.Path
	}
	return "other"
}

// ControlRoute names a control-plane call in metrics: the pattern that
// matched it.
func ControlRoute(r *http.Request) string {
	if r.Pattern == "" {
		return "other"
	}
	return r.Pattern
}

// Observe wraps h with metrics and a log line per request, plane naming
// the API's part ("control", "data", "opensandbox") and route the call.
// The log has the method, route, status and duration; never the query (it
// may hold a signature) or a header.
func (s *Server) Observe(plane string, route func(*http.Request) string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		rt := route(r)
		d := time.Since(start)
		s.m.requests.WithLabelValues(plane, rt, strconv.Itoa(rec.status)).Inc()
		s.m.duration.WithLabelValues(plane, rt).Observe(d.Seconds())
		lvl := s.log.Debug
		if plane == "control" && r.Method != http.MethodGet || rec.status >= 500 {
			lvl = s.log.Info
		}
		lvl("request", "plane", plane, "method", r.Method, "route", rt, "status", rec.status, "duration", d)
	})
}
