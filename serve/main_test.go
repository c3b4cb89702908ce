package serve

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves goroutines behind: streams,
// process waiters, expiry timers and data planes must all end. Idle
// keep-alive connections of the tests' HTTP clients are not leaks, nor is
// the child reaper the local provider starts once per process. It also
// fails when the local backend's tests left a sandbox, mount or cgroup.
func TestMain(m *testing.M) {
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
