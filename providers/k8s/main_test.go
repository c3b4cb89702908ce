package k8s_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extclient "sigs.k8s.io/agent-sandbox/clients/k8s/extensions/clientset/versioned"

	"github.com/berth-sh/berth/internal/testing/k8stest"
	"github.com/berth-sh/berth/internal/testing/k8stest/nodeshim"
	"github.com/berth-sh/berth/internal/testing/localtest"
	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/providers/k8s"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
)

// The package's tests share one control plane and one node shim, started
// here (about 15 s), and each test makes its own namespace.
var (
	cluster    *k8stest.Cluster
	shim       *nodeshim.Shim
	skipReason string
	localOpts  local.Options
)

// shimNode is the node the shim registers; sandbox pods are placed on it.
const shimNode = "berth-shim-0"

func TestMain(m *testing.M) {
	if os.Getenv(runnerEnv) != "" {
		os.Exit(runnerMain(os.Getenv(runnerKubeconfig)))
	}
	os.Exit(testMain(m))
}

// runnerKubeconfig hands the helper runner the cluster's kubeconfig.
const runnerKubeconfig = "BERTH_K8S_TEST_KUBECONFIG"

func testMain(m *testing.M) int {
	if skipReason = k8stest.Missing(); skipReason == "" {
		skipReason = testbin.LocalMissing()
	}
	if skipReason != "" {
		return m.Run()
	}
	defer testbin.Cleanup()
	agent, err := testbin.Agent()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	state, err := os.MkdirTemp("", "berth-k8s-local-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	localOpts = local.Options{StateDir: state, AgentBinary: agent, CgroupParent: "berth-k8stest-" + hex.EncodeToString(b)}
	defer func() {
		if left := localtest.Sweep(localOpts, state); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "the node shim left:\n  %s\n", strings.Join(left, "\n  "))
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	if cluster, err = k8stest.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "control plane:", err)
		return 1
	}
	defer cluster.Stop()
	ld, err := local.New(localOpts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	lp := sandbox.NewProvider("local", ld)
	defer lp.Close()
	tlsCfg, err := cluster.CA.ServerTLS(shimNode)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	shim, err = nodeshim.Start(ctx, nodeshim.Options{Client: cluster.Client, Node: shimNode, TLS: tlsCfg, Local: lp,
		Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }})
	if err != nil {
		fmt.Fprintln(os.Stderr, "node shim:", err)
		return 1
	}
	defer shim.Stop()
	fmt.Fprintf(os.Stderr, "k8s test control plane and node shim up in %v\n", time.Since(start).Round(time.Millisecond))
	return m.Run()
}

func needCluster(t testing.TB) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}

// namespace makes a fresh namespace for t, removed at its end, and waits
// for its default service account (the admission plugin needs it).
func namespace(t testing.TB) string {
	t.Helper()
	needCluster(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := "berth-t-" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cluster.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = cluster.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	for {
		if _, err := cluster.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return ns
		}
		select {
		case <-ctx.Done():
			t.Fatalf("namespace %s: no default service account: %s", ns, cluster.Tail("kube-controller-manager"))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// options are the driver options of the tests: the admin kubeconfig, pods
// placed on the shim's node, and port-forward.
func options(ns string) k8s.Options {
	return k8s.Options{
		Kubeconfig:   cluster.Kubeconfig,
		Namespace:    ns,
		NodeSelector: map[string]string{"berth.sh/node-shim": "true"},
		Dial:         k8s.DialPortForward,
		MaxLifetime:  time.Hour,
		ReadyTimeout: time.Minute,
		AgentImage:   "berth.local/agent:test", // never pulled: the shim mounts the agent
	}
}

func openDriver(t testing.TB, o k8s.Options) *k8s.Provider {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := k8s.New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var (
	kwokMu  sync.Mutex
	kwokErr error
	kwokRan bool

	asOnce sync.Once
	asErr  error
)

// needAgentSandbox starts agent-sandbox's controller on the cluster the
// first time a test asks, or skips when it is not built.
func needAgentSandbox(t testing.TB) {
	t.Helper()
	needCluster(t)
	if why := k8stest.AgentSandboxMissing(); why != "" {
		t.Skip(why)
	}
	asOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		asErr = cluster.RunAgentSandbox(ctx)
	})
	if asErr != nil {
		t.Fatalf("agent-sandbox controller: %v", asErr)
	}
}

// extClient is an admin client of agent-sandbox's extensions.
func extClient(t testing.TB) extclient.Interface {
	t.Helper()
	c, err := extclient.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// claimOptions are options in agent-sandbox mode, with a warm pool of
// warm pods per template.
func claimOptions(t testing.TB, ns string, warm int32) k8s.Options {
	t.Helper()
	needAgentSandbox(t)
	o := options(ns)
	o.Mode = k8s.ModeAgentSandbox
	o.WarmPool = warm
	return o
}

// kwokOnce starts kwok on the cluster the first time a test asks.
func kwokOnce() error {
	kwokMu.Lock()
	defer kwokMu.Unlock()
	if !kwokRan {
		kwokRan = true
		kwokErr = cluster.RunKwok()
	}
	return kwokErr
}

func isExists(err error) bool { return apierrors.IsAlreadyExists(err) }

var (
	listAll   = metav1.ListOptions{}
	deleteNow = metav1.DeleteOptions{}
)
