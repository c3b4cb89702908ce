package k8s_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testbin"
	"github.com/berth-sh/berth/providers/k8s"
	"github.com/berth-sh/berth/providers/local"
)

// TestGoldenEpisode runs `berth smoke --connector harbor --backend k8s`,
// the binary itself, against the test control plane: the registry entry
// finds the cluster through KUBECONFIG and the namespace selector, and the
// pre-built image map stands in for a registry the cluster can pull (the
// entry's default image is mapped to the shim's offline busybox).
func TestGoldenEpisode(t *testing.T) {
	ns := namespace(t)
	bin, err := testbin.Berth()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "smoke", "--connector", "harbor", "--backend", "k8s")
	cmd.Env = append(os.Environ(),
		"HOME="+t.TempDir(),
		k8s.EnvKubeconfig+"="+cluster.Kubeconfig,
		k8s.EnvNamespace+"="+ns,
		k8s.EnvImageMap+"=debian:bookworm-slim="+local.DefaultImage,
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("berth smoke --backend k8s: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "PASS") {
		t.Fatalf("no PASS in the report:\n%s", out)
	}
	t.Logf("\n%s", out)
	// The episode leaves no pod behind (once the node has finished it).
	waitNoPods(t, ns)
}

// waitNoPods waits up to 30 s for the namespace to hold no pod.
func waitNoPods(t *testing.T, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, listAll)
		if err == nil && len(pods.Items) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pods left: %v %v", pods, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
