package daytonatest

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth/internal/testing/fakeengine"
)

// Preview URLs. Daytona's are hosts, <port>-<sandbox id>.<proxy domain>
// with the sandbox's preview token in the X-Daytona-Preview-Token header,
// and <port>-<token>.<proxy domain> for a signed URL that carries its own
// credential until it expires. The fake has one loopback address, so the
// same names are the first element of a path on it instead:
// /preview/<port>-<id>/... and /signed/<port>-<token>/.... The proxy
// forwards to the port on the loopback address, where a server started
// in the sandbox listens (the fake's sandboxes share the host's network).
const (
	previewPrefix = "/preview/"
	signedPrefix  = "/signed/"
	toolboxPrefix = "/toolbox/"

	previewTokenHeader = "X-Daytona-Preview-Token"
)

// signedURL is a signed preview URL's token record.
type signedURL struct {
	sandboxID string
	port      int
	expires   time.Time
}

func (s *Server) previewRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/sandbox/{id}/ports/{port}/preview-url", s.withSandbox(func(w http.ResponseWriter, r *http.Request, sb *sandbox) {
		port, ok := previewPort(w, r.PathValue("port"))
		if !ok {
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"sandboxId": sb.ID,
			"url":       fmt.Sprintf("%s%s%d-%s", s.srv.URL, previewPrefix, port, sb.ID),
			"token":     s.previewToken(sb),
		})
	}))
	mux.HandleFunc("GET /api/sandbox/{id}/ports/{port}/signed-preview-url", s.withSandbox(func(w http.ResponseWriter, r *http.Request, sb *sandbox) {
		port, ok := previewPort(w, r.PathValue("port"))
		if !ok {
			return
		}
		secs := 60
		if v := r.URL.Query().Get("expiresInSeconds"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 24*60*60 {
				writeError(w, http.StatusBadRequest, "expiresInSeconds must be between 1 second and 24 hours")
				return
			}
			secs = n
		}
		token := strings.ToLower(randomHex(8))
		s.signed[token] = signedURL{sandboxID: sb.ID, port: port, expires: time.Now().Add(time.Duration(secs) * time.Second)}
		writeJSON(w, http.StatusOK, map[string]any{
			"sandboxId": sb.ID,
			"port":      port,
			"token":     token,
			"url":       fmt.Sprintf("%s%s%d-%s", s.srv.URL, signedPrefix, port, token),
		})
	}))
	mux.HandleFunc("POST /api/sandbox/{id}/ports/{port}/signed-preview-url/{token}/expire", s.withSandbox(func(w http.ResponseWriter, r *http.Request, sb *sandbox) {
		port, ok := previewPort(w, r.PathValue("port"))
		if !ok {
			return
		}
		if u, ok := s.signed[r.PathValue("token")]; ok && u.sandboxID == sb.ID && u.port == port {
			delete(s.signed, r.PathValue("token"))
		}
		w.WriteHeader(http.StatusCreated)
	}))
	mux.HandleFunc(previewPrefix+"{target}/", s.proxyPreview)
	mux.HandleFunc(previewPrefix+"{target}", s.proxyPreview)
	mux.HandleFunc(signedPrefix+"{target}/", s.proxySigned)
	mux.HandleFunc(signedPrefix+"{target}", s.proxySigned)
}

func previewPort(w http.ResponseWriter, v string) (int, bool) {
	port, err := strconv.Atoi(v)
	if err != nil || port < 1 || port > 65535 {
		writeError(w, http.StatusBadRequest, "Invalid port")
		return 0, false
	}
	return port, true
}

// previewToken is the sandbox's preview token, made on first use; s.mu
// is held.
func (s *Server) previewToken(sb *sandbox) string {
	if sb.authToken == "" {
		sb.authToken = randomHex(16)
	}
	return sb.authToken
}

// proxyPreview serves /preview/<port>-<id>/...: the sandbox's preview
// token is required (the fake has no public sandboxes' login pages).
func (s *Server) proxyPreview(w http.ResponseWriter, r *http.Request) {
	port, id, ok := splitTarget(r.PathValue("target"))
	s.mu.Lock()
	sb := s.find(id)
	var token, state string
	if sb != nil {
		token, state = s.previewToken(sb), sb.State
	}
	s.mu.Unlock()
	switch {
	case !ok || sb == nil || state == stateDestroyed:
		writeError(w, http.StatusNotFound, "sandbox not found")
	case subtle.ConstantTimeCompare([]byte(r.Header.Get(previewTokenHeader)), []byte(token)) != 1:
		writeError(w, http.StatusUnauthorized, "missing or invalid preview token")
	default:
		s.forward(w, r, state, port, previewPrefix+r.PathValue("target"))
	}
}

// proxySigned serves /signed/<port>-<token>/... while the token lives.
func (s *Server) proxySigned(w http.ResponseWriter, r *http.Request) {
	port, token, ok := splitTarget(r.PathValue("target"))
	s.mu.Lock()
	u, found := s.signed[token]
	var state string
	if found {
		if sb := s.find(u.sandboxID); sb != nil {
			state = sb.State
		}
	}
	s.mu.Unlock()
	if !ok || !found || u.port != port || time.Now().After(u.expires) || state == "" {
		writeError(w, http.StatusForbidden, "Invalid or expired token")
		return
	}
	s.forward(w, r, state, port, signedPrefix+r.PathValue("target"))
}

// forward proxies r to the port, without the prefix and without the
// caller's credentials.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, state string, port int, prefix string) {
	if state != stateStarted {
		writeError(w, http.StatusBadGateway, "sandbox is not running (state "+state+")")
		return
	}
	to := "/" + strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, prefix), "/")
	fakeengine.Proxy(port, to, []string{"Authorization", previewTokenHeader}, func(w http.ResponseWriter) {
		writeError(w, http.StatusBadGateway, "no server is listening on port "+strconv.Itoa(port))
	}).ServeHTTP(w, r)
}

// splitTarget reads "<port>-<rest>".
func splitTarget(t string) (int, string, bool) {
	p, rest, ok := strings.Cut(t, "-")
	port, err := strconv.Atoi(p)
	return port, rest, ok && err == nil && port > 0 && port < 65536 && rest != ""
}
