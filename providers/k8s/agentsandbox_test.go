package k8s_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extclient "sigs.k8s.io/agent-sandbox/clients/k8s/extensions/clientset/versioned"

	"github.com/berth-sh/berth/providers/k8s"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
)

// waitPoolReady waits until every warm pool of the namespace has want
// ready pods, and returns the names of the pods that are the pools'.
func waitPoolReady(t testing.TB, ext extclient.Interface, ns string, want int32) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		pools, err := ext.ExtensionsV1beta1().SandboxWarmPools(ns).List(ctx, listAll)
		ok := err == nil && len(pools.Items) > 0
		for _, p := range pools.Items {
			ok = ok && p.Status.ReadyReplicas == want
		}
		if ok {
			pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "berth.sh/template,!" + claimUIDLabel})
			if err == nil && len(pods.Items) >= int(want) {
				var names []string
				for _, p := range pods.Items {
					names = append(names, p.Name)
				}
				return names
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("warm pool of %s never had %d ready pods: %+v %v", ns, want, pools, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// A claim on a full warm pool gets one of the pool's running pods, and the
// sandbox's own settings (environment, working directory, token) reach its
// agent after the claim, not through the claim. Spec labels in the
// controller's allowlisted domain go on the pod; the others stay on the
// claim, where List finds them, and the controller does not refuse the
// claim for them. The pool's token opens nothing once the pod is claimed.
func TestWarmPoolClaim(t *testing.T) {
	ns := namespace(t)
	o := claimOptions(t, ns, 2)
	d := openDriver(t, o)
	p := sandbox.NewProvider("k8s", d)
	defer p.Close()
	ext := extClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The first create makes the template and its pool.
	first, err := p.Create(ctx, sandbox.Spec{Image: local.DefaultImage})
	if err != nil {
		t.Fatal(err)
	}
	_ = first.Delete(ctx)
	_ = first.Close()
	warm := waitPoolReady(t, ext, ns, 2)

	spec := sandbox.Spec{
		Image:   local.DefaultImage,
		Env:     map[string]string{"FROM_SPEC": "yes"},
		WorkDir: "/work",
		Labels:  map[string]string{"sandbox.users.io/trial": "t1", "berth.sh/job": "j1", "plain": "x"},
	}
	sb, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	claim, err := ext.ExtensionsV1beta1().SandboxClaims(ns).Get(ctx, sb.ID(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := claim.Status.SandboxStatus.Name
	if !slices.Contains(warm, pod) {
		t.Fatalf("the claim got pod %q, not one of the warm pool's %v", pod, warm)
	}
	if len(claim.Spec.Env) != 0 {
		t.Errorf("the claim carries env (a cold start): %v", claim.Spec.Env)
	}
	res, err := sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", "echo $FROM_SPEC; pwd"}})
	if err != nil || string(res.Stdout) != "yes\n/work\n" {
		t.Fatalf("the sandbox's settings did not reach the warm pod's agent: %q %v", res.Stdout, err)
	}
	got, err := cluster.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["sandbox.users.io/trial"] != "t1" {
		t.Errorf("the allowlisted label is not on the pod: %v", got.Labels)
	}
	if _, ok := got.Labels["berth.sh/job"]; ok {
		t.Errorf("a label outside the allowlist reached the pod: %v", got.Labels)
	}
	if infos, err := p.List(ctx, map[string]string{"berth.sh/job": "j1", "plain": "x"}); err != nil || len(infos) != 1 || infos[0].ID != sb.ID() {
		t.Errorf("list by the claim's labels: %+v %v", infos, err)
	}

	// The attack: whoever holds the pool's token (every warm pod of the
	// template shares it) takes over a claimed sandbox.
	pool, err := k8s.PoolToken(ctx, d, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	for _, call := range []struct{ method, path, body string }{
		{"POST", "/berth/claim", `{"token_sha256":"` + strings.Repeat("ab", 32) + `"}`},
		{"POST", "/filesystem.Filesystem/Stat", `{"path":"/"}`},
		{"GET", "/files?path=/etc/hostname", ""},
	} {
		code, err := k8s.AgentStatus(ctx, d, sb.ID(), pool, call.method, call.path, call.body)
		if err != nil {
			t.Fatal(err)
		}
		if code != http.StatusUnauthorized {
			t.Errorf("%s %s with the pool's token after the claim: %d, want 401", call.method, call.path, code)
		}
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	waitNoClaims(t, ns)
}

// The TTL of a claim is its shutdownTime with shutdownPolicy Delete:
// SetTimeout moves it, and agent-sandbox's controller deletes the claim
// (and, after it, the pod) at that time, without berth's reaper.
func TestClaimShutdownTime(t *testing.T) {
	ns := namespace(t)
	p := sandbox.NewProvider("k8s", openDriver(t, claimOptions(t, ns, 0)))
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := p.Create(ctx, sandbox.Spec{Image: local.DefaultImage, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	ext := extClient(t)
	claims := ext.ExtensionsV1beta1().SandboxClaims(ns)
	c, err := claims.Get(ctx, sb.ID(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Spec.Lifecycle; l == nil || l.ShutdownTime == nil || time.Until(l.ShutdownTime.Time) < 59*time.Minute || l.ShutdownPolicy != "Delete" {
		t.Fatalf("lifecycle %+v, want shutdownTime in an hour and policy Delete", l)
	}
	pod := c.Status.SandboxStatus.Name
	if err := sb.SetTimeout(ctx, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	set := time.Now()
	for {
		_, err := claims.Get(ctx, sb.ID(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(set) > 45*time.Second {
			t.Fatalf("the controller did not delete the claim past its shutdown time")
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("claim deleted %v after SetTimeout(3s)", time.Since(set))
	if time.Since(set) < 2*time.Second {
		t.Errorf("the claim went %v after a 3 s timeout", time.Since(set))
	}
	if err := sb.SetTimeout(ctx, time.Minute); sandbox.ClassOf(err) != sandbox.NotFound {
		t.Errorf("set timeout on a deleted claim: %v", err)
	}
	for {
		_, err := cluster.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			t.Logf("its pod deleted %v after SetTimeout(3s)", time.Since(set))
			return
		}
		if time.Since(set) > 90*time.Second {
			t.Fatalf("the claim's pod %s outlived it: %v", pod, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// When berth is told a label domain the controller does not allow, the
// controller refuses the claim (InvalidMetadata), and Create says so at
// once, as InvalidArgument, instead of waiting out its ready timeout.
func TestClaimRefusedLabels(t *testing.T) {
	ns := namespace(t)
	o := claimOptions(t, ns, 0)
	o.ClaimLabelDomains = []string{"berth.sh"} // the controller allows sandbox.users.io only
	p := sandbox.NewProvider("k8s", openDriver(t, o))
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	_, err := p.Create(ctx, sandbox.Spec{Image: local.DefaultImage, Labels: map[string]string{"berth.sh/job": "j"}})
	if sandbox.ClassOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), "InvalidMetadata") {
		t.Fatalf("create with a label the controller refuses: %v", err)
	}
	waitNoClaims(t, ns)
}
