package hud

import (
	"io"
	"sync"
)

// Splice copies a to b and b to a until both directions end, passing each
// end on as a half-close where the stream allows it, then closes both.
func Splice(a, b io.ReadWriteCloser) {
	var wg sync.WaitGroup
	pump := func(dst, src io.ReadWriteCloser) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	wg.Add(2)
	go pump(a, b)
	go pump(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}
