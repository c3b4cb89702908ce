package dockerfile

import (
	"slices"
	"strings"
	"testing"
)

// The base image's environment is in scope after FROM, so ENV can extend
// it; without it $PATH would expand to nothing.
func TestParseWithEnv(t *testing.T) {
	src := "FROM base\nENV PATH=/opt/bin:$PATH HOME2=${HOME}\n"
	f, err := ParseWithEnv(strings.NewReader(src), nil, []string{"PATH=/usr/bin:/bin", "HOME=/root"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PATH", "/opt/bin:/usr/bin:/bin", "HOME2", "/root"}
	if got := f.Instructions[0].Args; !slices.Equal(got, want) {
		t.Errorf("ENV args %q, want %q", got, want)
	}
	f, err = Parse(strings.NewReader(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Instructions[0].Args[1]; got != "/opt/bin:" {
		t.Errorf("without a base env, PATH expands to %q", got)
	}
}
