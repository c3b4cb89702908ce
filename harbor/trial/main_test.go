package trial_test

import (
	"testing"

	"github.com/berth-sh/berth/internal/testing/testbin"
)

// TestMain removes the berth binary the local tests built.
func TestMain(m *testing.M) { testbin.Main(m) }
