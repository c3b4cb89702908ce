package main

import (
	"testing"

	"github.com/berth-sh/berth/internal/testing/testbin"
)

// localBinaries skips t unless the local provider can run here, and
// returns the static berth binary and the agent its sandboxes run.
func localBinaries(t testing.TB) (bin, agent string) {
	t.Helper()
	testbin.NeedLocal(t)
	bin, err := testbin.Berth()
	if err != nil {
		t.Fatal(err)
	}
	if agent, err = testbin.Agent(); err != nil {
		t.Fatal(err)
	}
	return bin, agent
}
