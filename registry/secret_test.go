package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth/sandbox/driver"
)

const secretBytes = "sk-live-0123456789abcdef"

func TestSecretNeverPrints(t *testing.T) {
	s := Secret(secretBytes)
	if s.Reveal() != secretBytes {
		t.Fatal("Reveal lost the contents")
	}
	holder := struct {
		Name string
		Key  Secret
		Map  map[string]Secret
		List []Secret
		Ptr  *Secret
	}{"x", s, map[string]Secret{"K": s}, []Secret{s}, &s}
	cfg := Config{Name: "acme", Secrets: map[string]Secret{"ACME_KEY": s}}

	var outs []string
	for _, verb := range []string{"%v", "%s", "%+v", "%#v", "%q", "%x", "%X", "%d", "%10.3s", "%T %v"} {
		outs = append(outs,
			fmt.Sprintf(verb, s), fmt.Sprintf(verb, holder), fmt.Sprintf(verb, cfg), fmt.Sprintf(verb, &holder))
	}
	outs = append(outs, fmt.Sprint(s), fmt.Sprintln(s, holder), s.String(), s.GoString())
	for _, v := range []any{s, holder, cfg.Secrets, &holder} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("json: %v", err)
		}
		outs = append(outs, string(b))
	}
	var logs bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&logs, nil), slog.NewJSONHandler(&logs, nil)} {
		l := slog.New(h)
		l.Info("resolved", "key", s, "holder", holder, "cfg", cfg, slog.Any("map", cfg.Secrets))
		l.Info("group", slog.Group("g", "key", s))
	}
	outs = append(outs, logs.String())
	for _, o := range outs {
		if strings.Contains(o, secretBytes) || strings.Contains(o, fmt.Sprintf("%x", secretBytes)) {
			t.Fatalf("secret printed: %s", o)
		}
	}
	if !strings.Contains(logs.String(), redacted) || !strings.Contains(fmt.Sprintf("%v", s), redacted) {
		t.Fatal("placeholder missing: the value was dropped, not redacted")
	}
}

// A driver that logs everything it is given must still not leak the key
// through Registry.Open.
func TestOpenLogsNoSecret(t *testing.T) {
	home := t.TempDir()
	writeFile(t, filepath.Join(home, ".config/acme/key"), secretBytes+"\n")
	var got Config
	e := acme()
	e.Open = func(ctx context.Context, cfg Config) (driver.Provider, error) {
		got = cfg
		cfg.Logger.Info("opening", "config", cfg, "secrets", cfg.Secrets)
		return nopDriver{}, nil
	}
	r := New()
	r.Register(e)
	var logs bytes.Buffer
	p, err := r.Open(context.Background(), "acmeenv", MapEnviron(nil, home), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got.Secrets["ACME_KEY"].Reveal() != secretBytes {
		t.Fatal("the factory did not get the resolved key")
	}
	if got.Env.Get("ACME_V2") != "1" {
		t.Fatal("the factory's env lacks the env defaults")
	}
	if strings.Contains(logs.String(), secretBytes) || !strings.Contains(logs.String(), redacted) {
		t.Fatalf("logs: %s", logs.String())
	}
}

// nopDriver is a driver that does nothing, for tests of Open.
type nopDriver struct{ driver.Provider }

func (nopDriver) Capabilities() driver.Capabilities { return driver.Capabilities{} }
func (nopDriver) Close() error                      { return nil }
