package servetest

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// Main runs a package's tests, then fails it when they left goroutines
// behind (streams, process waiters, expiry timers and data planes must all
// end) or left a local sandbox, mount or cgroup. Idle keep-alive
// connections of the tests' HTTP clients are not leaks, nor is the child
// reaper the local provider starts once per process.
func Main(m *testing.M) {
	code := m.Run()
	if left := cleanupLocal(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "left after the tests:\n  %s\n", strings.Join(left, "\n  "))
		code = 1
	}
	if err := goleak.Find(
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("github.com/berth-sh/berth/internal/reap.Loop")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}
