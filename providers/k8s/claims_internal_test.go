package k8s

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Only Spec labels whose key is in an allowlisted domain (or below one)
// are asked for the claim's pod; the claim keeps every valid one.
func TestClaimPodLabels(t *testing.T) {
	o := Options{Mode: ModeAgentSandbox, Config: nil}
	o.ClaimLabelDomains = []string{"Sandbox.Users.io", "corp.example"}
	o.Kubeconfig = "/nonexistent" // fill fails on the config after the options it checks
	_ = o.fill()
	m := &claimMode{p: &Provider{opts: o}}
	spec := driver.Spec{Labels: map[string]string{
		"sandbox.users.io/trial": "t1", "team.sandbox.users.io/x": "y", "corp.example/a": "b", "Corp.example/c": "d",
		"berth.sh/job": "j", "plain": "p", "notsandbox.users.io/z": "z", "sandbox.users.io/bad": "has spaces",
	}}
	got := m.podLabels(spec)
	want := map[string]string{"sandbox.users.io/trial": "t1", "team.sandbox.users.io/x": "y", "corp.example/a": "b"}
	if len(got) != len(want) {
		t.Fatalf("pod labels %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("pod labels %v, want %v", got, want)
		}
	}
	cl := claimLabels(spec)
	if cl[labelManaged] != "true" || cl["berth.sh/job"] != "j" || cl["plain"] != "p" {
		t.Errorf("claim labels %v", cl)
	}
	if _, ok := cl["sandbox.users.io/bad"]; ok {
		t.Errorf("an invalid label value became a claim label")
	}
	bad := Options{ClaimLabelDomains: []string{"not a domain"}}
	if err := bad.fill(); errdefs.ClassOf(err) != errdefs.InvalidArgument {
		t.Errorf("a bad claim label domain: %v", err)
	}
	if err := (&Options{WarmPool: -1}).fill(); errdefs.ClassOf(err) != errdefs.InvalidArgument {
		t.Errorf("a negative warm pool: %v", err)
	}
}

// A claim is over when deleted, past its shutdownTime, expired by the
// controller, or when its pod ended; shutdown times round up to a second.
func TestClaimEnded(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *extv1beta1.Lifecycle {
		st := metav1.NewTime(now.Add(d))
		return &extv1beta1.Lifecycle{ShutdownTime: &st, ShutdownPolicy: extv1beta1.ShutdownPolicyDelete}
	}
	del := metav1.NewTime(now)
	for _, tt := range []struct {
		name  string
		claim extv1beta1.SandboxClaim
		ended bool
	}{
		{"live", extv1beta1.SandboxClaim{Spec: extv1beta1.SandboxClaimSpec{Lifecycle: at(time.Minute)}}, false},
		{"past shutdown", extv1beta1.SandboxClaim{Spec: extv1beta1.SandboxClaimSpec{Lifecycle: at(-time.Second)}}, true},
		{"deleted", extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &del}}, true},
		{"pod ended", extv1beta1.SandboxClaim{Status: extv1beta1.SandboxClaimStatus{Conditions: []metav1.Condition{
			{Type: "Finished", Status: metav1.ConditionTrue, Reason: "PodFailed"}}}}, true},
		{"expired", extv1beta1.SandboxClaim{Status: extv1beta1.SandboxClaimStatus{Conditions: []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionFalse, Reason: "ClaimExpired"}}}}, true},
		{"not ready yet", extv1beta1.SandboxClaim{Status: extv1beta1.SandboxClaimStatus{Conditions: []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionFalse, Reason: "SandboxNotReady"}}}}, false},
	} {
		if got := claimEnded(&tt.claim, now) != ""; got != tt.ended {
			t.Errorf("%s: ended %v, want %v", tt.name, got, tt.ended)
		}
	}
	if got := ceilSecond(now.Add(time.Millisecond)); !got.Equal(now.Add(time.Second)) {
		t.Errorf("ceilSecond rounded to %v", got)
	}
	if got := ceilSecond(now); !got.Equal(now) {
		t.Errorf("ceilSecond moved a whole second to %v", got)
	}
}

// A port-forward dialled ahead for the pod a claim named while the
// controller worked is used only for that pod: when the ready claim
// reports another one, the early session is closed and a new one is made
// for the reported pod, so no call reaches a pod the claim does not own.
func TestPredialOnlyForTheReportedPod(t *testing.T) {
	p := &Provider{}
	pre := &forwarder{p: p, name: "warm-a"}
	_, c := p.agentTransport("warm-a", "", pre)
	if c != pre || pre.closed {
		t.Fatalf("the early session to the reported pod was not used")
	}
	other := &forwarder{p: p, name: "warm-a"}
	_, c = p.agentTransport("warm-b", "", other)
	f, ok := c.(*forwarder)
	if !ok || f == other || f.name != "warm-b" {
		t.Fatalf("transport for warm-b goes through %+v", c)
	}
	if !other.closed {
		t.Errorf("the early session to warm-a was left open")
	}
	if (&Provider{opts: Options{Dial: DialPodIP}}).predial(t.Context(), "x") != nil {
		t.Errorf("predial made a port-forward where agents are dialled by pod IP")
	}
}

// One pod shape is one pool per namespace, under a name no other
// namespace's pool has: agent-sandbox's controller queues warm sandboxes by
// pool name alone, and a pool of the same name deleted elsewhere would
// empty this one's queue.
func TestTemplateNamePerNamespace(t *testing.T) {
	ps := corev1.PodSpec{Containers: []corev1.Container{{Name: "sandbox", Image: "img"}}}
	a, b := templateName("team-a", ps, "none"), templateName("team-b", ps, "none")
	if a == b {
		t.Fatalf("namespaces team-a and team-b share pool name %s", a)
	}
	if again := templateName("team-a", ps, "none"); again != a {
		t.Errorf("the same shape in the same namespace is %s and %s", a, again)
	}
	if other := templateName("team-a", ps, "public"); other == a {
		t.Errorf("another network shares pool %s", a)
	}
	if len(a) > 63 {
		t.Errorf("pool name %q is not a valid label value", a)
	}
}
