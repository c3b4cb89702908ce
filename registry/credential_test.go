package registry

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// pair is a provider whose credential is two variables, parsed from a file
// of "id\nsecret".
func pair() Entry {
	return Entry{
		Name: "pair",
		Credential: Credential{
			KeyVars:       []string{"P_ID", "P_SECRET"},
			FileVar:       "P_FILE",
			DefaultPath:   "~/.pair",
			ProvisionHint: "pair login",
			ParseFile: func(data []byte, _ Environ) (map[string]string, error) {
				lines := strings.Fields(string(data))
				switch len(lines) {
				case 1:
					return map[string]string{"P_ID": lines[0]}, nil
				case 2:
					return map[string]string{"P_ID": lines[0], "P_SECRET": lines[1]}, nil
				}
				return nil, errors.New("want two lines")
			},
		},
		Open:         nopOpen,
		Capabilities: nopCaps,
	}
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The launcher-side rules, one row each, on a one-key entry.
func TestSupplyRules(t *testing.T) {
	const key = "acme-secret-key-0001"
	type fixture struct {
		home, def, other, empty, dir string
	}
	setup := func(t *testing.T) fixture {
		home := t.TempDir()
		f := fixture{home: home, def: filepath.Join(home, ".config/acme/key")}
		f.other = writeFile(t, filepath.Join(home, "elsewhere/key"), key+"\n")
		f.empty = writeFile(t, filepath.Join(home, "empty"), " \n\t\n")
		f.dir = filepath.Join(home, "adir")
		os.Mkdir(f.dir, 0o700)
		return f
	}
	tests := []struct {
		name    string
		prep    func(t *testing.T, f fixture) (vars map[string]string, flag string)
		source  string
		path    func(f fixture) string // forwarded path, for source file
		wantErr func(f fixture) string
	}{
		{
			name:   "flag names a readable file",
			prep:   func(t *testing.T, f fixture) (map[string]string, string) { return nil, f.other },
			source: SourceFile, path: func(f fixture) string { return f.other },
		},
		{
			name: "file variable in the launcher env counts as explicit",
			prep: func(t *testing.T, f fixture) (map[string]string, string) {
				return map[string]string{"ACME_KEY_FILE": f.other}, ""
			},
			source: SourceFile, path: func(f fixture) string { return f.other },
		},
		{
			name: "flag wins over the file variable",
			prep: func(t *testing.T, f fixture) (map[string]string, string) {
				return map[string]string{"ACME_KEY_FILE": "/nonexistent"}, f.other
			},
			source: SourceFile, path: func(f fixture) string { return f.other },
		},
		{
			name: "default path readable",
			prep: func(t *testing.T, f fixture) (map[string]string, string) {
				writeFile(t, f.def, key)
				return nil, ""
			},
			source: SourceFile, path: func(f fixture) string { return f.def },
		},
		{
			name: "file first: default path beats a set key variable",
			prep: func(t *testing.T, f fixture) (map[string]string, string) {
				writeFile(t, f.def, key)
				return map[string]string{"ACME_KEY": key}, ""
			},
			source: SourceFile, path: func(f fixture) string { return f.def },
		},
		{
			name:   "flag path with ~/ is expanded",
			prep:   func(t *testing.T, f fixture) (map[string]string, string) { return nil, "~/elsewhere/key" },
			source: SourceFile, path: func(f fixture) string { return f.other },
		},
		{
			name: "explicit missing file is an error even with the key variable set",
			prep: func(t *testing.T, f fixture) (map[string]string, string) {
				return map[string]string{"ACME_KEY": key}, "/nonexistent"
			},
			wantErr: func(fixture) string { return "ACME_KEY_FILE=/nonexistent is missing or empty" },
		},
		{
			name: "explicit empty file (blank) is an error",
			prep: func(t *testing.T, f fixture) (map[string]string, string) {
				return map[string]string{"ACME_KEY_FILE": f.empty}, ""
			},
			wantErr: func(f fixture) string { return "ACME_KEY_FILE=" + f.empty + " is missing or empty" },
		},
		{
			name:    "explicit directory is missing",
			prep:    func(t *testing.T, f fixture) (map[string]string, string) { return nil, f.dir },
			wantErr: func(f fixture) string { return "ACME_KEY_FILE=" + f.dir + " is missing or empty" },
		},
		{
			name: "explicit FIFO is missing, without blocking",
			prep: func(t *testing.T, f fixture) (map[string]string, string) {
				p := filepath.Join(f.home, "fifo")
				if err := syscall.Mkfifo(p, 0o600); err != nil {
					t.Skipf("mkfifo: %v", err)
				}
				return nil, p
			},
			wantErr: func(f fixture) string {
				return "ACME_KEY_FILE=" + filepath.Join(f.home, "fifo") + " is missing or empty"
			},
		},
		{
			name: "oversized file is not a key file",
			prep: func(t *testing.T, f fixture) (map[string]string, string) {
				return nil, writeFile(t, filepath.Join(f.home, "big"), strings.Repeat("k", maxKeyFile+1))
			},
			wantErr: func(f fixture) string {
				return "ACME_KEY_FILE=" + filepath.Join(f.home, "big") + " is missing or empty"
			},
		},
		{
			name: "no file, key variable set: environment, nothing forwarded",
			prep: func(t *testing.T, f fixture) (map[string]string, string) {
				return map[string]string{"ACME_KEY": key}, ""
			},
			source: SourceEnvironment,
		},
		{
			name: "blank default file falls through to the environment",
			prep: func(t *testing.T, f fixture) (map[string]string, string) {
				writeFile(t, f.def, "\n\n")
				return map[string]string{"ACME_KEY": key}, ""
			},
			source: SourceEnvironment,
		},
		{
			name: "nothing anywhere: needs credentials",
			prep: func(t *testing.T, f fixture) (map[string]string, string) {
				return map[string]string{"ACME_KEY": "   "}, ""
			},
			wantErr: func(f fixture) string {
				return "the acme sandbox mode needs credentials: put them in a file (" + f.def +
					"; ACME_KEY_FILE overrides) or in the environment as ACME_KEY. Provision the file with: acme login"
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t)
			vars, flag := tt.prep(t, f)
			sup, err := acme().Supply(MapEnviron(vars, f.home), flag)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("Supply = %+v, want error", sup)
				}
				if got, want := err.Error(), tt.wantErr(f); got != want {
					t.Fatalf("error\n got %q\nwant %q", got, want)
				}
				if !errors.Is(err, errdefs.ErrUnauthenticated) {
					t.Fatalf("class %v, want Unauthenticated", errdefs.ClassOf(err))
				}
				return
			}
			if err != nil {
				t.Fatalf("Supply: %v", err)
			}
			if sup.Source != tt.source {
				t.Fatalf("source %q, want %q", sup.Source, tt.source)
			}
			switch tt.source {
			case SourceFile:
				p := tt.path(f)
				if sup.Path != p || len(sup.Vars) != 1 || sup.Vars[0] != (Var{"ACME_KEY_FILE", p}) {
					t.Fatalf("file supply = %+v, want ACME_KEY_FILE=%s", sup, p)
				}
				want := "credential supply: file " + p + " (readable here; forwarding the path, workers read it themselves)"
				if sup.Message != want {
					t.Fatalf("message\n got %q\nwant %q", sup.Message, want)
				}
			case SourceEnvironment:
				if len(sup.Vars) != 0 {
					t.Fatalf("environment supply forwards %v", sup.Vars)
				}
				if !strings.Contains(sup.Message, "environment") || !strings.Contains(sup.Message, "ACME_KEY") {
					t.Fatalf("message %q does not say the environment is used", sup.Message)
				}
			}
		})
	}
}

func TestSupplyForwardsAbsolutePath(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "key"), "k")
	t.Chdir(dir)
	sup, err := acme().Supply(MapEnviron(nil, t.TempDir()), "key")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "key"); sup.Vars[0].Value != want {
		t.Fatalf("forwarded %q, want the absolute %q: workers run elsewhere", sup.Vars[0].Value, want)
	}
}

func TestSupplyNoCredential(t *testing.T) {
	e := Entry{Name: "local", Open: nopOpen}
	sup, err := e.Supply(MapEnviron(nil, t.TempDir()), "")
	if err != nil || sup.Source != SourceNone || len(sup.Vars) != 0 || sup.Message == "" {
		t.Fatalf("Supply(local) = %+v, %v", sup, err)
	}
	if _, err := e.Supply(MapEnviron(nil, ""), "/some/key"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("a key file for a provider without credential: %v, want InvalidArgument", err)
	}
	s, err := e.Resolve(MapEnviron(nil, ""))
	if s != nil || err != nil {
		t.Fatalf("Resolve(local) = %v, %v", s, err)
	}
	if ok, src := e.Available(MapEnviron(nil, "")); !ok || src != SourceNone {
		t.Fatalf("Available(local) = %v, %q", ok, src)
	}
}

// The worker-side rules, one row each.
func TestResolveRules(t *testing.T) {
	home := t.TempDir()
	def := writeFile(t, filepath.Join(home, ".config/acme/key"), "  from-default-file\n")
	other := writeFile(t, filepath.Join(home, "other"), "from-other-file\n")
	empty := writeFile(t, filepath.Join(home, "empty"), "\n")
	emptyHome := t.TempDir()
	pairHome := t.TempDir()
	pairFile := writeFile(t, filepath.Join(pairHome, ".pair"), "file-id\nfile-secret\n")
	halfFile := writeFile(t, filepath.Join(t.TempDir(), "half"), "only-id\n")
	badFile := writeFile(t, filepath.Join(t.TempDir(), "bad"), "a b c\n")

	tests := []struct {
		name    string
		entry   Entry
		vars    map[string]string
		home    string
		want    map[string]string
		source  string
		wantErr string
	}{
		{"environment first, even with a file", acme(), map[string]string{"ACME_KEY": " env-key\n"}, home,
			map[string]string{"ACME_KEY": "env-key"}, "environment", ""},
		{"file variable when the key variable is unset", acme(), map[string]string{"ACME_KEY_FILE": other}, home,
			map[string]string{"ACME_KEY": "from-other-file"}, "file " + other, ""},
		{"blank key variable counts as unset", acme(), map[string]string{"ACME_KEY": " "}, home,
			map[string]string{"ACME_KEY": "from-default-file"}, "file " + def, ""},
		{"default path, trimmed", acme(), nil, home,
			map[string]string{"ACME_KEY": "from-default-file"}, "file " + def, ""},
		{"file variable missing: no fallback to the default", acme(), map[string]string{"ACME_KEY_FILE": "/nonexistent"}, home,
			nil, "", "no API key: ACME_KEY is unset and /nonexistent is missing or empty"},
		{"empty file", acme(), map[string]string{"ACME_KEY_FILE": empty}, home,
			nil, "", "no API key: ACME_KEY is unset and " + empty + " is missing or empty"},
		{"nothing", acme(), nil, emptyHome,
			nil, "", "no API key: ACME_KEY is unset and " + filepath.Join(emptyHome, ".config/acme/key") + " is missing or empty"},
		{"pair from the environment", pair(), map[string]string{"P_ID": "env-id", "P_SECRET": "env-secret"}, pairHome,
			map[string]string{"P_ID": "env-id", "P_SECRET": "env-secret"}, "environment", ""},
		{"half a pair goes to the file", pair(), map[string]string{"P_ID": "env-id"}, pairHome,
			map[string]string{"P_ID": "file-id", "P_SECRET": "file-secret"}, "file " + pairFile, ""},
		{"half a pair and no file is missing, naming both", pair(), map[string]string{"P_SECRET": "env-secret"}, emptyHome,
			nil, "", "no API key: P_ID + P_SECRET is unset and " + filepath.Join(emptyHome, ".pair") + " is missing or empty"},
		{"file with half a pair", pair(), map[string]string{"P_FILE": halfFile}, emptyHome,
			nil, "", "no API key: P_ID + P_SECRET is unset and " + halfFile + " lacks P_SECRET"},
		{"file the parser refuses", pair(), map[string]string{"P_FILE": badFile}, emptyHome,
			nil, "", "no API key: P_ID + P_SECRET is unset and " + badFile + " holds none: want two lines"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := MapEnviron(tt.vars, tt.home)
			got, err := tt.entry.Resolve(env)
			ok, source := tt.entry.Available(env)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error\n got %v\nwant %q", err, tt.wantErr)
				}
				if !errors.Is(err, errdefs.ErrUnauthenticated) {
					t.Fatalf("class %v, want Unauthenticated", errdefs.ClassOf(err))
				}
				if ok {
					t.Fatal("Available reports true for a credential that does not resolve")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d secrets, want %d", len(got), len(tt.want))
			}
			for k, v := range tt.want {
				if got[k].Reveal() != v {
					t.Errorf("%s = %q, want %q", k, got[k].Reveal(), v)
				}
			}
			if !ok || source != tt.source {
				t.Fatalf("Available = %v, %q; want true, %q", ok, source, tt.source)
			}
		})
	}
}

// TestExposedKeyFileWarns: a key file others can read is used, with a
// warning naming the file, its mode and the fix (never the key), on the
// worker side (Open's logger) and the launcher side (Launch's notes). On
// 6f9918d a 0644 key file was used without a word: checked there, this
// test failed.
func TestExposedKeyFileWarns(t *testing.T) {
	home := t.TempDir()
	key := writeFile(t, filepath.Join(home, ".config/acme/key"), secretBytes+"\n")
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620} {
		if err := os.Chmod(key, mode); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		r := acmeRegistry()
		e, _ := r.Lookup("acme")
		e.Open = func(context.Context, Config) (driver.Provider, error) { return nopDriver{}, nil }
		r = New()
		r.Register(e)
		p, err := r.Open(context.Background(), "acme", MapEnviron(nil, home), slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatalf("mode %04o: %v", mode, err)
		}
		p.Close()
		if !strings.Contains(logs.String(), "chmod 600 "+key) || strings.Contains(logs.String(), secretBytes) {
			t.Errorf("mode %04o: open logged %q; want a warning with the fix and no key", mode, logs.String())
		}
		l, err := r.Launch("acme", MapEnviron(nil, home), "")
		if err != nil || !slices.ContainsFunc(l.Notes, func(n string) bool { return strings.Contains(n, "chmod 600 "+key) }) {
			t.Errorf("mode %04o: launch notes %q, %v; want the warning", mode, l.Notes, err)
		}
	}
}

// TestStrictRefusesExposedKeyFile: with BERTH_STRICT_KEY_FILES=1 the same
// file is refused on both sides, Launch forwards the switch to workers, and
// a file only its owner can read is fine either way.
func TestStrictRefusesExposedKeyFile(t *testing.T) {
	home := t.TempDir()
	key := writeFile(t, filepath.Join(home, ".config/acme/key"), secretBytes+"\n")
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	strictEnv := MapEnviron(map[string]string{StrictKeyFilesVar: "1"}, home)
	e := acme()
	if _, err := e.Resolve(strictEnv); !errors.Is(err, errdefs.ErrUnauthenticated) || !strings.Contains(err.Error(), "chmod 600") || strings.Contains(err.Error(), secretBytes) {
		t.Errorf("strict resolve of a 0644 file: %v", err)
	}
	if _, err := e.Supply(strictEnv, ""); !errors.Is(err, errdefs.ErrUnauthenticated) || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("strict supply of a 0644 file: %v", err)
	}
	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	sup, err := e.Supply(strictEnv, "")
	if err != nil || sup.Warning != "" {
		t.Errorf("strict supply of a 0600 file: %+v, %v", sup, err)
	}
	l, err := acmeRegistry().Launch("acme", strictEnv, "")
	if err != nil || !slices.Contains(l.Vars, Var{StrictKeyFilesVar, "1"}) {
		t.Errorf("launch in strict mode: %v, %v; want %s=1 forwarded", l, err, StrictKeyFilesVar)
	}
}
