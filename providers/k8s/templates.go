package k8s

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sandboxv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/berth-sh/berth/agent/podagent"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Labels and annotations of agent-sandbox mode.
const (
	// labelTemplate names the SandboxTemplate a warm pod comes from.
	labelTemplate = "berth.sh/template"
	// annTemplate on a claim names its template (and pool).
	annTemplate = "berth.sh/template"
)

// ensured is one template's creation, done once per process.
type ensured struct {
	once sync.Once
	err  error
}

// ensureTemplate makes, once per process, the SandboxTemplate of the
// Spec's pod and its SandboxWarmPool, both named by a hash of the pod spec,
// so that every sandbox of the same shape (image, resources, user, network,
// placement) draws from one pool, and a changed shape gets a new one. The
// template holds no sandbox's settings: its agent starts pooled, with the
// pool's token (derived from the namespace's key and the template's name),
// and takes a sandbox's settings after the claim. A template or pool that
// exists is left as it is (AlreadyExists from another process is success):
// its name is its content.
//
// The namespace is part of the hash: agent-sandbox v0.5's controller keeps
// its queue of warm sandboxes by pool name alone, and the deletion of a
// pool in one namespace drops the queue of every pool of that name, so a
// pool whose name another namespace also used would hand its claims no
// warm sandbox (each one a cold start) until it refilled.
func (m *claimMode) ensureTemplate(ctx context.Context, spec driver.Spec, key []byte, network string) (string, error) {
	p := m.p
	ps, err := p.podSpec(driver.Spec{Image: spec.Image, Resources: spec.Resources, User: uidOnly(spec.User)}, p.image(spec.Image), nil)
	if err != nil {
		return "", errdefs.Errorf(errdefs.InvalidArgument, "k8s: %w", err)
	}
	name := templateName(p.opts.Namespace, ps, network)
	m.mu.Lock()
	e, ok := m.templates[name]
	if !ok {
		e = &ensured{}
		m.templates[name] = e
	}
	m.mu.Unlock()
	e.once.Do(func() {
		ps.Containers[0].Env = []corev1.EnvVar{
			{Name: podagent.EnvTokenSHA256, Value: podagent.TokenHash(poolToken(key, name))},
			{Name: podagent.EnvPooled, Value: "1"},
		}
		e.err = m.createTemplate(ctx, name, ps, network)
	})
	if e.err != nil {
		m.mu.Lock()
		delete(m.templates, name) // the next create tries again
		m.mu.Unlock()
		return "", e.err
	}
	return name, nil
}

// uidOnly keeps a numeric user, which the pod runs as (runAsUser); a user
// by name is the agent's default user, set after the claim.
func uidOnly(user string) string {
	for _, c := range user {
		if c < '0' || c > '9' {
			return ""
		}
	}
	return user
}

func (m *claimMode) createTemplate(ctx context.Context, name string, ps corev1.PodSpec, network string) error {
	ext := m.ext.ExtensionsV1beta1()
	ns := m.p.opts.Namespace
	no := false
	podLabels := map[string]string{labelTemplate: name}
	if network != "" {
		podLabels[labelNetwork] = network
	}
	tmpl := &extv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{labelTemplate: name}},
		Spec: extv1beta1.SandboxTemplateSpec{
			PodTemplate: sandboxv1beta1.PodTemplate{Spec: ps, ObjectMeta: sandboxv1beta1.PodMetadata{Labels: podLabels}},
			// berth's own NetworkPolicies (netpol.go) select the pods by
			// labelNetwork; the controller's default one would admit
			// ingress from its sandbox router only.
			NetworkPolicyManagement: extv1beta1.NetworkPolicyManagementUnmanaged,
			EnvVarsInjectionPolicy:  extv1beta1.EnvVarsInjectionPolicyDisallowed,
			Service:                 &no,
		},
	}
	if _, err := ext.SandboxTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return m.p.classifyNS(err, "create sandbox template")
	}
	pool := &extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{labelTemplate: name}},
		Spec: extv1beta1.SandboxWarmPoolSpec{
			Replicas:    m.p.opts.WarmPool,
			TemplateRef: extv1beta1.SandboxTemplateRef{Name: name},
		},
	}
	if _, err := ext.SandboxWarmPools(ns).Create(ctx, pool, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return m.p.classifyNS(err, "create sandbox warm pool")
	}
	return nil
}

// templateName names the template and pool of a pod shape in a namespace.
func templateName(namespace string, ps corev1.PodSpec, network string) string {
	shape, _ := json.Marshal(struct {
		Namespace string         `json:"namespace"`
		Spec      corev1.PodSpec `json:"spec"`
		Network   string         `json:"network"`
	}{namespace, ps, network})
	sum := sha256.Sum256(shape)
	return "berth-" + hex.EncodeToString(sum[:])[:16]
}

// poolToken is the token of the warm pods of a template: "/" never occurs
// in a sandbox's name, so it is no sandbox's token.
func poolToken(key []byte, template string) string { return token(key, "pool/"+template) }

// claimAgent hands a warm pod's agent its sandbox's settings, with the
// pool's token: the sandbox's token (its hash), user, directory and
// environment. From then on only the sandbox's token opens the agent.
func (h *sandboxHandle) claimAgent(ctx context.Context, poolTok string, spec driver.Spec) error {
	c := podagent.Claim{TokenSHA256: podagent.TokenHash(h.token), User: spec.User, Dir: spec.WorkDir, Env: spec.Env}
	err := podagent.PostClaim(ctx, &http.Client{Transport: h.tr}, baseURL, poolTok, c)
	if err != nil {
		return h.wrap(fmt.Errorf("k8s: hand sandbox %s its settings: %w", h.id, err))
	}
	return nil
}
