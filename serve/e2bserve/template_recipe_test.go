package e2bserve

import (
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/providers/local/dockerfile"
	"github.com/berth-sh/berth/sandbox"
)

var testHash = strings.Repeat("ab", 32)

// TestRecipeRoundTrip: the Dockerfile a template becomes parses back to
// exactly the steps' arguments, whatever quotes, newlines and '$' they
// hold, and each line maps to its step.
func TestRecipeRoundTrip(t *testing.T) {
	run := "printf '%s\\n' \"a b\" 'c $HOME' && cat <<EOF > /x\nline 2 \"quoted\" $NOT_EXPANDED\nEOF"
	steps := []e2bapi.TemplateStep{
		{Type: "ENV", Args: []string{"A", "one two \"three\"", "B", "x=y", "C", `C:\dir\ 'q' \"`}},
		{Type: "RUN", Args: []string{run}},
		{Type: "RUN", Args: []string{"apt-get install -y curl", "root"}},
		{Type: "USER", Args: []string{"app"}},
		{Type: "COPY", Args: []string{"src/**/*.go", "/opt/$dir with space/", "", "0755"}, FilesHash: testHash},
		{Type: "copy", Args: []string{"./conf/a.json", "a.json", "other:grp"}, FilesHash: testHash},
		{Type: "WORKDIR", Args: []string{`/srv/$x "a" 'b' \c`}},
	}
	r, err := newRecipe(e2bapi.TemplateBuildStartV2{FromImage: "debian:bookworm-slim", Steps: steps, StartCmd: "serve", ReadyCmd: "true"}, "debian:bookworm-slim", 100, func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	f, err := dockerfile.Parse(strings.NewReader(r.dockerfile), nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, r.dockerfile)
	}
	if f.Base != "debian:bookworm-slim" {
		t.Fatalf("base %q", f.Base)
	}
	in := f.Instructions
	want := []struct {
		cmd   string
		args  []string
		flags map[string]string
	}{
		{"ENV", []string{"A", `one two "three"`}, nil},
		{"ENV", []string{"B", "x=y"}, nil},
		{"ENV", []string{"C", `C:\dir\ 'q' \"`}, nil},
		{"RUN", []string{"/bin/sh", "-c", runWrapper, "sh", run}, nil},
		{"RUN", []string{"/bin/sh", "-c", runWrapper, "sh", "apt-get install -y curl"}, map[string]string{"user": "root"}},
		{"USER", []string{"app"}, nil},
		// A glob copies what the SDK uploaded, from its non-glob part; the
		// owner defaults to the current USER, as on E2B.
		{"COPY", []string{"s5/src", "/opt/$dir with space/"}, map[string]string{"chown": "app", "chmod": "0755"}},
		{"COPY", []string{"s6/conf/a.json", "a.json"}, map[string]string{"chown": "other:grp"}},
		{"WORKDIR", []string{`/srv/$x "a" 'b' \c`}, nil},
	}
	if len(in) != len(want) {
		t.Fatalf("%d instructions, want %d:\n%s", len(in), len(want), r.dockerfile)
	}
	for i, w := range want {
		if in[i].Cmd != w.cmd || !slices.Equal(in[i].Args, w.args) {
			t.Errorf("instruction %d = %s %q, want %s %q", i, in[i].Cmd, in[i].Args, w.cmd, w.args)
		}
		for k, v := range w.flags {
			if in[i].Flags[k] != v {
				t.Errorf("instruction %d flags %v, want %s=%s", i, in[i].Flags, k, v)
			}
		}
	}
	// Lines name their steps as the SDK counts them (1-based; base first).
	wantSteps := []string{stepBase, "1", "1", "1", "2", "3", "4", "5", "6", "7"}
	for n, s := range wantSteps {
		if got := r.lines[n+1].step; got != s {
			t.Errorf("line %d is step %q, want %q", n+1, got, s)
		}
	}
	if got := r.stepOf("build x: Dockerfile:5: RUN ...: exit status 2"); got != "2" {
		t.Errorf("stepOf = %q", got)
	}
	if len(r.copies) != 2 || r.copies[0] != (copySource{"s5", testHash}) {
		t.Errorf("copies = %+v", r.copies)
	}
}

// TestRecipeLongCommand: a command longer than a Dockerfile line may be
// (BuildKit reads 64 KiB a line) is folded with continuations and parses
// back byte for byte, whatever it holds where a line would break; the
// steps after it keep their lines.
func TestRecipeLongCommand(t *testing.T) {
	var b strings.Builder
	for b.Len() < maxCmdBytes-1000 {
		b.WriteString(`echo 'a\b' "#x" \\ $HOME  ` + strings.Repeat("QUJD", 50) + "\n")
	}
	long := b.String()
	steps := []e2bapi.TemplateStep{{Type: "RUN", Args: []string{long}}, {Type: "ENV", Args: []string{"E", strings.Repeat(`\ #`, 30<<10)}}, {Type: "USER", Args: []string{"app"}}}
	r, err := newRecipe(e2bapi.TemplateBuildStartV2{Steps: steps}, "debian:bookworm-slim", 10, func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	f, err := dockerfile.Parse(strings.NewReader(r.dockerfile), nil)
	if err != nil {
		t.Fatal(err)
	}
	in := f.Instructions
	if len(in) != 3 || !slices.Equal(in[0].Args, []string{"/bin/sh", "-c", runWrapper, "sh", long}) || in[1].Args[1] != steps[1].Args[1] {
		t.Fatalf("the long steps did not parse back: %d instructions", len(in))
	}
	for i, want := range []string{"1", "2", "3"} {
		if got := r.lines[in[i].Line].step; got != want {
			t.Errorf("instruction %d starts on line %d, step %q; want step %s", i, in[i].Line, got, want)
		}
	}
	if in[2].Line < 6 {
		t.Errorf("USER on line %d: the long steps were not folded", in[2].Line)
	}
}

// TestRecipeDigest: the cache key covers the steps, the uploads, the
// start and ready commands and the key, and not force.
func TestRecipeDigest(t *testing.T) {
	mk := func(b e2bapi.TemplateBuildStartV2) *recipe {
		t.Helper()
		r, err := newRecipe(b, "img", 10, func(string) bool { return true })
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	copyStep := func(hash string) e2bapi.TemplateStep {
		return e2bapi.TemplateStep{Type: "COPY", Args: []string{"a", "/a"}, FilesHash: hash}
	}
	base := mk(e2bapi.TemplateBuildStartV2{Steps: []e2bapi.TemplateStep{{Type: "RUN", Args: []string{"true"}}, copyStep(testHash)}})
	same := mk(e2bapi.TemplateBuildStartV2{Force: true, Steps: []e2bapi.TemplateStep{{Type: "RUN", Args: []string{"true"}}, copyStep(testHash)}})
	if base.digest("k1") != same.digest("k1") || !same.force || base.force {
		t.Fatal("force changed the digest, or was lost")
	}
	for name, other := range map[string]string{
		"key":   base.digest("k2"),
		"step":  mk(e2bapi.TemplateBuildStartV2{Steps: []e2bapi.TemplateStep{{Type: "RUN", Args: []string{"false"}}, copyStep(testHash)}}).digest("k1"),
		"files": mk(e2bapi.TemplateBuildStartV2{Steps: []e2bapi.TemplateStep{{Type: "RUN", Args: []string{"true"}}, copyStep(strings.Repeat("cd", 32))}}).digest("k1"),
		"start": mk(e2bapi.TemplateBuildStartV2{StartCmd: "x", Steps: []e2bapi.TemplateStep{{Type: "RUN", Args: []string{"true"}}, copyStep(testHash)}}).digest("k1"),
	} {
		if other == base.digest("k1") {
			t.Errorf("a different %s has the same digest", name)
		}
	}
}

// TestRecipeRefusals: what cannot be built faithfully, or would reach
// outside the build context, is refused before anything runs, naming the
// step as the SDK counts it, and never echoing registry credentials.
func TestRecipeRefusals(t *testing.T) {
	uploaded := func(h string) bool { return h == testHash }
	cases := []struct {
		name  string
		b     e2bapi.TemplateBuildStartV2
		base  string
		class sandbox.Class
		msg   string
	}{
		{"copy parent", e2bapi.TemplateBuildStartV2{Steps: []e2bapi.TemplateStep{{Type: "COPY", Args: []string{"../../etc/passwd", "/x"}, FilesHash: testHash}}}, "img", sandbox.InvalidArgument, "step 1: COPY source \"../../etc/passwd\" is outside the build context"},
		{"copy parent inside", e2bapi.TemplateBuildStartV2{Steps: []e2bapi.TemplateStep{{Type: "COPY", Args: []string{"a/../../b", "/x"}, FilesHash: testHash}}}, "img", sandbox.InvalidArgument, "outside the build context"},
		{"copy absolute", e2bapi.TemplateBuildStartV2{Steps: []e2bapi.TemplateStep{{Type: "COPY", Args: []string{"/etc/passwd", "/x"}, FilesHash: testHash}}}, "img", sandbox.InvalidArgument, "not a relative path"},
		{"copy not uploaded", e2bapi.TemplateBuildStartV2{Steps: []e2bapi.TemplateStep{{Type: "COPY", Args: []string{"a", "/x"}, FilesHash: strings.Repeat("0", 64)}}}, "img", sandbox.InvalidArgument, "were not uploaded"},
		{"copy bad hash", e2bapi.TemplateBuildStartV2{Steps: []e2bapi.TemplateStep{{Type: "COPY", Args: []string{"a", "/x"}, FilesHash: "../../x"}}}, "img", sandbox.InvalidArgument, "64 hex digits"},
		{"copy newline dest", e2bapi.TemplateBuildStartV2{Steps: []e2bapi.TemplateStep{{Type: "COPY", Args: []string{"a", "/x\nRUN evil"}, FilesHash: testHash}}}, "img", sandbox.InvalidArgument, "not one line"},
		{"env newline", e2bapi.TemplateBuildStartV2{Steps: []e2bapi.TemplateStep{{Type: "RUN", Args: []string{"true"}}, {Type: "ENV", Args: []string{"A", "x\nRUN evil"}}}}, "img", sandbox.InvalidArgument, "step 2: ENV A: values with newlines"},
		{"env name", e2bapi.TemplateBuildStartV2{Steps: []e2bapi.TemplateStep{{Type: "ENV", Args: []string{"A B", "x"}}}}, "img", sandbox.InvalidArgument, "not a variable name"},
		{"env odd", e2bapi.TemplateBuildStartV2{Steps: []e2bapi.TemplateStep{{Type: "ENV", Args: []string{"A"}}}}, "img", sandbox.InvalidArgument, "pairs"},
		{"user injection", e2bapi.TemplateBuildStartV2{Steps: []e2bapi.TemplateStep{{Type: "USER", Args: []string{"root\nRUN evil"}}}}, "img", sandbox.InvalidArgument, "one user name"},
		{"run user injection", e2bapi.TemplateBuildStartV2{Steps: []e2bapi.TemplateStep{{Type: "RUN", Args: []string{"true", "root [\"x\"]"}}}}, "img", sandbox.InvalidArgument, "not a user name"},
		{"workdir newline", e2bapi.TemplateBuildStartV2{Steps: []e2bapi.TemplateStep{{Type: "WORKDIR", Args: []string{"/a\nRUN evil"}}}}, "img", sandbox.InvalidArgument, "one line"},
		{"unknown step", e2bapi.TemplateBuildStartV2{Steps: []e2bapi.TemplateStep{{Type: "HEALTHCHECK", Args: []string{"x"}}}}, "img", sandbox.InvalidArgument, "type \"HEALTHCHECK\" is not supported"},
		{"base injection", e2bapi.TemplateBuildStartV2{}, "img\nRUN evil", sandbox.InvalidArgument, "not an image reference"},
		{"too many steps", e2bapi.TemplateBuildStartV2{Steps: make([]e2bapi.TemplateStep, 11)}, "img", sandbox.InvalidArgument, "at most 10"},
		{"command too long", e2bapi.TemplateBuildStartV2{Steps: []e2bapi.TemplateStep{{Type: "RUN", Args: []string{strings.Repeat("x", maxCmdBytes+1)}}}}, "img", sandbox.InvalidArgument, "longer than 262144 bytes"},
		{"Dockerfile too long", e2bapi.TemplateBuildStartV2{Steps: slices.Repeat([]e2bapi.TemplateStep{{Type: "RUN", Args: []string{strings.Repeat("x", 200<<10)}}}, 6)}, "img", sandbox.InvalidArgument, "the builder reads at most"},
		{"registry credentials", e2bapi.TemplateBuildStartV2{FromImageRegistry: []byte(`{"type":"registry","username":"u","password":"hunter2-secret"}`)}, "img", sandbox.NotSupported, "fromImageRegistry"},
	}
	for _, c := range cases {
		_, err := newRecipe(c.b, c.base, 10, uploaded)
		if err == nil || sandbox.ClassOf(err) != c.class || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v; want %v containing %q", c.name, err, c.class, c.msg)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error echoes a registry password: %v", c.name, err)
		}
	}
}
