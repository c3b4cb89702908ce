package view

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/berth-sh/berth/results"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

//go:embed templates/*.tmpl
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// CSP is the Content-Security-Policy of every page: scripts and styles
// only from the server's own static files (no inline script or style, so
// markup injected through a sandbox's output could not run or restyle
// anything even if escaping failed), images from the server or data:
// URLs, fetches to the server only, no framing.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// rawCSP is the policy of raw files: nothing runs, nothing loads.
const rawCSP = "default-src 'none'; sandbox; frame-ancestors 'none'"

// Options configure a Server.
type Options struct {
	// AllowedHosts are host names (besides localhost and IP literals)
	// that requests may name in Host. Names not listed are refused, so a
	// web page cannot reach the viewer through DNS rebinding.
	AllowedHosts []string
	// Logger receives request errors; nil discards them.
	Logger *slog.Logger
}

// Server serves the viewer's pages over a Library.
type Server struct {
	lib   *results.Library
	opts  Options
	pages map[string]*template.Template
	mux   *http.ServeMux
}

// New makes a Server; it reads only through lib.
func New(lib *results.Library, opts Options) (*Server, error) {
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{lib: lib, opts: opts, pages: pages, mux: http.NewServeMux()}
	static, _ := fs.Sub(staticFS, "static")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /{$}", s.jobsPage)
	s.mux.HandleFunc("GET /jobs/{root}/{job}/{$}", s.jobPage)
	s.mux.HandleFunc("GET /jobs/{root}/{job}/charts/{chart}", s.chart)
	s.mux.HandleFunc("GET /jobs/{root}/{job}/trials/{trial}/{$}", s.trialPage)
	s.mux.HandleFunc("GET /jobs/{root}/{job}/trials/{trial}/samples", s.samplesPage)
	s.mux.HandleFunc("GET /jobs/{root}/{job}/trials/{trial}/files/{path...}", s.rawFile)
	s.mux.HandleFunc("GET /compare", s.comparePage)
	s.mux.HandleFunc("GET /api/jobs", s.jobsAPI)
	s.mux.HandleFunc("GET /api/jobs/{root}/{job}", s.jobAPI)
	return s, nil
}

// pageFiles are the page templates; each is parsed with the layout and
// the shared parts.
var pageFiles = []string{"jobs", "job", "trial", "samples", "compare", "error", "report"}

func parsePages() (map[string]*template.Template, error) {
	base, err := template.New("base").Funcs(funcs).ParseFS(templateFS, "templates/layout.tmpl", "templates/parts.tmpl", "templates/trialparts.tmpl")
	if err != nil {
		return nil, err
	}
	out := map[string]*template.Template{}
	for _, p := range pageFiles {
		t, err := template.Must(base.Clone()).ParseFS(templateFS, "templates/"+p+".tmpl")
		if err != nil {
			return nil, err
		}
		out[p] = t
	}
	return out, nil
}

// ServeHTTP applies the security headers and checks, then routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "read-only: GET and HEAD only", http.StatusMethodNotAllowed)
		return
	}
	if !s.hostAllowed(r.Host) {
		http.Error(w, "unknown Host: open the viewer by its address (127.0.0.1 or localhost)", http.StatusMisdirectedRequest)
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") || net.ParseIP(host) != nil {
		return true
	}
	for _, a := range s.opts.AllowedHosts {
		if strings.EqualFold(host, a) {
			return true
		}
	}
	return false
}

// ref reads the job route parameters.
func ref(r *http.Request) (results.Ref, error) {
	root, err := strconv.Atoi(r.PathValue("root"))
	if err != nil || root < 0 {
		return results.Ref{}, errdefs.Errorf(errdefs.NotFound, "no jobs directory %q", r.PathValue("root"))
	}
	return results.Ref{Root: root, Name: r.PathValue("job")}, nil
}

// render executes a page into a buffer first, so a failing template
// sends an error page, not half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, page string, data any) {
	var b bytes.Buffer
	if err := s.pages[page].ExecuteTemplate(&b, "layout", data); err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, errdefs.ErrInvalidArgument):
		code = http.StatusBadRequest
	case errors.Is(err, context.Canceled):
		return
	}
	if code == http.StatusInternalServerError {
		s.opts.Logger.Error("view: request failed", "path", r.URL.Path, "error", err)
	}
	var b bytes.Buffer
	data := errorPage{page: page{Title: http.StatusText(code), L: serverLinks{}}, Code: code, Message: err.Error()}
	if terr := s.pages["error"].ExecuteTemplate(&b, "layout", data); terr != nil {
		http.Error(w, http.StatusText(code), code)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
