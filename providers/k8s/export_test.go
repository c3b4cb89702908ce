package k8s

import (
	"context"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/sandbox/driver"
)

// CreateUnbacked makes a sandbox's pod and waits for the informer to see it
// running, without dialling its agent: the scale benchmark's pods run on
// kwok nodes, which run no process. It is Create minus the data plane, in
// pod mode.
func CreateUnbacked(ctx context.Context, p *Provider, spec driver.Spec) (string, error) {
	key, err := p.keys.get(ctx)
	if err != nil {
		return "", err
	}
	m := p.m.(*podMode)
	spec = spec.WithDefaults()
	name, err := m.create(ctx, spec, key)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	r := &readiness{name: name}
	err = m.w.until(ctx, name, func(pod *corev1.Pod) (bool, error) {
		if pod != nil && pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" {
			return true, nil
		}
		return r.check(pod)
	})
	return name, err
}

// Cached is how many sandboxes the process's informer holds for p.
func Cached(p *Provider) int { return p.m.cached() }

// PoolToken is the warm-pool token of a claimed sandbox's template: what
// its agent answered to before the claim.
func PoolToken(ctx context.Context, p *Provider, id string) (string, error) {
	m := p.m.(*claimMode)
	c, err := m.liveClaim(ctx, id)
	if err != nil {
		return "", err
	}
	key, err := p.keys.get(ctx)
	if err != nil {
		return "", err
	}
	return poolToken(key, c.Annotations[annTemplate]), nil
}

// AgentStatus makes one call to a sandbox's agent with tok and returns
// the HTTP status.
func AgentStatus(ctx context.Context, p *Provider, id, tok, method, path string, body string) (int, error) {
	t, err := p.m.live(ctx, id)
	if err != nil {
		return 0, err
	}
	tr, fwd := p.agentTransport(t.pod, t.podIP, nil)
	defer fwd.Close()
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, method, baseURL+path, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set(envd.AccessTokenHeader, tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
