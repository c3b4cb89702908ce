package benchstat

import (
	"runtime"
	"testing"
	"time"
)

// Busy work on this process shows in the machine's busy time, and the
// machine's CPUs are counted.
func TestCPU(t *testing.T) {
	before := CPU()
	if before == 0 {
		t.Skip("no /proc/stat")
	}
	end := time.Now().Add(300 * time.Millisecond)
	x := 0
	for time.Now().Before(end) {
		x++
	}
	_ = x
	if d := CPU() - before; d < 200*time.Millisecond {
		t.Errorf("300 ms of spinning showed as %v of machine CPU", d)
	}
	if n := Cores(); n < 1 || n > 4*runtime.NumCPU()+64 {
		t.Errorf("Cores() = %d with runtime.NumCPU() = %d", n, runtime.NumCPU())
	}
}
