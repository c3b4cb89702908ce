package registry

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

func acmeRegistry() *Registry {
	r := New()
	r.Register(acme())
	return r
}

func TestLaunchOrderAndValues(t *testing.T) {
	home := t.TempDir()
	key := writeFile(t, filepath.Join(home, ".config/acme/key"), "secret")
	env := MapEnviron(map[string]string{"ACME_URL": " https://acme.example:8443 ", "UNRELATED": "x"}, home)
	l, err := acmeRegistry().Launch("acmeenv", env, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []Var{
		{"BERTH_BACKEND", "acme"}, // the canonical name, not the alias
		{"HARBOR_ENV_TYPE", "acme"},
		{"ACME_KEY_FILE", key},
		{"ACME_URL", "https://acme.example:8443"},
		{"ACME_V2", "1"},
	}
	if !slices.Equal(l.Vars, want) {
		t.Fatalf("Vars\n got %v\nwant %v", l.Vars, want)
	}
	wantNotes := []string{
		"credential supply: file " + key + " (readable here; forwarding the path, workers read it themselves)",
		"acme endpoint: https://acme.example:8443",
	}
	if !slices.Equal(l.Notes, wantNotes) {
		t.Fatalf("Notes\n got %q\nwant %q", l.Notes, wantNotes)
	}
}

func TestLaunchDefaultsAndTarget(t *testing.T) {
	env := MapEnviron(map[string]string{"ACME_KEY": "k", "ACME_V2": "0"}, t.TempDir())
	l, err := acmeRegistry().Launch("acme", env, "")
	if err != nil {
		t.Fatal(err)
	}
	m := l.Map()
	if m["ACME_V2"] != "0" {
		t.Errorf("user's ACME_V2=0 replaced by %q", m["ACME_V2"])
	}
	if _, ok := m["ACME_KEY"]; ok {
		t.Error("the key variable was forwarded")
	}
	if _, ok := m["ACME_URL"]; ok {
		t.Error("an unset forward variable was forwarded")
	}
	if got := l.Notes[len(l.Notes)-1]; got != "acme endpoint: Acme Cloud (default)" {
		t.Errorf("target line %q", got)
	}
	// Blank is unset: the default applies.
	l, err = acmeRegistry().Launch("acme", MapEnviron(map[string]string{"ACME_KEY": "k", "ACME_V2": " "}, t.TempDir()), "")
	if err != nil {
		t.Fatal(err)
	}
	if l.Map()["ACME_V2"] != "1" {
		t.Errorf("blank ACME_V2 did not get the default: %q", l.Map()["ACME_V2"])
	}
}

func TestLaunchRefusesUnsafeForwards(t *testing.T) {
	const cred = "user:hunter2"
	for _, tt := range []struct{ name, variable, value string }{
		{"credential in a forwarded address", "ACME_URL", "https://" + cred + "@acme.example"},
		{"credential in another forward", "ACME_REGION", cred + "@eu"},
		{"credential in an env default", "ACME_V2", cred + "@1"},
		{"newline", "ACME_REGION", "eu\nexport X=" + cred},
		{"too long", "ACME_REGION", strings.Repeat(cred, 1000)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := MapEnviron(map[string]string{"ACME_KEY": "k", tt.variable: tt.value}, t.TempDir())
			_, err := acmeRegistry().Launch("acme", env, "")
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("Launch with %s=%q: %v, want InvalidArgument", tt.variable, tt.value, err)
			}
			if !strings.Contains(err.Error(), tt.variable) {
				t.Errorf("error %q does not name %s", err, tt.variable)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error echoes the value: %q", err)
			}
		})
	}
}

func TestLaunchPropagatesSupplyError(t *testing.T) {
	_, err := acmeRegistry().Launch("acme", MapEnviron(nil, t.TempDir()), "/nonexistent")
	if err == nil || err.Error() != "ACME_KEY_FILE=/nonexistent is missing or empty" {
		t.Fatalf("Launch with a missing key file: %v", err)
	}
	if _, err := acmeRegistry().Launch("nope", MapEnviron(nil, ""), ""); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Launch of an unknown backend: %v", err)
	}
}

// tricky values that a naive renderer would let the shell interpret.
var tricky = []Var{
	{"A", "plain"},
	{"B", "it's a 'quote'"},
	{"C", `$HOME $(touch /tmp/berth-pwned) ` + "`id`" + ` \ "dq" ; | & > <`},
	{"D", "line1\nline2"},
	{"E", ""},
	{"F", "ünïcode ✓"},
}

func TestShellRoundTrip(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh in PATH")
	}
	l := &LaunchEnv{Vars: tricky}
	script := l.Shell()
	for _, line := range strings.Split(strings.TrimSuffix(script, "\n"), "\n") {
		if !strings.HasPrefix(line, "export ") && !strings.HasPrefix(line, "line2") {
			t.Fatalf("unexpected line %q", line)
		}
	}
	// Evaluate the output in a clean shell and print each value back, NUL-terminated.
	script += `for v in A B C D E F; do eval "printf '%s\0' \"\$$v\""; done`
	out, err := exec.Command(sh, "-c", script).Output()
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	for i, v := range tricky {
		if got[i] != v.Value {
			t.Errorf("%s: shell read %q, want %q", v.Name, got[i], v.Value)
		}
	}
}

func TestJSON(t *testing.T) {
	l := &LaunchEnv{Vars: append([]Var{{"Z_FIRST", "1"}}, tricky...)}
	b, err := l.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, b)
	}
	if len(m) != len(l.Vars) {
		t.Fatalf("%d keys, want %d", len(m), len(l.Vars))
	}
	for _, v := range l.Vars {
		if m[v.Name] != v.Value {
			t.Errorf("%s = %q, want %q", v.Name, m[v.Name], v.Value)
		}
	}
	if !strings.HasPrefix(string(b), `{"Z_FIRST":"1","A":`) {
		t.Errorf("order of Vars not kept: %s", b)
	}
	if b, _ := (&LaunchEnv{}).JSON(); string(b) != "{}" {
		t.Errorf("empty env renders %s", b)
	}
}

func TestWorkerEnv(t *testing.T) {
	e := acme()
	home := t.TempDir()
	w := e.workerEnv(MapEnviron(map[string]string{"ACME_URL": "u", "ACME_V2": " "}, home))
	if w.Get("ACME_V2") != "1" || w.Get("ACME_URL") != "u" || w.Home != home {
		t.Fatalf("worker env: V2=%q URL=%q home=%q", w.Get("ACME_V2"), w.Get("ACME_URL"), w.Home)
	}
	if _, ok := w.Lookup("NOT_SET"); ok {
		t.Error("an unset variable appears set")
	}
	w = e.workerEnv(MapEnviron(map[string]string{"ACME_V2": "0"}, home))
	if w.Get("ACME_V2") != "0" {
		t.Fatalf("user's ACME_V2=0 replaced by %q", w.Get("ACME_V2"))
	}
	if w := e.workerEnv(Environ{}); w.Get("ACME_V2") != "1" || w.Get("X") != "" {
		t.Fatal("zero Environ not handled")
	}
}

// TestBackend: the flag, then $BERTH_BACKEND, then $HARBOR_ENV_TYPE, then
// local; blank counts as unset.
func TestBackend(t *testing.T) {
	for _, tc := range []struct {
		flag string
		env  map[string]string
		want string
	}{
		{"", nil, "local"},
		{"", map[string]string{"HARBOR_ENV_TYPE": "daytona"}, "daytona"},
		{"", map[string]string{"BERTH_BACKEND": "e2b", "HARBOR_ENV_TYPE": "daytona"}, "e2b"},
		{"modal", map[string]string{"BERTH_BACKEND": "e2b", "HARBOR_ENV_TYPE": "daytona"}, "modal"},
		{" ", map[string]string{"BERTH_BACKEND": "  ", "HARBOR_ENV_TYPE": " modal "}, "modal"},
	} {
		if got := Backend(tc.flag, MapEnviron(tc.env, "")); got != tc.want {
			t.Errorf("Backend(%q, %v) = %q, want %q", tc.flag, tc.env, got, tc.want)
		}
	}
}
