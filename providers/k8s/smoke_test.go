package k8s_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/providers/k8s"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
)

// One sandbox end to end, through each data plane: the API server's
// port-forward, and the pod IP (as from inside the cluster; the node shim
// relays its loopback pod IPs into the pods).
func TestDialModes(t *testing.T) {
	for _, dial := range []k8s.Dial{k8s.DialPortForward, k8s.DialPodIP} {
		t.Run(string(dial), func(t *testing.T) { oneSandbox(t, dial) })
	}
}

func oneSandbox(t *testing.T, dial k8s.Dial) {
	o := options(namespace(t))
	o.Dial = dial
	p := sandbox.NewProvider("k8s", openDriver(t, o))
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := p.Create(ctx, sandbox.Spec{Image: local.DefaultImage})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", "echo hi"}})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "hi" {
		t.Fatalf("run: %+v %v", res, err)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
}
