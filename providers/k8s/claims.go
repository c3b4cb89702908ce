package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	sandboxv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extclient "sigs.k8s.io/agent-sandbox/clients/k8s/extensions/clientset/versioned"
	extinformers "sigs.k8s.io/agent-sandbox/clients/k8s/extensions/informers/externalversions/api/v1beta1"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// claimMode is agent-sandbox mode: each sandbox is one SandboxClaim, named
// by the sandbox's ID, against the SandboxWarmPool of its pod template
// (templates.go). agent-sandbox's controller gives the claim a warm pod
// (or, when the pool is empty, makes one from the template) and reports it
// in the claim's status; berth follows the claims through one informer and
// never reads their Sandbox or Pod objects.
//
// The TTL is the claim's spec.lifecycle.shutdownTime with shutdownPolicy
// Delete: the controller deletes the claim at that time (and, by owner
// references, its Sandbox and Pod), SetTimeout moves it, and the reaper
// deletes what the controller left. There is no kubelet backstop
// (activeDeadlineSeconds): a warm pod's idle time in its pool would count
// against it.
type claimMode struct {
	p   *Provider
	ext extclient.Interface
	w   *watcher[*extv1beta1.SandboxClaim]

	mu        sync.Mutex
	templates map[string]*ensured // by template name
}

func newClaimMode(ctx context.Context, p *Provider) (*claimMode, error) {
	ext, err := extclient.NewForConfig(p.opts.Config)
	if err != nil {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "k8s: agent-sandbox client: %w", err)
	}
	// Discovery, which every authenticated client may read, tells a
	// cluster without agent-sandbox from an informer that cannot sync.
	gv := extv1beta1.GroupVersion.String()
	if _, err := ext.Discovery().ServerResourcesForGroupVersion(gv); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errdefs.Errorf(errdefs.NotSupported, "k8s: %s=%s needs kubernetes-sigs/agent-sandbox in the cluster (its CRDs at %s, and its controller with --extensions): %w", EnvMode, ModeAgentSandbox, gv, err)
		}
		return nil, classify(err, "discover "+gv)
	}
	w, err := acquireWatcher[*extv1beta1.SandboxClaim](ctx, "sandboxclaims", p.opts.Config, p.opts.Namespace, func() cache.SharedIndexInformer {
		inf := extinformers.NewFilteredSandboxClaimInformer(ext, p.opts.Namespace, 0,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, managedOnly)
		_ = inf.SetTransform(trimClaim)
		return inf
	})
	if err != nil {
		return nil, err
	}
	return &claimMode{p: p, ext: ext, w: w, templates: map[string]*ensured{}}, nil
}

func (m *claimMode) close() { m.w.release() }

func (m *claimMode) cached() int { return len(m.w.list()) }

func trimClaim(o any) (any, error) {
	if c, ok := o.(*extv1beta1.SandboxClaim); ok {
		c.ManagedFields = nil
	}
	return o, nil
}

func (m *claimMode) claims() interface {
	Create(context.Context, *extv1beta1.SandboxClaim, metav1.CreateOptions) (*extv1beta1.SandboxClaim, error)
	Get(context.Context, string, metav1.GetOptions) (*extv1beta1.SandboxClaim, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
	Patch(context.Context, string, k8stypes.PatchType, []byte, metav1.PatchOptions, ...string) (*extv1beta1.SandboxClaim, error)
} {
	return m.ext.ExtensionsV1beta1().SandboxClaims(m.p.opts.Namespace)
}

// create ensures the template and pool of the Spec's pod, then claims from
// the pool. Spec labels go on the claim; those in an allowlisted domain go
// on its pod too. The Spec's environment, user and directory are not in
// the claim: a claim's env forces a cold start, so the agent takes them
// after the claim (claimAgent).
func (m *claimMode) create(ctx context.Context, spec driver.Spec, key []byte) (string, error) {
	p := m.p
	net, err := p.nets.ensure(ctx, spec.Network)
	if err != nil {
		return "", err
	}
	tmpl, err := m.ensureTemplate(ctx, spec, key, net)
	if err != nil {
		return "", err
	}
	labelsJSON, err := json.Marshal(spec.Labels)
	if err != nil {
		return "", errdefs.Errorf(errdefs.InvalidArgument, "k8s: %w", err)
	}
	metaJSON, _ := json.Marshal(meta{User: spec.User, WorkDir: spec.WorkDir, Image: p.image(spec.Image)})
	name := newName()
	shutdown := metav1.NewTime(ceilSecond(time.Now().Add(spec.TTL)))
	claim := &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: claimLabels(spec),
			Annotations: map[string]string{
				annLabels:   string(labelsJSON),
				annMeta:     string(metaJSON),
				annTemplate: tmpl,
			},
		},
		Spec: extv1beta1.SandboxClaimSpec{
			WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: tmpl},
			Lifecycle: &extv1beta1.Lifecycle{
				ShutdownTime:   &shutdown,
				ShutdownPolicy: extv1beta1.ShutdownPolicyDelete,
			},
			AdditionalPodMetadata: sandboxv1beta1.PodMetadata{Labels: m.podLabels(spec)},
		},
	}
	if _, err := m.claims().Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return "", p.classifyNS(err, "create sandbox claim")
	}
	return name, nil
}

// claimLabels are the claim object's own labels: the informer's selector
// and each Spec label that is a valid Kubernetes label (the controller
// checks only what a claim asks for its pod).
func claimLabels(spec driver.Spec) map[string]string {
	l := map[string]string{labelManaged: "true"}
	for k, v := range spec.Labels {
		if validLabel(k, v) {
			l[k] = v
		}
	}
	return l
}

// podLabels are the Spec labels the controller's allowlist lets a claim put
// on its pod: a prefixed key in an allowed domain (or below one). Any
// other label would make the controller refuse the claim (InvalidMetadata).
func (m *claimMode) podLabels(spec driver.Spec) map[string]string {
	var out map[string]string
	for k, v := range spec.Labels {
		if !validLabel(k, v) || !m.allowedDomain(k) {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}

func (m *claimMode) allowedDomain(key string) bool {
	domain, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	domain = strings.ToLower(domain)
	for _, d := range m.p.opts.ClaimLabelDomains {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return true
		}
	}
	return false
}

// ready waits on the informer for the claim to report a ready pod. The
// controller names the warm sandbox it adopts (and so its pod) on the claim
// a few API writes before it reports the claim ready; the port-forward to
// that pod is dialled from then on, so a warm claim's first call to its
// agent does not wait for the API server's upgrade. Only the pod the
// ready claim reports is used.
func (m *claimMode) ready(ctx context.Context, id string) (target, error) {
	r := &claimReadiness{name: id}
	var pre *forwarder
	check := func(c *extv1beta1.SandboxClaim) (bool, error) {
		if c != nil && pre == nil {
			if name := c.Annotations[extv1beta1.AssignedSandboxNameAnnotation]; name != "" {
				pre = m.p.predial(ctx, name)
			}
		}
		return r.check(c)
	}
	handed := false
	defer func() {
		if !handed && pre != nil {
			pre.Close()
		}
	}()
	if err := m.w.until(ctx, id, check); err != nil {
		if ctx.Err() != nil {
			return target{}, errdefs.Errorf(errdefs.DeadlineExceeded, "k8s: sandbox claim %s not ready within %v (%s)", id, m.p.opts.ReadyTimeout, r.state)
		}
		return target{}, err
	}
	c := m.w.get(id)
	t := claimTarget(c)
	key, err := m.p.keys.get(ctx)
	if err != nil {
		return target{}, err
	}
	t.poolToken = poolToken(key, c.Annotations[annTemplate])
	t.fwd, handed = pre, true // agentTransport closes it if the claim reports another pod
	return t, nil
}

func claimTarget(c *extv1beta1.SandboxClaim) target {
	var md meta
	_ = json.Unmarshal([]byte(c.Annotations[annMeta]), &md)
	t := target{id: c.Name, pod: c.Status.SandboxStatus.Name, user: md.User}
	if ips := c.Status.SandboxStatus.PodIPs; len(ips) > 0 {
		t.podIP = ips[0]
	}
	return t
}

// claimReadiness says whether a claim has its pod ready; seen records that
// the cache has held the claim, so that a claim gone from it afterwards is
// reported as deleted rather than awaited.
type claimReadiness struct {
	name  string
	seen  bool
	state string
}

// Reasons of the claim's Ready condition that no amount of waiting fixes.
var fatalClaimReasons = map[string]bool{"InvalidMetadata": true, "VolumeClaimTemplatesError": true}

func (r *claimReadiness) check(c *extv1beta1.SandboxClaim) (bool, error) {
	if c == nil {
		if r.seen {
			return false, errdefs.Errorf(errdefs.NotFound, "k8s: sandbox claim %s was deleted before it was ready", r.name)
		}
		r.state = "not yet seen by the informer"
		return false, nil
	}
	r.seen = true
	if why := claimEnded(c, time.Now()); why != "" {
		return false, errdefs.Errorf(errdefs.Unavailable, "k8s: sandbox claim %s: %s before it was ready", r.name, why)
	}
	ready := apimeta.FindStatusCondition(c.Status.Conditions, string(sandboxv1beta1.SandboxConditionReady))
	switch {
	case ready == nil:
		r.state = "not reconciled yet (is agent-sandbox's controller running, with --extensions?)"
	case ready.Status == metav1.ConditionTrue && c.Status.SandboxStatus.Name != "" && len(c.Status.SandboxStatus.PodIPs) > 0:
		return true, nil
	case fatalClaimReasons[ready.Reason]:
		return false, errdefs.Errorf(errdefs.InvalidArgument, "k8s: sandbox claim %s refused: %s: %s", r.name, ready.Reason, ready.Message)
	default:
		r.state = ready.Reason + ": " + ready.Message
	}
	return false, nil
}

// claimEnded says why a claim's sandbox is over ("" while it is not):
// deleted, expired, or its pod ended.
func claimEnded(c *extv1beta1.SandboxClaim, now time.Time) string {
	if c.DeletionTimestamp != nil {
		return "it is being deleted"
	}
	if exp, ok := claimExpiry(c); ok && !now.Before(exp) {
		return "it expired"
	}
	if f := apimeta.FindStatusCondition(c.Status.Conditions, string(sandboxv1beta1.SandboxConditionFinished)); f != nil && f.Status == metav1.ConditionTrue {
		return fmt.Sprintf("its pod ended (%s %s)", f.Reason, f.Message)
	}
	if r := apimeta.FindStatusCondition(c.Status.Conditions, string(sandboxv1beta1.SandboxConditionReady)); r != nil &&
		(r.Reason == extv1beta1.ClaimExpiredReason || r.Reason == sandboxv1beta1.SandboxReasonExpired) {
		return "it expired"
	}
	return ""
}

func claimExpiry(c *extv1beta1.SandboxClaim) (time.Time, bool) {
	if l := c.Spec.Lifecycle; l != nil && l.ShutdownTime != nil {
		return l.ShutdownTime.Time, true
	}
	return time.Time{}, false
}

// live reads the cache (one GET when it has not seen a claim another
// process just made).
func (m *claimMode) live(ctx context.Context, id string) (target, error) {
	c, err := m.liveClaim(ctx, id)
	if err != nil {
		return target{}, err
	}
	t := claimTarget(c)
	if t.pod == "" || t.podIP == "" {
		return target{}, errdefs.Errorf(errdefs.Unavailable, "k8s: sandbox %s has no pod yet", id)
	}
	return t, nil
}

func (m *claimMode) liveClaim(ctx context.Context, id string) (*extv1beta1.SandboxClaim, error) {
	c := m.w.get(id)
	if c == nil {
		got, err := m.claims().Get(ctx, id, metav1.GetOptions{})
		if err != nil {
			return nil, m.p.classifyNS(err, "get sandbox claim")
		}
		if got.Labels[labelManaged] != "true" {
			return nil, errdefs.Errorf(errdefs.NotFound, "k8s: sandbox claim %s is not a berth sandbox", id)
		}
		c = got
	}
	if why := claimEnded(c, time.Now()); why != "" {
		return nil, errdefs.Errorf(errdefs.NotFound, "k8s: sandbox %s is gone: %s", id, why)
	}
	return c, nil
}

func (m *claimMode) list(labels map[string]string, now time.Time) []driver.Info {
	var out []driver.Info
	for _, c := range m.w.list() {
		if claimEnded(c, now) != "" || !labelsMatch(c.Labels, labels) {
			continue
		}
		var l map[string]string
		if err := json.Unmarshal([]byte(c.Annotations[annLabels]), &l); err != nil || l == nil {
			l = map[string]string{}
		}
		if !driver.MatchLabels(l, labels) {
			continue
		}
		var md meta
		_ = json.Unmarshal([]byte(c.Annotations[annMeta]), &md)
		exp, _ := claimExpiry(c)
		state := "Pending"
		if r := apimeta.FindStatusCondition(c.Status.Conditions, string(sandboxv1beta1.SandboxConditionReady)); r != nil && r.Status == metav1.ConditionTrue {
			state = "Running"
		}
		out = append(out, driver.Info{ID: c.Name, Image: md.Image, Labels: l, State: state, CreatedAt: c.CreationTimestamp.Time, ExpiresAt: exp})
	}
	return out
}

// delete deletes the claim; the garbage collector deletes its Sandbox and
// Pod after it (owner references), as it does at the claim's shutdown.
func (m *claimMode) delete(ctx context.Context, id string) error {
	if c := m.w.get(id); c != nil && c.DeletionTimestamp != nil {
		return errdefs.Errorf(errdefs.NotFound, "k8s: sandbox %s is already being deleted", id)
	}
	if err := m.claims().Delete(ctx, id, metav1.DeleteOptions{}); err != nil {
		return m.p.classifyNS(err, "delete sandbox claim")
	}
	return m.w.until(ctx, id, func(c *extv1beta1.SandboxClaim) (bool, error) {
		return c == nil || c.DeletionTimestamp != nil, nil
	})
}

func (m *claimMode) ended(now time.Time) []string {
	var ids []string
	for _, c := range m.w.list() {
		if c.DeletionTimestamp == nil && claimEnded(c, now) != "" {
			ids = append(ids, c.Name)
		}
	}
	return ids
}

// setExpiry moves the claim's shutdownTime (one PATCH), up to the
// provider's max lifetime from the claim's creation.
func (m *claimMode) setExpiry(ctx context.Context, id string, at time.Time) error {
	c, err := m.liveClaim(ctx, id)
	if err != nil {
		return err
	}
	if limit := c.CreationTimestamp.Add(m.p.opts.MaxLifetime); at.After(limit) {
		return errdefs.Errorf(errdefs.InvalidArgument,
			"k8s set timeout: %s is past the sandbox's max lifetime (%s); raise the provider's max lifetime", at.Format(time.RFC3339), limit.Format(time.RFC3339))
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"lifecycle": map[string]any{
		"shutdownTime": ceilSecond(at).UTC().Format(time.RFC3339), "shutdownPolicy": string(extv1beta1.ShutdownPolicyDelete),
	}}})
	_, err = m.claims().Patch(ctx, id, k8stypes.MergePatchType, patch, metaPatchOpts)
	return m.p.classifyNS(err, "set the claim's shutdown time")
}

func (m *claimMode) gone(ctx context.Context, id string) string {
	var why string
	seen, start := false, time.Now()
	err := m.w.until(ctx, id, func(c *extv1beta1.SandboxClaim) (bool, error) {
		switch {
		case c == nil && !seen && time.Since(start) < unseenGrace:
			return false, nil
		case c == nil:
			why = "its sandbox claim was deleted"
		default:
			seen = true
			if e := claimEnded(c, time.Now()); e != "" {
				why = "its sandbox claim ended: " + e
				return true, nil
			}
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return ""
	}
	return why
}

// ceilSecond rounds t up to a whole second: shutdownTime keeps seconds
// only, and a TTL must never end before the time it was given.
func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}
