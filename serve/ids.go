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
