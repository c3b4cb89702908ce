package archtest

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const berth = "github.com/berth-sh/berth"

// arrowRules are imports that point up. From is a package pattern of the
// module, as go list takes it ("results/..." is results and everything
// under it); no package it matches may depend on To, directly or not
// (test files aside). A To ending in "/..." forbids that whole tree.
var arrowRules = []struct {
	From, To string
	Why      string
}{
	{"results/...", "harbor/job", "the results reader reads the layout (results/layout), not the runner that writes it"},
	{"results/...", "harbor/trial", "the results reader reads the layout (results/layout), not the runner that writes it"},
	{"results/...", "registry", "the results reader needs no provider"},
	{"view/...", "harbor/job", "the viewer reads results, not the runner"},
	{"view/...", "harbor/trial", "the viewer reads results, not the runner"},
	{"view/...", "registry", "the viewer needs no provider"},
	{"session/...", "serve/...", "the session server is not part of berth serve (keys: internal/apikeys)"},
	{"providers/local/imagebuild", "envd", "the Dockerfile builder needs no data plane"},
	{"rollout", "harbor/agent/command", "the rollout library takes its agent from the caller (rollout/agents)"},
	{"rollout", "harbor/agent/terminus", "the rollout library takes its agent from the caller (rollout/agents)"},
}

// leaves are packages that may depend on nothing of the module but the
// packages listed with them.
var leaves = map[string][]string{
	"results/layout": {"sandbox/errdefs"},
}

type goPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// TestNoArrowsUp: go list shows none of arrowRules' imports. Before
// issue 25's moves results and view reached harbor/job and the registry
// for result types, session reached serve/apikeys, imagebuild envd for
// one helper, and the rollout library chose between terminus and command:
// each failed here.
func TestNoArrowsUp(t *testing.T) {
	for _, r := range arrowRules {
		pkgs := goList(t, berth+"/"+r.From)
		if len(pkgs) == 0 {
			t.Errorf("rule %s -> %s: no package matches %s (moved? fix the rule)", r.From, r.To, r.From)
		}
		to, tree := strings.CutSuffix(berth+"/"+r.To, "/...")
		for _, p := range pkgs {
			for _, d := range p.Deps {
				if d == to || tree && strings.HasPrefix(d, to+"/") {
					t.Errorf("%s depends on %s (through %s): %s", p.ImportPath, d, strings.Join(through(t, p, d), ", "), r.Why)
				}
			}
		}
	}
}

// TestLeaves: a leaf package depends on the standard library and its
// listed packages only, so that anything may import it.
func TestLeaves(t *testing.T) {
	for leaf, allowed := range leaves {
		pkgs := goList(t, berth+"/"+leaf)
		if len(pkgs) != 1 {
			t.Fatalf("%s: %d packages", leaf, len(pkgs))
		}
		for _, d := range pkgs[0].Deps {
			if !strings.HasPrefix(d, berth+"/") {
				if !strings.Contains(strings.SplitN(d, "/", 2)[0], ".") {
					continue // the standard library
				}
				t.Errorf("%s depends on %s, outside the module", leaf, d)
				continue
			}
			if !slices.Contains(allowed, strings.TrimPrefix(d, berth+"/")) {
				t.Errorf("%s depends on %s; a leaf may depend only on %v", leaf, d, allowed)
			}
		}
	}
}

// TestSessionAPIHidesJinja: no exported declaration of the session
// packages mentions a chattemplate/jinja type, so that callers of the
// session server do not depend on the template engine. Before issue 25
// tito's ParseTools, Render, Increment and Record.Tools handed out
// []jinja.Value.
func TestSessionAPIHidesJinja(t *testing.T) {
	const jinja = berth + "/chattemplate/jinja"
	root := moduleDir(t)
	err := filepath.WalkDir(filepath.Join(root, "session"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		name := importName(f, jinja)
		if name == "" {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		for _, what := range exportedUses(f, name) {
			t.Errorf("%s: %s shows a %s type", rel, what, jinja)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// importName is the name f uses for the package at path, "" when f does
// not import it.
func importName(f *ast.File, path string) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == path {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return filepath.Base(path)
		}
	}
	return ""
}

// exportedUses names f's exported declarations whose exported surface
// (signatures, exported fields, interface methods, declared types of
// vars and consts) mentions pkg.
func exportedUses(f *ast.File, pkg string) []string {
	var out []string
	check := func(what string, n ast.Node) {
		if n != nil && mentions(n, pkg) {
			out = append(out, what)
		}
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Name.IsExported() && (d.Recv == nil || exportedRecv(d.Recv)) {
				check("func "+d.Name.Name, d.Type)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						check("type "+s.Name.Name, exportedSurface(s.Type))
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							check(n.Name, s.Type)
						}
					}
				}
			}
		}
	}
	return out
}

// exportedSurface is the part of a type that other packages see: a
// struct's exported fields (and embedded ones), or the type itself.
func exportedSurface(e ast.Expr) ast.Node {
	st, ok := e.(*ast.StructType)
	if !ok {
		return e
	}
	var shown []*ast.Field
	for _, f := range st.Fields.List {
		if len(f.Names) == 0 || slices.ContainsFunc(f.Names, func(n *ast.Ident) bool { return n.IsExported() }) {
			shown = append(shown, f)
		}
	}
	return &ast.FieldList{List: shown}
}

func exportedRecv(r *ast.FieldList) bool {
	t := r.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if g, ok := t.(*ast.IndexExpr); ok {
		t = g.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}

// mentions reports whether n names anything of the package imported as pkg.
func mentions(n ast.Node, pkg string) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == pkg {
				found = true
			}
		}
		return !found
	})
	return found
}

// through names p's direct imports that are, or lead to, dep.
func through(t *testing.T, p goPackage, dep string) []string {
	var out []string
	for _, imp := range p.Imports {
		if imp == dep {
			out = append(out, imp)
			continue
		}
		if q := goList(t, imp); len(q) == 1 && slices.Contains(q[0].Deps, dep) {
			out = append(out, imp)
		}
	}
	return out
}

func goCommand(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list the packages with")
	}
	return gobin
}

// goList is go list's view of the packages pattern matches, each with
// all it depends on (test files aside).
func goList(t *testing.T, pattern string) []goPackage {
	t.Helper()
	cmd := exec.Command(goCommand(t), "list", "-json=ImportPath,Imports,Deps", pattern)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pattern, err, stderr.String())
	}
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		if err := dec.Decode(&p); err == io.EOF {
			return pkgs
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
}

// moduleDir is the module's root directory.
func moduleDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(goCommand(t), "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	return strings.TrimSpace(string(out))
}
