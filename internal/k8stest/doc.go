// Package k8stest runs a real Kubernetes control plane on loopback for
// tests: etcd, kube-apiserver, kube-scheduler and kube-controller-manager
// (and kwok, for nodes that run nothing), built from Go modules by
// controlplane/build.sh into a cache directory and never committed. Tests
// that need it call Start and skip, with the reason, when the binaries are
// absent. Its sibling nodeshim backs pods with local berth sandboxes.
//
// Certificates, the service-account signing key and the kubeconfigs are
// generated per cluster in a temporary directory; every process listens on
// 127.0.0.1 only and is killed (with its process group) by Stop.
//
// Importers: tests of providers/k8s and of what runs on it.
package k8stest
