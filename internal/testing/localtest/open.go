package localtest

import (
	"testing"

	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/providers/local"
)

// Open opens a local provider for one test: a state dir of its own and
// the static berth-agent as the sandboxes' init. It skips the test where
// local cannot run (testbin.NeedLocal). The caller closes it.
func Open(t testing.TB) *local.Provider {
	t.Helper()
	testbin.NeedLocal(t)
	agent, err := testbin.Agent()
	if err != nil {
		t.Fatal(err)
	}
	d, err := local.New(local.Options{StateDir: t.TempDir(), AgentBinary: agent})
	if err != nil {
		t.Fatal(err)
	}
	return d
}
