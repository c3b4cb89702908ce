package k8s_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/providers/k8s"
	"github.com/berth-sh/berth/providers/local"
)

// TestGoldenEpisode runs `berth smoke --connector harbor --backend k8s`,
// the binary itself, against the test control plane: the registry entry
// finds the cluster through KUBECONFIG and the namespace selector, and the
// pre-built image map stands in for a registry the cluster can pull (the
// entry's default image is mapped to the shim's offline busybox).
func TestGoldenEpisode(t *testing.T) {
	goldenEpisode(t, namespace(t))
}

// TestGoldenEpisodeAgentSandbox is the same episode in agent-sandbox mode:
// the trial's sandbox a SandboxClaim on a warm pool of one.
func TestGoldenEpisodeAgentSandbox(t *testing.T) {
	needAgentSandbox(t)
	ns := namespace(t)
	goldenEpisode(t, ns, k8s.EnvMode+"="+string(k8s.ModeAgentSandbox), k8s.EnvWarmPool+"=1")
	waitNoClaims(t, ns)
}

func goldenEpisode(t *testing.T, ns string, env ...string) {
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
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("berth smoke --backend k8s: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "PASS") {
		t.Fatalf("no PASS in the report:\n%s", out)
	}
	t.Logf("\n%s", out)
	// The episode leaves no pod behind (once the node has finished it),
	// but the warm pool's.
	waitNoPods(t, ns)
}

// waitNoPods waits up to 30 s for the namespace to hold no sandbox's pod:
// none but the unclaimed pods of agent-sandbox warm pools.
func waitNoPods(t *testing.T, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, listAll)
		left := 0
		if err == nil {
			for _, p := range pods.Items {
				_, claimed := p.Labels[claimUIDLabel]
				if _, warm := p.Labels["berth.sh/template"]; !warm || claimed {
					left++
				}
			}
		}
		if err == nil && left == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pods left: %v %v", pods, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// claimUIDLabel marks a pod agent-sandbox's controller gave a claim.
const claimUIDLabel = "agents.x-k8s.io/claim-uid"

// waitNoClaims waits up to 30 s for the namespace to hold no SandboxClaim.
func waitNoClaims(t *testing.T, ns string) {
	t.Helper()
	ext := extClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		claims, err := ext.ExtensionsV1beta1().SandboxClaims(ns).List(ctx, listAll)
		if err == nil && len(claims.Items) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("claims left: %v %v", claims, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
