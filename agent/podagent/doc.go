// Package podagent is the inside of a Kubernetes sandbox: what the berth
// binary does as PID 1 of a sandbox Pod (the hidden `berth k8s-agent`
// verb). It serves E2B's envd protocol (package envd) on TCP, where the
// provider reaches it through the API server's port-forward or the pod IP.
//
// The pod spec is readable by anyone allowed to get pods, so it never holds
// the access token: it holds the token's SHA-256 (EnvTokenSHA256), and the
// agent accepts a call whose X-Access-Token hashes to it. The provider
// derives the token itself (providers/k8s token.go), so any process with the
// namespace's key reattaches from the pod name alone.
//
// Unlike the local agent it keeps no deadline: the TTL lives in the pod's
// annotations, enforced by the provider's reaper, with the pod's
// activeDeadlineSeconds as the kubelet-enforced backstop.
//
// Install copies the binary into a shared volume: the initContainer of a
// sandbox Pod runs it, since the sandbox image need not hold a berth.
//
// Importers: cmd/berth (the verb) and providers/k8s (the names below).
package podagent
