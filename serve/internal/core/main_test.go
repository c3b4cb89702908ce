package core

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves goroutines behind (the
// tests of the server's own, in package core_test, start no local
// sandbox).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
