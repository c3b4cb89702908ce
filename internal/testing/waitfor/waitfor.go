// Package waitfor is the polling wait of berth's tests: a condition that
// another process or goroutine makes true (a sandbox gone, a server up)
// checked every 50 ms until a limit. Import it only from tests.
package waitfor

import (
	"testing"
	"time"
)

// Until polls cond every 50 ms and fails t when it is still false after
// limit; what says what was awaited.
func Until(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
