package container

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// syscallNames lists every system call name of arch (amd64, arm64) from
// golang.org/x/sys (the version this module builds with), or skips.
func syscallNames(t *testing.T, arch string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "golang.org/x/sys").Output()
	if err != nil {
		t.Skipf("cannot find golang.org/x/sys's source for the syscall table: %v", err)
	}
	f, err := os.Open(filepath.Join(strings.TrimSpace(string(out)), "unix", "zsysnum_linux_"+arch+".go"))
	if err != nil {
		t.Skipf("no syscall table: %v", err)
	}
	defer f.Close()
	re := regexp.MustCompile(`^\s+SYS_([A-Z0-9_]+)\s+=\s+\d+`)
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			names = append(names, strings.ToLower(m[1]))
		}
	}
	if len(names) < 250 {
		t.Fatalf("read %d syscall names of %s: the table's format changed", len(names), arch)
	}
	return names
}

// securityTable returns the seccomp comparison table of SECURITY.md: the
// rows' first cells, the names in backquotes.
func securityTable(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../../../SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "## Seccomp: berth's profile next to Docker's")
	if !ok {
		t.Fatal("SECURITY.md has no seccomp comparison section")
	}
	names := map[string]bool{}
	for line := range strings.Lines(table) {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		for _, m := range regexp.MustCompile("`([a-z0-9_]+)`").FindAllStringSubmatch(first, -1) {
			names[m[1]] = true
		}
	}
	return names
}

// seccompSides sorts the rules of a profile: the names it allows
// unconditionally, and the names some rule of it filters by argument.
func seccompSides(p *specs.LinuxSeccomp, allows, conditional map[string]bool) {
	for _, r := range p.Syscalls {
		for _, n := range r.Names {
			switch {
			case len(r.Args) > 0:
				conditional[n] = true
			case r.Action == specs.ActAllow:
				allows[n] = true
			}
		}
	}
}

// TestSeccompComparedWithDocker compares berth's allow list with Docker's
// default (moby/profiles, for the capabilities berth's containers have),
// system call by system call, and checks that every difference is a row
// of SECURITY.md's table and every row a difference, so that an update of
// either side shows up here: the calls Docker refuses and berth lets
// through, those berth refuses and Docker lets through, and the ones
// either filters by argument. It also checks that the socket families
// berth refuses are exactly those Docker's allow list leaves out, that
// every name berth lists is a system call of amd64 or arm64 (a typo would
// refuse a call), and that no call berth filters by argument is also
// allowed outright (libseccomp drops a call's conditional rules when an
// unconditional one comes).
func TestSeccompComparedWithDocker(t *testing.T) {
	all := syscallNames(t, "amd64")
	known := append(slices.Clone(all), syscallNames(t, "arm64")...)
	docker, err := dockerProfile()
	if err != nil {
		t.Fatal(err)
	}
	if docker.DefaultAction != specs.ActErrno {
		t.Fatalf("Docker's default action is %v: the comparison assumes an allow list", docker.DefaultAction)
	}
	ours := allowProfile()
	if ours.DefaultAction != specs.ActErrno {
		t.Fatalf("berth's default action is %v: want a refusal", ours.DefaultAction)
	}
	dockerAllows, berthAllows, conditional, berthConditional := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	seccompSides(docker, dockerAllows, conditional)
	seccompSides(ours, berthAllows, berthConditional)
	for n := range berthConditional {
		if berthAllows[n] {
			t.Errorf("berth filters %s by argument and allows it outright: the conditions would be dropped", n)
		}
		conditional[n] = true
	}
	delete(conditional, "socket") // compared family by family below
	for _, list := range [][]string{allowedSyscalls, deniedSyscalls} {
		for _, n := range list {
			if !slices.Contains(known, n) {
				t.Errorf("berth names %s, which is no amd64 or arm64 system call", n)
			}
		}
	}
	table := securityTable(t)
	differs := map[string]bool{}
	for _, n := range all {
		switch {
		case conditional[n]:
			differs[n] = true
			if !table[n] {
				t.Errorf("%s is filtered by argument (by Docker or berth) and SECURITY.md's table does not compare the two", n)
			}
		case dockerAllows[n] != berthAllows[n]:
			differs[n] = true
			if !table[n] {
				t.Errorf("Docker allows %s: %v, berth: %v, and SECURITY.md's table does not say why", n, dockerAllows[n], berthAllows[n])
			}
		}
	}
	for n := range table {
		if !differs[n] && n != "socket" {
			t.Errorf("SECURITY.md's table has a row for %s, which berth and Docker treat alike", n)
		}
	}
	compareSocketFamilies(t, docker)
}

// compareSocketFamilies checks that berth refuses, below afMax, exactly
// the socket families Docker's allow list (a range below some family and
// single ones) leaves out, and that Docker allows none from afMax up.
func compareSocketFamilies(t *testing.T, docker *specs.LinuxSeccomp) {
	allowed := map[uint64]bool{}
	for _, r := range docker.Syscalls {
		if !slices.Contains(r.Names, "socket") {
			continue
		}
		a := r.Args[0]
		switch a.Op {
		case specs.OpEqualTo:
			allowed[a.Value] = true
		case specs.OpLessThan:
			for f := uint64(0); f < a.Value; f++ {
				allowed[f] = true
			}
		default:
			t.Fatalf("Docker's socket rule %+v: unexpected operator", a)
		}
	}
	var want []uint64
	for f := uint64(0); f < afMax; f++ {
		if !allowed[f] {
			want = append(want, f)
		}
	}
	for f := range allowed {
		if f >= afMax {
			t.Errorf("Docker allows socket family %d, above berth's afMax %d: review the new family", f, afMax)
		}
	}
	if !slices.Equal(want, deniedSocketFamilies) {
		t.Errorf("berth refuses socket families %v, Docker's allow list leaves out %v", deniedSocketFamilies, want)
	}
}
