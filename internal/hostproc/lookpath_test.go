package hostproc

import (
	"os"
	"path/filepath"
	"testing"
)

// The copies disagreed on PATH: envd took an empty or relative entry as
// relative to the working directory and passed over a file it could not
// run, the fake skipped those entries and called a non-executable file
// missing, modaltest skipped them and reported it as 126. One rule now:
// only absolute entries count, the first executable wins, and a
// non-executable match is 126 only when nothing runnable follows.
func TestLookPathRules(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"a", "b", "rel", "cwd/sub"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	a, b, cwd := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "cwd")
	writeFile(t, filepath.Join(a, "both"), "#!/bin/sh\n", 0o644)
	writeFile(t, filepath.Join(b, "both"), "#!/bin/sh\n", 0o755)
	writeFile(t, filepath.Join(a, "plain"), "#!/bin/sh\n", 0o644)
	writeFile(t, filepath.Join(cwd, "here"), "#!/bin/sh\n", 0o755)
	writeFile(t, filepath.Join(dir, "rel", "here"), "#!/bin/sh\n", 0o755)
	if err := os.Mkdir(filepath.Join(b, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := "::rel:" + a + ":" + b
	cases := []struct {
		name, want string
		code       int // ShellStatus of the error; 0 when found
	}{
		{name: "both", want: filepath.Join(b, "both")},
		{name: "plain", code: 126},
		{name: "here", code: 127}, // only in the working directory and a relative entry
		{name: "adir", code: 127}, // a directory in PATH is no program
		{name: "./here", want: filepath.Join(cwd, "here")},
		{name: "sub", code: 127},
		{name: "./sub", code: 126}, // named: bash's "Is a directory"
		{name: filepath.Join(a, "plain"), code: 126},
		{name: filepath.Join(a, "missing"), code: 127},
	}
	for _, tc := range cases {
		got, err := LookPath(tc.name, Lookup{PATH: path, Dir: cwd})
		code, _ := ShellStatus(err)
		if got != tc.want || code != tc.code {
			t.Errorf("LookPath(%q) = %q, %v (status %d); want %q, status %d", tc.name, got, err, code, tc.want, tc.code)
		}
	}
}

// With a Root every path is inside it, an absolute symlink there included
// (a Debian root's /etc/alternatives links), and the host's programs are
// not seen.
func TestLookPathInRoot(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"usr/bin", "opt", "work"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(root, "opt", "tool"), "#!/bin/sh\n", 0o755)
	if err := os.Symlink("/opt/tool", filepath.Join(root, "usr/bin/tool")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "work", "local"), "#!/bin/sh\n", 0o755)
	l := Lookup{PATH: "/usr/bin:/bin", Dir: "/work", Root: root}
	cases := []struct{ name, want string }{
		{"tool", "/usr/bin/tool"},
		{"./local", "/work/local"},
		{"../../../work/local", "/work/local"}, // .. stops at the root
		{"sh", ""},                             // the host's /bin/sh is not the root's
		{"/bin/sh", ""},
	}
	for _, tc := range cases {
		got, err := LookPath(tc.name, l)
		if got != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("LookPath(%q) in the root = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

// Without a Root, a sandbox's Tree is where an absolute name is looked for
// first (modaltest did this, the fake ran the host's): a program uploaded
// to /tmp/x runs as /tmp/x, and /bin/sh, which the tree lacks, is the
// host's.
func TestLookPathTreeThenHost(t *testing.T) {
	tree := t.TempDir()
	if err := os.MkdirAll(filepath.Join(tree, "opt"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(tree, "opt", "uploaded"), "#!/bin/sh\n", 0o755)
	l := Lookup{PATH: "/usr/bin:/bin", Dir: tree, Tree: tree}
	if got, err := LookPath("/opt/uploaded", l); err != nil || got != filepath.Join(tree, "opt", "uploaded") {
		t.Errorf("an uploaded program: %q, %v", got, err)
	}
	if got, err := LookPath("/bin/sh", l); err != nil || got != "/bin/sh" {
		t.Errorf("a host program: %q, %v", got, err)
	}
}
