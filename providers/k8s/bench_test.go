package k8s_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-sh/berth/providers/k8s"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
)

// counter counts the API requests of one driver (its WrapTransport), by
// verb, so that a benchmark can say how many a sandbox costs.
type counter struct {
	n  atomic.Int64
	mu sync.Mutex
	by map[string]int
}

func (c *counter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		c.n.Add(1)
		c.mu.Lock()
		if c.by == nil {
			c.by = map[string]int{}
		}
		c.by[r.Method]++
		c.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// percentile of sorted durations.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// BenchmarkCreateReady is create to ready, one at a time, backed by the
// node shim (a real local sandbox each, reached through port-forward): p50
// and p95, and the API requests each create+ready+delete costs. Each
// create starts on a settled cluster (settle): the teardown of the one
// before it, and of an earlier arm's namespace, would otherwise run on
// the same 2 cores during the timed create of one arm and not another. pod: a
// plain Pod each. claim-warm: an agent-sandbox SandboxClaim on a warm pool
// of 4 that is full before each create (the refill after each delete is
// not timed), the sandbox's settings handed to the warm agent after the
// claim. claim-cold: a claim on an empty pool, for which the controller
// makes a Sandbox and its Pod from the template.
func BenchmarkCreateReady(b *testing.B) {
	b.Run("pod", func(b *testing.B) {
		needCluster(b)
		createReady(b, options(namespace(b)), nil)
	})
	b.Run("claim-warm", func(b *testing.B) {
		ns := namespace(b)
		ext := extClient(b)
		createReady(b, claimOptions(b, ns, 4), func() { waitPoolReady(b, ext, ns, 4) })
	})
	b.Run("claim-cold", func(b *testing.B) {
		createReady(b, claimOptions(b, namespace(b), 0), nil)
	})
}

// createReady times b.N creates with o, calling before (untimed) ahead of
// each.
func createReady(b *testing.B, o k8s.Options, before func()) {
	var c counter
	o.WrapTransport = c.wrap
	p := sandbox.NewProvider("k8s", openDriver(b, o))
	defer p.Close()
	ctx := context.Background()
	// Warm: the key Secret, the network policy (and the template and its
	// pool) are per process.
	warm, err := p.Create(ctx, sandbox.Spec{Image: local.DefaultImage})
	if err != nil {
		b.Fatal(err)
	}
	_ = warm.Delete(ctx)
	_ = warm.Close()
	var lat []time.Duration
	var requests int64
	b.ResetTimer()
	for b.Loop() {
		settle(b, o.Namespace)
		if before != nil {
			before()
		}
		base := c.n.Load()
		t0 := time.Now()
		sb, err := p.Create(ctx, sandbox.Spec{Image: local.DefaultImage})
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		if err := sb.Delete(ctx); err != nil {
			b.Fatal(err)
		}
		requests += c.n.Load() - base
		_ = sb.Close()
	}
	b.StopTimer()
	b.ReportMetric(float64(percentile(lat, 0.50).Milliseconds()), "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.95).Milliseconds()), "p95-ms")
	b.ReportMetric(float64(requests)/float64(len(lat)), "api-requests/sandbox")
}

// settle waits, untimed, until the cluster is at rest: no namespace
// terminating, no pod being deleted, and no sandbox's pod left in ns (a
// warm pool's unclaimed pods stay).
func settle(tb testing.TB, ns string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		rest, err := atRest(ctx, ns)
		if err == nil && rest {
			return
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("the cluster did not come to rest: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func atRest(ctx context.Context, ns string) (bool, error) {
	nss, err := cluster.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, n := range nss.Items {
		if n.Status.Phase == corev1.NamespaceTerminating {
			return false, nil
		}
	}
	pods, err := cluster.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, p := range pods.Items {
		warm := p.Labels["berth.sh/template"] != "" && p.Labels[claimUIDLabel] == ""
		if p.DeletionTimestamp != nil || (p.Namespace == ns && !warm) {
			return false, nil
		}
	}
	return true, nil
}

// kwokNodes registers n kwok-managed nodes labelled berth.sh/kwok=true.
func kwokNodes(tb testing.TB, n int) {
	tb.Helper()
	ctx := context.Background()
	cap := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("500"),
	}
	for i := range n {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        fmt.Sprintf("kwok-%02d", i),
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
				Labels:      map[string]string{"berth.sh/kwok": "true", "type": "kwok"},
			},
			Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: "kwok.x-k8s.io/node", Value: "fake", Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{Capacity: cap, Allocatable: cap},
		}
		if _, err := cluster.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !isExists(err) {
			tb.Fatal(err)
		}
	}
}

// BenchmarkScale makes 1,000 sandboxes' pods over 20 kwok nodes (which run
// nothing: no agent is dialled, see CreateUnbacked), 50 at a time, then
// deletes them: creates per second, API requests per sandbox, and the heap
// the provider holds with 1,000 pods in its informer.
func BenchmarkScale(b *testing.B) {
	needCluster(b)
	if err := kwokOnce(); err != nil {
		b.Skip(err)
	}
	kwokNodes(b, 20)
	total, parallel := 1000, 50
	if v, err := strconv.Atoi(os.Getenv("BERTH_K8S_SCALE")); err == nil && v > 0 {
		total = v // a quicker look
	}
	for b.Loop() {
		var c counter
		o := kwokOptions(namespace(b), &c)
		o.QPS, o.Burst = 200, 400
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		d := openDriver(b, o)
		ctx := context.Background()
		base := c.n.Load()
		t0 := time.Now()
		names, err := createUnbacked(ctx, d, total, parallel, false)
		if err != nil {
			b.Fatalf("%v\nkwok: %s", err, cluster.Tail("kwok"))
		}
		elapsed := time.Since(t0)
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		cached := k8s.Cached(d)
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(parallel)
		for _, name := range names {
			g.Go(func() error { return d.Delete(gctx, name) })
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(total)/elapsed.Seconds(), "creates/s")
		b.ReportMetric(float64(c.n.Load()-base)/float64(total), "api-requests/sandbox")
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "heap-MB@1000")
		if cached < total {
			b.Errorf("the informer held %d pods, want %d", cached, total)
		}
		_ = d.Close()
	}
}

// No per-sandbox polling: a sandbox's create, ready and delete cost at
// most 5 API requests (create, the port-forward upgrade, delete; readiness
// comes from the shared informer), counted at the driver's transport. In
// agent-sandbox mode too: the claim's POST, the port-forward that carries
// the claim call to the warm agent, and its DELETE, readiness from the
// informer on the claims.
func TestAPIRequestsPerSandbox(t *testing.T) {
	t.Run("pod", func(t *testing.T) { apiRequestsPerSandbox(t, options(namespace(t))) })
	t.Run("agent-sandbox", func(t *testing.T) { apiRequestsPerSandbox(t, claimOptions(t, namespace(t), 2)) })
}

func apiRequestsPerSandbox(t *testing.T, o k8s.Options) {
	var c counter
	o.WrapTransport = c.wrap
	p := sandbox.NewProvider("k8s", openDriver(t, o))
	defer p.Close()
	ctx := context.Background()
	const n = 5
	base := c.n.Load()
	for range n {
		sb, err := p.Create(ctx, sandbox.Spec{Image: local.DefaultImage})
		if err != nil {
			t.Fatal(err)
		}
		if err := sb.Delete(ctx); err != nil {
			t.Fatal(err)
		}
		_ = sb.Close()
	}
	// The first create also reads the key Secret (and makes it) and the
	// network policy, once per process (and in agent-sandbox mode the
	// template and its warm pool, once per pod shape).
	per := float64(c.n.Load()-base) / n
	t.Logf("%.1f API requests per sandbox (by verb, with the informer's: %v)", per, c.by)
	if per > 5 {
		t.Errorf("%.1f API requests per sandbox, want at most 5", per)
	}
}

// kwok's nodes take pods that run nothing: 40 of them over 20 nodes cost
// 2 API requests each (create, delete), with readiness from the informer.
func TestKwokPodsRequests(t *testing.T) {
	needCluster(t)
	if err := kwokOnce(); err != nil {
		t.Skip(err)
	}
	kwokNodes(t, 20)
	var c counter
	d := openDriver(t, kwokOptions(namespace(t), &c))
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const n = 40
	base := c.n.Load()
	if _, err := createUnbacked(ctx, d, n, 10, true); err != nil {
		t.Fatalf("%v\nkwok: %s", err, cluster.Tail("kwok"))
	}
	per := float64(c.n.Load()-base) / n
	t.Logf("%.2f API requests per kwok sandbox (%v)", per, c.by)
	if per > 3 {
		t.Errorf("%.2f API requests per sandbox, want at most 3 (no polling)", per)
	}
}

// kwokOptions places pods on the kwok nodes and counts requests into c.
func kwokOptions(ns string, c *counter) k8s.Options {
	o := options(ns)
	o.WrapTransport = c.wrap
	o.NodeSelector = map[string]string{"berth.sh/kwok": "true"}
	o.Tolerations = []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	return o
}

// createUnbacked makes n unbacked sandboxes, parallel at a time, deleting
// each at once when del is set, and returns their names.
func createUnbacked(ctx context.Context, d *k8s.Provider, n, parallel int, del bool) ([]string, error) {
	names := make([]string, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for i := range n {
		g.Go(func() error {
			name, err := k8s.CreateUnbacked(gctx, d, sandbox.Spec{Image: "registry.example/none:1"})
			names[i] = name
			if err != nil || !del {
				return err
			}
			return d.Delete(gctx, name)
		})
	}
	return names, g.Wait()
}
