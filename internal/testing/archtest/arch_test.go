package archtest

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/berth-sh/berth"

// rules are the arrows that must not exist: no package at or under From
// depends on To, directly or not (test files aside). Why says what the
// arrow would break.
var rules = []struct {
	From, To string
	Why      string
}{
	{"providers", "sandbox", "a driver implements sandbox/driver and imports only it and below, never the user API"},
	{"providers", "sandbox/throttle", "a driver imports no runner machinery: the create gate is above the user API"},
}

// pkg is what go list says of one package.
type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// TestNoForbiddenArrows: go list -deps over the module shows none of the
// rules' arrows. On c83d05d providers/daytona imported sandbox/throttle
// (for a sleep), and through it the user API: this test failed there with
// both arrows named.
func TestNoForbiddenArrows(t *testing.T) {
	pkgs := list(t)
	byPath := map[string]pkg{}
	for _, p := range pkgs {
		byPath[p.ImportPath] = p
	}
	for _, r := range rules {
		from, to := module+"/"+r.From, module+"/"+r.To
		if _, ok := byPath[to]; !ok {
			t.Errorf("rule %s -> %s: no package %s (moved? fix the rule)", r.From, r.To, to)
		}
		matched := 0
		for _, p := range pkgs {
			if p.ImportPath != from && !strings.HasPrefix(p.ImportPath, from+"/") {
				continue
			}
			matched++
			if slices.Contains(p.Deps, to) {
				t.Errorf("%s depends on %s (through %s): %s", p.ImportPath, to, via(p, to, byPath), r.Why)
			}
		}
		if matched == 0 {
			t.Errorf("rule %s -> %s: no package under %s (moved? fix the rule)", r.From, r.To, from)
		}
	}
}

// via names p's direct imports that are, or lead to, to.
func via(p pkg, to string, byPath map[string]pkg) string {
	var out []string
	for _, imp := range p.Imports {
		if imp == to || slices.Contains(byPath[imp].Deps, to) {
			out = append(out, imp)
		}
	}
	return strings.Join(out, ", ")
}

// list runs go list -deps over the whole module and returns its packages
// (the module's own and the ones they depend on).
func list(t *testing.T) []pkg {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list the packages with")
	}
	cmd := exec.Command(gobin, "list", "-deps", "-json=ImportPath,Imports,Deps", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}
