package core

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
)

const idAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// NewID returns a sandbox ID: 20 lowercase alphanumerics, as E2B's are.
func NewID() string {
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	for i := range b {
		// 256 % 36 != 0: the bias is under 1% per character and an ID is
		// not a secret.
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return string(b)
}

// RandomToken returns a per-sandbox access token (256 random bits).
func RandomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// SecretEqual compares a presented secret in constant time.
func SecretEqual(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// NewToken returns the envd access token of the sandbox id of the key:
// random, or, on a stateless server, derived from the key (so that every
// replica answers connect with it).
func (s *Server) NewToken(keyID, id string) string {
	return s.secretFor(keyID, tokenMessage(id))
}

// NewTrafficToken is the traffic access token of a sandbox whose ports are
// private (allowPublicTraffic false): derived as NewToken's, so that any
// replica of a stateless server can check it too.
func (s *Server) NewTrafficToken(keyID, id string) string {
	return s.secretFor(keyID, trafficMessage(id))
}

func (s *Server) secretFor(keyID, msg string) string {
	if s.opts.Stateless {
		if tok, ok := s.opts.Keys.Derive(keyID, msg); ok {
			return tok
		}
	}
	return RandomToken()
}
