package e2bserve

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/serve/internal/core"
)

// hostTarget parses Host "<port>-<id>.<domain>"; a port on the Host or
// the domain is not compared.
func (s *API) hostTarget(host string) (id, port string, ok bool) {
	h := stripPort(strings.ToLower(host))
	label, ok := strings.CutSuffix(h, "."+stripPort(s.opts.Domain))
	if !ok || strings.Contains(label, ".") {
		return "", "", false
	}
	port, id, ok = strings.Cut(label, "-")
	if !ok || port == "" || id == "" {
		return "", "", false
	}
	return id, port, true
}

func stripPort(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		return h[:i]
	}
	return h
}

func isRPC(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/process.Process/") || strings.HasPrefix(r.URL.Path, "/filesystem.Filesystem/")
}

// refuse answers a data-plane call that does not reach a sandbox, in the
// shape its client reads: Connect errors for RPCs, envd's JSON otherwise.
func refuse(w http.ResponseWriter, r *http.Request, status int, code connect.Code, format string, args ...any) {
	if isRPC(r) {
		envd.WriteRPCError(w, r, code, fmtMsg(format, args...))
		return
	}
	envd.WriteHTTPError(w, status, format, args...)
}

// serveData finds the sandbox a data-plane call is for, checks its access
// token and hands the call to the sandbox's data plane.
func (s *API) serveData(w http.ResponseWriter, r *http.Request) {
	id, port := r.Header.Get(e2bapi.SandboxIDHeader), r.Header.Get(e2bapi.SandboxPortHeader)
	if id == "" {
		id, port, _ = s.hostTarget(r.Host)
	}
	token := r.Header.Get(envd.AccessTokenHeader)
	var rec *core.Record
	switch {
	case id != "":
		rec = s.c.Get(id)
	case token != "":
		// SDKs 2.7 - 2.14.0 send /files with neither header nor host; the
		// token is unique per sandbox.
		// A token that names no live sandbox most likely belonged to one
		// that is gone: answer as for a gone sandbox (isRunning reads 502
		// as false). Tokens are 256 random bits; this tells nothing.
		rec = s.c.ByToken(token)
		if rec == nil {
			refuse(w, r, http.StatusBadGateway, connect.CodeNotFound, "no running sandbox has this access token (killed or timed out)")
			return
		}
	default:
		refuse(w, r, http.StatusBadRequest, connect.CodeInvalidArgument,
			"no sandbox named: send %s, a Host of <port>-<id>.%s, or %s", e2bapi.SandboxIDHeader, s.opts.Domain, envd.AccessTokenHeader)
		return
	}
	if rec == nil {
		// 502 is what E2B's edge answers for a sandbox that is gone, and
		// what the SDKs' isRunning reads as false.
		refuse(w, r, http.StatusBadGateway, connect.CodeNotFound, "sandbox %q is not running (killed, timed out or never created)", id)
		return
	}
	if port != "" && port != e2bapi.EnvdPort {
		s.servePort(w, r, rec, port)
		return
	}
	if !s.dataAuthorized(r, rec, token) {
		s.m.AuthFails.WithLabelValues("data").Inc()
		refuse(w, r, http.StatusUnauthorized, connect.CodeUnauthenticated, "missing or invalid access token for sandbox %s", rec.ID)
		return
	}
	rec.Plane.ServeHTTP(w, r)
}

// dataAuthorized: GET /health is open; /files takes the token or an envd
// signature made with it; everything else needs the token.
func (s *API) dataAuthorized(r *http.Request, rec *core.Record, token string) bool {
	if r.URL.Path == "/health" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		return true
	}
	if token != "" {
		return rec.TokenOK(token)
	}
	if r.URL.Path != "/files" {
		return false
	}
	q := r.URL.Query()
	sig := q.Get("signature")
	if sig == "" {
		return false
	}
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	}
	exp := q.Get("signature_expiration")
	if exp != "" && expired(exp) {
		return false
	}
	want := envd.FileSignature(q.Get("path"), op, q.Get("username"), rec.Token, exp)
	return core.SecretEqual(sig, want)
}

// servePort forwards a call to one of the sandbox's own ports, under
// E2B's access rule for them: open to anyone who names the sandbox,
// unless it was created with network.allowPublicTraffic false, when the
// call needs the sandbox's traffic access token (403 without it, in the
// shape of E2B's edge). The OpenSandbox API's sandboxes are always private
// and also take the credentials their clients hold (their
// core.PortCredentials: the owner's key, the execd token). No credential
// of berth's reaches the sandbox.
func (s *API) servePort(w http.ResponseWriter, r *http.Request, rec *core.Record, port string) {
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		envd.WriteHTTPError(w, http.StatusBadRequest, "port %q is not a number in 1-65535", port)
		return
	}
	if rec.TrafficToken != "" && !core.SecretEqual(r.Header.Get(e2bapi.TrafficAccessTokenHeader), rec.TrafficToken) && !s.c.PortCredentialsOpen(r, rec) {
		s.m.AuthFails.WithLabelValues("port").Inc()
		why := "is missing"
		if r.Header.Get(e2bapi.TrafficAccessTokenHeader) != "" {
			why = "is invalid"
		}
		msg := fmt.Sprintf("Sandbox is secured with traffic access token. Token header '%s' %s", strings.ToLower(e2bapi.TrafficAccessTokenHeader), why)
		if pc := rec.PortCredentials; pc != nil {
			msg += fmt.Sprintf(" (or send the owner's %s, or the sandbox's %s)", pc.KeyHeader, pc.TokenHeader)
		}
		writeJSON(w, http.StatusForbidden, map[string]any{"sandboxId": rec.ID, "code": http.StatusForbidden, "message": msg})
		return
	}
	s.c.StripPortCredentials(r.Header)
	rec.Ports.ServePort(w, r, n)
}
