package waitfor

import (
	"testing"
	"time"
)

// Until returns once the condition holds, after polling it.
func TestUntil(t *testing.T) {
	start, n := time.Now(), 0
	Until(t, 5*time.Second, "the third poll", func() bool { n++; return n == 3 })
	if n != 3 || time.Since(start) < 100*time.Millisecond {
		t.Errorf("returned after %d polls in %v", n, time.Since(start))
	}
}
