package core

import (
	"net/http"
	"slices"
)

// PortCredentials are credentials an API hands its clients, beyond a
// sandbox's traffic token, that open the private ports of the sandboxes it
// makes (the OpenSandbox API's: the owner's API key and the sandbox's
// execd token). An API adds them once (AddPortCredentials) and sets them
// on its records; whichever API made a sandbox, no call to its ports
// carries them on to it.
type PortCredentials struct {
	KeyHeader   string // an API key: the sandbox owner's opens its ports
	TokenHeader string // the sandbox's access token (Record.Token)
}

// AddPortCredentials makes pc's headers ones that never reach a sandbox.
func (s *Server) AddPortCredentials(pc *PortCredentials) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range []string{pc.KeyHeader, pc.TokenHeader} {
		if h = http.CanonicalHeaderKey(h); !slices.Contains(s.portHeaders, h) {
			s.portHeaders = append(s.portHeaders, h)
		}
	}
}

// StripPortCredentials removes every added PortCredentials header from h.
func (s *Server) StripPortCredentials(h http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.portHeaders {
		h.Del(k)
	}
}

// PortCredentialsOpen reports whether r carries credentials that open
// rec's ports beyond its traffic token: its PortCredentials, the access
// token or its owner's key.
func (s *Server) PortCredentialsOpen(r *http.Request, rec *Record) bool {
	pc := rec.PortCredentials
	if pc == nil {
		return false
	}
	if tok := r.Header.Get(pc.TokenHeader); tok != "" && rec.TokenOK(tok) {
		return true
	}
	keyID, ok := s.opts.Keys.Check(r.Header.Get(pc.KeyHeader))
	return ok && keyID == rec.KeyID
}
