// Package k8stest runs a real Kubernetes control plane on loopback for
// tests: etcd, kube-apiserver, kube-scheduler and kube-controller-manager
// (and kwok, for nodes that run nothing), built from Go modules by
// controlplane/build.sh into a cache directory and never committed. Tests
// that need it call Start and skip, with the reason, when the binaries are
// absent. Its sibling nodeshim backs pods with local berth sandboxes.
// RunAgentSandbox adds kubernetes-sigs/agent-sandbox's CRDs (v1beta1 only,
// so that no conversion webhook is needed) and its controller, built by
// build.sh with BERTH_K8S_AGENT_SANDBOX=1.
//
// Certificates, the service-account signing key and the kubeconfigs are
// generated per cluster in a temporary directory; every process listens on
// 127.0.0.1 only and is killed (with its process group) by Stop.
//
// Importers: tests of providers/k8s and of what runs on it.
package k8stest
