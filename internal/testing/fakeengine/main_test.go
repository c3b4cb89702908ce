package fakeengine_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every command's
// waiter ends with its sandbox.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
