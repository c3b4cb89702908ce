package serve

import (
	"crypto/rand"
	"encoding/hex"
)

const idAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// newID returns a sandbox ID: 20 lowercase alphanumerics, as E2B's are.
func newID() string {
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	for i := range b {
		// 256 % 36 != 0: the bias is under 1% per character and an ID is
		// not a secret.
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return string(b)
}

// newToken returns a per-sandbox envd access token (256 random bits).
func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newToken returns the envd access token of the sandbox id of the key:
// random, or, on a stateless server, derived from the key (so that every
// replica answers connect with it).
func (s *Server) newToken(keyID, id string) string {
	return s.secretFor(keyID, tokenMessage(id))
}

// newTrafficToken is the traffic access token of a sandbox whose ports are
// private (allowPublicTraffic false): derived as newToken's, so that any
// replica of a stateless server can check it too.
func (s *Server) newTrafficToken(keyID, id string) string {
	return s.secretFor(keyID, trafficMessage(id))
}

func (s *Server) secretFor(keyID, msg string) string {
	if s.opts.Stateless {
		if tok, ok := s.opts.Keys.Derive(keyID, msg); ok {
			return tok
		}
	}
	return newToken()
}
