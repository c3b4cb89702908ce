// Package k8s is the Kubernetes provider: each sandbox is a plain Pod whose
// PID 1 is berth's own agent (agent/podagent), serving E2B's envd
// protocol, or, with BERTH_K8S_MODE=agent-sandbox, a SandboxClaim of
// kubernetes-sigs/agent-sandbox (see "Agent-sandbox mode"). Import it from
// the registry's built-in entries; tests run it against the test control
// plane in internal/testing/k8stest.
//
// # The pod
//
// restartPolicy Never, no service-account token, no service links, a
// seccomp RuntimeDefault profile, no privilege escalation, runAsNonRoot
// when the Spec's user is a numeric non-root uid (berth cannot read an
// image's USER before the kubelet pulls it), resources from the Spec as
// requests (and limits when the Spec asks; GPUs as nvidia.com/gpu), an
// optional runtimeClassName (gVisor, Kata). An initContainer copies the
// static agent binary (cmd/berth-agent) from the agent image into an emptyDir mounted at
// /.berth, or, with Options.AgentImageVolume, the agent image is an image
// volume there. Spec labels that are valid Kubernetes labels become pod
// labels; all of them, and berth's metadata, are annotations.
//
// # Credentials
//
// The kubeconfig as kubectl finds it: Options.Kubeconfig, KUBECONFIG,
// ~/.kube/config, else the in-cluster service account. The registry entry
// forwards KUBECONFIG (a path, never the file) and the namespace selector
// BERTH_K8S_NAMESPACE. Access tokens to the agents derive from one Secret
// per namespace (token.go); pods hold only their token's SHA-256.
//
// # One informer
//
// Readiness, List, Connect and the reaper read one pod informer per
// process, API server, credential and namespace (watch.go); nothing polls
// a sandbox. Create is one POST, ready is the informer plus one
// port-forward upgrade, delete is one DELETE: three API requests per
// sandbox, plus per process the informer's LIST+WATCH, the key Secret and
// one NetworkPolicy per distinct network setting.
//
// # TTL
//
// The TTL is the berth.sh/expires-at annotation: SetTimeout patches it,
// Connect and List treat a sandbox past it as gone, and Reap (run by
// `berth serve` and `berth sandboxes reap`) deletes it. The kubelet's
// backstop is activeDeadlineSeconds, which can only be lowered on a live
// pod, so it is sized from Options.MaxLifetime and SetTimeout cannot go
// past it.
//
// # Data plane
//
// envd over HTTP to the agent's port 49983: the pod IP when the provider
// runs in the cluster (or Options.Dial says so), otherwise the API server's
// port-forward, WebSocket first and SPDY as the fallback (dial.go), one
// upgraded session per sandbox carrying a stream pair per connection.
//
// Ports (ports.go) ride the same channel: DialPort is a stream pair to any
// port of the pod (or its pod IP), and Endpoint a loopback listener of the
// process carrying each connection through it, as kubectl port-forward
// does. No Service is made per sandbox; the kubelet connects inside the
// pod's network namespace, so a network-none pod's ports work too.
//
// # Networks
//
// none, public and allowlist become one NetworkPolicy per distinct setting,
// selected by the berth.sh/network label. They are enforced only by a CNI
// that enforces NetworkPolicy; allowlist host names are resolved once,
// when the policy is made.
//
// # Agent-sandbox mode
//
// BERTH_K8S_MODE=agent-sandbox (Options.Mode) needs agent-sandbox v0.5
// (its CRDs and controller, with --extensions) in the cluster; berth
// imports only its v1beta1 API types and generated clients (claims.go,
// templates.go). Per distinct pod shape (image, resources, numeric user,
// network, placement) berth makes once a SandboxTemplate and a
// SandboxWarmPool of BERTH_K8S_WARM_POOL ready pods, named by a hash of the
// shape; per sandbox, one SandboxClaim on that pool. The controller hands
// the claim a warm pod (or makes one from the template when the pool is
// empty) and reports its name, IP and readiness in the claim's status,
// which is all berth reads: one informer, on the claims.
//
// A warm pod's spec is shared, so it holds no sandbox's settings: its
// agent starts pooled, answering only /health and, with the pool's token
// (derived from the namespace's key and the template), one claim call that
// sets the sandbox's token hash, user, directory and environment. This is
// the per-task setup after the claim: a claim's own env would make the
// controller cold-start a pod from the template. After it the pool's
// token opens nothing.
//
// The TTL is the claim's shutdownTime with shutdownPolicy Delete: the
// controller deletes the claim at that time (the garbage collector its
// Sandbox and Pod after it), SetTimeout patches it (up to the max lifetime
// from the claim's creation), Reap deletes what the controller missed.
// Warm pods get no activeDeadlineSeconds: idle time in the pool would
// count against it.
//
// Spec labels go on the claim (valid ones as labels, all in an
// annotation, where List reads them). The controller refuses a claim that
// asks its pod for a label outside its allowlist of label domains
// (allowed-label-domains; sandbox.users.io when unset), so berth asks only
// for labels in BERTH_K8S_CLAIM_LABEL_DOMAINS (default sandbox.users.io):
// set it to the controller's list. Templates disable the controller's
// NetworkPolicy (berth's own select the pods by label) and its Service.
//
// # Images
//
// The cluster pulls every image itself: a Spec image must be in a registry
// the cluster can pull, and a task Dockerfile needs a builder outside the
// cluster. Options.ImageMap (BERTH_K8S_IMAGE_MAP) maps task images to
// pre-built ones; Spec.Build is NotSupported.
package k8s
