package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The agent is PID 1 of every sandbox: every package linked into it runs
// its init there, and the pages it touches are charged to the sandbox's
// memory limit (an agent linked with the whole CLI, 150 MB, was the
// process the OOM killer chose in a 64 MB sandbox). It links none of the
// CLI's heavy dependencies.
func TestAgentLinksNoHeavyDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, heavy := range []string{
		"k8s.io/client-go/", "k8s.io/api/", "github.com/modal-labs/", "github.com/openai/",
		"gonum.org/", "github.com/chromedp/", "github.com/spf13/cobra", "google.golang.org/grpc",
		"github.com/google/go-containerregistry/", "github.com/modelcontextprotocol/",
		"github.com/berth-sh/berth/serve", "github.com/berth-sh/berth/view", "github.com/berth-sh/berth/session",
	} {
		for _, d := range deps {
			if d == strings.TrimSuffix(heavy, "/") || strings.HasPrefix(d, heavy) {
				t.Errorf("berth-agent links %s", d)
				break
			}
		}
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"nope"}, {"agent", "stray"}, {"k8s-agent", "--bogus"}} {
		if code := run(args); code != 2 {
			t.Errorf("berth-agent %q: exit %d, want 2", args, code)
		}
	}
}
