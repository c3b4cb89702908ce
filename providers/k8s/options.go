package k8s

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Environment variables the registry entry forwards to workers (addresses
// and selectors, never secrets: KUBECONFIG is a path).
const (
	EnvKubeconfig = "KUBECONFIG"
	EnvContext    = "BERTH_K8S_CONTEXT"
	EnvNamespace  = "BERTH_K8S_NAMESPACE"
	EnvMode       = "BERTH_K8S_MODE"
	EnvAgentImage = "BERTH_K8S_AGENT_IMAGE"
	EnvImageMap   = "BERTH_K8S_IMAGE_MAP"
	EnvRuntime    = "BERTH_K8S_RUNTIME_CLASS"
	EnvQPS        = "BERTH_K8S_QPS"
	EnvBurst      = "BERTH_K8S_BURST"
	EnvMaxLife    = "BERTH_K8S_MAX_LIFETIME"
	// EnvWarmPool sizes the SandboxWarmPool of each pod template in
	// agent-sandbox mode; EnvClaimLabelDomains lists the label domains its
	// controller lets a claim put on a pod (comma-separated).
	EnvWarmPool          = "BERTH_K8S_WARM_POOL"
	EnvClaimLabelDomains = "BERTH_K8S_CLAIM_LABEL_DOMAINS"
)

// Mode is how sandboxes are made.
type Mode string

// Modes.
const (
	// ModePod makes one plain Pod per sandbox.
	ModePod Mode = "pod"
	// ModeAgentSandbox makes one kubernetes-sigs/agent-sandbox
	// SandboxClaim per sandbox, from a SandboxTemplate and SandboxWarmPool
	// per distinct pod template (claims.go); its controller must run in
	// the cluster.
	ModeAgentSandbox Mode = "agent-sandbox"
)

// Dial is how the provider reaches a sandbox's agent.
type Dial string

// Dial modes.
const (
	// DialAuto uses the pod IP in the cluster and port-forward elsewhere.
	DialAuto Dial = ""
	// DialPodIP connects to podIP:49983 directly.
	DialPodIP Dial = "pod-ip"
	// DialPortForward tunnels through the API server (WebSocket, with
	// SPDY as the fallback).
	DialPortForward Dial = "port-forward"
)

// Defaults of Options.
const (
	DefaultNamespace   = "default"
	DefaultQPS         = 50
	DefaultBurst       = 100
	DefaultMaxLifetime = 24 * time.Hour
	// DefaultAgentImage holds the static agent binary (cmd/berth-agent) at /berth (see
	// deploy/agent.Dockerfile); clusters that cannot pull it set their own.
	DefaultAgentImage = "ghcr.io/berth-sh/berth-agent:latest"
	// DefaultReadyTimeout bounds create to ready (image pulls included).
	DefaultReadyTimeout = 5 * time.Minute
	// DefaultClaimLabelDomain is the one label domain agent-sandbox's
	// controller lets a claim put on its pod when its allowlist
	// (/etc/sandbox-config/allowed-label-domains) is not configured.
	DefaultClaimLabelDomain = "sandbox.users.io"
)

// Options configure the driver.
type Options struct {
	// Config is the API server's client configuration; nil means the one
	// kubectl would use (Kubeconfig, KUBECONFIG, ~/.kube/config, or the
	// in-cluster service account).
	Config *rest.Config
	// Kubeconfig is an explicit kubeconfig path ("" follows kubectl's
	// rules); Context picks a context in it ("" is the current one).
	Kubeconfig, Context string
	// Namespace holds the sandboxes; "" is the kubeconfig context's
	// namespace, else DefaultNamespace.
	Namespace string
	// Mode: ModePod (default) or ModeAgentSandbox.
	Mode Mode
	// WarmPool is how many ready pods the SandboxWarmPool of each pod
	// template keeps (agent-sandbox mode); 0 makes every claim a cold
	// start. A pool that exists keeps the size it has.
	WarmPool int32
	// ClaimLabelDomains are the label domains the agent-sandbox
	// controller's allowlist admits (its allowed-label-domains); a Spec
	// label in one of them is put on the claim's pod, every other one
	// stays on the claim only, so that the controller never refuses a
	// claim for its labels. nil means DefaultClaimLabelDomain.
	ClaimLabelDomains []string
	// QPS and Burst bound the client's API calls; 0 means DefaultQPS and
	// DefaultBurst (client-go's own defaults, 5 and 10, throttle a fleet).
	QPS   float32
	Burst int
	// AgentImage is pulled for the initContainer that copies the static
	// berth binary (at /berth in the image) into the sandbox; "" means
	// DefaultAgentImage. The cluster must be able to pull it.
	AgentImage string
	// AgentImageVolume mounts AgentImage as an image volume instead of
	// copying from an initContainer (clusters with the ImageVolume feature).
	AgentImageVolume bool
	// ImageMap maps a Spec's image (or a task's name) to an image the
	// cluster can pull: the pre-built images of task Dockerfiles. The
	// cluster builds nothing.
	ImageMap map[string]string
	// RuntimeClassName, when set, isolates sandboxes (gVisor, Kata).
	RuntimeClassName string
	// NodeSelector and Tolerations place sandbox pods.
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// MaxLifetime sizes activeDeadlineSeconds, the kubelet's backstop: it
	// can only be lowered on a live pod, so it is the longest a sandbox may
	// live whatever SetTimeout says; 0 means DefaultMaxLifetime.
	MaxLifetime time.Duration
	// ReadyTimeout bounds create to ready; 0 means DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// Dial picks how the agent is reached (DialAuto by default).
	Dial Dial
	// TokenKey, when set, derives the sandboxes' access tokens instead of
	// the namespace's key Secret (see token.go). Secret.
	TokenKey []byte
	// WrapTransport wraps the API client's transport (request counting in
	// benchmarks, tracing).
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// Logger receives the driver's logs; nil discards them.
	Logger *slog.Logger
}

// fill applies defaults and validates; it loads the client configuration.
func (o *Options) fill() error {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch o.Mode {
	case "":
		o.Mode = ModePod
	case ModePod, ModeAgentSandbox:
	default:
		return errdefs.Errorf(errdefs.InvalidArgument, "k8s: mode %q is not %q or %q", o.Mode, ModePod, ModeAgentSandbox)
	}
	switch o.Dial {
	case DialAuto, DialPodIP, DialPortForward:
	default:
		return errdefs.Errorf(errdefs.InvalidArgument, "k8s: dial %q is not %q or %q", o.Dial, DialPodIP, DialPortForward)
	}
	if o.QPS < 0 || o.Burst < 0 || o.MaxLifetime < 0 || o.ReadyTimeout < 0 || o.WarmPool < 0 {
		return errdefs.Errorf(errdefs.InvalidArgument, "k8s: qps, burst, max lifetime, ready timeout and warm pool must not be negative")
	}
	if o.ClaimLabelDomains == nil {
		o.ClaimLabelDomains = []string{DefaultClaimLabelDomain}
	}
	o.ClaimLabelDomains = slices.Clone(o.ClaimLabelDomains)
	for i, d := range o.ClaimLabelDomains {
		d = strings.ToLower(strings.TrimSpace(d))
		if errs := validation.IsDNS1123Subdomain(d); len(errs) > 0 {
			return errdefs.Errorf(errdefs.InvalidArgument, "k8s: claim label domain %q: %s", d, strings.Join(errs, "; "))
		}
		o.ClaimLabelDomains[i] = d
	}
	if o.QPS == 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst == 0 {
		o.Burst = DefaultBurst
	}
	if o.MaxLifetime == 0 {
		o.MaxLifetime = DefaultMaxLifetime
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.AgentImage == "" {
		o.AgentImage = DefaultAgentImage
	}
	if o.RuntimeClassName != "" {
		if errs := validation.IsDNS1123Subdomain(o.RuntimeClassName); len(errs) > 0 {
			return errdefs.Errorf(errdefs.InvalidArgument, "k8s: runtime class %q: %s", o.RuntimeClassName, strings.Join(errs, "; "))
		}
	}
	inCluster := false
	if o.Config == nil {
		cfg, ns, in, err := loadConfig(o.Kubeconfig, o.Context)
		if err != nil {
			return err
		}
		o.Config, inCluster = cfg, in
		if o.Namespace == "" {
			o.Namespace = ns
		}
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return errdefs.Errorf(errdefs.InvalidArgument, "k8s: namespace %q: %s", o.Namespace, strings.Join(errs, "; "))
	}
	if o.Dial == DialAuto {
		o.Dial = DialPortForward
		if inCluster {
			o.Dial = DialPodIP
		}
	}
	cfg := rest.CopyConfig(o.Config)
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	if o.WrapTransport != nil {
		cfg.Wrap(o.WrapTransport)
	}
	cfg.UserAgent = "berth"
	o.Config = cfg
	return nil
}

// loadConfig follows kubectl's rules: an explicit path, else KUBECONFIG,
// else ~/.kube/config, else the in-cluster service account. It returns the
// context's namespace and whether the config is the in-cluster one.
func loadConfig(path, context string) (*rest.Config, string, bool, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		// Never the file's contents: clientcmd's errors name paths and
		// contexts only.
		return nil, "", false, errdefs.Errorf(errdefs.Unauthenticated,
			"k8s: no usable kubeconfig (set %s, write ~/.kube/config, or run in a cluster): %w", EnvKubeconfig, err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		ns = ""
	}
	raw, rerr := cc.RawConfig()
	in := rerr == nil && len(raw.Contexts) == 0 && rest.IsConfigTransportTLS(*cfg) && inClusterEnv()
	return cfg, ns, in, nil
}

func inClusterEnv() bool {
	return getenv("KUBERNETES_SERVICE_HOST") != "" && getenv("KUBERNETES_SERVICE_PORT") != ""
}

// ParseImageMap parses "image=mapped,image2=mapped2" (EnvImageMap).
func ParseImageMap(s string) (map[string]string, error) {
	m := map[string]string{}
	for kv := range strings.SplitSeq(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("image map entry %q is not image=registry-reference", kv)
		}
		m[k] = v
	}
	return m, nil
}
