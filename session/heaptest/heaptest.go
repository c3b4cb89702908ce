package heaptest

import (
	"runtime"
	"runtime/debug"
	"time"
)

// gcPercent is the GOGC that Growth runs f under. At the default (100) the
// heap may reach twice what is live before a collection, and when that
// collection comes depends on the machine's load: on a loaded CI machine a
// 29 MB body read 412 MB where a quiet one read 327. At 10 the heap stays
// within a tenth of what is live, so the reading is what f holds: 177 MB for
// that body, against 530 MB for the code before its fix.
const gcPercent = 10

// Growth runs f and returns how far the heap grew above where it stood
// before, sampled every millisecond (so it can only read low: a bound it
// passes the real peak may pass too, a bound it fails is failed), with the
// collector kept close behind (gcPercent).
func Growth(f func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(gcPercent))
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	base, peak := m.HeapAlloc, m.HeapAlloc
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(stop)
	<-done
	return peak - base
}

// Allocated is the bytes allocated while f ran.
func Allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
