package hostproc

import (
	"slices"
	"testing"
)

// The copies disagreed on malformed variables: envd dropped them, the
// fake and modaltest passed "A=B" as a key through, which sets A. All drop
// them now; PATH always has a value, later layers win.
func TestEnviron(t *testing.T) {
	env := Environ([]string{"HOME=/base", "KEEP=1", "junk"},
		map[string]string{"HOME": "/layer", "PATH=/evil": "x", "": "empty", "NUL": "a\x00b"},
		map[string]string{"Z": "last", "KEEP": "2"})
	want := []string{"HOME=/layer", "KEEP=2", "Z=last", "PATH=" + DefaultPath}
	if !slices.Equal(env, want) {
		t.Errorf("Environ = %q, want %q", env, want)
	}
	if Getenv(env, "PATH") != DefaultPath {
		t.Errorf("PATH = %q", Getenv(env, "PATH"))
	}
	if got := Environ(nil, map[string]string{"PATH": "/only"}); !slices.Equal(got, []string{"PATH=/only"}) {
		t.Errorf("a PATH of the caller's: %q", got)
	}
}
