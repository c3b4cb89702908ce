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

// amd64Syscalls lists every x86-64 system call name, from golang.org/x/sys
// (the version this module builds with), or skips.
func amd64Syscalls(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "golang.org/x/sys").Output()
	if err != nil {
		t.Skipf("cannot find golang.org/x/sys's source for the syscall table: %v", err)
	}
	f, err := os.Open(filepath.Join(strings.TrimSpace(string(out)), "unix", "zsysnum_linux_amd64.go"))
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
	if len(names) < 300 {
		t.Fatalf("read %d syscall names: the table's format changed", len(names))
	}
	return names
}

// securityTable returns the seccomp comparison table of SECURITY.md: the
// rows' first cells, the names in backquotes.
func securityTable(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../SECURITY.md")
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

// TestSeccompComparedWithDocker compares berth's profile with Docker's
// default (moby/profiles, for the capabilities berth's containers have),
// system call by system call, and checks that every difference is a row
// of SECURITY.md's table, so that an update of either side shows up here:
// the syscalls Docker refuses and berth lets through, those berth refuses
// and Docker lets through, and the ones either filters by argument. It
// also checks that the socket families berth refuses are exactly those
// Docker's allow list leaves out.
func TestSeccompComparedWithDocker(t *testing.T) {
	all := amd64Syscalls(t)
	docker, err := dockerProfile()
	if err != nil {
		t.Fatal(err)
	}
	if docker.DefaultAction != specs.ActErrno {
		t.Fatalf("Docker's default action is %v: the comparison assumes an allow list", docker.DefaultAction)
	}
	dockerAllows := map[string]bool{}
	conditional := map[string]bool{}
	var socketRules []specs.LinuxSyscall
	for _, r := range docker.Syscalls {
		for _, n := range r.Names {
			if r.Action == specs.ActAllow {
				dockerAllows[n] = true
			}
			if len(r.Args) > 0 && n != "socket" {
				conditional[n] = true
			}
			if n == "socket" {
				socketRules = append(socketRules, r)
			}
		}
	}
	ours := denyProfile()
	berthDenies := map[string]bool{}
	for _, r := range ours.Syscalls {
		for _, n := range r.Names {
			if len(r.Args) == 0 {
				berthDenies[n] = true
			} else {
				conditional[n] = true
			}
		}
	}
	table := securityTable(t)
	for _, n := range all {
		switch {
		case !dockerAllows[n] && !berthDenies[n] && !table[n]:
			t.Errorf("Docker refuses %s, berth lets it through, and SECURITY.md's table does not say why", n)
		case dockerAllows[n] && berthDenies[n] && !conditional[n] && !table[n]:
			t.Errorf("berth refuses %s, Docker lets it through, and SECURITY.md's table does not say why", n)
		}
	}
	for n := range conditional {
		if !table[n] {
			t.Errorf("%s is filtered by argument (by Docker or berth) and SECURITY.md's table does not compare the two", n)
		}
	}
	for n := range table {
		if !slices.Contains(all, n) {
			t.Errorf("SECURITY.md's table names %s, which is no x86-64 system call", n)
		}
	}

	// Socket families: Docker allows a list (a range below some family
	// and single ones); berth refuses the complement below afMax.
	allowed := map[uint64]bool{}
	for _, r := range socketRules {
		a := r.Args[0]
		switch a.Op {
		case specs.OpEqualTo:
			allowed[a.Value] = true
		case specs.OpLessThan:
			for f := uint64(1); f < a.Value; f++ {
				allowed[f] = true
			}
		default:
			t.Fatalf("Docker's socket rule %+v: unexpected operator", a)
		}
	}
	var want []uint64
	for f := uint64(1); f < afMax; f++ {
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
