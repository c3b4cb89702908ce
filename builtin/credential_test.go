package builtin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/providers/modal/modaltest"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Secret bytes used by every test here; TestNoSecretInAnyOutput greps
// everything the package prints for them.
const (
	e2bKey      = "e2b_SECRET_8c1f0a"
	daytonaKey  = "dtn_SECRET_77ab31"
	modalID     = "ak-SECRETID-5d9e"
	modalSecret = "as-SECRETSECRET-4b2c"
	otherID     = "ak-OTHERPROFILE-1111"
	otherSecret = "as-OTHERPROFILE-2222"
)

var allSecrets = []string{e2bKey, daytonaKey, modalID, modalSecret, otherID, otherSecret}

func put(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func modalTOML(active string) string {
	s := fmt.Sprintf("[other]\ntoken_id = %q\ntoken_secret = %q\nenvironment = \"dev\"\n", otherID, otherSecret)
	if active == "other" {
		s += "active = true\n"
	}
	s += fmt.Sprintf("\n[default]\ntoken_id = %q\ntoken_secret = %q\n", modalID, modalSecret)
	if active == "default" {
		s += "active = true\n"
	}
	return s
}

// sink collects everything the tests below print, for the grep test.
type sink struct{ outs []string }

func (s *sink) add(v ...any) {
	for _, x := range v {
		switch x := x.(type) {
		case nil:
		case error:
			s.outs = append(s.outs, x.Error(), fmt.Sprintf("%+v %#v", x, x))
		default:
			s.outs = append(s.outs, fmt.Sprintf("%v %+v %#v", x, x, x))
		}
	}
}

var printed sink

// One row per supply rule and per resolve rule, on the real entries.
func TestCredentialRules(t *testing.T) {
	type row struct {
		name    string
		backend string
		vars    map[string]string
		files   map[string]string // relative to HOME
		flag    string            // relative to HOME unless absolute
		// supply
		supplyFrom string // "file <rel>", "environment", "none", or "" when wantSupplyErr
		supplyErr  string // exact; <home> is replaced
		// resolve
		resolved   map[string]string
		resolveErr string // exact; <home> is replaced
	}
	rows := []row{
		{name: "e2b key file via flag", backend: "e2b", files: map[string]string{"keys/e2b": e2bKey + "\n"}, flag: "keys/e2b",
			supplyFrom: "file keys/e2b",
			resolveErr: "no API key: E2B_API_KEY is unset and <home>/.config/e2b/api_key is missing or empty"},
		{name: "e2b key file via E2B_API_KEY_FILE", backend: "e2b", vars: map[string]string{"E2B_API_KEY_FILE": "<home>/keys/e2b"},
			files: map[string]string{"keys/e2b": e2bKey}, supplyFrom: "file keys/e2b",
			resolved: map[string]string{"E2B_API_KEY": e2bKey}},
		{name: "e2b default path", backend: "e2b", files: map[string]string{".config/e2b/api_key": "\n" + e2bKey + "\n"},
			supplyFrom: "file .config/e2b/api_key", resolved: map[string]string{"E2B_API_KEY": e2bKey}},
		{name: "e2b explicit missing", backend: "e2b", vars: map[string]string{"E2B_API_KEY": e2bKey}, flag: "/nonexistent",
			supplyErr: "E2B_API_KEY_FILE=/nonexistent is missing or empty",
			resolved:  map[string]string{"E2B_API_KEY": e2bKey}},
		{name: "e2b empty file via variable", backend: "e2b", vars: map[string]string{"E2B_API_KEY_FILE": "<home>/empty"},
			files:      map[string]string{"empty": ""},
			supplyErr:  "E2B_API_KEY_FILE=<home>/empty is missing or empty",
			resolveErr: "no API key: E2B_API_KEY is unset and <home>/empty is missing or empty"},
		{name: "e2b environment only", backend: "e2b", vars: map[string]string{"E2B_API_KEY": e2bKey},
			supplyFrom: "environment", resolved: map[string]string{"E2B_API_KEY": e2bKey}},
		{name: "e2b nothing", backend: "agentenv",
			supplyErr: "the e2b sandbox mode needs credentials: put them in a file (<home>/.config/e2b/api_key; E2B_API_KEY_FILE overrides) " +
				"or in the environment as E2B_API_KEY. Provision the file with: " + entry(t, "e2b").Credential.ProvisionHint,
			resolveErr: "no API key: E2B_API_KEY is unset and <home>/.config/e2b/api_key is missing or empty"},
		{name: "daytona default path", backend: "daytona", files: map[string]string{".config/daytona/api_key": daytonaKey},
			supplyFrom: "file .config/daytona/api_key", resolved: map[string]string{"DAYTONA_API_KEY": daytonaKey}},
		{name: "daytona environment first on the worker", backend: "daytona", vars: map[string]string{"DAYTONA_API_KEY": daytonaKey},
			files:      map[string]string{".config/daytona/api_key": "stale-file-key"},
			supplyFrom: "file .config/daytona/api_key", resolved: map[string]string{"DAYTONA_API_KEY": daytonaKey}},
		{name: "modal pair in the environment", backend: "modal", vars: map[string]string{"MODAL_TOKEN_ID": modalID, "MODAL_TOKEN_SECRET": modalSecret},
			supplyFrom: "environment", resolved: map[string]string{"MODAL_TOKEN_ID": modalID, "MODAL_TOKEN_SECRET": modalSecret}},
		{name: "modal half pair is missing", backend: "modal", vars: map[string]string{"MODAL_TOKEN_ID": modalID},
			supplyErr: "the modal sandbox mode needs credentials: put them in a file (<home>/.modal.toml; MODAL_CONFIG_PATH overrides) " +
				"or in the environment as MODAL_TOKEN_ID + MODAL_TOKEN_SECRET. Provision the file with: modal token new",
			resolveErr: "no API key: MODAL_TOKEN_ID + MODAL_TOKEN_SECRET is unset and <home>/.modal.toml is missing or empty"},
		{name: "modal half pair with a file uses the file", backend: "modal", vars: map[string]string{"MODAL_TOKEN_SECRET": "half"},
			files:      map[string]string{".modal.toml": modalTOML("")},
			supplyFrom: "file .modal.toml", resolved: map[string]string{"MODAL_TOKEN_ID": modalID, "MODAL_TOKEN_SECRET": modalSecret}},
		{name: "modal profile by MODAL_PROFILE", backend: "modal", vars: map[string]string{"MODAL_PROFILE": "other"},
			files:      map[string]string{".modal.toml": modalTOML("default")},
			supplyFrom: "file .modal.toml", resolved: map[string]string{"MODAL_TOKEN_ID": otherID, "MODAL_TOKEN_SECRET": otherSecret}},
		{name: "modal profile by active = true", backend: "modal",
			files:      map[string]string{".modal.toml": modalTOML("other")},
			supplyFrom: "file .modal.toml", resolved: map[string]string{"MODAL_TOKEN_ID": otherID, "MODAL_TOKEN_SECRET": otherSecret}},
		{name: "modal profile default", backend: "modal",
			files:      map[string]string{".modal.toml": modalTOML("")},
			supplyFrom: "file .modal.toml", resolved: map[string]string{"MODAL_TOKEN_ID": modalID, "MODAL_TOKEN_SECRET": modalSecret}},
		{name: "modal MODAL_CONFIG_PATH", backend: "modal", vars: map[string]string{"MODAL_CONFIG_PATH": "<home>/cfg/modal.toml"},
			files:      map[string]string{"cfg/modal.toml": modalTOML("")},
			supplyFrom: "file cfg/modal.toml", resolved: map[string]string{"MODAL_TOKEN_ID": modalID, "MODAL_TOKEN_SECRET": modalSecret}},
		{name: "modal unknown MODAL_PROFILE", backend: "modal", vars: map[string]string{"MODAL_PROFILE": "prod"},
			files:      map[string]string{".modal.toml": modalTOML("")},
			supplyFrom: "file .modal.toml",
			resolveErr: `no API key: MODAL_TOKEN_ID + MODAL_TOKEN_SECRET is unset and <home>/.modal.toml holds none: no profile "prod" (MODAL_PROFILE)`},
		{name: "modal no default and none active", backend: "modal",
			files:      map[string]string{".modal.toml": "[work]\ntoken_id = \"" + modalID + "\"\ntoken_secret = \"" + modalSecret + "\"\n"},
			supplyFrom: "file .modal.toml",
			resolveErr: `no API key: MODAL_TOKEN_ID + MODAL_TOKEN_SECRET is unset and <home>/.modal.toml holds none: no profile "default" (no profile has active = true)`},
		{name: "modal profile without secret", backend: "modal",
			files:      map[string]string{".modal.toml": "[default]\ntoken_id = \"" + modalID + "\"\n"},
			supplyFrom: "file .modal.toml",
			resolveErr: `no API key: MODAL_TOKEN_ID + MODAL_TOKEN_SECRET is unset and <home>/.modal.toml holds none: profile "default" (no profile has active = true) has no token_secret`},
		{name: "modal broken TOML never quotes the token", backend: "modal",
			files:      map[string]string{".modal.toml": "[default]\ntoken_id = " + modalID + "\ntoken_secret = \"" + modalSecret + "\"\n"},
			supplyFrom: "file .modal.toml",
			resolveErr: "no API key: MODAL_TOKEN_ID + MODAL_TOKEN_SECRET is unset and <home>/.modal.toml holds none: not valid TOML (line 2)"},
		{name: "local needs no credential", backend: "local", vars: map[string]string{"E2B_API_KEY": e2bKey},
			supplyFrom: "none", resolved: nil},
	}
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			sub := func(s string) string { return strings.ReplaceAll(s, "<home>", home) }
			for rel, content := range tt.files {
				put(t, filepath.Join(home, rel), content)
			}
			vars := map[string]string{}
			for k, v := range tt.vars {
				vars[k] = sub(v)
			}
			flag := tt.flag
			if flag != "" && !filepath.IsAbs(flag) {
				flag = filepath.Join(home, flag)
			}
			env := registry.MapEnviron(vars, home)
			e := entry(t, tt.backend)

			sup, err := e.Supply(env, flag)
			printed.add(sup, err)
			if tt.supplyErr != "" {
				if err == nil || err.Error() != sub(tt.supplyErr) {
					t.Fatalf("Supply error\n got %v\nwant %q", err, sub(tt.supplyErr))
				}
				if !errors.Is(err, errdefs.ErrUnauthenticated) {
					t.Errorf("Supply error class %v", errdefs.ClassOf(err))
				}
			} else if err != nil {
				t.Fatalf("Supply: %v", err)
			} else if from, rel, _ := strings.Cut(tt.supplyFrom, " "); sup.Source != from {
				t.Fatalf("Supply source %q, want %q", sup.Source, tt.supplyFrom)
			} else if from == "file" {
				p := filepath.Join(home, rel)
				want := []registry.Var{{Name: e.Credential.FileVar, Value: p}}
				if !slices.Equal(sup.Vars, want) || sup.Message != "credential supply: file "+p+" (readable here; forwarding the path, workers read it themselves)" {
					t.Fatalf("Supply = %+v, want %v", sup, want)
				}
			} else if len(sup.Vars) != 0 {
				t.Fatalf("Supply from %s forwards %v", from, sup.Vars)
			}

			got, err := e.Resolve(env)
			ok, source := e.Available(env)
			printed.add(err, source)
			if tt.resolveErr != "" {
				if err == nil || err.Error() != sub(tt.resolveErr) {
					t.Fatalf("Resolve error\n got %v\nwant %q", err, sub(tt.resolveErr))
				}
				if !errors.Is(err, errdefs.ErrUnauthenticated) || ok {
					t.Errorf("Resolve error class %v, available %v", errdefs.ClassOf(err), ok)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if !ok {
				t.Error("Available false for a credential that resolves")
			}
			if len(got) != len(tt.resolved) {
				t.Fatalf("resolved %d secrets, want %d", len(got), len(tt.resolved))
			}
			for k, v := range tt.resolved {
				if got[k].Reveal() != v {
					t.Errorf("%s resolved to the wrong value", k)
				}
			}
		})
	}
}

// The checks an operator sees through `berth env`, on Registry.Launch.
func TestLaunch(t *testing.T) {
	r := Registry()
	t.Run("modal with only MODAL_TOKEN_ID", func(t *testing.T) {
		_, err := r.Launch("modal", registry.MapEnviron(map[string]string{"MODAL_TOKEN_ID": modalID}, t.TempDir()), "")
		printed.add(err)
		if err == nil || !strings.Contains(err.Error(), "MODAL_TOKEN_ID + MODAL_TOKEN_SECRET") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("modal with ~/.modal.toml", func(t *testing.T) {
		home := t.TempDir()
		p := put(t, filepath.Join(home, ".modal.toml"), modalTOML("default"))
		l, err := r.Launch("modal", registry.MapEnviron(map[string]string{"MODAL_ENVIRONMENT": "staging"}, home), "")
		if err != nil {
			t.Fatal(err)
		}
		printed.add(l.Shell(), l.Notes)
		want := []registry.Var{{Name: "BERTH_BACKEND", Value: "modal"}, {Name: "HARBOR_ENV_TYPE", Value: "modal"},
			{Name: "MODAL_CONFIG_PATH", Value: p}, {Name: "MODAL_ENVIRONMENT", Value: "staging"}, {Name: "MODAL_SANDBOX_V2", Value: "1"}}
		if !slices.Equal(l.Vars, want) {
			t.Fatalf("Vars %v, want %v", l.Vars, want)
		}
		if got := l.Notes[1]; got != "modal workspace environment: staging" {
			t.Errorf("target line %q", got)
		}
	})
	t.Run("modal keeps the user's MODAL_SANDBOX_V2", func(t *testing.T) {
		env := registry.MapEnviron(map[string]string{"MODAL_TOKEN_ID": modalID, "MODAL_TOKEN_SECRET": modalSecret, "MODAL_SANDBOX_V2": "0"}, t.TempDir())
		l, err := r.Launch("modal", env, "")
		if err != nil {
			t.Fatal(err)
		}
		printed.add(l.Shell(), l.Notes)
		if l.Map()["MODAL_SANDBOX_V2"] != "0" || l.Notes[1] != "modal workspace environment: the profile's default" {
			t.Fatalf("Vars %v notes %q", l.Vars, l.Notes)
		}
	})
	t.Run("e2b default key file and forwarded address", func(t *testing.T) {
		home := t.TempDir()
		p := put(t, filepath.Join(home, ".config/e2b/api_key"), e2bKey)
		env := registry.MapEnviron(map[string]string{"E2B_API_URL": "http://10.0.0.5:3000", "E2B_SANDBOX_URL": "http://10.0.0.5:3001", "E2B_API_KEY": e2bKey}, home)
		l, err := r.Launch("agentenv", env, "")
		if err != nil {
			t.Fatal(err)
		}
		js, _ := l.JSON()
		printed.add(l.Shell(), string(js), l.Notes)
		want := `{"BERTH_BACKEND":"e2b","HARBOR_ENV_TYPE":"e2b","E2B_API_KEY_FILE":"` + p +
			`","E2B_API_URL":"http://10.0.0.5:3000","E2B_SANDBOX_URL":"http://10.0.0.5:3001"}`
		if string(js) != want {
			t.Fatalf("JSON\n got %s\nwant %s", js, want)
		}
		if l.Notes[1] != "e2b endpoint: http://10.0.0.5:3000" {
			t.Errorf("target line %q", l.Notes[1])
		}
	})
	t.Run("e2b target default", func(t *testing.T) {
		l, err := r.Launch("e2b", registry.MapEnviron(map[string]string{"E2B_API_KEY": e2bKey}, t.TempDir()), "")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(l.Notes[1:], []string{"e2b endpoint: E2B Cloud (default)"}) {
			t.Errorf("notes %q", l.Notes)
		}
	})
	t.Run("e2b address with @ is refused", func(t *testing.T) {
		env := registry.MapEnviron(map[string]string{"E2B_API_KEY": e2bKey, "E2B_API_URL": "https://user:" + e2bKey + "@api.example"}, t.TempDir())
		_, err := r.Launch("e2b", env, "")
		printed.add(err)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "E2B_API_URL") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("e2b --key-file /nonexistent", func(t *testing.T) {
		_, err := r.Launch("e2b", registry.MapEnviron(nil, t.TempDir()), "/nonexistent")
		if err == nil || err.Error() != "E2B_API_KEY_FILE=/nonexistent is missing or empty" {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("daytona forwards its address and region", func(t *testing.T) {
		env := registry.MapEnviron(map[string]string{"DAYTONA_API_KEY": daytonaKey, "DAYTONA_API_URL": "https://d.example/api", "DAYTONA_TARGET": "eu"}, t.TempDir())
		l, err := r.Launch("daytona", env, "")
		if err != nil {
			t.Fatal(err)
		}
		printed.add(l.Shell(), l.Notes)
		if m := l.Map(); m["DAYTONA_API_URL"] != "https://d.example/api" || m["DAYTONA_TARGET"] != "eu" || len(l.Notes) != 1 {
			t.Fatalf("vars %v notes %q", l.Vars, l.Notes)
		}
	})
	t.Run("local", func(t *testing.T) {
		l, err := r.Launch("local", registry.MapEnviron(nil, t.TempDir()), "")
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Vars) != 2 || l.Vars[0].Value != "local" {
			t.Fatalf("vars %v", l.Vars)
		}
	})
}

// A driver opened with a file credential logs nothing secret, at debug level
// too, and creates a sandbox on an in-process Modal server that accepts only
// that credential: the secret reached the SDK and nowhere else (checked in
// TestMain).
func TestOpenLogs(t *testing.T) {
	var logs strings.Builder
	home := t.TempDir()
	put(t, filepath.Join(home, ".modal.toml"), modalTOML("default"))
	srv := modaltest.New(t, modaltest.Options{TokenID: modalID, TokenSecret: modalSecret})
	// The SDK reads the server's address from the process environment.
	t.Setenv("MODAL_SERVER_URL", srv.URL())
	t.Setenv("MODAL_CONFIG_PATH", filepath.Join(home, ".modal.toml"))
	env := registry.MapEnviron(map[string]string{"MODAL_SERVER_URL": srv.URL()}, home)
	p, err := Registry().Open(t.Context(), "modal", env, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sb, err := p.Create(t.Context(), driver.Spec{Image: "alpine"})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer sb.Delete(context.WithoutCancel(t.Context()))
	defer sb.Close()
	res, err := sb.Run(t.Context(), driver.Command{Args: []string{"sh", "-c", "env"}})
	if err != nil {
		t.Fatal(err)
	}
	printed.add(fmt.Sprint(err), string(res.Stdout), logs.String())
}

// TestMain greps everything the tests printed (messages, errors, notes,
// shell and JSON renderings, logs) for the secret bytes, whatever tests ran
// and in whatever order.
func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	for _, o := range printed.outs {
		for _, s := range allSecrets {
			if strings.Contains(o, s) {
				fmt.Fprintf(os.Stderr, "FAIL: secret %.6s... printed in: %s\n", s, o)
				code = 1
			}
		}
	}
	if code == 0 && testing.Verbose() {
		fmt.Fprintf(os.Stderr, "no secret in %d printed outputs\n", len(printed.outs))
	}
	os.Exit(code)
}
