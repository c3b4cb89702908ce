package k8stest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// AgentSandboxVersion is the kubernetes-sigs/agent-sandbox release whose
// controller and CRDs controlplane/build.sh builds (BERTH_K8S_AGENT_SANDBOX=1).
const AgentSandboxVersion = "v0.5.0"

// agentSandboxBins are what RunAgentSandbox needs from BinDir.
var agentSandboxBins = []string{"agent-sandbox-controller", "agent-sandbox-crds"}

// AgentSandboxMissing says why RunAgentSandbox cannot run here ("" when it
// can): the controller is built only with BERTH_K8S_AGENT_SANDBOX=1.
func AgentSandboxMissing() string {
	if why := Missing(agentSandboxBins...); why != "" {
		return why + " (the agent-sandbox controller is built with BERTH_K8S_AGENT_SANDBOX=1)"
	}
	return ""
}

// servedVersion is the one API version of agent-sandbox's CRDs the test
// control plane serves.
const servedVersion = "v1beta1"

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// RunAgentSandbox installs agent-sandbox's CRDs and starts its controller
// (Sandbox, and the extensions: SandboxTemplate, SandboxWarmPool,
// SandboxClaim), returning once the CRDs are established.
//
// Upstream's CRDs serve v1alpha1 and v1beta1 and convert between them
// through a webhook reached by a Service, which a control plane on
// loopback (no kube-proxy, no cluster network) cannot route to. The
// controller rewrites every CRD's webhook to its Service on start, so
// pointing the webhook at a URL would not last; instead the CRDs are
// installed with v1beta1 alone and conversion strategy None: no object
// ever needs converting, and berth speaks v1beta1 only. The controller
// still serves its webhook (nobody calls it) on a free port, which it
// binds on every interface (it has no flag for the host).
func (c *Cluster) RunAgentSandbox(ctx context.Context) error {
	if why := AgentSandboxMissing(); why != "" {
		return errors.New(why)
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	dir := filepath.Join(BinDir(), "agent-sandbox-crds")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs in %s: %v", dir, err)
	}
	var names []string
	for _, f := range files {
		name, err := installCRD(ctx, dyn, f)
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
		names = append(names, name)
	}
	for _, n := range names {
		if err := waitEstablished(ctx, dyn, n); err != nil {
			return err
		}
	}
	// The controller keeps its webhook certificates in a Secret of this
	// namespace.
	const ns = "agent-sandbox-system"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	return c.run("agent-sandbox-controller", "--kubeconfig="+c.Kubeconfig, "--extensions",
		"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--webhook-port="+strconv.Itoa(ports[0]), "--webhook-cert-dir="+filepath.Join(c.Dir, "agent-sandbox-webhook"),
		"--webhook-namespace="+ns,
		// One Sandbox worker (upstream's default) serialises every pod
		// create and status update behind one queue.
		"--sandbox-concurrent-workers=8", "--sandbox-warm-pool-concurrent-workers=2")
}

// installCRD creates the CRD in file with only servedVersion and no
// conversion, and returns its name.
func installCRD(ctx context.Context, dyn dynamic.Interface, file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	var obj map[string]any
	if err := yaml.Unmarshal(b, &obj); err != nil {
		return "", err
	}
	u := &unstructured.Unstructured{Object: obj}
	versions, _, err := unstructured.NestedSlice(obj, "spec", "versions")
	if err != nil {
		return "", err
	}
	versions = slices.DeleteFunc(versions, func(v any) bool {
		m, _ := v.(map[string]any)
		return m["name"] != servedVersion
	})
	if len(versions) != 1 {
		return "", fmt.Errorf("no %s version", servedVersion)
	}
	versions[0].(map[string]any)["storage"] = true
	if err := unstructured.SetNestedSlice(obj, versions, "spec", "versions"); err != nil {
		return "", err
	}
	if err := unstructured.SetNestedMap(obj, map[string]any{"strategy": "None"}, "spec", "conversion"); err != nil {
		return "", err
	}
	_, err = dyn.Resource(crdGVR).Create(ctx, u, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	return u.GetName(), nil
}

// waitEstablished waits for the API server to serve the CRD.
func waitEstablished(ctx context.Context, dyn dynamic.Interface, name string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		u, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not established: %v", name, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
