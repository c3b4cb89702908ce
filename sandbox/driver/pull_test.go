package driver

import (
	"github.com/berth-sh/berth/sandbox/errdefs"
	"testing"
)

// TestPullPolicyAllows: an entry matches its host on any port, or its
// host and port; names match whatever their case, addresses whatever
// their spelling; nothing else matches, and a nil policy allows nothing.
func TestPullPolicyAllows(t *testing.T) {
	p := &PullPolicy{Allow: []string{"Registry.Internal", "127.0.0.1:5000", "[::1]:6000", "fd00::1", "[fd00::2]"}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		host, port string
		want       bool
	}{
		{"registry.internal", "443", true}, {"REGISTRY.internal.", "5000", true},
		{"127.0.0.1", "5000", true}, {"127.0.0.1", "5001", false}, {"localhost", "5000", false},
		{"::1", "6000", true}, {"[::1]", "6000", true}, {"0:0::1", "6000", true}, {"::1", "5000", false},
		{"fd00::1", "1", true}, {"fd00:0::2", "443", true}, {"::ffff:127.0.0.1", "5000", false},
		{"registry.internal.evil", "443", false}, {"internal", "443", false},
	} {
		if got := p.Allows(c.host, c.port); got != c.want {
			t.Errorf("Allows(%q, %q) = %v, want %v", c.host, c.port, got, c.want)
		}
	}
	var none *PullPolicy
	if none.Allows("127.0.0.1", "5000") || none.Validate() != nil {
		t.Error("a nil policy allows, or is invalid")
	}
	for _, bad := range []string{"", "http://r", "r/x", "r:0", "r:65536", "r:", "u@r", "fd00::1:", ":5000", "r x"} {
		if err := (&PullPolicy{Allow: []string{bad}}).Validate(); errdefs.ClassOf(err) != errdefs.InvalidArgument {
			t.Errorf("entry %q: %v", bad, err)
		}
	}
	spec := Spec{Image: "x", Pull: &PullPolicy{Allow: []string{"r/x"}}}
	if err := spec.Validate(); errdefs.ClassOf(err) != errdefs.InvalidArgument {
		t.Errorf("a spec with a bad pull policy: %v", err)
	}
	if d := spec.WithDefaults(); d.Pull == spec.Pull || &d.Pull.Allow[0] == &spec.Pull.Allow[0] {
		t.Error("WithDefaults shares the pull policy with its caller")
	}
}
