package allowlist

import (
	"slices"
	"testing"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

func TestSplit(t *testing.T) {
	cidrs, domains, err := Split("p", []string{"10.0.0.0/8", "1.2.3.4", "::1", "PyPI.org", "*.example.com", "files.pythonhosted.org."})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cidrs, []string{"10.0.0.0/8", "1.2.3.4/32", "::1/128"}) ||
		!slices.Equal(domains, []string{"pypi.org", "*.example.com", "files.pythonhosted.org."}) {
		t.Fatalf("cidrs %v domains %v", cidrs, domains)
	}
	for _, bad := range []string{"10.0.0.0/33", "exa mple.com", "a,b", "", "-a.com", "a\nRUN x", "*.*.com"} {
		if _, _, err := Split("p", []string{bad}); errdefs.ClassOf(err) != errdefs.InvalidArgument {
			t.Errorf("%q: %v, want InvalidArgument", bad, err)
		}
	}
	if c, d, err := Split("p", nil); err != nil || c == nil || d == nil {
		t.Errorf("empty: %v %v %v, want empty lists", c, d, err)
	}
}
