package trial_test

import (
	"os"
	"testing"

	"github.com/berth-sh/berth/internal/testbin"
)

// TestMain removes the berth binary the local tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}
