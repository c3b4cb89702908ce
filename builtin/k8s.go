package builtin

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	k8sprovider "github.com/berth-sh/berth/providers/k8s"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// k8s is the Kubernetes entry. Its credential is the kubeconfig as kubectl
// finds it: the file KUBECONFIG names (else ~/.kube/config), forwarded as
// a path and read by each worker, never by value; or, in the cluster, the
// pod's service account, which client-go detects by the two variables the
// kubelet sets (the "environment" path: their values are addresses, the
// token stays in its file). The namespace and mode are forwarded selectors.
func k8s() registry.Entry {
	return registry.Entry{
		Name:    "k8s",
		Aliases: []string{"kubernetes"},
		Summary: "a Kubernetes cluster: a Pod per sandbox with berth's agent as PID 1; images must be pullable by the cluster",
		Credential: registry.Credential{
			KeyVars:       []string{"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"},
			FileVar:       k8sprovider.EnvKubeconfig,
			DefaultPath:   "~/.kube/config",
			Flag:          "--key-file",
			ProvisionHint: "kubectl config view --raw --minify > ~/.kube/config (or run berth in the cluster under a service account)",
			ParseFile:     parseKubeconfig,
		},
		Forward: []string{
			k8sprovider.EnvContext, k8sprovider.EnvNamespace, k8sprovider.EnvMode,
			k8sprovider.EnvAgentImage, k8sprovider.EnvImageMap, k8sprovider.EnvRuntime,
			k8sprovider.EnvQPS, k8sprovider.EnvBurst, k8sprovider.EnvMaxLife,
			k8sprovider.EnvWarmPool, k8sprovider.EnvClaimLabelDomains,
		},
		Target:     &registry.Target{Var: k8sprovider.EnvNamespace, Label: "namespace", Default: "the kubeconfig context's, else default"},
		Library:    "k8s.io/client-go",
		MinVersion: "v0.37.2",
		// The API server takes far more, but every create is a pod
		// scheduling and an image pull on some node: 20/s keeps a laptop's
		// `berth run -n 500` from flooding a shared cluster.
		Limits:       driver.Limits{CreatesPerSecond: 20, CreateConcurrency: 32},
		Capabilities: k8sprovider.ProviderCapabilities,
		DefaultImage: registry.DefaultPublicImage,
		Open:         openK8s,
	}
}

// parseKubeconfig checks that the file is a kubeconfig with a current
// context. The driver reads the file itself (client-go's loading rules), so
// nothing of it is returned: the values stand for "the kubeconfig".
func parseKubeconfig(data []byte, _ registry.Environ) (map[string]string, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, errors.New("not a kubeconfig")
	}
	if cfg.CurrentContext == "" && len(cfg.Contexts) != 1 {
		return nil, errors.New("the kubeconfig has no current context")
	}
	return map[string]string{"KUBERNETES_SERVICE_HOST": "kubeconfig", "KUBERNETES_SERVICE_PORT": "kubeconfig"}, nil
}

// openK8s opens the driver from the forwarded variables.
func openK8s(ctx context.Context, cfg registry.Config) (driver.Provider, error) {
	o := k8sprovider.Options{
		Kubeconfig:       cfg.Env.Get(k8sprovider.EnvKubeconfig),
		Context:          cfg.Env.Get(k8sprovider.EnvContext),
		Namespace:        cfg.Env.Get(k8sprovider.EnvNamespace),
		Mode:             k8sprovider.Mode(cfg.Env.Get(k8sprovider.EnvMode)),
		AgentImage:       cfg.Env.Get(k8sprovider.EnvAgentImage),
		RuntimeClassName: cfg.Env.Get(k8sprovider.EnvRuntime),
		Logger:           cfg.Logger,
	}
	// KUBECONFIG may be a list (kubectl merges it); an explicit path is one
	// file, so a list is left to the loading rules.
	if strings.Contains(o.Kubeconfig, ":") {
		o.Kubeconfig = ""
	}
	if v := cfg.Env.Get(k8sprovider.EnvImageMap); v != "" {
		m, err := k8sprovider.ParseImageMap(v)
		if err != nil {
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "%s: %w", k8sprovider.EnvImageMap, err)
		}
		o.ImageMap = m
	}
	if v := strings.TrimSpace(cfg.Env.Get(k8sprovider.EnvQPS)); v != "" {
		q, err := strconv.ParseFloat(v, 32)
		if err != nil || q <= 0 {
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "%s=%q: want a positive number of requests per second", k8sprovider.EnvQPS, v)
		}
		o.QPS = float32(q)
	}
	if v := strings.TrimSpace(cfg.Env.Get(k8sprovider.EnvBurst)); v != "" {
		b, err := strconv.Atoi(v)
		if err != nil || b <= 0 {
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "%s=%q: want a positive whole number", k8sprovider.EnvBurst, v)
		}
		o.Burst = b
	}
	if v := strings.TrimSpace(cfg.Env.Get(k8sprovider.EnvMaxLife)); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "%s=%q: want a positive duration such as 24h", k8sprovider.EnvMaxLife, v)
		}
		o.MaxLifetime = d
	}
	if v := strings.TrimSpace(cfg.Env.Get(k8sprovider.EnvWarmPool)); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "%s=%q: want a whole number of warm pods, 0 for none", k8sprovider.EnvWarmPool, v)
		}
		o.WarmPool = int32(n)
	}
	if v := strings.TrimSpace(cfg.Env.Get(k8sprovider.EnvClaimLabelDomains)); v != "" {
		o.ClaimLabelDomains = strings.Split(v, ",")
	}
	return k8sprovider.New(ctx, o)
}
