// Package stream is the deterministic byte stream the conformance suite
// and its portserver agree on, so that a large transfer can be checked
// without holding it.
package stream

import (
	"crypto/sha256"
	"math/rand/v2"
)

// New returns an endless reader of pseudo-random bytes determined by seed.
func New(seed string) *Reader {
	return &Reader{r: rand.NewChaCha8(sha256.Sum256([]byte(seed)))}
}

// Reader reads the stream.
type Reader struct{ r *rand.ChaCha8 }

func (r *Reader) Read(p []byte) (int, error) { return r.r.Read(p) }
