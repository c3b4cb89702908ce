package registry

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// nopOpen is a factory for entries whose driver a test never uses.
func nopOpen(context.Context, Config) (driver.Provider, error) {
	return nil, errors.New("not opened in this test")
}

// nopCaps stands for a driver package's Capabilities function.
func nopCaps() driver.Capabilities { return driver.Capabilities{} }

// acme is a one-key provider with every field set, built fresh per call.
func acme() Entry {
	return Entry{
		Name:    "acme",
		Aliases: []string{"acmeenv"},
		Credential: Credential{
			KeyVars:       []string{"ACME_KEY"},
			FileVar:       "ACME_KEY_FILE",
			DefaultPath:   "~/.config/acme/key",
			Flag:          "--key-file",
			ProvisionHint: "acme login",
		},
		Forward:      []string{"ACME_URL", "ACME_REGION"},
		EnvDefaults:  []Var{{"ACME_V2", "1"}},
		Target:       &Target{Var: "ACME_URL", Label: "endpoint", Default: "Acme Cloud (default)"},
		Open:         nopOpen,
		Capabilities: nopCaps,
	}
}

func TestRegisterPanics(t *testing.T) {
	tests := []struct {
		name  string
		entry func() Entry
	}{
		{"empty name", func() Entry { e := acme(); e.Name = ""; return e }},
		{"upper-case name", func() Entry { e := acme(); e.Name = "Acme"; return e }},
		{"name with spaces", func() Entry { e := acme(); e.Name = " acme"; return e }},
		{"no factory", func() Entry { e := acme(); e.Open = nil; return e }},
		{"no capabilities", func() Entry { e := acme(); e.Capabilities = nil; return e }},
		{"duplicate name", func() Entry { e := acme(); e.Aliases = nil; return e }},
		{"alias clashes with a name", func() Entry { e := acme(); e.Name = "other"; e.Aliases = []string{"acme"}; return e }},
		{"name clashes with an alias", func() Entry { e := acme(); e.Name = "acmeenv"; e.Aliases = nil; return e }},
		{"alias clashes with an alias", func() Entry { e := acme(); e.Name = "other"; return e }},
		{"alias equal to own name", func() Entry { e := acme(); e.Name = "x"; e.Aliases = []string{"x"}; return e }},
		{"empty alias", func() Entry { e := acme(); e.Name = "x"; e.Aliases = []string{""}; return e }},
		{"key variable forwarded", func() Entry { e := acme(); e.Name = "x"; e.Aliases = nil; e.Forward = []string{"ACME_KEY"}; return e }},
		{"file variable as default", func() Entry {
			e := acme()
			e.Name, e.Aliases = "x", nil
			e.EnvDefaults = []Var{{"ACME_KEY_FILE", "/etc/passwd"}}
			return e
		}},
		{"backend variable forwarded", func() Entry {
			e := acme()
			e.Name = "x"
			e.Aliases = nil
			e.Forward = []string{"BERTH_BACKEND"}
			return e
		}},
		{"unquotable variable name", func() Entry { e := acme(); e.Name = "x"; e.Aliases = nil; e.Forward = []string{"A;rm -rf /"}; return e }},
		{"credential without hint", func() Entry { e := acme(); e.Name = "x"; e.Aliases = nil; e.Credential.ProvisionHint = ""; return e }},
		{"file variable without keys", func() Entry {
			return Entry{Name: "x", Credential: Credential{FileVar: "X_FILE"}, Open: nopOpen, Capabilities: nopCaps}
		}},
		{"key variable as target", func() Entry {
			e := acme()
			e.Name, e.Aliases = "x", nil
			e.Target = &Target{Var: "ACME_KEY", Label: "key", Default: "-"}
			return e
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New()
			r.Register(acme())
			e := tt.entry()
			func() {
				defer func() {
					if recover() == nil {
						t.Fatalf("Register(%q) did not panic", e.Name)
					}
				}()
				r.Register(e)
			}()
			// A refused entry leaves nothing behind.
			if got := r.Names(); !slices.Equal(got, []string{"acme"}) {
				t.Errorf("Names after refused Register = %v", got)
			}
			if _, err := r.Lookup("x"); err == nil {
				t.Error("refused entry x is resolvable")
			}
			if got, err := r.Lookup("acmeenv"); err != nil || got.Name != "acme" {
				t.Errorf("alias of the first entry lost: %v %v", got.Name, err)
			}
		})
	}
}

func TestNamesSortedAndEntries(t *testing.T) {
	r := New()
	for _, n := range []string{"zeta", "alpha", "mid"} {
		r.Register(Entry{Name: n, Open: nopOpen, Capabilities: nopCaps})
	}
	want := []string{"alpha", "mid", "zeta"}
	if got := r.Names(); !slices.Equal(got, want) {
		t.Fatalf("Names = %v, want %v", got, want)
	}
	var got []string
	for _, e := range r.Entries() {
		got = append(got, e.Name)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Entries order = %v, want %v", got, want)
	}
	// The caller's slice is a copy.
	names := r.Names()
	names[0] = "mutated"
	if r.Names()[0] != "alpha" {
		t.Fatal("Names handed out internal state")
	}
}

func TestLookup(t *testing.T) {
	r := New()
	r.Register(acme())
	r.Register(Entry{Name: "local", Open: nopOpen, Capabilities: nopCaps})
	for _, name := range []string{"acme", "acmeenv", " AcmeEnv ", "ACME"} {
		e, err := r.Lookup(name)
		if err != nil || e.Name != "acme" {
			t.Errorf("Lookup(%q) = %q, %v; want acme", name, e.Name, err)
		}
	}
	_, err := r.Lookup("dockr")
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("unknown backend: class %v, want NotFound", errdefs.ClassOf(err))
	}
	want := `unknown backend "dockr" (registered: acme (alias acmeenv), local)`
	if err.Error() != want {
		t.Fatalf("unknown backend error:\n got %q\nwant %q", err, want)
	}
	_, err = r.Lookup(strings.Repeat("x", 10000))
	if err == nil || len(err.Error()) > 200 {
		t.Fatalf("a long unknown name is echoed unbounded (%d bytes)", len(err.Error()))
	}
}
